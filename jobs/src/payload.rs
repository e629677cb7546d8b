//! Timer payloads, their queue names and their idempotency keys.
//!
//! This module owns the wire shape of every durable timer. Payloads carry ids only (the service
//! re-reads everything else from its own tables when the timer fires), so they stay small and
//! survive schema changes. They are serialized as camelCase JSON into `apalis.jobs.job`.
//!
//! Compatibility rules, because rows written by an older build may be read by a newer one (and
//! the other way round during a rolling deploy):
//! - unknown fields are ignored (no `deny_unknown_fields`);
//! - any field added later must carry `#[serde(default)]`;
//! - a field is never renamed or removed while rows that carry it may still be pending.
//!
//! Each kind has its own explicit queue (`apalis.jobs.job_type`) and one idempotency key per
//! subject (`park:{task_id}`, `claim:{task_id}`, `deadline:{task_id}`, `expiry:{opportunity_id}`,
//! `delegation:{delegation_id}`, `a2a:delegation:{delegation_id}:{attempt}`,
//! `a2a:turn:{task_id}:{turn_number}`),
//! so there is at most one pending timer of a kind per task or opportunity. The outbox's jobs
//! ([`OutboxDelivery`]) are the exception: they carry no key (see its docs).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Explicit apalis queue names (`apalis.jobs.job_type`), one per timer kind.
///
/// They are part of the stored data: renaming one strands the rows already queued under the
/// old name.
pub mod queues {
    /// Queue of [`ParkTimeout`](super::ParkTimeout) timers.
    pub const PARK_TIMEOUT: &str = "parley.park_timeout";
    /// Queue of [`ClaimTimeout`](super::ClaimTimeout) timers.
    pub const CLAIM_TIMEOUT: &str = "parley.claim_timeout";
    /// Queue of [`NegotiationDeadline`](super::NegotiationDeadline) timers.
    pub const NEGOTIATION_DEADLINE: &str = "parley.negotiation_deadline";
    /// Queue of [`PendingExpiry`](super::PendingExpiry) timers.
    pub const PENDING_EXPIRY: &str = "parley.pending_expiry";
    /// Queue of the periodic [`Housekeeping`](super::Housekeeping) job.
    pub const HOUSEKEEPING: &str = "parley.housekeeping";
    /// Queue of [`DelegationTimeout`](super::DelegationTimeout) timers.
    pub const DELEGATION_TIMEOUT: &str = "parley.delegation_timeout";
    /// Queue of [`SystemTurn`](super::SystemTurn) jobs.
    pub const SYSTEM_TURN: &str = "parley.system_turn";
    /// Queue of [`A2aCall`](super::A2aCall) jobs.
    pub const A2A_CALL: &str = "parley.a2a_call";
    /// Queue of [`OutboxDelivery`](super::OutboxDelivery) jobs.
    pub const OUTBOX: &str = "parley.outbox";

    /// Every queue this crate owns, in a fixed order.
    pub const ALL: [&str; 9] = [
        PARK_TIMEOUT,
        CLAIM_TIMEOUT,
        NEGOTIATION_DEADLINE,
        PENDING_EXPIRY,
        HOUSEKEEPING,
        DELEGATION_TIMEOUT,
        SYSTEM_TURN,
        A2A_CALL,
        OUTBOX,
    ];
}

/// A parked turn ran out of time (mixed negotiations): the system negotiator takes the turn.
///
/// Acts only if the task is still `waiting_for_agent` at `turn_number` with `generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkTimeout {
    /// The negotiation's task.
    pub task_id: Uuid,
    /// The 0-based turn that was parked.
    pub turn_number: u32,
    /// The task's claim generation when the timer was armed.
    pub generation: i64,
}

/// A claim expired without a respond: the turn goes back to `waiting_for_agent`.
///
/// Acts only if the task is still `claimed` with `generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimTimeout {
    /// The negotiation's task.
    pub task_id: Uuid,
    /// The claim generation this timer guards.
    pub generation: i64,
}

