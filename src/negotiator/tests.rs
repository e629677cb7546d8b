//! Tests of the system negotiator's decisions: labelled scenarios played in process against a
//! scripted agent (the same format `tests/api/judgment.rs` plays over HTTP), and properties.

use super::*;
use crate::domain::turn::{Role, Side, SuggestedRoles, Turn};
use crate::domain::user::{SeedAssessment, UserContext};
use serde::Deserialize;

/// A labelled scenario: one system side, one scripted agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    pub id: String,
    pub category: String,
    pub label: String,
    pub system_side: Side,
    pub source_user: UserContext,
    pub candidate_user: UserContext,
    pub seed_assessment: SeedAssessment,
    #[serde(default)]
    pub discovery_query: Option<String>,
    #[serde(default)]
    pub agent: Script,
    /// Why the negotiator does not yet agree with the label, for a scenario it gets wrong.
    #[serde(default)]
    pub known_miss: Option<String>,
    /// Whether the scenario was kept out of sight while the rules were tuned.
    #[serde(default)]
    pub held_out: bool,
}

/// What the scripted agent says.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub propose: Option<String>,
    #[serde(default)]
    pub replies: Vec<Reply>,
    #[serde(default)]
    pub r#final: Option<Reply>,
}

/// One scripted reply.
#[derive(Debug, Clone, Deserialize)]
pub struct Reply {
    pub action: Action,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub fallback: Option<String>,
}

/// How a scenario ended.
#[derive(Debug, Clone)]
pub struct Played {
    /// `accept` or `reject` when the system side's own turn ended it, else `none`.
    pub verdict: &'static str,
    /// Whether an opportunity came out.
    pub opportunity: bool,
    pub turns: Vec<Turn>,
}

impl Played {
    /// Whether the system side decided as the label says.
    pub fn agrees(&self, label: &str) -> bool {
        match label {
            "accept" => self.verdict == "accept",
            "reject" | "not-accept" => self.verdict != "accept" && !self.opportunity,
            _ => true,
        }
    }
}

/// Turn cap of a mixed negotiation (the default configuration).
const MIXED_CAP: u32 = 8;

/// Plays `sc` with the scripted agent's rules (see `tests/api/judgment.rs`).
pub fn play(cfg: &NegotiatorConfig, sc: &Scenario) -> Played {
    let users = |side: Side| if side == Side::Source { &sc.source_user } else { &sc.candidate_user };
    let agent_side = sc.system_side.other();
    let agent_role = {
        let v = sc.seed_assessment.valency_role.unwrap_or(Role::Peer);
        if agent_side == Side::Source { v } else { v.complement() }
    };
    let mut turns: Vec<Turn> = Vec::new();
    let mut used = 0usize;
    loop {
        let n = turns.len() as u32;
        let side = Side::for_turn(n);
        let turn = if side == sc.system_side {
            let own = users(side);
            let other = users(side.other()).as_seen_by_other_side();
            let d = decide(
                cfg,
                &Situation {
                    own,
                    other: &other,
                    own_side: side,
                    seed: &sc.seed_assessment,
                    discovery_query: sc.discovery_query.as_deref(),
                    history: &turns,
                    max_turns: MIXED_CAP,
                },
            );
            Turn {
                turn_number: n,
                side,
                action: d.action,
                reasoning: d.reasoning,
                suggested_roles: d.suggested_roles,
                message: d.message,
                played: Some(crate::domain::Played::system(None, crate::domain::DecidedBy::Rules)),
            }
        } else {
            let (action, message) = if n == 0 {
                (Action::Propose, sc.agent.propose.clone())
            } else if n + 1 >= MIXED_CAP {
                let f = sc.agent.r#final.clone().unwrap_or(Reply {
                    action: Action::Reject,
                    message: Some("We will leave it here.".into()),
                    fallback: None,
                });
                (f.action, f.message)
            } else {
                let r = if sc.agent.replies.is_empty() {
                    Reply { action: Action::Counter, message: sc.agent.propose.clone(), fallback: None }
                } else {
                    sc.agent.replies[used.min(sc.agent.replies.len() - 1)].clone()
                };
                used += 1;
                let message = r.message.map(|m| {
                    if m.contains("{asked}") {
                        let asked = asked_terms(&turns, agent_side).or(r.fallback.clone()).unwrap_or_default();
                        m.replace("{asked}", &asked)
                    } else {
                        m
                    }
                });
                (r.action, message)
            };
            Turn {
                turn_number: n,
                side,
                action,
                reasoning: "Scripted personal agent.".into(),
                suggested_roles: SuggestedRoles { own_user: agent_role, other_user: agent_role.complement() },
                message,
                played: Some(crate::domain::Played::agent()),
            }
        };
        let action = turn.action;
        turns.push(turn);
        if action.is_terminal() || turns.len() as u32 >= MIXED_CAP {
            let last = turns.last().unwrap();
            let verdict =
                if last.side == sc.system_side && last.action.is_terminal() { last.action.as_str() } else { "none" };
            return Played { verdict, opportunity: last.action == Action::Accept, turns };
        }
    }
}

