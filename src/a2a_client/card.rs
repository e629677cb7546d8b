//! AgentCards: fetching one within bounds, checking it, and choosing the interface Parley will
//! call.
//!
//! The fetch ([`fetch_card`]) goes through the guarded client ([`super::guard`]): http(s)
//! only, [`FETCH_TIMEOUT`] in all, at most [`MAX_CARD_BYTES`] read (a larger card is refused
//! as soon as it is seen to be larger, by its `Content-Length` or by the bytes read so far,
//! never read whole), redirects within the same origin only. The document must be a JSON
//! object with the fields every A2A card carries ([`read_card`]).
//!
//! The interface ([`choose_interface`]), in order of preference:
//!
//! 1. the Bindu dialect, when the card carries Bindu's marks (`agentTrust`, `kind`,
//!    `numHistorySessions`, or a `did:bindu:` extension): such a card claims protocol 1.0 but
//!    its agent answers only 0.3 method names, with its own rules, so its marks decide before
//!    the version it claims; its endpoint is the card's `url`;
//! 2. a JSONRPC interface at protocol 1.0 (`supportedInterfaces[]` with `protocolBinding`
//!    `JSONRPC` and a `protocolVersion` 1.0), the first one listed;
//! 3. a JSONRPC interface at protocol 0.3: one in `supportedInterfaces[]`, else a 0.3 card's
//!    `url` when its `preferredTransport` is JSONRPC (the default), else a JSONRPC entry of its
//!    `additionalInterfaces`.
//!
//! Anything else is refused with the reason ([`CardError`]).

use std::time::Duration;

use reqwest::{Url, header};
use serde_json::{Map, Value};

use super::guard::{self, TargetRefused};
use crate::bounded_body::{self, BodyError};

/// The longest a card fetch may take, redirects and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes of a card that are read.
pub const MAX_CARD_BYTES: usize = 64 * 1024;

/// Skills kept in a card's summary.
pub const MAX_SKILLS: usize = 100;

/// The longest URL kept (the card's, after redirects, and the interface's).
pub const MAX_URL_CHARS: usize = 2048;

/// Which flavour of A2A Parley speaks to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A2A 1.0: `SendMessage`, `GetTask`, ProtoJSON enums, the `A2A-Version: 1.0` header.
    V1_0,
    /// A2A 0.3: `message/send`, `tasks/get`, `kind` discriminators.
    V0_3,
    /// Bindu's: 0.3 method names whatever the card claims, client-chosen UUID `contextId`,
    /// `taskId` and JSON-RPC `id`, snake_case answers, no streaming.
    Bindu,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 3] = [Dialect::V1_0, Dialect::V0_3, Dialect::Bindu];

    /// The stored (and wire) name: `1.0`, `0.3` or `bindu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::V1_0 => "1.0",
            Dialect::V0_3 => "0.3",
            Dialect::Bindu => "bindu",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// The interface chosen on a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The JSON-RPC endpoint (absolute, http or https).
    pub url: String,
    /// The protocol version the card gives for it (`1.0`, `0.3.0`; Bindu's claim as it is).
    pub protocol_version: String,
    /// How to speak to it.
    pub dialect: Dialect,
}

/// One skill of a card, in brief.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkillSummary {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// What Parley keeps of a checked card besides the document itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSummary {
    /// The agent's name on the card.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its skills (the first [`MAX_SKILLS`]).
    pub skills: Vec<SkillSummary>,
    /// Whether the card says the agent streams (`capabilities.streaming`).
    pub streaming: bool,
    /// The interface Parley will call.
    pub interface: Interface,
}

/// A fetched, checked card.
#[derive(Debug, Clone)]
pub struct FetchedCard {
    /// The URL it was fetched from (after same-host redirects).
    pub url: Url,
    /// The document.
    pub document: Value,
    /// What was read from it.
    pub summary: CardSummary,
}

