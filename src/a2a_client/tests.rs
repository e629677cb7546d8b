//! The guard's classifier and URL checks on literal addresses only (nothing is connected to),
//! and the card's checks and interface choice on documents.

use std::net::{IpAddr, SocketAddr};

use reqwest::Url;
use serde_json::{Value, json};

use super::{
    card::{CardError, Dialect, choose_interface, has_bindu_marks, read_card},
    guard::{self, Blocked, TargetRefused, check_url, classify, filter_resolved},
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap_or_else(|_| panic!("{s} is an address"))
}

#[test]
fn every_non_public_range_is_refused_by_its_name() {
    let cases: &[(&str, Blocked)] = &[
        ("0.0.0.0", Blocked::Unspecified),
        ("0.1.2.3", Blocked::Unspecified),
        ("127.0.0.1", Blocked::Loopback),
        ("127.255.255.254", Blocked::Loopback),
        ("10.0.0.1", Blocked::Private),
        ("10.255.255.255", Blocked::Private),
        ("172.16.0.1", Blocked::Private),
        ("172.31.255.255", Blocked::Private),
        ("192.168.1.1", Blocked::Private),
        ("100.64.0.1", Blocked::SharedAddressSpace),
        ("100.127.255.255", Blocked::SharedAddressSpace),
        ("169.254.169.254", Blocked::LinkLocal),
        ("169.254.0.1", Blocked::LinkLocal),
        ("192.0.0.170", Blocked::ProtocolAssignment),
        ("192.0.2.10", Blocked::Documentation),
        ("198.51.100.7", Blocked::Documentation),
        ("203.0.113.200", Blocked::Documentation),
        ("198.18.0.1", Blocked::Benchmarking),
        ("198.19.255.255", Blocked::Benchmarking),
        ("192.88.99.1", Blocked::Reserved),
        ("224.0.0.1", Blocked::Multicast),
        ("239.255.255.250", Blocked::Multicast),
        ("240.0.0.1", Blocked::Reserved),
        ("255.255.255.255", Blocked::Broadcast),
        ("::", Blocked::Unspecified),
        ("::1", Blocked::Loopback),
        ("fe80::1", Blocked::LinkLocal),
        ("febf:ffff::1", Blocked::LinkLocal),
        ("fec0::1", Blocked::SiteLocal),
        ("fc00::1", Blocked::UniqueLocal),
        ("fd12:3456:789a::1", Blocked::UniqueLocal),
        ("ff02::1", Blocked::Multicast),
        ("ff0e::fb", Blocked::Multicast),
        ("2001:db8::1", Blocked::Documentation),
        ("3fff::1", Blocked::Documentation),
        ("2001:2::1", Blocked::Benchmarking),
        ("2001::1", Blocked::ProtocolAssignment), // Teredo
        ("2001:10::1", Blocked::ProtocolAssignment),
        ("100::1", Blocked::Reserved),
        ("64:ff9b:1::1", Blocked::Reserved),
        ("::7f00:1", Blocked::Reserved), // IPv4-compatible 127.0.0.1
        ("4000::1", Blocked::Reserved),
        // An IPv4 address carried in IPv6 is judged as itself.
        ("::ffff:127.0.0.1", Blocked::Loopback),
        ("::ffff:10.1.2.3", Blocked::Private),
        ("::ffff:169.254.169.254", Blocked::LinkLocal),
        ("::ffff:100.64.1.1", Blocked::SharedAddressSpace),
        ("::ffff:0.0.0.0", Blocked::Unspecified),
        ("64:ff9b::a9fe:a9fe", Blocked::LinkLocal), // NAT64 of 169.254.169.254
        ("64:ff9b::7f00:1", Blocked::Loopback),
        ("2002:c0a8:0101::1", Blocked::Private), // 6to4 of 192.168.1.1
        ("2002:7f00:0001::1", Blocked::Loopback),
    ];
    for (addr, want) in cases {
        assert_eq!(classify(ip(addr)), Some(*want), "{addr}");
    }
}

