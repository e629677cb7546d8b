//! The system negotiator asks its person: where the user it plays for opted in
//! (`negotiationPreferences.askWhenUnsure` on the user's context) and its evidence is genuinely
//! split, it asks that person one yes/no question before it decides, and decides by the answer.
//!
//! What "genuinely split" means is read from the negotiator's own assessment
//! ([`negotiator::evaluate`]) and its own decision ([`negotiator::decide`]), never by judging
//! anew ([`split`]). The rules are about to decide (accept or reject: never while they still
//! counter, which is how they ask the other side for more, nor before a proposal, after which
//! they judge again);
//! nothing rules the match out on its own (no concern, no word in another sense, nothing the
//! other side says its user lacks) and nobody manipulates (instructions, look-alike letters,
//! claims the profile contradicts); and the two halves of the fit disagree: the seed prior (the
//! platform's evaluator) stands near the line, at or above `final_accept_at` but below
//! `protected_seed`, while the evidence pulls away from it, either the profile alone shows what
//! an accept needs (grounded at or above `accept_at`) or what speaks for the match is only
//! claimed and the profile does not bear it out. The fit alone does not say it: it folds the
//! two halves together, so a fit near the accept line is as often a clear case whose claims
//! were answered in full.
//!
//! The question is one sentence in people's words, with the options `yes` and `no`, asked as a
//! personal agent's `ask_person` is (`super::ask`): the turn waits in `waiting_for_person`
//! (`working -> waiting_for_person`), the person reads it on their status page and answers
//! within `PARLEY_ASK_TIMEOUT`. Then (`waiting_for_person -> working`) the system negotiator
//! takes the same turn again: a yes accepts (proposes at the first turn), a no rejects, and an
//! answer that is neither, or none in time, leaves the turn to the rules as if it had never
//! asked. It asks at most once per negotiation, and never when it stands in for a personal
//! agent (a fallback) or when a model decides the system's turns.
//!
//! A question is asked under a claim generation of its own (the task's is moved on by one), so
//! that it never shares one with a question the other side's agent asked. Nothing of it reaches
//! the other side, which reads only that the negotiation waits for the other person.

use serde_json::json;
use uuid::Uuid;

use super::{DeliveryError, Engine};
use crate::{
    domain::{Action, DecidedBy, Played, SeedAssessment, Side, SideKind, TaskEvent, TaskState, Turn, UserContext},
    negotiator::{self, Decision, Evaluation, NegotiatorConfig, Situation, evidence::Distrust},
    store::{
        insights,
        person_questions::{self, NewQuestion, QuestionStatus},
        tasks::{self, Task},
    },
};

/// Most terms named per list in a question.
const NAMED_TERMS: usize = 3;

/// Longest bio sentence a question quotes.
const BIO_CHARS: usize = 140;

/// The options a system question offers.
const OPTIONS: [&str; 2] = ["yes", "no"];

/// Whether the user of `side` opted in to be asked (read from the stored context as it is,
/// without decoding the rest).
pub(crate) fn opted_in(task: &Task, side: Side) -> bool {
    let context = match side {
        Side::Source => &task.source_context,
        Side::Candidate => &task.candidate_context,
    };
    context.pointer("/negotiationPreferences/askWhenUnsure").and_then(serde_json::Value::as_bool) == Some(true)
}

/// Whether the evidence of `eval` is genuinely split, with `action` the rules' decision: see
/// the module docs. Pure.
pub fn split(cfg: &NegotiatorConfig, eval: &Evaluation, action: Action) -> bool {
    // A decision that can end the negotiation: a proposal is not one (the rules judge again
    // once the other side has answered it), nor is a counter (the rules still ask for more).
    let deciding = matches!(action, Action::Accept | Action::Reject);
    // Nothing rules the match out on its own, and nobody manipulates: claims that are merely
    // not borne out by the profile are the one distrust that leaves the case open.
    let open = eval.need.is_some()
        && eval.concerns.is_empty()
        && eval.other_sense.is_none()
        && eval.denied == 0.0
        && matches!(eval.distrust, None | Some(Distrust::Unsupported));
    // The platform's evaluator put the match near the line: proposed, but not as surely as the
    // negotiator protects a first turn for.
    let prior_near_line = (cfg.final_accept_at..cfg.protected_seed).contains(&eval.seed);
    // ... and the evidence pulls away from it: the profile alone shows what an accept needs, or
    // what speaks for the match is only claimed.
    let evidence_pulls = eval.grounded >= cfg.accept_at || eval.distrust == Some(Distrust::Unsupported);
    deciding && open && prior_near_line && evidence_pulls
}