/// Why a card cannot be used: every case is the registering caller's to fix.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CardError {
    /// The card URL or the interface URL leads where Parley does not call.
    #[error("{0}")]
    Refused(#[from] TargetRefused),
    /// The card could not be fetched (unreachable, timed out, an error status, too large).
    #[error("the card could not be fetched: {0}")]
    Fetch(String),
    /// The document is not a usable card.
    #[error("{0}")]
    Invalid(String),
}

/// Reads and checks a card fetched from `base` (relative interface URLs are resolved against
/// it): the fields every card carries, then the interface ([`choose_interface`]).
pub fn read_card(document: &Value, base: &Url) -> Result<CardSummary, CardError> {
    let card = document.as_object().ok_or_else(|| CardError::Invalid("the card is not a JSON object".into()))?;
    if holds_nul(document) {
        return Err(CardError::Invalid("the card holds a NUL character (\\u0000), which cannot be stored".into()));
    }
    let mut missing = Vec::new();
    let text = |key: &str, missing: &mut Vec<String>| match card.get(key).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            missing.push(format!("{key} (a non-empty string)"));
            String::new()
        }
    };
    let name = text("name", &mut missing);
    let description = match card.get("description") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            missing.push("description (a string)".to_owned());
            String::new()
        }
    };
    text("version", &mut missing);
    let capabilities = card.get("capabilities").and_then(Value::as_object);
    if capabilities.is_none() {
        missing.push("capabilities (an object)".to_owned());
    }
    for key in ["defaultInputModes", "defaultOutputModes"] {
        if !card.get(key).and_then(Value::as_array).is_some_and(|a| a.iter().all(Value::is_string)) {
            missing.push(format!("{key} (an array of strings)"));
        }
    }
    let skills = match card.get("skills").and_then(Value::as_array) {
        None => {
            missing.push("skills (an array)".to_owned());
            Vec::new()
        }
        Some(skills) => {
            let mut out = Vec::new();
            for (i, skill) in skills.iter().enumerate() {
                let field = |key: &str| skill.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
                match (field("id"), field("name")) {
                    (Some(id), Some(name)) => out.push(SkillSummary { id: cut(id, 200), name: cut(name, 200) }),
                    _ => missing.push(format!("skills[{i}].id and skills[{i}].name (non-empty strings)")),
                }
            }
            out.truncate(MAX_SKILLS);
            out
        }
    };
    if !missing.is_empty() {
        return Err(CardError::Invalid(format!("the card lacks required fields: {}", missing.join(", "))));
    }
    let streaming = capabilities.and_then(|c| c.get("streaming")).and_then(Value::as_bool).unwrap_or(false);
    let interface = choose_interface(card, base)?;
    Ok(CardSummary { name: cut(&name, 200), description: cut(&description, 2000), skills, streaming, interface })
}

