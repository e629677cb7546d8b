//! What a target may be: the checks a webhook's or a push configuration's URL and a webhook's
//! event kinds pass at registration (the HTTP routes and the A2A methods both call them).
//!
//! A URL is `http` or `https`, at most [`MAX_URL_LEN`] characters, with a host and no
//! credentials in it, and it must lead to a public address: the outbound address rule of the
//! A2A client (`crate::a2a_client::guard`), judged here with the name resolved (a name that
//! resolves to nothing yet is taken), and again at every send by the sender's client. Loopback, private and link-local targets are allowed only
//! with `PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true`.

use reqwest::Url;

use crate::{a2a_client::guard, store::events};

/// The longest URL a target may have.
pub const MAX_URL_LEN: usize = 2048;
/// The longest a URL's name may take to resolve at registration.
const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The most push notification configurations one task may have.
pub const MAX_PUSH_CONFIGS_PER_TASK: i64 = 10;

/// Why a URL is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// Not a URL Parley would call at all (the message says why).
    Invalid(String),
    /// The outbound address rule refuses where it leads.
    Refused(String),
}

/// `url` checked and resolved now, as a target's URL. A name that resolves to no address now is
/// taken (a receiver's name may not be published yet): the rule judges where it leads at every
/// send, and a send that cannot resolve it fails and is retried as any failed attempt. A name
/// that resolves to an address the rule refuses is refused now.
pub async fn check_url(url: &str, allow_private: bool) -> Result<Url, UrlError> {
    if url.chars().count() > MAX_URL_LEN {
        return Err(UrlError::Invalid(format!("url must be at most {MAX_URL_LEN} characters")));
    }
    let parsed = Url::parse(url).map_err(|e| UrlError::Invalid(format!("url is not an absolute URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(UrlError::Invalid("url must be an http:// or https:// URL".to_owned()));
    }
    if parsed.fragment().is_some() {
        return Err(UrlError::Invalid("url must hold no fragment (#...)".to_owned()));
    }
    let judged = tokio::time::timeout(RESOLVE_TIMEOUT, guard::check_target(&parsed, allow_private))
        .await
        .map_err(|_| UrlError::Refused(format!("{} did not resolve within 5 s", parsed.host_str().unwrap_or(""))))?;
    taken(judged)?;
    Ok(parsed)
}

/// What the outbound address rule's judgement of a target's URL means at registration.
fn taken(judged: Result<(), guard::TargetRefused>) -> Result<(), UrlError> {
    match judged {
        Ok(()) | Err(guard::TargetRefused::Unresolved(_)) => Ok(()),
        Err(refused @ (guard::TargetRefused::Scheme(_) | guard::TargetRefused::Form(_))) => {
            Err(UrlError::Invalid(refused.to_string()))
        }
        Err(other) => Err(UrlError::Refused(other.to_string())),
    }
}

/// A webhook's event kinds: those named (each a kind of the log, each once, in the log's
/// order), or without a list every kind that is on by default (`negotiation.turn` is opt-in).
pub fn event_types(named: Option<&[String]>) -> Result<Vec<String>, String> {
    let Some(named) = named else {
        return Ok(events::KINDS.iter().filter(|k| k.by_default).map(|k| k.name.to_owned()).collect());
    };
    if named.is_empty() {
        return Err("events must name at least one event type (or be left out for the default ones)".to_owned());
    }
    if let Some(unknown) = named.iter().find(|n| events::kind(n).is_none()) {
        let known: Vec<&str> = events::KINDS.iter().map(|k| k.name).collect();
        return Err(format!(
            "events: {} is not an event type; the types are {}",
            crate::quote::quote(unknown),
            known.join(", ")
        ));
    }
    Ok(events::KINDS.iter().filter(|k| named.iter().any(|n| n == k.name)).map(|k| k.name.to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_are_judged_by_the_outbound_address_rule() {
        for refused in ["http://127.0.0.1:9/hook", "http://[::1]/hook", "http://10.0.0.8/", "http://169.254.169.254/"] {
            assert!(matches!(check_url(refused, false).await, Err(UrlError::Refused(_))), "{refused}");
            assert!(check_url(refused, true).await.is_ok(), "{refused} with private targets allowed");
        }
        for invalid in ["ftp://example.com/", "not a url", "https://user:pw@example.com/", "http://example.com/#x"] {
            assert!(matches!(check_url(invalid, true).await, Err(UrlError::Invalid(_))), "{invalid}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(matches!(check_url(&long, true).await, Err(UrlError::Invalid(_))));
    }

    #[test]
    fn a_name_that_resolves_to_nothing_yet_is_taken_and_judged_at_every_send() {
        assert_eq!(taken(Err(guard::TargetRefused::Unresolved("hooks.example.org".into()))), Ok(()));
        let private = guard::check_url(&Url::parse("http://10.1.2.3/").unwrap(), false);
        assert!(matches!(taken(private), Err(UrlError::Refused(_))));
    }

    #[test]
    fn event_types_default_to_all_but_turns_and_keep_the_logs_order() {
        let default = event_types(None).unwrap();
        assert!(!default.contains(&"negotiation.turn".to_owned()));
        assert!(default.contains(&"delegation.status".to_owned()));
        let named =
            event_types(Some(&["delegation.status".into(), "negotiation.turn".into(), "negotiation.turn".into()]));
        assert_eq!(named.unwrap(), ["negotiation.turn", "delegation.status"]);
        assert!(event_types(Some(&[])).is_err());
        assert!(event_types(Some(&["negotiation.everything".into()])).unwrap_err().contains("opportunity.status"));
    }
}
