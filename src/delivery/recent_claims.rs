//! The claims this process handed out lately, as their pickup read them: the snapshot a respond
//! plans from, without reading it again.
//!
//! A respond that presents a claim token looks its claim up here first (by task and
//! generation). Everything a plan reads is fixed while that claim lives: the contexts never
//! change, turns are only appended, and the opportunity moves only once the negotiation ends.
//! `parley_respond` applies the plan only if the task is still claimed by that agent under that
//! generation at that turn count, unexpired, and the API key is a live key of that agent; so a
//! stale entry (the claim expired, was answered through another process, or the key was
//! revoked) costs one failed statement, and the respond then reads the task afresh and decides
//! from what it finds. An entry is taken out when it is used, and the map is bounded.

use std::{num::NonZeroUsize, sync::Mutex};

use lru::LruCache;
use uuid::Uuid;

use super::Claim;
use crate::store::turn_delivery::{KeyCheck, RespondSnapshot};

/// How many claims are remembered (the least recently handed out are forgotten first).
const CAPACITY: usize = 4096;

/// See the module docs.
pub struct RecentClaims {
    claims: Mutex<LruCache<(Uuid, i64), RespondSnapshot>>,
}

impl Default for RecentClaims {
    fn default() -> Self {
        RecentClaims { claims: Mutex::new(LruCache::new(NonZeroUsize::new(CAPACITY).expect("non-zero"))) }
    }
}

impl RecentClaims {
    /// Remembers a claim handed out by pickup.
    pub fn remember(&self, claim: &Claim) {
        let (Some(agent_id), Some(owner_user_id)) = (claim.task.claim_agent_id, claim.task.awaiting_user_id.clone())
        else {
            return;
        };
        let snapshot = RespondSnapshot {
            key: KeyCheck::Ok { agent_id, owner_user_id },
            task: Some(claim.task.clone()),
            history: claim.history.clone(),
            opportunity_status: Some(claim.opportunity_status),
            replay: None,
        };
        self.lock().put((claim.task.id, claim.task.claim_generation), snapshot);
    }

    /// Takes out the claim of `task_id` at `generation`, unless the call names another agent
    /// than its holder. Its `key` is who held the claim, which `parley_respond` checks against
    /// the key presented.
    pub fn take(&self, task_id: Uuid, generation: i64, agent_id: Option<Uuid>) -> Option<RespondSnapshot> {
        let snapshot = self.lock().pop(&(task_id, generation))?;
        let holder = snapshot.task.as_ref().and_then(|t| t.claim_agent_id);
        agent_id.is_none_or(|a| Some(a) == holder).then_some(snapshot)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<(Uuid, i64), RespondSnapshot>> {
        // A panic while holding this lock leaves nothing half-done: every operation is one call.
        self.claims.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