/// Whether a string or key anywhere in `v` holds the NUL character (which PostgreSQL's `text`
/// and `jsonb` cannot store).
fn holds_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// The first `max` characters of `s`.
fn cut(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Whether a card carries Bindu's marks.
pub fn has_bindu_marks(card: &Map<String, Value>) -> bool {
    let keys = ["agentTrust", "kind", "numHistorySessions", "agent_trust", "num_history_sessions"];
    keys.iter().any(|k| card.contains_key(*k))
        || card.get("capabilities").and_then(|c| c.get("extensions")).and_then(Value::as_array).is_some_and(|exts| {
            exts.iter().any(|e| e.get("uri").and_then(Value::as_str).is_some_and(|u| u.starts_with("did:bindu:")))
        })
}

/// `1.0`, `1.0.0`, `1.0.3`: the 1.0 protocol.
fn is_v1_0(version: &str) -> bool {
    version == "1" || version == "1.0" || version.starts_with("1.0.")
}

/// `0.3`, `0.3.0`, `0.3.7`: the 0.3 protocol.
fn is_v0_3(version: &str) -> bool {
    version == "0.3" || version.starts_with("0.3.")
}

/// The interface Parley calls on `card` (see the module's docs for the order), its URL
/// resolved against `base`. Refused: a card with no usable JSONRPC interface, saying what it
/// offers instead.
pub fn choose_interface(card: &Map<String, Value>, base: &Url) -> Result<Interface, CardError> {
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::trim).unwrap_or("").to_owned();
    let top = |key: &str| card.get(key).and_then(Value::as_str).unwrap_or("").trim();
    let claimed = top("protocolVersion").to_owned();
    // Why each candidate was passed over, for the refusal.
    let mut passed = Vec::new();
    let usable = |url: &str, what: &str, passed: &mut Vec<String>| -> Option<String> {
        if url.is_empty() {
            passed.push(format!("{what} has no url"));
            return None;
        }
        match base.join(url) {
            Ok(u) if u.as_str().len() > MAX_URL_CHARS => {
                passed.push(format!("{what}'s url is longer than {MAX_URL_CHARS} characters"));
                None
            }
            Ok(u) if matches!(u.scheme(), "http" | "https") => Some(u.to_string()),
            Ok(u) => {
                passed.push(format!("{what}'s url is {}, not http(s)", u.scheme()));
                None
            }
            Err(e) => {
                passed.push(format!("{what}'s url is not a URL ({e})"));
                None
            }
        }
    };

    if has_bindu_marks(card) {
        return match usable(top("url"), "the Bindu card", &mut passed) {
            Some(url) => Ok(Interface { url, protocol_version: claimed, dialect: Dialect::Bindu }),
            None => Err(CardError::Invalid(format!("the card carries Bindu's marks but {}", passed.join("; ")))),
        };
    }

    let supported: Vec<&Value> =
        card.get("supportedInterfaces").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    let jsonrpc = |v: &Value, key: &str| str_of(v, key).eq_ignore_ascii_case("JSONRPC");
    for (want, dialect) in [(is_v1_0 as fn(&str) -> bool, Dialect::V1_0), (is_v0_3, Dialect::V0_3)] {
        for (i, iface) in supported.iter().enumerate() {
            let version = str_of(iface, "protocolVersion");
            if jsonrpc(iface, "protocolBinding")
                && want(&version)
                && let Some(url) = usable(&str_of(iface, "url"), &format!("supportedInterfaces[{i}]"), &mut passed)
            {
                return Ok(Interface { url, protocol_version: version, dialect });
            }
        }
    }
    for iface in &supported {
        let (binding, version) = (str_of(iface, "protocolBinding"), str_of(iface, "protocolVersion"));
        if !(binding.eq_ignore_ascii_case("JSONRPC") && (is_v1_0(&version) || is_v0_3(&version))) {
            passed.push(format!(
                "supportedInterfaces offers {} at protocol {}",
                if binding.is_empty() { "no protocolBinding" } else { &binding },
                if version.is_empty() { "(none)" } else { &version }
            ));
        }
    }

    if is_v0_3(&claimed) {
        let preferred = card.get("preferredTransport").and_then(Value::as_str).map_or("JSONRPC", str::trim);
        if preferred.eq_ignore_ascii_case("JSONRPC") {
            if let Some(url) = usable(top("url"), "the card", &mut passed) {
                return Ok(Interface { url, protocol_version: claimed, dialect: Dialect::V0_3 });
            }
        } else {
            passed.push(format!("its preferredTransport is {preferred}"));
        }
        let additional = card.get("additionalInterfaces").and_then(Value::as_array);
        for (i, iface) in additional.into_iter().flatten().enumerate() {
            if jsonrpc(iface, "transport") {
                if let Some(url) = usable(&str_of(iface, "url"), &format!("additionalInterfaces[{i}]"), &mut passed) {
                    return Ok(Interface { url, protocol_version: claimed, dialect: Dialect::V0_3 });
                }
            } else {
                passed.push(format!("additionalInterfaces[{i}] is {}", str_of(iface, "transport")));
            }
        }
    } else if supported.is_empty() {
        passed.push(if claimed.is_empty() {
            "it has neither supportedInterfaces (A2A 1.0) nor a protocolVersion (A2A 0.3)".to_owned()
        } else {
            format!("it has no supportedInterfaces and its protocolVersion is {claimed}")
        });
    }
    Err(CardError::Invalid(format!(
        "the card offers no usable JSONRPC interface at A2A 1.0 or 0.3 (Parley speaks only JSON-RPC): {}",
        passed.join("; ")
    )))
}

