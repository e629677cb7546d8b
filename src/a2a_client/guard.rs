//! The outbound guard: which addresses Parley may call on an agent's behalf, and the HTTP client
//! that enforces it on every connection.
//!
//! An AgentCard URL and the interface URL a card names are chosen by whoever registers the agent:
//! without a guard, Parley would fetch (and later call) whatever they point at, its own loopback
//! services, the private network it runs in, or a cloud metadata endpoint (169.254.169.254). So an
//! address is public ([`classify`] gives `None`) or refused, and the rule is applied where it
//! cannot be stepped around:
//!
//! - names are judged after resolution, by the client's own resolver ([`GuardedResolver`]): the
//!   addresses a connection is made to are the ones judged, on the first request, on every
//!   redirect and on every later call, so a name that resolves differently between a check and
//!   the connection (DNS rebinding) gains nothing;
//! - a URL whose host is a literal address never reaches a resolver, so [`check_url`] judges it
//!   (and the scheme, and credentials in the URL) before each request, and the redirect policy
//!   does the same for every redirect target;
//! - proxies from the environment are not used (a proxy would resolve the name instead);
//! - redirects stay within the origin first asked for (the same scheme, host and port: another
//!   port of the same host is another server, maybe one bound only to that host's own users),
//!   at most [`MAX_REDIRECTS`].
//!
//! `PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true` lets every address through (agents on the same
//! machine or network, and the tests); the scheme, host and redirect rules hold regardless.
//!
//! [`client_builder`] is the one way to build a client that calls agents; a caller adds its own
//! timeout and must pass each URL through [`check_url`] before sending to it.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use reqwest::{
    Url,
    dns::{Addrs, Name, Resolve, Resolving},
    redirect,
};

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why an address is not public: the range it falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// `0.0.0.0/8` ("this network"), `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// RFC 6598 shared address space (carrier-grade NAT): `100.64.0.0/10`.
    SharedAddressSpace,
    /// `169.254.0.0/16` (with the cloud metadata address 169.254.169.254), `fe80::/10`.
    LinkLocal,
    /// IPv6 unique local addresses, `fc00::/7`.
    UniqueLocal,
    /// Deprecated IPv6 site-local addresses, `fec0::/10`.
    SiteLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// IETF protocol assignments: `192.0.0.0/24`, `2001::/23` (Teredo among them).
    ProtocolAssignment,
    /// Reserved or not global unicast: `240.0.0.0/4`, `192.88.99.0/24`, IPv4-compatible IPv6
    /// `::/96`, local-use NAT64 `64:ff9b:1::/48`, discard-only `100::/64`, and all of IPv6
    /// outside `2000::/3`.
    Reserved,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Blocked::Unspecified => "an unspecified address",
            Blocked::Loopback => "a loopback address",
            Blocked::Private => "a private address (RFC 1918)",
            Blocked::SharedAddressSpace => "a shared (carrier-grade NAT) address",
            Blocked::LinkLocal => "a link-local address (cloud metadata lives there)",
            Blocked::UniqueLocal => "a unique local IPv6 address",
            Blocked::SiteLocal => "a site-local IPv6 address",
            Blocked::Multicast => "a multicast address",
            Blocked::Broadcast => "the broadcast address",
            Blocked::Documentation => "a documentation address",
            Blocked::Benchmarking => "a benchmarking address",
            Blocked::ProtocolAssignment => "an IETF protocol assignment address",
            Blocked::Reserved => "a reserved address",
        })
    }
}