#[test]
fn public_addresses_pass() {
    for addr in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.215.14",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.167.255.255",
        "192.169.0.0",
        "169.253.255.255",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:0808:0808::1",
    ] {
        assert_eq!(classify(ip(addr)), None, "{addr}");
    }
}

#[test]
fn urls_are_judged_by_scheme_form_and_literal_address() {
    let check = |s: &str| check_url(&Url::parse(s).unwrap(), false);
    assert!(check("https://agent.example.com/.well-known/agent-card.json").is_ok());
    assert!(check("http://8.8.8.8:8080/card").is_ok());
    assert!(matches!(check("ftp://agent.example.com/card"), Err(TargetRefused::Scheme(_))));
    assert!(matches!(check("file:///etc/passwd"), Err(TargetRefused::Scheme(_))));
    assert!(matches!(check("https://user:pw@agent.example.com/"), Err(TargetRefused::Form(_))));
    for (url, blocked) in [
        ("http://127.0.0.1:8080/card", Blocked::Loopback),
        ("http://[::1]/card", Blocked::Loopback),
        ("http://169.254.169.254/latest/meta-data/", Blocked::LinkLocal),
        ("http://[::ffff:169.254.169.254]/", Blocked::LinkLocal),
        ("http://[fd00::1]/", Blocked::UniqueLocal),
        // Other spellings of 127.0.0.1 are read as the address they are.
        ("http://2130706433/", Blocked::Loopback),
        ("http://0x7f.1/", Blocked::Loopback),
        ("http://0/", Blocked::Unspecified),
        ("http://10.1/", Blocked::Private),
    ] {
        match check(url) {
            Err(TargetRefused::Address { blocked: got, .. }) => assert_eq!(got, blocked, "{url}"),
            other => panic!("{url}: {other:?}"),
        }
    }
    // The setting lets addresses through, never another scheme.
    let allowed = |s: &str| check_url(&Url::parse(s).unwrap(), true);
    assert!(allowed("http://127.0.0.1:8080/card").is_ok());
    assert!(allowed("http://[fe80::1]/").is_ok());
    assert!(allowed("gopher://127.0.0.1/").is_err());
}

#[test]
fn resolved_addresses_are_filtered_and_none_left_is_refused() {
    let sock = |s: &str| SocketAddr::new(ip(s), 0);
    // A name that resolves to the metadata address only, or to loopback and a private one.
    let refused = filter_resolved("evil.example", [sock("169.254.169.254")], false).unwrap_err();
    assert!(matches!(refused, TargetRefused::Address { blocked: Blocked::LinkLocal, .. }), "{refused:?}");
    assert!(refused.to_string().contains("evil.example"), "{refused}");
    let refused = filter_resolved("rebind.example", [sock("127.0.0.1"), sock("::1"), sock("10.0.0.5")], false);
    assert!(matches!(refused, Err(TargetRefused::Address { blocked: Blocked::Loopback, .. })));
    // Mixed: only the public addresses are kept (a connection goes to those only).
    let kept = filter_resolved("mixed.example", [sock("10.0.0.5"), sock("8.8.8.8"), sock("fd00::1")], false).unwrap();
    assert_eq!(kept, vec![sock("8.8.8.8")]);
    // Nothing resolved.
    assert!(matches!(filter_resolved("nowhere.example", [], false), Err(TargetRefused::Unresolved(_))));
    // Allowed: everything is kept.
    assert_eq!(filter_resolved("local", [sock("127.0.0.1"), sock("10.0.0.1")], true).unwrap().len(), 2);
}

fn base() -> Url {
    Url::parse("https://agent.example.com/.well-known/agent-card.json").unwrap()
}

/// The fields every card carries, around `rest`.
fn card(rest: Value) -> Value {
    let mut c = json!({
        "name": "Reviewer",
        "description": "Reviews code",
        "version": "2.1.0",
        "capabilities": {"streaming": true},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "review", "name": "Code review", "description": "d", "tags": []}],
    });
    c.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
    c
}

