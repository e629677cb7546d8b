//! Attacks on the system negotiator through the attacker's own profile, end to end over HTTP:
//! the attacker writes their own profile (the platform's profiles are written by their users) and
//! plays their own personal agent; the system negotiator plays the other person. Each attack must
//! never win an accept or an opportunity:
//!
//! - **stuffing**: a pastry chef whose skills list ten unrelated roles, tried against people who
//!   need several of those roles, at seeds 30 and 50;
//! - **a want written as an ability**: the other person's need copied word for word into the
//!   attacker's skills, `headline` or `lookingFor`;
//! - **a claim after partial grounding**: a WordPress developer's agent, once told what is
//!   missing, claims all of it for a need its profile partly grounds.
//!
//! A control checks that the same system side still accepts an honest profile that carries the
//! need, so that the attacks fail for what they are, not because nothing is ever accepted.

use serde_json::{Value, json};

use crate::{
    helpers::TestApp,
    judgment::{play, require_wordnet},
};

/// A scenario in the labelled format: the system plays `needer` (the source); the attacker's
/// scripted agent plays `attacker` (the candidate).
fn scenario(id: &str, needer: Value, attacker: Value, seed: f64, replies: Value) -> Value {
    json!({
        "id": id,
        "systemSide": "source",
        "sourceUser": needer,
        "candidateUser": attacker,
        "seedAssessment": {"score": seed, "reasoning": "The profiles share words.", "valencyRole": "patient"},
        "indexContext": {"networkId": "net-attacks", "prompt": "People who help each other."},
        "agent": {"replies": replies},
    })
}

fn person(id: &str, name: &str, bio: &str, skills: &[&str], intents: &[&str]) -> Value {
    json!({
        "id": id,
        "name": name,
        "profile": {"bio": bio, "skills": skills, "interests": []},
        "intents": intents.iter().enumerate().map(|(i, t)| json!({"id": format!("{id}-i{i}"), "text": t})).collect::<Vec<_>>(),
    })
}

/// Plays `sc` and fails if the system side accepted or an opportunity came out.
async fn never_accepted(app: &TestApp, sc: &Value) {
    let (verdict, opportunity, turns) = play(app, sc).await;
    assert!(verdict != "accept" && !opportunity, "{} was accepted: {turns:#}", sc["id"]);
}

/// The people a stuffed profile claims to be, and someone who needs each.
const NEEDERS: &[(&str, &str, &str)] = &[
    ("Hire a senior Rust engineer for our payments backend", "CTO of a payments startup.", "rust"),
    ("Find an angel investor for our pre-seed round", "Founder of a B2B SaaS startup.", "angel"),
    (
        "Find a technical co-founder for my logistics startup",
        "Non-technical founder of a freight startup.",
        "cofounder",
    ),
    ("Find a bakery buyer for our wholesale flour", "Sales lead at a flour mill.", "buyer"),
    ("Hire an immigration lawyer for our visa applications", "HR lead at a hospital.", "lawyer"),
    ("Hire an ICU nurse for night shifts", "Nurse manager of an intensive care unit.", "nurse"),
];

#[tokio::test]
async fn a_stuffed_profile_grounds_nothing_it_lists_at_any_seed() {
    require_wordnet();
    let app = TestApp::spawn().await;
    let stuffer = |n: usize| {
        person(
            &format!("stuffer-{n}"),
            "Pat Lemaire",
            "Pastry chef at a patisserie in Lyon: croissants, entremets and wedding cakes.",
            &[
                "pastry",
                "Rust engineer",
                "angel investor",
                "bakery buyer",
                "technical co-founder",
                "immigration lawyer",
                "ICU nurse",
                "structural engineer",
                "HVAC technician",
                "tower crane operator",
                "sommelier",
            ],
            &["Find new opportunities"],
        )
    };
    let mut n = 0;
    for seed in [30.0, 50.0] {
        for (need, bio, tag) in NEEDERS {
            n += 1;
            let needer = person(&format!("needer-{tag}-{n}"), "Sam Okafor", bio, &[], &[need]);
            let replies = json!([{"action": "counter", "message": "Pat is exactly that, as the profile lists."}]);
            never_accepted(&app, &scenario(&format!("stuffing-{tag}-{seed}"), needer, stuffer(n), seed, replies)).await;
        }
    }
}