/// What the system side's latest message says it "needs evidence of" (the echo attack's script).
fn asked_terms(turns: &[Turn], agent_side: Side) -> Option<String> {
    let last = turns.iter().rev().find(|t| t.side != agent_side)?;
    let m = last.message.as_deref()?;
    let lower = m.to_lowercase();
    let at = lower.find("needs evidence of")?;
    let rest = &m[at + "needs evidence of".len()..];
    Some(rest.trim_start_matches(':').lines().next().unwrap_or("").trim().trim_end_matches('.').to_owned())
}

/// Scenarios of a file in the case format.
pub fn load(path: &std::path::Path) -> Vec<Scenario> {
    #[derive(Deserialize)]
    struct File {
        scenarios: Vec<Scenario>,
    }
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str::<File>(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display())).scenarios
}

/// The project's labelled scenarios (also played over HTTP by `tests/api/judgment.rs`).
const OWN_CASES: &str = include_str!("../../tests/api/judgment_cases.json");

/// Labelled scenarios of people in fields the first set does not use (trades, health care,
/// academia, farming, law, logistics, hospitality, sport, the arts, non-profits), with stuffed
/// profiles, wants in profile fields and claims after partial grounding; the ones marked
/// `heldOut` were written last and kept out of sight while the rules were tuned.
const FIELDS_CASES: &str = include_str!("../../tests/api/judgment_fields.json");

fn parse(text: &str) -> Vec<Scenario> {
    #[derive(Deserialize)]
    struct File {
        scenarios: Vec<Scenario>,
    }
    serde_json::from_str::<File>(text).expect("the scenarios parse").scenarios
}

fn own_cases() -> Vec<Scenario> {
    parse(OWN_CASES)
}

/// The labelled scenarios judge with word senses: they need WordNet, which the project's set-up
/// installs (`.ci/run`, the README).
fn require_lexicon() {
    assert!(
        !crate::lexicon::get().is_empty(),
        "WordNet is not installed at {}: the system negotiator reads word senses from it, and its labelled \
         scenarios are judged with them. Install Debian's wordnet-base (`apt-get install wordnet-base`, as \
         .ci/run does) and run the tests again.",
        crate::lexicon::DEFAULT_DIR
    );
}

/// Plays `cases`, failing at once on an accepted manipulation or mismatch, and returns the
/// scenarios that end otherwise than recorded (disagreeing unmarked, or agreeing though marked as
/// a known miss).
fn play_all(cfg: &NegotiatorConfig, cases: &[Scenario]) -> Vec<String> {
    let mut wrong = Vec::new();
    for sc in cases {
        let p = play(cfg, sc);
        if sc.label != "accept" {
            assert!(
                !p.opportunity && p.verdict != "accept",
                "{} ({}) was accepted: {:#?}",
                sc.id,
                sc.category,
                p.turns
            );
        }
        if p.agrees(&sc.label) == sc.known_miss.is_some() {
            wrong.push(format!("{} ({}): {} (known miss: {})", sc.id, sc.category, p.verdict, sc.known_miss.is_some()));
        }
    }
    wrong
}