fn chosen(c: &Value) -> Result<(String, String, Dialect), CardError> {
    choose_interface(c.as_object().unwrap(), &base()).map(|i| (i.url, i.protocol_version, i.dialect))
}

#[test]
fn a_jsonrpc_interface_at_1_0_is_preferred() {
    let dual = card(json!({
        "supportedInterfaces": [
            {"url": "https://agent.example.com/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "https://agent.example.com/a2a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "https://agent.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ],
        "url": "https://agent.example.com/legacy", "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC",
    }));
    assert_eq!(chosen(&dual).unwrap(), ("https://agent.example.com/a2a".into(), "1.0".into(), Dialect::V1_0));
    // Only 0.3 among the supported interfaces: 0.3.
    let only_03 = card(json!({"supportedInterfaces": [
        {"url": "https://agent.example.com/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "/a2a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
    ]}));
    assert_eq!(chosen(&only_03).unwrap(), ("https://agent.example.com/a2a/v03".into(), "0.3.0".into(), Dialect::V0_3));
}

#[test]
fn a_0_3_card_gives_its_url_or_a_jsonrpc_additional_interface() {
    let plain = card(json!({"url": "https://agent.example.com/a2a", "protocolVersion": "0.3.0"}));
    assert_eq!(chosen(&plain).unwrap(), ("https://agent.example.com/a2a".into(), "0.3.0".into(), Dialect::V0_3));
    let grpc_first = card(json!({
        "url": "https://agent.example.com/grpc", "protocolVersion": "0.3.0", "preferredTransport": "GRPC",
        "additionalInterfaces": [
            {"url": "https://agent.example.com/grpc", "transport": "GRPC"},
            {"url": "https://agent.example.com/jsonrpc", "transport": "JSONRPC"},
        ],
    }));
    assert_eq!(chosen(&grpc_first).unwrap().0, "https://agent.example.com/jsonrpc");
}

#[test]
fn a_card_without_a_jsonrpc_interface_is_refused_saying_what_it_offers() {
    let grpc = card(json!({"supportedInterfaces": [
        {"url": "https://agent.example.com/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    ]}));
    let why = chosen(&grpc).unwrap_err().to_string();
    assert!(why.contains("no usable JSONRPC interface") && why.contains("GRPC at protocol 1.0"), "{why}");
    let old = card(json!({"url": "https://agent.example.com/a2a", "protocolVersion": "0.2.5"}));
    let why = chosen(&old).unwrap_err().to_string();
    assert!(why.contains("protocolVersion is 0.2.5"), "{why}");
    let bare = card(json!({}));
    let why = chosen(&bare).unwrap_err().to_string();
    assert!(why.contains("neither supportedInterfaces"), "{why}");
    let not_http = card(json!({"supportedInterfaces": [
        {"url": "ws://agent.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]}));
    let why = chosen(&not_http).unwrap_err().to_string();
    assert!(why.contains("url is ws, not http(s)"), "{why}");
}

#[test]
fn bindu_marks_choose_the_bindu_dialect_whatever_version_is_claimed() {
    let bindu = card(json!({
        "id": "7f1c1f9e-2a4e-4a53-9d4e-0c9a8f2b8d11",
        "url": "https://bindu.example.com",
        "protocolVersion": "1.0.0",
        "kind": "agent",
        "numHistorySessions": 10,
        "agentTrust": {"identityProvider": "custom", "inheritedRoles": []},
    }));
    assert_eq!(chosen(&bindu).unwrap(), ("https://bindu.example.com/".into(), "1.0.0".into(), Dialect::Bindu));
    for marks in [
        json!({"kind": "agent"}),
        json!({"numHistorySessions": 3}),
        json!({"agentTrust": {}}),
        json!({"capabilities": {"extensions": [{"uri": "did:bindu:someone:agent:1234"}]}}),
    ] {
        assert!(has_bindu_marks(card(marks.clone()).as_object().unwrap()), "{marks}");
    }
    assert!(!has_bindu_marks(
        card(json!({"capabilities": {"extensions": [{"uri": "https://ext"}]}})).as_object().unwrap()
    ));
}

#[test]
fn a_card_lacking_required_fields_is_refused_naming_them() {
    let why = read_card(&json!({"name": "x"}), &base()).unwrap_err().to_string();
    for field in ["description", "version", "capabilities", "defaultInputModes", "defaultOutputModes", "skills"] {
        assert!(why.contains(field), "{field} not named in: {why}");
    }
    let why = read_card(&json!([1, 2]), &base()).unwrap_err().to_string();
    assert!(why.contains("not a JSON object"), "{why}");
    let mut with_nul = card(json!({"url": "https://a.example.com/", "protocolVersion": "0.3.0"}));
    with_nul["skills"][0]["name"] = json!("Code\u{0}review");
    let why = read_card(&with_nul, &base()).unwrap_err().to_string();
    assert!(why.contains("NUL"), "{why}");
    let mut nameless_skill = card(json!({"url": "https://a.example.com/", "protocolVersion": "0.3.0"}));
    nameless_skill["skills"] = json!([{"id": "x"}]);
    let why = read_card(&nameless_skill, &base()).unwrap_err().to_string();
    assert!(why.contains("skills[0]"), "{why}");
}

#[test]
fn a_good_card_is_summarised() {
    let c = card(json!({"url": "https://agent.example.com/a2a", "protocolVersion": "0.3.0"}));
    let summary = read_card(&c, &base()).unwrap();
    assert_eq!(summary.name, "Reviewer");
    assert!(summary.streaming);
    assert_eq!(summary.skills.len(), 1);
    assert_eq!(summary.skills[0].id, "review");
    assert_eq!(summary.interface.dialect, Dialect::V0_3);
    for d in Dialect::ALL {
        assert_eq!(Dialect::parse(d.as_str()), Some(d));
    }
}

#[test]
fn a_redirect_to_a_non_public_target_is_refused() {
    let u = |s: &str| Url::parse(s).unwrap();
    let from = [u("https://agent.example.com/.well-known/agent-card.json")];
    // To the metadata address, to loopback, to a private name: another origin, refused.
    for to in [
        "https://169.254.169.254/latest/meta-data",
        "https://127.0.0.1/card",
        "https://[::1]/card",
        "https://10.0.0.7/card",
    ] {
        let refused = guard::redirect_refusal(&u(to), &from, false).expect(to);
        assert!(refused.to_string().contains("another origin"), "{to}: {refused}");
    }
    // Within the same origin it is followed (its name is resolved through the guard again), even
    // spelled with the scheme's own port.
    assert!(guard::redirect_refusal(&u("https://agent.example.com/card"), &from, false).is_none());
    assert!(guard::redirect_refusal(&u("https://agent.example.com:443/card"), &from, false).is_none());
    // Another port or scheme of the same host is another origin: never down to http, never to a
    // port the first URL did not name (a service bound there for the host's own users).
    for to in ["http://agent.example.com/card", "https://agent.example.com:8443/card", "http://agent.example.com:443/"]
    {
        let refused = guard::redirect_refusal(&u(to), &from, false).expect(to);
        assert!(refused.to_string().contains("another origin"), "{to}: {refused}");
    }
    // Never more than a few.
    let many: Vec<Url> = (0..10).map(|i| u(&format!("https://agent.example.com/{i}"))).collect();
    assert!(guard::redirect_refusal(&u("https://agent.example.com/x"), &many, false).is_some());
    // A literal non-public address on the same host is refused by the address rule itself.
    let literal = [u("http://192.168.1.20/card")];
    let refused = guard::redirect_refusal(&u("http://192.168.1.20/other"), &literal, false).unwrap();
    assert!(refused.to_string().contains("private"), "{refused}");
    assert!(guard::redirect_refusal(&u("http://192.168.1.20/other"), &literal, true).is_none());
}