/// The range that keeps `ip` from being called, or `None` for a public address. An IPv4
/// address carried in IPv6 (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) is judged as the IPv4 address it carries.
pub fn classify(ip: IpAddr) -> Option<Blocked> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Blocked> {
    let [a, b, c, _] = ip.octets();
    let blocked = match (a, b, c) {
        _ if ip.is_broadcast() => Blocked::Broadcast,
        (0, ..) => Blocked::Unspecified,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => Blocked::Private,
        (100, 64..=127, _) => Blocked::SharedAddressSpace,
        (127, ..) => Blocked::Loopback,
        (169, 254, _) => Blocked::LinkLocal,
        (192, 0, 0) => Blocked::ProtocolAssignment,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Blocked::Documentation,
        (192, 88, 99) => Blocked::Reserved,
        (198, 18..=19, _) => Blocked::Benchmarking,
        (224..=239, ..) => Blocked::Multicast,
        (240..=255, ..) => Blocked::Reserved,
        _ => return None,
    };
    Some(blocked)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Blocked> {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    // The NAT64 well-known prefix carries an IPv4 address in its last 32 bits.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])));
    }
    // 6to4 carries one in bits 16 to 48.
    if s[0] == 0x2002 {
        return classify_v4(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])));
    }
    let blocked = match s {
        _ if ip.is_unspecified() => Blocked::Unspecified,
        _ if ip.is_loopback() => Blocked::Loopback,
        [0, 0, 0, 0, 0, 0, ..] => Blocked::Reserved, // IPv4-compatible, deprecated
        [first, ..] if first & 0xff00 == 0xff00 => Blocked::Multicast,
        [first, ..] if first & 0xfe00 == 0xfc00 => Blocked::UniqueLocal,
        [first, ..] if first & 0xffc0 == 0xfe80 => Blocked::LinkLocal,
        [first, ..] if first & 0xffc0 == 0xfec0 => Blocked::SiteLocal,
        [0x2001, 0xdb8, ..] => Blocked::Documentation,
        [first, ..] if first & 0xfff0 == 0x3ff0 => Blocked::Documentation,
        [0x2001, 0x2, 0, ..] => Blocked::Benchmarking,
        [0x2001, second, ..] if second < 0x200 => Blocked::ProtocolAssignment,
        // Global unicast is 2000::/3; everything else (discard-only, local NAT64, unassigned).
        [first, ..] if first & 0xe000 != 0x2000 => Blocked::Reserved,
        _ => return None,
    };
    Some(blocked)
}

/// Why Parley will not call a URL: its scheme, its form, or where it leads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetRefused {
    /// Not `http` or `https`.
    #[error("only http and https URLs are called, not {0}:")]
    Scheme(String),
    /// No host, or user name and password in the URL.
    #[error("{0}")]
    Form(&'static str),
    /// The host is (or resolves only to) an address that is not public.
    #[error("{host} is {blocked} ({ip}); such targets are refused unless PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true")]
    Address {
        /// The host as the URL names it.
        host: String,
        /// The address judged (the first refused one).
        ip: IpAddr,
        /// Its range.
        blocked: Blocked,
    },
    /// The name resolves to no address at all.
    #[error("{0} resolves to no address")]
    Unresolved(String),
    /// A redirect leaves the host, downgrades to http, or one redirect too many.
    #[error("{0}")]
    Redirect(String),
}

/// Judges a URL before a request is sent to it: `http` or `https`, a host, no credentials in
/// it, and, when the host is a literal address, a public one (a name is judged once resolved,
/// by [`GuardedResolver`]).
pub fn check_url(url: &Url, allow_private: bool) -> Result<(), TargetRefused> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(TargetRefused::Scheme(url.scheme().to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(TargetRefused::Form("a URL with a user name or password in it is refused"));
    }
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or(TargetRefused::Form("the URL has no host"))?;
    // The URL parser writes a literal address in its canonical form (IPv6 in brackets, IPv4 in
    // dotted decimal whatever form it was given in); a name is left to the resolver.
    match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        Ok(ip) => check_ip(host, ip, allow_private),
        Err(_) => Ok(()),
    }
}

fn check_ip(host: &str, ip: IpAddr, allow_private: bool) -> Result<(), TargetRefused> {
    match classify(ip) {
        Some(blocked) if !allow_private => Err(TargetRefused::Address { host: host.to_owned(), ip, blocked }),
        _ => Ok(()),
    }
}

