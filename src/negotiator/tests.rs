//! Table-driven scenarios with realistic profiles: clear match, clear mismatch, partial fit
//! answered by later evidence, caps, blockers, roles and determinism.

use super::*;
use crate::domain::turn::{Role, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedActor, SeedAssessment, UserContext};
use serde_json::json;

fn user(v: serde_json::Value) -> UserContext {
    serde_json::from_value(v).unwrap()
}

fn seed(score: f64, reasoning: &str) -> SeedAssessment {
    SeedAssessment {
        score,
        reasoning: reasoning.into(),
        valency_role: None,
        actors: None,
    }
}

fn founder() -> UserContext {
    user(json!({
        "id": "u-founder", "name": "Ada",
        "profile": {
            "bio": "Founder and CEO of Ledgerly, an early-stage fintech startup building payment infrastructure in Rust.",
            "skills": ["product management", "fundraising", "payments"],
            "interests": ["fintech", "Rust", "open banking"]
        },
        "intents": [{"text": "Looking for a senior Rust backend engineer to join my fintech startup as a founding engineer"}]
    }))
}

fn rust_engineer() -> UserContext {
    user(json!({
        "id": "u-engineer", "name": "Linus",
        "profile": {
            "bio": "Senior backend engineer with 8 years of Rust and PostgreSQL, building payment systems at scale.",
            "skills": ["Rust", "backend engineering", "PostgreSQL", "distributed systems"],
            "interests": ["startups", "fintech"]
        },
        "intents": [{"text": "Looking to join an early-stage fintech startup as a founding engineer working in Rust"}]
    }))
}

fn pastry_chef() -> UserContext {
    user(json!({
        "id": "u-chef", "name": "Camille",
        "profile": {
            "bio": "Pastry chef opening an artisan bakery and patisserie in Lyon.",
            "skills": ["pastry", "baking", "viennoiserie"],
            "interests": ["food", "hospitality"]
        },
        "intents": [{"text": "Seeking investors for my artisan bakery and patisserie"}]
    }))
}

fn kernel_dev() -> UserContext {
    user(json!({
        "id": "u-kernel", "name": "Greg",
        "profile": {
            "bio": "Linux kernel developer: device drivers, schedulers and memory management in C.",
            "skills": ["C", "Linux kernel", "device drivers", "embedded systems"],
            "interests": ["firmware", "RISC-V"]
        },
        "intents": [{"text": "Looking for embedded firmware work on RISC-V boards"}]
    }))
}

fn climate_cto() -> UserContext {
    user(json!({
        "id": "u-cto", "name": "Priya",
        "profile": {"bio": "CTO of a climate analytics startup.", "skills": ["data architecture", "climate science"]},
        "intents": [{"text": "Looking for a data engineer with Python, Kubernetes and Terraform for our climate analytics platform"}]
    }))
}

fn data_engineer() -> UserContext {
    user(json!({
        "id": "u-data", "name": "Tom",
        "profile": {
            "bio": "Data engineer building Python pipelines with Spark and Airflow for climate research.",
            "skills": ["Python", "Spark", "Airflow", "data engineering"],
            "interests": ["climate"]
        },
        "intents": [{"text": "Looking for a mission-driven climate startup"}]
    }))
}

fn turn(n: u32, action: Action, reasoning: &str, message: Option<&str>) -> Turn {
    Turn {
        turn_number: n,
        side: Side::for_turn(n),
        action,
        reasoning: reasoning.into(),
        suggested_roles: SuggestedRoles {
            own_user: Role::Peer,
            other_user: Role::Peer,
        },
        message: message.map(str::to_owned),
    }
}

fn situation<'a>(
    own: &'a UserContext,
    other: &'a UserContext,
    own_side: Side,
    seed: &'a SeedAssessment,
    history: &'a [Turn],
    max_turns: u32,
) -> Situation<'a> {
    Situation {
        own,
        other,
        own_side,
        seed,
        discovery_query: None,
        index_context: None,
        history,
        max_turns,
    }
}