/// A personal-vs-personal negotiation reached its overall deadline: it ends `stalled`/`timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NegotiationDeadline {
    /// The negotiation's task.
    pub task_id: Uuid,
}

/// A `pending` opportunity nobody decided on reached its TTL: it becomes `expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingExpiry {
    /// The opportunity to expire.
    pub opportunity_id: Uuid,
}

/// A delegation attempt ran out of time: not accepted within the accept timeout, or not
/// finished within the delegation's `timeoutMs`. One pending timer per delegation (key
/// `delegation:{delegation_id}`), moved along as the attempt is accepted or replaced by the next.
///
/// Acts only if `attempt` is still the delegation's live attempt and its deadline has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationTimeout {
    /// The delegation.
    pub delegation_id: Uuid,
    /// The 1-based attempt the timer was armed for.
    pub attempt: i32,
}

/// A system turn that a model decides, taken off the request that made it due (the model may
/// take seconds). One pending job per task (key `system-turn:{task_id}`), due at once.
///
/// Acts only if the task is still `working` at `turn_number` or, for a fallback, still parked
/// at `turn_number` with `generation`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemTurn {
    /// The negotiation's task.
    pub task_id: Uuid,
    /// The 0-based turn the system negotiator takes.
    pub turn_number: u32,
    /// The task's claim generation when the job was armed.
    #[serde(default)]
    pub generation: i64,
    /// Why the system stands in for the side's personal agent (`park_timeout`, `offline`,
    /// `hand_back`), when it does.
    #[serde(default)]
    pub fallback: Option<String>,
}

/// The idempotency key of the system-turn job of `task_id`.
pub fn system_turn_key(task_id: Uuid) -> String {
    format!("system-turn:{task_id}")
}

/// The idempotency key of the timer of `delegation_id`.
pub fn delegation_timeout_key(delegation_id: Uuid) -> String {
    format!("delegation:{delegation_id}")
}

/// One step of Parley calling an agent registered by its AgentCard (an agent that never polls):
/// pushing it a delegation attempt or a negotiation turn, then following the task it answers
/// with. One pending job per subject (key [`A2aSubject::key`]); each step makes at most one call
/// and arms the next step in the transaction that records what the call answered, so a step
/// lost to a crash runs again (the call it repeats carries the same message id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct A2aCall {
    /// What is pushed.
    pub subject: A2aSubject,
    /// Follow-up reads of the agent's task made so far (the backoff grows with them).
    #[serde(default)]
    pub polls: u32,
    /// Calls that failed in a row (network, 5xx, an answer that could not be read); for a turn,
    /// the answers that failed (at three, the turn is handed back).
    #[serde(default)]
    pub failures: u32,
    /// A turn's: the agent the turn is pushed to, once chosen.
    #[serde(default)]
    pub agent_id: Option<Uuid>,
    /// A turn's: the claim generation it was sent under.
    #[serde(default)]
    pub generation: Option<i64>,
    /// A turn's: the agent's task, once the send was answered (an attempt's is stored with the
    /// attempt).
    #[serde(default)]
    pub remote_task_id: Option<String>,
}

impl A2aCall {
    /// The first step of pushing `subject`.
    pub fn first(subject: A2aSubject) -> A2aCall {
        A2aCall { subject, polls: 0, failures: 0, agent_id: None, generation: None, remote_task_id: None }
    }
}

/// What an [`A2aCall`] pushes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum A2aSubject {
    /// Attempt `attempt` of a delegation, offered to the agent.
    Delegation {
        /// The delegation.
        delegation_id: Uuid,
        /// The 1-based attempt.
        attempt: i32,
    },
    /// A negotiation's turn, parked for the agent's user.
    Turn {
        /// The negotiation's task.
        task_id: Uuid,
        /// The 0-based turn.
        turn_number: u32,
    },
}