/// A person's answer read as yes (`Some(true)`) or no; `None` when it is neither.
pub fn yes_or_no(answer: &str) -> Option<bool> {
    let first = answer.trim().split(|c: char| !c.is_alphanumeric()).next().unwrap_or("").to_lowercase();
    match first.as_str() {
        "yes" | "y" | "yeah" | "yep" | "sure" | "ok" | "okay" => Some(true),
        "no" | "n" | "nope" | "nah" => Some(false),
        _ => None,
    }
}

/// Terms named as people read them: "a", "a and b", "a, b and c".
fn named(terms: &[&str]) -> String {
    let terms: Vec<&str> = terms.iter().take(NAMED_TERMS).copied().collect();
    match terms.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn name_of(u: &UserContext) -> &str {
    u.name.as_deref().filter(|n| !n.trim().is_empty()).unwrap_or(&u.id)
}

/// The other user as the question names them: their name, and their bio's first sentence (at
/// most [`BIO_CHARS`] characters) when they have one.
fn who(other: &UserContext) -> String {
    let name = name_of(other);
    let bio = other.profile.as_ref().and_then(|p| p.bio.as_deref()).unwrap_or("").trim();
    let first = bio.split_terminator(['.', '!', '?', '\n']).next().unwrap_or("").trim();
    if first.is_empty() || first.chars().count() > BIO_CHARS {
        return name.to_owned();
    }
    format!("{name} ({first})")
}

/// The one yes/no sentence the person is asked: whether they want to meet the other user, who
/// that is, and what of their need shows and what does not.
pub fn question(other: &UserContext, eval: &Evaluation) -> String {
    let shows: Vec<&str> =
        eval.terms.iter().filter(|t| !t.denied && t.grounded > 0.0).map(|t| t.shown.as_str()).collect();
    let claims: Vec<&str> = eval
        .terms
        .iter()
        .filter(|t| !t.denied && t.grounded == 0.0 && t.claimed > 0.0)
        .map(|t| t.shown.as_str())
        .collect();
    let missing: Vec<&str> = eval.missing().map(|t| t.shown.as_str()).collect();
    let mut evidence = match (shows.is_empty(), missing.is_empty()) {
        (false, false) => format!("their profile shows {} but nothing yet of {}", named(&shows), named(&missing)),
        (false, true) => format!("their profile shows {}", named(&shows)),
        (true, false) => format!("nothing in their profile shows {} yet", named(&missing)),
        (true, true) => "the evidence is mixed".to_owned(),
    };
    if !claims.is_empty() {
        evidence.push_str(&format!(", and only their messages say {}", named(&claims)));
    }
    if eval.distrust == Some(Distrust::Unsupported) {
        evidence.push_str(", and what they say of it is not borne out by their profile");
    }
    let need = eval.need.as_ref().map(|n| n.text.trim().trim_end_matches(['.', '!', '?'])).unwrap_or_default();
    let who = who(other);
    let sentence = if need.is_empty() {
        format!("Would you like to meet {who}, given that {evidence}?")
    } else {
        format!("Would you like to meet {who} for “{need}”, given that {evidence}?")
    };
    clip(sentence)
}

/// At most the 500 characters a question may have.
fn clip(sentence: String) -> String {
    const MAX: usize = 500;
    if sentence.chars().count() <= MAX {
        return sentence;
    }
    let mut cut: String = sentence.chars().take(MAX - 2).collect();
    cut.push_str("…?");
    cut
}

/// The turn decided by the person's answer (`yes`: accept, or propose at the first turn; `no`:
/// reject), with the rules' roles and the question in the reasoning (private to its side).
fn answered_turn(s: &Situation, rules: &Decision, eval: &Evaluation, yes: bool, asked: &str, answer: &str) -> Turn {
    let turn_number = s.history.len() as u32;
    let (own, other) = (name_of(s.own), name_of(s.other));
    let action = match (yes, turn_number) {
        (true, 0) => Action::Propose,
        (true, _) => Action::Accept,
        (false, _) => Action::Reject,
    };
    let message = if yes {
        format!("{own} has considered it and would like to take this further with {other}.")
    } else {
        format!("{own} has considered it and will pass on this one.")
    };
    let reasoning = format!(
        "decided by {own}'s answer “{answer}” to “{asked}”; the rules stood at fit {:.2} from grounded {:.2} \
         and seed {:.0}",
        eval.fit,
        eval.grounded,
        eval.seed * 100.0
    );
    Turn {
        turn_number,
        side: s.own_side,
        action,
        reasoning,
        suggested_roles: rules.suggested_roles,
        message: Some(message),
        played: Some(Played::system(None, DecidedBy::Rules)),
    }
}

/// What the system negotiator does about its person before it takes a turn.
pub(crate) enum Consult {
    /// It asked (the task now waits for the person).
    Asked,
    /// The person's answer decided the turn.
    Decided(Box<Turn>),
    /// The rules take the turn, as always.
    Rules,
}

/// The side's own context, the other as it may be seen, and the seed.
fn situation_parts(task: &Task, side: Side) -> Result<(UserContext, UserContext, SeedAssessment), DeliveryError> {
    let own = task.context(side)?;
    let other = task.context(side.other())?.as_seen_by_other_side();
    let seed: SeedAssessment = serde_json::from_value(task.seed_assessment.clone()).map_err(anyhow::Error::from)?;
    Ok((own, other, seed))
}

impl Engine {
    /// Whether the system negotiator of `side` (a system seat, the rules deciding) would ask its
    /// person at the turn after `history`, by the assessment alone: respond's plan leaves such a
    /// turn to the engine's loop ([`Engine::consult_person`]), which also knows whether it asked
    /// already. Pure.
    pub(crate) fn system_may_ask(&self, task: &Task, side: Side, history: &[crate::domain::Turn]) -> bool {
        if task.kind(side) != SideKind::System || self.model_decides() || !opted_in(task, side) {
            return false;
        }
        let Ok((own, other, seed)) = situation_parts(task, side) else { return false };
        let s = self.situation(task, side, &own, &other, &seed, history);
        let eval = negotiator::evaluate(&self.negotiator, &s);
        split(&self.negotiator, &eval, negotiator::decide(&self.negotiator, &s).action)
    }

    fn situation<'a>(
        &self,
        task: &'a Task,
        side: Side,
        own: &'a UserContext,
        other: &'a UserContext,
        seed: &'a SeedAssessment,
        history: &'a [Turn],
    ) -> Situation<'a> {
        Situation {
            own,
            other,
            own_side: side,
            seed,
            discovery_query: task.discovery_query.as_deref(),
            history,
            max_turns: task.max_turns,
        }
    }

    /// Before the system negotiator takes `side`'s turn on a locked `working` task (`history`:
    /// the turns so far), in the caller's transaction: asks its person when the user opted in,
    /// it has not asked in this negotiation and the evidence is split; decides by the answer
    /// when the person answered at this turn; otherwise leaves the turn to the rules. Costs
    /// nothing more for a user who did not opt in.
    pub(crate) async fn consult_person(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &Task,
        side: Side,
        history: &[Turn],
    ) -> Result<Consult, DeliveryError> {
        if task.kind(side) != SideKind::System || self.model_decides() || !opted_in(task, side) {
            return Ok(Consult::Rules);
        }
        let turn_number = history.len() as u32;
        let (own, other, seed) = situation_parts(task, side)?;
        let s = self.situation(task, side, &own, &other, &seed, history);
        let closed = person_questions::closed_for_turn(conn, task.id, turn_number, side).await?;
        if let Some(q) = closed.last() {
            let yes = q.answer.as_deref().and_then(|a| yes_or_no(a).map(|yes| (yes, a)));
            let Some((yes, answer)) = yes.filter(|_| q.status == QuestionStatus::Answered) else {
                return Ok(Consult::Rules);
            };
            let eval = negotiator::evaluate(&self.negotiator, &s);
            let rules = negotiator::decide(&self.negotiator, &s);
            return Ok(Consult::Decided(Box::new(answered_turn(&s, &rules, &eval, yes, &q.question, answer))));
        }
        let eval = negotiator::evaluate(&self.negotiator, &s);
        let rules = negotiator::decide(&self.negotiator, &s);
        if !split(&self.negotiator, &eval, rules.action)
            || person_questions::count_for_side(conn, task.id, side).await? > 0
        {
            return Ok(Consult::Rules);
        }
        self.system_asks(conn, task, side, &question(&other, &eval)).await?;
        Ok(Consult::Asked)
    }

    /// Asks the person of `side` `text`, in the caller's transaction: `working ->
    /// waiting_for_person` under a claim generation of its own, the question stored, the answer
    /// window armed as the task's turn timer, the event written to that person only.
    async fn system_asks(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &Task,
        side: Side,
        text: &str,
    ) -> Result<(), DeliveryError> {
        let next = task.state.transition(TaskEvent::SystemAsks)?;
        let user_id = task.user_id(side).to_owned();
        let generation = tasks::system_asks(conn, task.id, &user_id).await?;
        let question_id = Uuid::now_v7();
        let expires_at = self.answer_deadline()?;
        let options: Vec<String> = OPTIONS.iter().map(|o| (*o).to_owned()).collect();
        person_questions::insert(
            conn,
            &NewQuestion {
                id: question_id,
                task_id: task.id,
                side,
                user_id: &user_id,
                agent_id: None,
                turn_number: task.turn_count,
                claim_generation: generation,
                request_hash: &[],
                response: None,
                question: text,
                options: &options,
                expires_at,
            },
        )
        .await?;
        self.disarm_turn_timer(conn, task.id).await?;
        parley_jobs::schedule_park_timeout(
            conn,
            &parley_jobs::ParkTimeout { task_id: task.id, turn_number: task.turn_count, generation },
            expires_at,
        )
        .await
        .map_err(|e| DeliveryError::Unexpected(e.into()))?;
        let data = json!({
            "negotiationId": task.id, "opportunityId": task.opportunity_id, "questionId": question_id,
            "state": "asked", "question": text, "options": options,
            "askedAt": chrono::Utc::now(), "expiresAt": expires_at,
        });
        let mut asking = task.clone();
        asking.state = next;
        self.record_question_event(conn, &asking, &user_id, data).await?;
        insights::count_question(conn, task.id, &user_id, "asked").await?;
        tracing::info!(negotiation.id = %task.id, turn.number = task.turn_count, question.id = %question_id,
            "the system negotiator asked its person");
        Ok(())
    }

    /// Once a question of the system negotiator closed on a locked task (answered, or its window
    /// ran out), in the caller's transaction: `waiting_for_person -> working`, the answer window
    /// gone. The caller runs the negotiation on ([`Engine::advance`]) once committed.
    pub(crate) async fn back_to_system(
        &self,
        conn: &mut sqlx::PgConnection,
        task: &mut Task,
    ) -> Result<(), DeliveryError> {
        let next = task.state.transition(TaskEvent::SystemResumes)?;
        tasks::set_state(conn, task.id, task.state, next, task.turn_count).await?;
        task.state = next;
        task.awaiting_user_id = None;
        self.disarm_turn_timer(conn, task.id).await?;
        Ok(())
    }

    /// Whether the question a locked task waiting for its person waits on is the system
    /// negotiator's (its side has no personal agent).
    pub(crate) fn system_is_asking(task: &Task) -> bool {
        task.state == TaskState::WaitingForPerson && task.kind(Side::for_turn(task.turn_count)) == SideKind::System
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiator::Concern;

    fn user(value: serde_json::Value) -> UserContext {
        serde_json::from_value(value).unwrap()
    }

    /// Omar (a founder who wants to meet founders) judging Julia (a researcher who interviews
    /// them), who proposed: the profiles match every word, the seed is lukewarm.
    fn omar_judging_julia() -> (Evaluation, Action, String) {
        let omar = user(json!({"id": "omar", "name": "Omar Farouk",
            "profile": {"bio": "Founder of a Berlin heat-pump installation startup.", "skills": ["HVAC"]},
            "intents": [{"text": "Meet other founders in the Berlin climate-tech scene"}]}));
        let julia = user(json!({"id": "julia", "name": "Julia Weber",
            "profile": {"bio": "Climate policy researcher at a Berlin think tank.", "skills": ["policy research"]},
            "intents": [{"text": "Interview climate-tech founders for my report on building decarbonisation"}]}));
        let seed: SeedAssessment =
            serde_json::from_value(json!({"score": 62, "reasoning": "Berlin climate tech"})).unwrap();
        let proposal = Turn {
            turn_number: 0,
            side: Side::Source,
            action: Action::Propose,
            reasoning: "r".into(),
            suggested_roles: serde_json::from_value(json!({"ownUser": "peer", "otherUser": "peer"})).unwrap(),
            message: Some("Julia would like to interview Omar.".into()),
            played: None,
        };
        let history = [proposal];
        let s = Situation {
            own: &omar,
            other: &julia,
            own_side: Side::Candidate,
            seed: &seed,
            discovery_query: None,
            history: &history,
            max_turns: 8,
        };
        let cfg = NegotiatorConfig::default();
        (
            negotiator::evaluate(&cfg, &s),
            negotiator::decide(&cfg, &s).action,
            question(&julia, &negotiator::evaluate(&cfg, &s)),
        )
    }

    #[test]
    fn strong_evidence_against_a_lukewarm_seed_is_split_and_anything_decisive_is_not() {
        let cfg = NegotiatorConfig::default();
        let (eval, action, _) = omar_judging_julia();
        assert_eq!(action, Action::Accept, "{eval:?}");
        assert!(split(&cfg, &eval, action), "{eval:?}");
        // The rules still counter, or only propose: not a decision to ask before.
        assert!(!split(&cfg, &eval, Action::Counter));
        assert!(!split(&cfg, &eval, Action::Propose));
        // A seed the negotiator protects, or one below its line: the prior is not near the line.
        for seed in [cfg.protected_seed, 0.9, cfg.final_accept_at - 0.01, 0.3] {
            assert!(!split(&cfg, &Evaluation { seed, ..eval.clone() }, action), "seed {seed}");
        }
        // Evidence that does not pull away from the prior.
        assert!(!split(&cfg, &Evaluation { grounded: cfg.accept_at - 0.01, ..eval.clone() }, action));
        // Anything that rules the match out, or a manipulation, decides on its own.
        let decisive = [
            Evaluation { concerns: vec![Concern::SameNeed], ..eval.clone() },
            Evaluation { other_sense: Some(("rust".into(), "the video game")), ..eval.clone() },
            Evaluation { denied: 0.2, ..eval.clone() },
            Evaluation { distrust: Some(Distrust::Instructions), ..eval.clone() },
            Evaluation { distrust: Some(Distrust::LookAlikes), ..eval.clone() },
            Evaluation { distrust: Some(Distrust::Contradicted), ..eval.clone() },
            Evaluation { need: None, ..eval.clone() },
        ];
        for e in decisive {
            assert!(!split(&cfg, &e, action), "{e:?}");
        }
        // Claims the profile does not bear out leave a case near the line open, however weak
        // the grounded evidence.
        let unsupported = Evaluation { distrust: Some(Distrust::Unsupported), grounded: 0.2, ..eval };
        assert!(split(&cfg, &unsupported, Action::Reject));
    }

    #[test]
    fn the_question_is_one_yes_no_sentence_naming_the_other_user_and_the_need() {
        let (_, _, q) = omar_judging_julia();
        assert!(
            q.starts_with("Would you like to meet Julia Weber (Climate policy researcher at a Berlin think tank)"),
            "{q}"
        );
        assert!(q.contains("“Meet other founders in the Berlin climate-tech scene”"), "{q}");
        assert!(q.ends_with('?') && q.matches('?').count() == 1, "{q}");
        assert!(q.chars().count() <= 500);
    }

    #[test]
    fn answers_read_as_yes_or_no() {
        for yes in ["yes", "Yes", " YES.", "y", "Yes, please", "ok"] {
            assert_eq!(yes_or_no(yes), Some(true), "{yes}");
        }
        for no in ["no", "No.", "nope", "no thanks", "N"] {
            assert_eq!(yes_or_no(no), Some(false), "{no}");
        }
        for neither in ["", "maybe", "not sure", "yesterday", "know more first"] {
            assert_eq!(yes_or_no(neither), None, "{neither}");
        }
    }

    #[test]
    fn terms_are_named_as_people_read_them() {
        assert_eq!(named(&[]), "");
        assert_eq!(named(&["rust"]), "rust");
        assert_eq!(named(&["rust", "payments"]), "rust and payments");
        assert_eq!(named(&["a", "b", "c", "d"]), "a, b and c");
    }

    #[test]
    fn a_long_question_is_clipped_to_500_characters_and_stays_a_question() {
        let long = format!("Would you like to meet {}?", "x".repeat(600));
        let clipped = clip(long);
        assert_eq!(clipped.chars().count(), 500);
        assert!(clipped.ends_with('?'));
    }
}
