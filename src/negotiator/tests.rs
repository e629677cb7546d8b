//! Table-driven scenarios with realistic profiles (clear match, clear mismatch, partial fit
//! answered by later evidence, stalemates, private reasoning, caps, blockers, roles and
//! determinism), then property tests over generated people and personal agents.

use super::*;
use crate::domain::turn::{Role, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedActor, SeedAssessment, UserContext};
use proptest::prelude::*;
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

/// Turn `n`, taken by `side` as the negotiator `decision` says.
fn decided_turn(n: u32, side: Side, decision: Decision) -> Turn {
    Turn {
        turn_number: n,
        side,
        action: decision.action,
        reasoning: decision.reasoning,
        suggested_roles: decision.suggested_roles,
        message: decision.message,
    }
}

/// The users as `side` sees them: (own, other).
fn own_and_other<'a>(
    side: Side,
    source: &'a UserContext,
    candidate: &'a UserContext,
) -> (&'a UserContext, &'a UserContext) {
    if side == Side::Source {
        (source, candidate)
    } else {
        (candidate, source)
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

/// What the system negotiator does for Priya (the source) against Tom after `history`, under
/// the turn cap `cap`.
fn priya_decides(
    cfg: &NegotiatorConfig,
    seed: &SeedAssessment,
    history: &[Turn],
    cap: u32,
) -> Decision {
    let (cto, data) = (climate_cto(), data_engineer());
    decide(
        cfg,
        &situation(&cto, &data, Side::Source, seed, history, cap),
    )
}

/// Asserts that `text` contains `part`, showing `text` when it does not.
#[track_caller]
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text}");
}