impl A2aSubject {
    /// The idempotency key of the subject's job: `a2a:delegation:{id}:{attempt}` or
    /// `a2a:turn:{task_id}:{turn_number}` (an attempt's steps never replace an earlier
    /// attempt's, which may still have a cancel to send).
    pub fn key(&self) -> String {
        match self {
            A2aSubject::Delegation { delegation_id, attempt } => format!("a2a:delegation:{delegation_id}:{attempt}"),
            A2aSubject::Turn { task_id, turn_number } => format!("a2a:turn:{task_id}:{turn_number}"),
        }
    }
}

/// Sending the outbox's deliveries (webhooks and A2A push notifications) that are due: those of
/// one event (armed in SQL by the event's own transaction, `parley_jobs.arm_outbox_event`), or
/// those of one target (a retry armed for its time, a sender that ran out of its time budget,
/// housekeeping's sweep). The service's handler sends every due delivery of the targets named,
/// within each target's concurrency, so a job may send more than it was armed for and may find
/// nothing left to send: the deliveries' rows say what is due, the job only says "look now".
///
/// Outbox jobs have no idempotency key: events are written by many transactions at once, and
/// a keyed arming would make them wait on one another. Finished ones are pruned sooner than
/// the timers' (see `worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxDelivery {
    /// Send the due deliveries of the targets this event goes to.
    #[serde(default)]
    pub event_id: Option<i64>,
    /// Send the due deliveries of this target.
    #[serde(default)]
    pub target_id: Option<Uuid>,
}

/// The periodic maintenance job: the service resumes stale `working` tasks, this crate prunes
/// finished apalis rows older than a day. It re-arms itself; there is one chain per database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Housekeeping {}

/// The task-scoped timer kinds, for [`cancel_timers_for_task`](crate::cancel_timers_for_task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// [`ParkTimeout`].
    Park,
    /// [`ClaimTimeout`].
    Claim,
    /// [`NegotiationDeadline`].
    Deadline,
}

impl TimerKind {
    /// Every task-scoped kind (cancel them all when a negotiation ends).
    pub const ALL: [TimerKind; 3] = [TimerKind::Park, TimerKind::Claim, TimerKind::Deadline];

    /// The queue this kind lives in.
    pub fn queue(self) -> &'static str {
        match self {
            TimerKind::Park => queues::PARK_TIMEOUT,
            TimerKind::Claim => queues::CLAIM_TIMEOUT,
            TimerKind::Deadline => queues::NEGOTIATION_DEADLINE,
        }
    }

    /// The idempotency key of this kind's timer for `task_id`.
    pub fn key(self, task_id: Uuid) -> String {
        match self {
            TimerKind::Park => format!("park:{task_id}"),
            TimerKind::Claim => format!("claim:{task_id}"),
            TimerKind::Deadline => format!("deadline:{task_id}"),
        }
    }
}

/// The idempotency key of the pending-expiry timer of `opportunity_id`.
pub fn pending_expiry_key(opportunity_id: Uuid) -> String {
    format!("expiry:{opportunity_id}")
}