/// Every labelled scenario ends as its label says, except the few marked as known misses (all
/// of them false rejects of a paraphrase), and no manipulation or mismatch is ever accepted.
#[test]
fn the_labelled_scenarios_end_as_labelled() {
    require_lexicon();
    let cfg = NegotiatorConfig::default();
    let cases = own_cases();
    let kinds: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.category.as_str()).collect();
    for kind in [
        "accept/literal",
        "accept/paraphrase",
        "accept/null-pitch",
        "accept/answered",
        "reject/keyword-trap",
        "reject/same-role",
        "reject/mismatch",
        "reject/negation",
        "not-accept/echo",
        "not-accept/echo-after-counter",
        "not-accept/injection",
        "not-accept/unicode",
        "not-accept/snap-accept",
    ] {
        assert!(kinds.contains(kind), "no scenario of kind {kind}");
    }
    let wrong = play_all(&cfg, &cases);
    assert!(wrong.is_empty(), "scenarios that do not end as recorded: {wrong:#?}");
}

/// The scenarios of other fields end as labelled, but for the known misses they record, and
/// none of their manipulations (stuffed profiles, wants written into skills and other fields,
/// claims the profile does not bear out, echoes, instructions, look-alike letters) or bad
/// matches is accepted.
#[test]
fn the_scenarios_of_other_fields_end_as_labelled() {
    require_lexicon();
    let cases = parse(FIELDS_CASES);
    assert!(cases.len() >= 120, "{} scenarios", cases.len());
    assert!(cases.iter().filter(|c| c.held_out).count() >= 40);
    let kinds: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.category.as_str()).collect();
    for kind in ["not-accept/stuffed", "not-accept/want-in-field", "not-accept/echo-after-counter", "reject/same-role"]
    {
        assert!(kinds.contains(kind), "no scenario of kind {kind}");
    }
    let wrong = play_all(&NegotiatorConfig::default(), &cases);
    assert!(wrong.is_empty(), "scenarios that do not end as recorded: {wrong:#?}");
}

/// Without its lexicon (WordNet missing) the negotiator judges by spelling and its table alone:
/// it turns down more good matches, but what it refuses on manipulation does not depend on the
/// lexicon: instructions, look-alike letters, echoes the profile contradicts, snap accepts and
/// wants written into profile fields are still never accepted.
#[test]
fn without_a_lexicon_no_manipulation_is_accepted() {
    let cfg = NegotiatorConfig::default();
    let mut cases = own_cases();
    cases.extend(parse(FIELDS_CASES));
    crate::lexicon::with(crate::lexicon::empty(), || {
        for sc in cases.iter().filter(|c| c.label == "not-accept" && !c.category.ends_with("/stuffed")) {
            let p = play(&cfg, sc);
            assert!(
                !p.opportunity && p.verdict != "accept",
                "{} ({}) was accepted without a lexicon",
                sc.id,
                sc.category
            );
        }
    });
}

/// Who decided is the engine's to record; the negotiator's turn carries only what was decided,
/// and the same inputs give the same turn.
#[test]
fn the_same_scenario_plays_the_same_way() {
    let cfg = NegotiatorConfig::default();
    for sc in own_cases().iter().take(6) {
        let (a, b) = (play(&cfg, sc), play(&cfg, sc));
        assert_eq!(a.turns, b.turns, "{}", sc.id);
    }
}

/// Plays the scenarios of the file named by `PARLEY_CASES` and prints each verdict (a tool for
/// working on the negotiator; the project's own scenarios are asserted below and over HTTP).
#[test]
#[ignore]
fn play_cases_from_env() {
    let Ok(path) = std::env::var("PARLEY_CASES") else { return };
    let cfg = NegotiatorConfig::default();
    let verbose = std::env::var("PARLEY_CASES_VERBOSE").is_ok();
    let (mut agree, mut scored) = (0, 0);
    for sc in load(std::path::Path::new(&path)) {
        let p = play(&cfg, &sc);
        let ok = p.agrees(&sc.label);
        if sc.label != "either" {
            scored += 1;
            agree += ok as usize;
        }
        println!(
            "{:8} {:30} {:10} {:6} opp={:5} turns={} {}",
            sc.id,
            sc.category,
            sc.label,
            p.verdict,
            p.opportunity,
            p.turns.len(),
            if ok { "" } else { "DISAGREE" }
        );
        if verbose || !ok {
            for t in &p.turns {
                println!(
                    "    {} {:9} {:8} {}",
                    t.turn_number,
                    t.side.as_str(),
                    t.action.as_str(),
                    t.message.as_deref().unwrap_or("-")
                );
                if t.side == sc.system_side {
                    println!("         reasoning: {}", t.reasoning);
                }
            }
        }
    }
    println!("agree {agree}/{scored}");
}