/// Asserts that `text` starts with `lead`, showing `text` when it does not.
#[track_caller]
fn assert_starts_with(text: &str, lead: &str) {
    assert!(text.starts_with(lead), "{text}");
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
        let (own, other) = own_and_other(side, source, candidate);
        let mut s = situation(own, other, side, seed, &history, cap);
        s.discovery_query = query;
        let d = decide(&cfg, &s);
        assert!(!d.reasoning.is_empty());
        assert_ne!(d.action, Action::Question);
        let end = d.action.is_terminal();
        history.push(decided_turn(n, side, d));
        if end {
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
    assert_contains(&turns[0].reasoning, "Seed reasoning: Ada needs");
    assert_starts_with(&turns[1].reasoning, "Accepting");
}

#[test]
fn clear_mismatch_is_rejected_by_either_side() {
    let seed = seed(30.0, "Both are makers.");
    let turns = simulate(&pastry_chef(), &kernel_dev(), &seed, None, 6);
    assert_eq!(actions(&turns), [Action::Propose, Action::Reject]);
    assert_contains(&turns[1].reasoning, "matched: none");
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
    assert_contains(
        &d.reasoning,
        "missing: investors, artisan, bakery, patisserie",
    );
}

fn cyd() -> UserContext {
    user(json!({
        "id": "u-cyd", "name": "Cyd",
        "profile": {
            "bio": "Brand and product designer: ten years of identities, packaging and design systems.",
            "skills": ["brand design", "Figma", "design systems", "illustration"],
            "interests": ["typography", "small business"]
        },
        "intents": [{"text": "Looking for a part-time designer role at a small business"}]
    }))
}

fn dee() -> UserContext {
    user(json!({
        "id": "u-dee", "name": "Dee",
        "profile": {
            "bio": "Accountant keeping the books of a small business; we want our brand refreshed.",
            "skills": ["accounting", "bookkeeping", "payroll", "tax returns"],
            "interests": ["small business", "finance"]
        },
        "intents": [{"text": "Looking for a full-time co-founder to handle sales and brand design"}]
    }))
}

/// Priya's turns 0 and 2 (a propose, then a counter naming what she misses) around Tom's turn 1,
/// as the system negotiator plays them, followed by Tom's turn 3 saying `message` with private
/// `reasoning`.
fn priya_countered_then_tom_says(
    seed: &SeedAssessment,
    reasoning: &str,
    message: &str,
) -> Vec<Turn> {
    let mut history = vec![turn(0, Action::Propose, "Proposing Tom for Priya.", None)];
    history.push(turn(
        1,
        Action::Counter,
        "Tom wants a mission-driven team.",
        Some("What is the mission?"),
    ));
    let d = priya_decides(&NegotiatorConfig::default(), seed, &history, 0);
    assert_eq!(d.action, Action::Counter, "{}", d.reasoning);
    history.push(turn(2, d.action, &d.reasoning, d.message.as_deref()));
    history.push(turn(3, Action::Counter, reasoning, Some(message)));
    history
}

#[test]
fn partial_fit_is_countered_then_resolved_by_new_evidence() {
    let seed = seed(70.0, "Tom is a climate data engineer; Priya is hiring one.");
    let history = priya_countered_then_tom_says(
        &seed,
        "Tom has the infrastructure experience asked for.",
        "I run our Kubernetes clusters, manage all infrastructure with Terraform, and built our analytics platform.",
    );
    // Turn 2 named what is missing, in the reasoning and to Tom.
    assert_contains(
        &history[2].reasoning,
        "missing: kubernetes, terraform, analytics, platform",
    );
    assert_starts_with(
        history[2].message.as_deref().unwrap(),
        "To go ahead, Priya needs evidence of: kubernetes, terraform, analytics, platform.\nPriya brings: ",
    );
    // Tom answers the objection in his message; the evidence is re-read and the fit convinces.
    let d = priya_decides(&NegotiatorConfig::default(), &seed, &history, 8);
    assert_eq!(d.action, Action::Accept, "{}", d.reasoning);
    assert_starts_with(
        &d.reasoning,
        "Accepting (the fit is convincing; now covered: kubernetes, terraform, analytics, platform): ",
    );
    assert_contains(&d.reasoning, "missing: none");
}

#[test]
fn a_later_counter_says_what_changed_and_a_stalemate_ends_at_once() {
    let cfg = NegotiatorConfig::default();
    // (seed, Tom's turn 3, Tom's turn 5, Priya's turn 4, Priya's turn 6, turn 6 starts with)
    let table = [
        // Part of the objection answered: a narrower counter; then nothing new: a decision.
        (
            50.0,
            "I run our Kubernetes clusters.",
            "Happy to talk.",
            Action::Counter,
            Action::Accept,
            "Accepting (final decision: nothing new since turn 4; the fit is sufficient): ",
        ),
        (
            30.0,
            "I run our Kubernetes clusters.",
            "Happy to talk.",
            Action::Counter,
            Action::Reject,
            "Rejecting (final decision: nothing new since turn 4; the fit is too weak): ",
        ),
        // Nothing new at all: Priya decides at turn 4 already.
        (
            70.0,
            "I build Python pipelines for climate research.",
            "",
            Action::Accept,
            Action::Accept,
            "Accepting (final decision: nothing new since turn 2; the fit is sufficient): ",
        ),
        (
            30.0,
            "Happy to talk.",
            "",
            Action::Reject,
            Action::Reject,
            "Rejecting (final decision: nothing new since turn 2; the fit is too weak): ",
        ),
    ];
    for (score, third, fifth, want4, want_end, lead) in table {
        let sd = seed(score, "partial");
        let mut history = priya_countered_then_tom_says(&sd, "Tom's own notes.", third);
        let d4 = priya_decides(&cfg, &sd, &history, 0);
        assert_eq!(d4.action, want4, "seed {score}: {}", d4.reasoning);
        let last = if want4 == Action::Counter {
            assert_starts_with(
                &d4.reasoning,
                "Countering (now covered: kubernetes since turn 2): ",
            );
            assert_starts_with(
                d4.message.as_deref().unwrap(),
                "Now covered: kubernetes; to go ahead, Priya still needs evidence of: terraform, analytics, platform.\n",
            );
            assert_ne!(
                d4.message, history[2].message,
                "a counter is never repeated"
            );
            history.push(turn(4, d4.action, &d4.reasoning, d4.message.as_deref()));
            history.push(turn(5, Action::Counter, "Still keen.", Some(fifth)));
            priya_decides(&cfg, &sd, &history, 0)
        } else {
            d4
        };
        assert_eq!(last.action, want_end, "seed {score}: {}", last.reasoning);
        assert_starts_with(&last.reasoning, lead);
        if want_end == Action::Reject {
            let n = if want4 == Action::Counter { 4 } else { 2 };
            assert_eq!(
                last.message.as_deref(),
                Some(
                    format!("Priya will pass on this match: nothing new since turn {n}.").as_str()
                )
            );
        }
    }
}

#[test]
fn private_reasoning_is_never_evidence_and_never_quoted() {
    let cfg = NegotiatorConfig::default();
    let sd = seed(40.0, "partial");
    let answer = "I secretly run Kubernetes with Terraform and built an analytics platform";
    // The answer only in Tom's private reasoning: nothing new, so Priya decides, and rejects.
    let hidden = priya_countered_then_tom_says(&sd, answer, "Happy to talk.");
    let d = priya_decides(&cfg, &sd, &hidden, 8);
    assert_eq!(d.action, Action::Reject, "{}", d.reasoning);
    assert_contains(&d.reasoning, "nothing new since turn 2");
    assert_contains(
        &d.reasoning,
        "missing: kubernetes, terraform, analytics, platform",
    );
    for text in [Some(&d.reasoning), d.message.as_ref()]
        .into_iter()
        .flatten()
    {
        assert!(!text.contains("secretly"), "{text}");
    }
    // Whatever the reasoning says, the decision is the same.
    let other = priya_countered_then_tom_says(&sd, "Nothing to add.", "Happy to talk.");
    assert_eq!(priya_decides(&cfg, &sd, &other, 8), d);
    // The same words in the message are evidence.
    let said = priya_countered_then_tom_says(&sd, "Nothing to add.", answer);
    let d = priya_decides(&cfg, &sd, &said, 8);
    assert_eq!(d.action, Action::Accept, "{}", d.reasoning);
}

#[test]
fn a_line_asking_for_evidence_is_no_evidence() {
    let cfg = NegotiatorConfig::default();
    let (cto, data) = (climate_cto(), data_engineer());
    let sd = seed(50.0, "partial");
    // (Tom's message at turn 1, does it cover kubernetes for Priya)
    let table = [
        (
            "To go ahead, Tom needs evidence of: kubernetes, terraform.\nTom brings: Python.",
            false,
        ),
        ("Tom NEEDS EVIDENCE OF kubernetes", false),
        (
            "Tom brings: kubernetes.\nTo go ahead, Tom needs evidence of: terraform.",
            true,
        ),
        (
            "I know kubernetes. Tom needs evidence of: terraform.",
            false,
        ),
    ];
    for (message, covered) in table {
        let history = [
            turn(0, Action::Propose, "Proposing.", None),
            turn(1, Action::Counter, "x", Some(message)),
        ];
        let e = evaluate(
            &cfg,
            &situation(&cto, &data, Side::Source, &sd, &history, 8),
        );
        assert_eq!(
            e.matched.iter().any(|t| t.key == "kubernete"),
            covered,
            "{message}: {e:?}"
        );
    }
}

#[test]
fn two_system_negotiators_in_a_stalemate_stop_at_turn_three_with_whole_compounds() {
    let sd = seed(55.0, "Both run small businesses.");
    let turns = simulate(&cyd(), &dee(), &sd, None, 6);
    assert_eq!(
        actions(&turns),
        [
            Action::Propose,
            Action::Counter,
            Action::Counter,
            Action::Reject
        ]
    );
    let message = |n: usize| turns[n].message.clone().unwrap();
    assert_eq!(
        message(1),
        "To go ahead, Dee needs evidence of: full-time, co-founder, handle, sales.\nDee brings: accounting, bookkeeping, payroll, tax returns."
    );
    assert_starts_with(
        &message(2),
        "To go ahead, Cyd needs evidence of: part-time, designer, role.\n",
    );
    assert_contains(&turns[2].reasoning, "missing: part-time, designer, role");
    assert_starts_with(
        &turns[3].reasoning,
        "Rejecting (final decision: nothing new since turn 1; the fit is too weak): ",
    );
    assert_contains(
        &turns[3].reasoning,
        "missing: full-time, co-founder, handle, sales",
    );
}

#[test]
fn the_last_turn_the_cap_allows_is_accept_or_reject() {
    let cfg = NegotiatorConfig::default();
    // Turn 2 is Priya's first counter unless the cap makes it the last turn. Half of her needs
    // are covered by Tom, so the fit sits between the thresholds. (cap, seed) -> action.
    let table = [
        (3, 70.0, Action::Accept),
        (3, 20.0, Action::Reject),
        (0, 70.0, Action::Counter),
        (8, 70.0, Action::Counter),
        (8, 20.0, Action::Counter),
    ];
    for (cap, score, want) in table {
        let seed = seed(score, "partial");
        let history = [
            turn(0, Action::Propose, "Proposing.", None),
            turn(1, Action::Counter, "Unsure.", Some("Tell me more.")),
        ];
        let d = priya_decides(&cfg, &seed, &history, cap);
        assert_eq!(d.action, want, "cap {cap} seed {score}: {}", d.reasoning);
        if cap == 3 {
            assert_contains(&d.reasoning, "final decision: the last turn the cap allows");
        }
    }
    // A whole simulated negotiation under any cap never ends on a counter from the system side.
    for cap in 2..=6 {
        let seed = seed(50.0, "partial");
        let turns = simulate(&climate_cto(), &data_engineer(), &seed, None, cap);
        assert!(
            turns.last().unwrap().action.is_terminal(),
            "cap {cap}: {:?}",
            actions(&turns)
        );
    }
}

#[test]
fn counters_are_limited_even_without_a_cap() {
    let seed = seed(50.0, "partial");
    // Tom's turn 3 covers something new, so only the counter limit stops a second counter.
    let history = priya_countered_then_tom_says(&seed, "x", "I run our Kubernetes clusters.");
    for (max_counters, want, lead) in [
        (
            1,
            Action::Accept,
            "Accepting (final decision: no agreement after 1 counter; the fit is sufficient",
        ),
        (
            3,
            Action::Counter,
            "Countering (now covered: kubernetes since turn 2)",
        ),
    ] {
        let cfg = NegotiatorConfig {
            max_counters,
            ..NegotiatorConfig::default()
        };
        let d = priya_decides(&cfg, &seed, &history, 0);
        assert_eq!(d.action, want, "{}", d.reasoning);
        assert_starts_with(&d.reasoning, lead);
    }
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
    assert_contains(&d.reasoning, "deal-breaker \"crypto trading\"");
    // At turn 0 the protocol still demands a propose; the concern is stated.
    let d = decide(
        &cfg,
        &situation(&engineer, &founder, Side::Source, &seed, &[], 6),
    );
    assert_eq!(d.action, Action::Propose);
    assert_contains(&d.reasoning, "Concern: deal-breaker");

    // The source searched for something the candidate does not offer.
    let (chef, kernel) = (pastry_chef(), kernel_dev());
    let s = Situation {
        discovery_query: Some("bakery investors"),
        ..situation(&kernel, &chef, Side::Candidate, &seed, &opening, 6)
    };
    let d = decide(&cfg, &s);
    assert_eq!(d.action, Action::Reject);
    assert_contains(&d.reasoning, "discovery query \"bakery investors\"");
}

#[test]
fn roles_follow_actors_then_valency_then_needs() {
    let cfg = NegotiatorConfig::default();
    // Tom states no intents of his own here: the match serves Priya's needs only.
    let (cto, mut data) = (climate_cto(), data_engineer());
    data.intents.clear();
    let mut sd = seed(70.0, "x");
    let roles_for = |sd: &SeedAssessment, side: Side| {
        let (own, other) = own_and_other(side, &cto, &data);
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

/// Words people are made of in the property tests: plain words, compounds in several spellings,
/// stop words, and words the other side may or may not have.
const VOCAB: &[&str] = &[
    "rust",
    "payments",
    "part-time",
    "full-time",
    "full time",
    "fulltime",
    "co-founder",
    "cofounders",
    "ci/cd",
    "design",
    "designer",
    "accounting",
    "sales",
    "brand",
    "python",
    "kubernetes",
    "terraform",
    "startup",
    "startups",
    "fintech",
    "climate",
    "data",
    "senior",
    "backend",
    "remote",
    "mentor",
    "one-on-one",
    "and",
    "for",
    "with",
    "looking",
];

fn words(n: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(VOCAB), n).prop_map(|w| w.join(" "))
}

prop_compose! {
    fn person(id: &'static str)(
        intent in words(0..6),
        bio in words(0..6),
        skills in proptest::collection::vec(proptest::sample::select(VOCAB), 0..4),
    ) -> UserContext {
        user(json!({
            "id": id, "name": id,
            "profile": {"bio": bio, "skills": skills},
            "intents": [{"text": intent}]
        }))
    }
}

/// A personal agent's turn: an action that goes on, a message and private reasoning.
fn agent_turn() -> impl Strategy<Value = (Action, String, String)> {
    (
        prop_oneof![Just(Action::Counter), Just(Action::Question)],
        words(0..4),
        words(0..4),
    )
}

/// Plays a mixed negotiation: the system negotiator on the `system` side, the scripted agent's
/// turns on the other (each reasoning prefixed by `secret`; turn 0 is always a propose), until
/// a terminal turn, the script's end or `cap`.
fn play_mixed(
    source: &UserContext,
    candidate: &UserContext,
    system: Side,
    seed: &SeedAssessment,
    agent: &[(Action, String, String)],
    secret: &str,
    cap: u32,
) -> Vec<Turn> {
    let cfg = NegotiatorConfig::default();
    let mut history: Vec<Turn> = Vec::new();
    let mut scripted = agent.iter();
    for n in 0..cap {
        let side = Side::for_turn(n);
        let t = if side == system {
            let (own, other) = own_and_other(side, source, candidate);
            decided_turn(
                n,
                side,
                decide(&cfg, &situation(own, other, side, seed, &history, cap)),
            )
        } else {
            let Some((action, message, reasoning)) = scripted.next() else {
                break;
            };
            let action = if n == 0 { Action::Propose } else { *action };
            turn(
                n,
                action,
                &format!("{secret} {reasoning}"),
                Some(message.as_str()),
            )
        };
        let end = t.action.is_terminal();
        history.push(t);
        if end {
            break;
        }
    }
    history
}

/// The counters of `side`, as (reasoning, message).
fn counters(turns: &[Turn], side: Side) -> Vec<(&str, Option<&str>)> {
    turns
        .iter()
        .filter(|t| t.side == side && t.action == Action::Counter)
        .map(|t| (t.reasoning.as_str(), t.message.as_deref()))
        .collect()
}

fn all_distinct<T: PartialEq>(items: &[T]) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(i, a)| items[..i].iter().all(|b| b != a))
}