/// Plays a system-vs-system negotiation to the end (or the cap) and returns its turns.
fn simulate(
    source: &UserContext,
    candidate: &UserContext,
    seed: &SeedAssessment,
    query: Option<&str>,
    cap: u32,
) -> Vec<Turn> {
    let cfg = NegotiatorConfig::default();
    let mut history: Vec<Turn> = Vec::new();
    for n in 0..cap {
        let side = Side::for_turn(n);
        let (own, other) = if side == Side::Source {
            (source, candidate)
        } else {
            (candidate, source)
        };
        let mut s = situation(own, other, side, seed, &history, cap);
        s.discovery_query = query;
        let d = decide(&cfg, &s);
        assert!(!d.reasoning.is_empty());
        assert_ne!(d.action, Action::Question);
        history.push(Turn {
            turn_number: n,
            side,
            action: d.action,
            reasoning: d.reasoning,
            suggested_roles: d.suggested_roles,
            message: d.message,
        });
        if d.action.is_terminal() {
            break;
        }
    }
    history
}

fn actions(turns: &[Turn]) -> Vec<Action> {
    turns.iter().map(|t| t.action).collect()
}

#[test]
fn clear_match_is_accepted_in_a_system_negotiation() {
    let seed = seed(
        85.0,
        "Ada needs a founding Rust engineer; Linus is one and wants a fintech startup.",
    );
    let turns = simulate(
        &founder(),
        &rust_engineer(),
        &seed,
        Some("senior Rust backend engineer"),
        6,
    );
    assert_eq!(actions(&turns), [Action::Propose, Action::Accept]);
    // Both sides find the fit convincing on their own.
    let cfg = NegotiatorConfig::default();
    let (f, e) = (founder(), rust_engineer());
    let for_founder = evaluate(
        &cfg,
        &situation(&f, &e, Side::Source, &seed, &turns[..1], 6),
    );
    let for_engineer = evaluate(
        &cfg,
        &situation(&e, &f, Side::Candidate, &seed, &turns[..1], 6),
    );
    assert!(for_founder.fit >= cfg.accept_at, "{for_founder:?}");
    assert!(for_engineer.fit >= cfg.accept_at, "{for_engineer:?}");
    // The opening presents the case: matched terms and the seed's reasoning.
    assert!(
        turns[0].reasoning.contains("matched: ") && turns[0].reasoning.contains("rust"),
        "{}",
        turns[0].reasoning
    );
    assert!(
        turns[0].reasoning.contains("Seed reasoning: Ada needs"),
        "{}",
        turns[0].reasoning
    );
    assert!(
        turns[1].reasoning.starts_with("Accepting"),
        "{}",
        turns[1].reasoning
    );
}

#[test]
fn clear_mismatch_is_rejected_by_either_side() {
    let seed = seed(30.0, "Both are makers.");
    let turns = simulate(&pastry_chef(), &kernel_dev(), &seed, None, 6);
    assert_eq!(actions(&turns), [Action::Propose, Action::Reject]);
    assert!(
        turns[1].reasoning.contains("matched: none"),
        "{}",
        turns[1].reasoning
    );
    // The source rejects too once it is its turn again.
    let (chef, kernel) = (pastry_chef(), kernel_dev());
    let history = [
        turns[0].clone(),
        turn(1, Action::Counter, "Tell me more about the role.", None),
    ];
    let d = decide(
        &NegotiatorConfig::default(),
        &situation(&chef, &kernel, Side::Source, &seed, &history, 6),
    );
    assert_eq!(d.action, Action::Reject);
    assert!(
        d.reasoning
            .contains("missing: investors, artisan, bakery, patisserie"),
        "{}",
        d.reasoning
    );
}