/// The idempotency key of the single housekeeping chain.
pub(crate) const HOUSEKEEPING_KEY: &str = "housekeeping";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_camel_case_and_tolerate_unknown_fields() {
        let id = Uuid::now_v7();
        let t = ParkTimeout { task_id: id, turn_number: 3, generation: 7 };
        let json = serde_json::to_value(t).expect("encode");
        assert_eq!(json["taskId"], id.to_string());
        assert_eq!(json["turnNumber"], 3);
        assert_eq!(json["generation"], 7);

        let with_extra = serde_json::json!({
            "taskId": id, "turnNumber": 3, "generation": 7, "addedLater": true
        });
        let back: ParkTimeout = serde_json::from_value(with_extra).expect("decode");
        assert_eq!(back, t);

        let h: Housekeeping = serde_json::from_str(r#"{"anything": 1}"#).expect("decode");
        assert_eq!(h, Housekeeping {});
        assert_eq!(serde_json::to_string(&Housekeeping {}).expect("encode"), "{}");
    }

    #[test]
    fn keys_and_queues_are_distinct_per_kind() {
        let id = Uuid::now_v7();
        let keys: Vec<String> = TimerKind::ALL.iter().map(|k| k.key(id)).collect();
        assert_eq!(keys[0], format!("park:{id}"));
        assert_eq!(keys[1], format!("claim:{id}"));
        assert_eq!(keys[2], format!("deadline:{id}"));
        assert_eq!(pending_expiry_key(id), format!("expiry:{id}"));
        let mut qs = queues::ALL.to_vec();
        qs.sort_unstable();
        qs.dedup();
        assert_eq!(qs.len(), queues::ALL.len());
    }

    /// The SQL arming function `function` (in `jobs/sql/timers.sql`): the queue, the key prefix
    /// and the payload's keys it writes.
    fn armed_in_sql(function: &str) -> (String, String, std::collections::BTreeSet<String>) {
        let sql = crate::worker::TIMERS_SQL;
        let start = sql.find(&format!("FUNCTION parley_jobs.{function}(")).expect("the function is in timers.sql");
        let body = &sql[start..];
        let body = &body[..body.find("$$;").expect("its end")];
        let literal = |s: &str| s.trim().strip_prefix('\'')?.strip_suffix('\'').map(str::to_owned);
        // `arm(queue, key, ...)` or `rearm(from_queue, from_key, queue, key, ...)`: the last
        // queue and key literals before the payload are the timer's own.
        let call = &body
            [body.find("PERFORM parley_jobs.").expect("a call")..body.find("json_build_object(").expect("a payload")];
        let args: Vec<&str> = call[call.find('(').expect("args") + 1..].split(',').map(str::trim).collect();
        let queue = args.iter().filter_map(|a| literal(a)).rfind(|a| a.starts_with("parley.")).expect("a queue");
        let prefix = args
            .iter()
            .filter_map(|a| a.split("||").next().and_then(literal))
            .rfind(|a| a.ends_with(':'))
            .expect("a key prefix");
        let object = &body[body.find("json_build_object(").expect("a payload") + "json_build_object(".len()..];
        let object = &object[..object.find(')').expect("its end")];
        let keys = object.split(',').step_by(2).filter_map(literal).collect();
        (queue, prefix, keys)
    }

    fn keys_of(payload: impl Serialize) -> std::collections::BTreeSet<String> {
        let json = serde_json::to_value(payload).expect("encode");
        json.as_object().expect("an object").keys().cloned().collect()
    }

    #[test]
    fn the_timers_the_sql_arms_have_the_payloads_queues_and_keys_of_these_types() {
        let id = Uuid::now_v7();
        let (queue, prefix, keys) = armed_in_sql("arm_park_timeout");
        assert_eq!(
            (queue.as_str(), keys),
            (queues::PARK_TIMEOUT, keys_of(ParkTimeout { task_id: id, turn_number: 0, generation: 0 }))
        );
        assert_eq!(format!("{prefix}{id}"), TimerKind::Park.key(id));
        let (queue, prefix, keys) = armed_in_sql("arm_claim_timeout");
        assert_eq!(
            (queue.as_str(), keys),
            (queues::CLAIM_TIMEOUT, keys_of(ClaimTimeout { task_id: id, generation: 0 }))
        );
        assert_eq!(format!("{prefix}{id}"), TimerKind::Claim.key(id));
        let (queue, prefix, keys) = armed_in_sql("arm_delegation_timeout");
        assert_eq!(
            (queue.as_str(), keys),
            (queues::DELEGATION_TIMEOUT, keys_of(DelegationTimeout { delegation_id: id, attempt: 1 }))
        );
        assert_eq!(format!("{prefix}{id}"), delegation_timeout_key(id));
    }
}