/// Judges a URL now, its name resolved: [`check_url`], then, for a name, the addresses it
/// resolves to (at least one must be public). For a check at registration; the resolver judges
/// again at every connection.
pub async fn check_target(url: &Url, allow_private: bool) -> Result<(), TargetRefused> {
    check_url(url, allow_private)?;
    let host = url.host_str().unwrap_or_default();
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Ok(()); // a literal address, judged above
    }
    let resolved = tokio::net::lookup_host((host, 0)).await.map_err(|_| TargetRefused::Unresolved(host.to_owned()))?;
    filter_resolved(host, resolved, allow_private).map(drop)
}

/// The addresses of `host` a connection may be made to: the public ones (all of them when
/// private targets are allowed). None left is an error naming the first refused address.
pub fn filter_resolved(
    host: &str,
    resolved: impl IntoIterator<Item = SocketAddr>,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, TargetRefused> {
    let mut kept = Vec::new();
    let mut first_refused = None;
    for addr in resolved {
        match check_ip(host, addr.ip(), allow_private) {
            Ok(()) => kept.push(addr),
            Err(refused) => {
                first_refused.get_or_insert(refused);
            }
        }
    }
    match (kept.is_empty(), first_refused) {
        (false, _) => Ok(kept),
        (true, Some(refused)) => Err(refused),
        (true, None) => Err(TargetRefused::Unresolved(host.to_owned())),
    }
}

/// A DNS resolver that resolves with the system's resolver and lets through only the addresses
/// [`filter_resolved`] keeps: the addresses a connection is made to are the ones judged.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    /// `PARLEY_A2A_ALLOW_PRIVATE_TARGETS`.
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let kept = filter_resolved(&host, resolved, allow_private)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// The redirect policy: at most [`MAX_REDIRECTS`], within the first URL's origin only, and a
/// literal address target judged as [`check_url`] does (a name is judged by the resolver when
/// the redirect is followed).
fn redirect_policy(allow_private: bool) -> redirect::Policy {
    redirect::Policy::custom(move |attempt| match redirect_refusal(attempt.url(), attempt.previous(), allow_private) {
        Some(refused) => attempt.error(refused),
        None => attempt.follow(),
    })
}

/// Why a redirect to `url`, after the `previous` URLs of its request (the first is the one
/// asked for), is not followed, if it is not: too many, out of the first URL's origin (its
/// scheme, host and port: so never from https to http either), or to a URL [`check_url`]
/// refuses. A redirect it lets through still connects only to the addresses
/// [`GuardedResolver`] lets through.
pub fn redirect_refusal(url: &Url, previous: &[Url], allow_private: bool) -> Option<TargetRefused> {
    if previous.len() > MAX_REDIRECTS {
        return Some(TargetRefused::Redirect(format!("more than {MAX_REDIRECTS} redirects")));
    }
    if let Some(first) = previous.first()
        && first.origin() != url.origin()
    {
        return Some(TargetRefused::Redirect(format!(
            "a redirect to another origin ({}) is refused; only redirects within the same origin (scheme, host and \
             port) are followed",
            url.origin().ascii_serialization()
        )));
    }
    check_url(url, allow_private).err()
}

/// A client builder for calling agents: the guarded resolver, the redirect policy, no proxy
/// from the environment, and Parley's user agent. The caller sets its timeouts; every URL it
/// sends to must pass [`check_url`] first.
pub fn client_builder(allow_private: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .redirect(redirect_policy(allow_private))
        .no_proxy()
        .user_agent(concat!("parley/", env!("CARGO_PKG_VERSION")))
}

/// The guard's refusal somewhere in `error`'s causes (a refused resolution or redirect inside a
/// request error), if it is there.
pub fn refusal_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a TargetRefused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<TargetRefused>() {
            return Some(refused);
        }
        cause = e.source();
    }
    None
}