#[test]
fn partial_fit_is_countered_then_resolved_by_new_evidence() {
    let cfg = NegotiatorConfig::default();
    let (cto, data) = (climate_cto(), data_engineer());
    let seed = seed(70.0, "Tom is a climate data engineer; Priya is hiring one.");
    let opening = turn(0, Action::Propose, "Proposing Tom for Priya.", None);
    let reply = turn(
        1,
        Action::Counter,
        "Tom wants a mission-driven team.",
        Some("What is the mission?"),
    );
    let history = vec![opening, reply];
    let d = decide(
        &cfg,
        &situation(&cto, &data, Side::Source, &seed, &history, 8),
    );
    assert_eq!(d.action, Action::Counter, "{}", d.reasoning);
    assert!(
        d.reasoning
            .contains("missing: kubernetes, terraform, analytics, platform"),
        "{}",
        d.reasoning
    );
    let message = d.message.clone().unwrap();
    assert!(
        message.contains("needs evidence of: kubernetes, terraform, analytics, platform"),
        "{message}"
    );

    // The other side answers the objection; the evidence is re-scored and the fit convinces.
    let mut history = history;
    history.push(turn(2, Action::Counter, &d.reasoning, d.message.as_deref()));
    history.push(turn(
        3,
        Action::Counter,
        "Tom has the infrastructure experience asked for.",
        Some("I run our Kubernetes clusters, manage all infrastructure with Terraform, and built our analytics platform."),
    ));
    let d = decide(
        &cfg,
        &situation(&cto, &data, Side::Source, &seed, &history, 8),
    );
    assert_eq!(d.action, Action::Accept, "{}", d.reasoning);
    assert!(d.reasoning.contains("missing: none"), "{}", d.reasoning);
}

#[test]
fn the_last_turn_the_cap_allows_is_accept_or_reject() {
    let cfg = NegotiatorConfig::default();
    let (cto, data) = (climate_cto(), data_engineer());
    // (cap, seed) -> forced outcome; the fit without the answer sits between the thresholds.
    let table = [
        (4, 70.0, Action::Accept),
        (4, 20.0, Action::Reject),
        (0, 70.0, Action::Counter),
        (6, 70.0, Action::Counter),
    ];
    for (cap, score, want) in table {
        let seed = seed(score, "partial");
        let history = [
            turn(0, Action::Propose, "Proposing.", None),
            turn(1, Action::Counter, "Unsure.", None),
            turn(2, Action::Counter, "Still unsure.", None),
        ];
        // Turn 3 is the candidate's: Tom's needs {mission, driven, climate, startup} are half
        // covered by Priya, so the fit sits between the thresholds.
        let d = decide(
            &cfg,
            &situation(&data, &cto, Side::Candidate, &seed, &history, cap),
        );
        assert_eq!(d.action, want, "cap {cap} seed {score}: {}", d.reasoning);
        if cap == 4 {
            assert!(d.reasoning.contains("final decision"), "{}", d.reasoning);
        }
    }
    // A whole simulated negotiation under a cap never ends on a counter from the system side.
    let seed = seed(50.0, "partial");
    let turns = simulate(&climate_cto(), &data_engineer(), &seed, None, 4);
    assert!(
        turns.last().unwrap().action.is_terminal(),
        "{:?}",
        actions(&turns)
    );
}

#[test]
fn counters_are_limited_even_without_a_cap() {
    let cfg = NegotiatorConfig {
        max_counters: 1,
        ..NegotiatorConfig::default()
    };
    let (cto, data) = (climate_cto(), data_engineer());
    let seed = seed(70.0, "partial");
    let history = [
        turn(0, Action::Propose, "Proposing.", None),
        turn(1, Action::Counter, "Unsure.", None),
        turn(2, Action::Counter, "Need more.", None),
        turn(3, Action::Counter, "Unsure.", None),
    ];
    let d = decide(
        &cfg,
        &situation(&cto, &data, Side::Source, &seed, &history, 0),
    );
    assert_eq!(d.action, Action::Accept, "{}", d.reasoning); // fit >= final_accept_at
}

#[test]
fn deal_breakers_and_discovery_queries_rule_a_match_out() {
    let cfg = NegotiatorConfig::default();
    let mut engineer = rust_engineer();
    engineer
        .profile
        .as_mut()
        .unwrap()
        .extra
        .insert("dealBreakers".into(), json!(["crypto trading", 7]));
    let mut founder = founder();
    founder.profile.as_mut().unwrap().bio =
        Some("Founder of a Rust fintech startup doing crypto trading infrastructure.".into());
    let seed = seed(85.0, "strong");
    let opening = [turn(0, Action::Propose, "Proposing.", None)];
    let d = decide(
        &cfg,
        &situation(&engineer, &founder, Side::Candidate, &seed, &opening, 6),
    );
    assert_eq!(d.action, Action::Reject);
    assert!(
        d.reasoning.contains("deal-breaker \"crypto trading\""),
        "{}",
        d.reasoning
    );
    // At turn 0 the protocol still demands a propose; the concern is stated.
    let d = decide(
        &cfg,
        &situation(&engineer, &founder, Side::Source, &seed, &[], 6),
    );
    assert_eq!(d.action, Action::Propose);
    assert!(
        d.reasoning.contains("Concern: deal-breaker"),
        "{}",
        d.reasoning
    );

    // The source searched for something the candidate does not offer.
    let (chef, kernel) = (pastry_chef(), kernel_dev());
    let s = Situation {
        discovery_query: Some("bakery investors"),
        ..situation(&kernel, &chef, Side::Candidate, &seed, &opening, 6)
    };
    let d = decide(&cfg, &s);
    assert_eq!(d.action, Action::Reject);
    assert!(
        d.reasoning.contains("discovery query \"bakery investors\""),
        "{}",
        d.reasoning
    );
}

