//! Liveness: when each personal agent was last seen, and whether it is live.
//!
//! Every call an agent authenticates (pickup, respond, extend, release, the negotiation views,
//! MCP, `POST /api/agents/{id}/heartbeat`) marks it seen: `agents.last_seen_at = now()`. That
//! write is throttled in the process, at most once per [`SEEN_WRITE_EVERY`] per agent, so an
//! agent that polls in a tight loop costs one small UPDATE per 15 s, not one per call. The
//! throttle is a map from agent id to when this process last wrote for it; with several
//! processes each writes at most that often.
//!
//! An agent is *live* when it is active, one of its keys works and it was seen within
//! `PARLEY_AGENT_LIVENESS` (default 90 s): [`is_live`], the one place that says so, for the
//! agent views (`live`) and the park window alike (SQL only stores what it reads). A long-poll in
//! progress counts as seen without any write while it waits: the pickup marks the agent at its
//! start, and a long-poll lasts at most `PARLEY_LONG_POLL_MAX` (30 s). So at any moment during
//! a wait, the agent was written at most 15 s (the throttle) + 30 s (the wait) = 45 s ago, well
//! inside 90 s; the configuration refuses a liveness window not longer than that sum.
//!
//! The delegation calls mark their agents seen the same way, through the same throttle.
//!
//! What liveness decides: the park window of a mixed negotiation's turn (see
//! `Engine::park_window` and the park timer in `crate::delivery`).
//!
//! The writes can be switched off in a process ([`Runtime::record_liveness`]); only
//! `parley-bench` does, to measure what they cost the turn cycle in one run.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Instant,
};

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Runtime;
use crate::store::agents::{self, AgentStatus, Presence};

pub use crate::config::SEEN_WRITE_EVERY;

/// How many agents the throttle remembers before it forgets the ones written long ago.
const REMEMBERED: usize = 10_000;

/// The write throttle: agent id -> when this process last wrote `last_seen_at` for it.
#[derive(Debug, Default)]
pub struct SeenThrottle {
    written: Mutex<HashMap<Uuid, Instant>>,
    /// Writes switched off ([`Runtime::record_liveness`]).
    off: AtomicBool,
    /// `last_seen_at` writes made by this process.
    writes: AtomicU64,
}

impl SeenThrottle {
    /// Whether to write for `agent` now; if so, the write is counted as made.
    fn due(&self, agent: Uuid, now: Instant) -> bool {
        if self.off.load(Ordering::Relaxed) {
            return false;
        }
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.get(&agent).is_some_and(|at| now.duration_since(*at) < SEEN_WRITE_EVERY) {
            return false;
        }
        if written.len() >= REMEMBERED {
            written.retain(|_, at| now.duration_since(*at) < SEEN_WRITE_EVERY);
        }
        written.insert(agent, now);
        true
    }

    /// A write that failed is not counted, so the next call tries again.
    fn forget(&self, agent: Uuid) {
        self.written.lock().unwrap_or_else(|e| e.into_inner()).remove(&agent);
    }
}

/// Whether an agent is live at `now`: active, with a key that works, and seen within `window`.
/// An agent seen lately is not live when it can answer nothing (inactive, every key revoked or
/// expired).
pub fn is_live(presence: &Presence, window: std::time::Duration, now: DateTime<Utc>) -> bool {
    let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
    presence.status == AgentStatus::Active
        && presence.working_key
        && presence.last_seen_at.is_some_and(|seen| now.checked_sub_signed(window).is_none_or(|since| seen > since))
}

impl Runtime {
    /// Whether an agent is live now, by the configured window ([`is_live`]).
    pub fn is_live(&self, presence: &Presence) -> bool {
        is_live(presence, self.config.agent_liveness, Utc::now())
    }

    /// Whether any agent of `user_id` is live now ([`is_live`]): one that can answer a turn.
    pub async fn any_live(&self, conn: &mut PgConnection, user_id: &str) -> sqlx::Result<bool> {
        Ok(agents::presences(conn, user_id).await?.iter().any(|p| self.is_live(p)))
    }

    /// Marks `agent` seen, writing `last_seen_at` unless this process wrote it within the last
    /// [`SEEN_WRITE_EVERY`]. A failed write is logged and does not fail the caller's request.
    pub async fn seen(&self, agent: Uuid) {
        if !self.seen_throttle.due(agent, Instant::now()) {
            return;
        }
        let written = async {
            let mut conn = self.pool.acquire().await?;
            agents::mark_seen(&mut conn, agent).await
        }
        .await;
        match written {
            Ok(()) => {
                self.seen_throttle.writes.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.seen_throttle.forget(agent);
                tracing::warn!(agent.id = %agent, error = %e, "marking an agent seen failed");
            }
        }
    }

    /// Switches this process's `last_seen_at` writes on (the default) or off. Off, agents that
    /// call this process are not marked seen, so they may look offline: only for measuring
    /// what the writes cost (`parley-bench --only liveness`).
    pub fn record_liveness(&self, on: bool) {
        self.seen_throttle.off.store(!on, Ordering::Relaxed);
    }

    /// How many `last_seen_at` writes this process has made.
    pub fn liveness_writes(&self) -> u64 {
        self.seen_throttle.writes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_throttle_lets_one_write_through_per_period_and_agent() {
        let throttle = SeenThrottle::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let t0 = Instant::now();
        assert!(throttle.due(a, t0));
        assert!(!throttle.due(a, t0 + Duration::from_secs(14)));
        assert!(throttle.due(b, t0 + Duration::from_secs(1)), "agents are throttled apart");
        assert!(throttle.due(a, t0 + SEEN_WRITE_EVERY));
        throttle.forget(b);
        assert!(throttle.due(b, t0 + Duration::from_secs(2)), "a failed write is tried again");
    }

    #[test]
    fn live_is_active_with_a_working_key_and_seen_within_the_window() {
        let now = Utc::now();
        let window = Duration::from_secs(90);
        let seen = |ago: i64| Some(now - chrono::Duration::seconds(ago));
        let live = Presence { status: AgentStatus::Active, last_seen_at: seen(89), working_key: true };
        assert!(is_live(&live, window, now));
        let cases = [
            (Presence { last_seen_at: seen(91), ..live }, "seen before the window"),
            (Presence { last_seen_at: None, ..live }, "never seen"),
            (Presence { status: AgentStatus::Inactive, ..live }, "inactive"),
            (Presence { working_key: false, ..live }, "no key that works"),
        ];
        for (presence, why) in cases {
            assert!(!is_live(&presence, window, now), "{why}");
        }
        assert!(
            is_live(&Presence { last_seen_at: seen(1_000_000), ..live }, Duration::MAX, now),
            "a window past the calendar"
        );
    }

    #[test]
    fn switched_off_nothing_is_due() {
        let throttle = SeenThrottle::default();
        let agent = Uuid::now_v7();
        throttle.off.store(true, Ordering::Relaxed);
        assert!(!throttle.due(agent, Instant::now()), "off: not even a first write");
        throttle.off.store(false, Ordering::Relaxed);
        assert!(throttle.due(agent, Instant::now()), "on again: the agent is written");
    }
}