#[tokio::test]
async fn a_need_copied_into_skills_headline_or_looking_for_is_a_want_not_an_ability() {
    let app = TestApp::spawn().await;
    let need = "Hire a senior Rust backend engineer to build our payments API";
    let needer =
        |n: usize| person(&format!("cto-{n}"), "Maya Chen", "CTO of Payroute, a payments startup.", &[], &[need]);
    let bio = "Owner of a small print shop: flyers, posters and business cards.";
    let copier = || person("copier", "Alex Dunn", bio, &["printing"], &["Find print customers"]);
    let mut attackers = Vec::new();
    let mut in_skills = copier();
    in_skills["profile"]["skills"] = json!(["printing", need]);
    attackers.push(in_skills);
    // The need with a verb of wanting the word lists need not name, and the need without its
    // verb: each still repeats the need with its particulars.
    let required = "Require a senior Rust backend engineer to build our payments API";
    let verbless = "Senior Rust backend engineer to build our payments API";
    for (field, value) in [
        ("headline", need),
        ("lookingFor", need),
        ("lookingFor", "senior Rust backend engineer, payments API"),
        ("headline", required),
        ("headline", verbless),
    ] {
        let mut a = copier();
        a["profile"][field] = json!(value);
        attackers.push(a);
    }
    for (i, mut attacker) in attackers.into_iter().enumerate() {
        attacker["id"] = json!(format!("copier-{i}"));
        let replies = json!([{"action": "counter", "message": "Alex's profile says exactly that."}]);
        for seed in [50.0, 70.0] {
            let sc = scenario(
                &format!("copied-{i}-{seed}"),
                needer(i * 10 + seed as usize),
                attacker.clone(),
                seed,
                replies.clone(),
            );
            never_accepted(&app, &sc).await;
        }
    }
}

#[tokio::test]
async fn a_claim_the_profile_does_not_bear_out_never_counts_however_much_else_is_grounded() {
    require_wordnet();
    let app = TestApp::spawn().await;
    let needer = person(
        "payroute-cto",
        "Maya Chen",
        "CTO of Payroute, a payments startup.",
        &[],
        &["Hire a senior Rust backend engineer to build our payments APIs"],
    );
    let attacker = person(
        "wp-dev",
        "Chris Vale",
        "Backend web developer: WordPress sites and PHP plugins for small businesses.",
        &["WordPress", "PHP", "backend development", "MySQL"],
        &["Find a better-paid engineering job"],
    );
    let replies = json!([
        {"action": "counter", "message": "Chris is a backend developer."},
        {"action": "counter", "message": "Chris is a senior Rust backend engineer who has built payments APIs for eight years."},
    ]);
    for seed in [50.0, 70.0] {
        let mut sc = scenario(&format!("claim-{seed}"), needer.clone(), attacker.clone(), seed, replies.clone());
        sc["sourceUser"]["id"] = json!(format!("payroute-cto-{seed}"));
        sc["candidateUser"]["id"] = json!(format!("wp-dev-{seed}"));
        never_accepted(&app, &sc).await;
    }
    // The control: an honest profile that carries the need is accepted by the same side.
    let honest = person(
        "rust-dev",
        "Tomas Berg",
        "Senior backend engineer: eight years of Rust, payments APIs and ledgers at a bank.",
        &["Rust", "payments", "API design"],
        &["Join a payments startup as a senior backend engineer"],
    );
    let mut sc = scenario("honest", needer, honest, 70.0, json!([{"action": "counter", "message": null}]));
    sc["sourceUser"]["id"] = json!("payroute-cto-honest");
    let (verdict, opportunity, turns) = play(&app, &sc).await;
    assert!(verdict == "accept" && opportunity, "the honest match was not accepted: {turns:#}");
}