#[test]
fn roles_follow_actors_then_valency_then_needs() {
    let cfg = NegotiatorConfig::default();
    // Tom states no intents of his own here: the match serves Priya's needs only.
    let (cto, mut data) = (climate_cto(), data_engineer());
    data.intents.clear();
    let mut sd = seed(70.0, "x");
    let roles_for = |sd: &SeedAssessment, side: Side| {
        let (own, other) = if side == Side::Source {
            (&cto, &data)
        } else {
            (&data, &cto)
        };
        decide(&cfg, &situation(own, other, side, sd, &[], 6)).suggested_roles
    };
    let r = |own, other| SuggestedRoles {
        own_user: own,
        other_user: other,
    };
    // No hints: half of Priya's needs are covered by Tom and Tom needs nothing, so she receives
    // (patient) and he provides (agent).
    assert_eq!(roles_for(&sd, Side::Source), r(Role::Patient, Role::Agent));
    assert_eq!(
        roles_for(&sd, Side::Candidate),
        r(Role::Agent, Role::Patient)
    );
    sd.valency_role = Some(Role::Agent); // the source's role
    assert_eq!(roles_for(&sd, Side::Source), r(Role::Agent, Role::Patient));
    assert_eq!(
        roles_for(&sd, Side::Candidate),
        r(Role::Patient, Role::Agent)
    );
    sd.actors = Some(vec![SeedActor {
        user_id: "u-data".into(),
        role: Role::Peer,
    }]);
    assert_eq!(roles_for(&sd, Side::Source), r(Role::Peer, Role::Peer));
    // Symmetric needs with no hints: peers.
    let (f, e) = (founder(), rust_engineer());
    let d = decide(
        &cfg,
        &situation(&f, &e, Side::Source, &seed(80.0, "x"), &[], 6),
    );
    assert_eq!(d.suggested_roles, r(Role::Peer, Role::Peer));
}

#[test]
fn decisions_are_deterministic() {
    let cfg = NegotiatorConfig::default();
    let (cto, data) = (climate_cto(), data_engineer());
    let seed = seed(70.0, "partial");
    let history = [
        turn(
            0,
            Action::Propose,
            "Proposing.",
            Some("Priya brings: data architecture."),
        ),
        turn(1, Action::Counter, "x", None),
    ];
    let s = situation(&cto, &data, Side::Source, &seed, &history, 6);
    let first = decide(&cfg, &s);
    for _ in 0..5 {
        assert_eq!(decide(&cfg, &s), first);
    }
}

#[test]
fn users_without_intents_or_profiles_still_get_a_reasoned_turn() {
    let cfg = NegotiatorConfig::default();
    let (a, b) = (user(json!({"id": "a"})), user(json!({"id": "b"})));
    for (score, want) in [
        (90.0, Action::Accept),
        (40.0, Action::Counter),
        (10.0, Action::Reject),
    ] {
        let sd = seed(score, "");
        let history = [turn(0, Action::Propose, "p", None)];
        let d = decide(&cfg, &situation(&b, &a, Side::Candidate, &sd, &history, 6));
        assert_eq!(d.action, want, "{}", d.reasoning);
        assert!(
            d.reasoning.contains("matched: none; missing: none"),
            "{}",
            d.reasoning
        );
        assert_eq!(
            d.suggested_roles,
            SuggestedRoles {
                own_user: Role::Peer,
                other_user: Role::Peer
            }
        );
    }
}