proptest! {
    /// Two system negotiators end by turn 3 on an accept or a reject, never repeat a counter and
    /// never ask; the same people give the same turns.
    #[test]
    fn system_negotiations_end_early_without_repeating_themselves(
        source in person("source"),
        candidate in person("candidate"),
        score in 0.0f64..=100.0,
        cap in 2u32..=8,
    ) {
        let sd = seed(score, "generated");
        let turns = simulate(&source, &candidate, &sd, None, cap);
        prop_assert!(turns.len() <= 4, "{:?}", actions(&turns));
        prop_assert!(turns.last().unwrap().action.is_terminal(), "{:?}", actions(&turns));
        for side in [Side::Source, Side::Candidate] {
            prop_assert!(all_distinct(&counters(&turns, side)));
        }
        prop_assert_eq!(simulate(&source, &candidate, &sd, None, cap), turns);
    }

    /// Against a personal agent, the system side never repeats a counter, counters again only
    /// when something new was covered (and says so), decides on the last turn the cap allows,
    /// and neither reads nor quotes the agent's private reasoning.
    #[test]
    fn against_an_agent_the_system_makes_progress_and_ignores_private_reasoning(
        source in person("source"),
        candidate in person("candidate"),
        system_is_source in any::<bool>(),
        score in 0.0f64..=100.0,
        agent in proptest::collection::vec(agent_turn(), 4),
        other_reasoning in words(0..6),
    ) {
        let sd = seed(score, "generated");
        let side = if system_is_source { Side::Source } else { Side::Candidate };
        let turns = play_mixed(&source, &candidate, side, &sd, &agent, "zqxsecret", 8);
        let system: Vec<&Turn> = turns.iter().filter(|t| t.side == side).collect();
        prop_assert!(system.iter().all(|t| t.action != Action::Question));
        prop_assert!(all_distinct(&counters(&turns, side)));
        for (i, t) in system.iter().enumerate() {
            if t.action == Action::Counter && system[..i].iter().any(|p| p.action == Action::Counter) {
                prop_assert!(t.reasoning.starts_with("Countering (now covered: "), "{}", t.reasoning);
            }
        }
        if let Some(last) = turns.get(7) {
            prop_assert!(last.side != side || last.action.is_terminal(), "{:?}", actions(&turns));
        }
        for t in &system {
            prop_assert!(!t.reasoning.contains("zqxsecret"));
            prop_assert!(!t.message.as_deref().unwrap_or("").contains("zqxsecret"));
        }
        // Other private reasoning, the same system turns.
        let agent_b: Vec<_> = agent
            .iter()
            .map(|(a, m, _)| (*a, m.clone(), other_reasoning.clone()))
            .collect();
        let again: Vec<Turn> = play_mixed(&source, &candidate, side, &sd, &agent_b, "other", 8)
            .into_iter()
            .filter(|t| t.side == side)
            .collect();
        prop_assert_eq!(again, system.into_iter().cloned().collect::<Vec<_>>());
    }
}