/// Fetches the card at `card_url` through the guarded client and checks it, the chosen
/// interface's host included (resolved now, and judged again at every later call).
pub async fn fetch_card(card_url: &str, allow_private: bool) -> Result<FetchedCard, CardError> {
    let url = Url::parse(card_url.trim())
        .map_err(|e| CardError::Invalid(format!("agentCardUrl is not an absolute URL ({e})")))?;
    guard::check_url(&url, allow_private)?;
    let client = guard::client_builder(allow_private)
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| CardError::Fetch(format!("no HTTP client ({e})")))?;
    let (url, document) = tokio::time::timeout(FETCH_TIMEOUT, fetch_json(&client, url))
        .await
        .map_err(|_| CardError::Fetch(format!("no whole answer within {} s", FETCH_TIMEOUT.as_secs())))??;
    if url.as_str().len() > MAX_URL_CHARS {
        return Err(CardError::Invalid(format!("the card's URL is longer than {MAX_URL_CHARS} characters")));
    }
    let summary = read_card(&document, &url)?;
    let interface = Url::parse(&summary.interface.url)
        .map_err(|e| CardError::Invalid(format!("the interface URL is not a URL ({e})")))?;
    tokio::time::timeout(FETCH_TIMEOUT, guard::check_target(&interface, allow_private))
        .await
        .map_err(|_| CardError::Fetch("the interface URL's host did not resolve in time".into()))?
        .map_err(|refused| CardError::Invalid(format!("the card's interface URL is refused: {refused}")))?;
    Ok(FetchedCard { url, document, summary })
}

/// GETs `url` and reads at most [`MAX_CARD_BYTES`] of it as JSON; returns the final URL too.
async fn fetch_json(client: &reqwest::Client, url: Url) -> Result<(Url, Value), CardError> {
    let response =
        client.get(url).header(header::ACCEPT, "application/json").send().await.map_err(|e| request_failed(&e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(CardError::Fetch(format!("the card URL answered HTTP {status}")));
    }
    let final_url = response.url().clone();
    let body = match bounded_body::read(response, MAX_CARD_BYTES).await {
        Ok(body) => body,
        Err(BodyError::TooLarge(_)) => {
            return Err(CardError::Fetch(format!("the card is larger than {} KiB", MAX_CARD_BYTES / 1024)));
        }
        Err(BodyError::Failed(e)) => return Err(request_failed(&e)),
    };
    let document: Value =
        serde_json::from_slice(&body).map_err(|e| CardError::Invalid(format!("the card is not JSON ({e})")))?;
    Ok((final_url, document))
}

/// What a failed request tells the caller: the guard's refusal when it was one, else the cause.
fn request_failed(e: &reqwest::Error) -> CardError {
    if let Some(refused) = guard::refusal_in(e) {
        return CardError::Refused(refused.clone());
    }
    if e.is_timeout() {
        return CardError::Fetch(format!("no whole answer within {} s", FETCH_TIMEOUT.as_secs()));
    }
    let mut innermost: &dyn std::error::Error = e;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    let what = if e.is_connect() { "could not connect" } else { "the request failed" };
    CardError::Fetch(format!("{what} ({innermost})"))
}
