//! Which target an attempt goes to, decided inside the delegation's transaction from what the
//! screen found before it ([`super::screen`]): the named target, when it may take the work and
//! its input schema accepted the input; otherwise the best screened candidate that accepted it
//! and may still take the work (active, its capability unchanged, enabled, taking delegations,
//! above the trust floor), not yet tried.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    DelegationError,
    screen::Screened,
    service::Delegations,
    store::{self, Delegation, TargetOffer},
};
use crate::directory::trust;

/// The target an attempt goes to.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) agent_id: Uuid,
    pub(super) anonymous_id: Uuid,
    pub(super) capability_id: Uuid,
    pub(super) output_schema: Value,
}

/// The capability an eligible target offers for the work.
#[derive(Debug, Clone)]
pub(super) struct Offered {
    pub(super) capability_id: Uuid,
    pub(super) input_schema: Value,
    pub(super) output_schema: Value,
}

/// Whether `agent_id`, offering `offer` for `task_type` work (`None`: no such agent), may take it
/// from `requester`: the capability when it may, else why not. The trust minimum is checked
/// apart ([`above_floor`]).
pub(super) fn judge(
    offer: Option<TargetOffer>,
    agent_id: Uuid,
    requester: Uuid,
    task_type: &str,
) -> Result<Offered, String> {
    if agent_id == requester {
        return Err("the target is the requesting agent itself".into());
    }
    let Some(offer) = offer.filter(|o| o.active) else {
        return Err("the target agent is not active".into());
    };
    let (Some(capability_id), Some(input_schema), Some(output_schema)) =
        (offer.capability_id, offer.input_schema, offer.output_schema)
    else {
        return Err(format!("the target has no {task_type} capability"));
    };
    if !offer.enabled {
        return Err("the target's capability is disabled".into());
    }
    if !offer.accept_delegations {
        return Err("the target does not accept delegations".into());
    }
    Ok(Offered { capability_id, input_schema, output_schema })
}

/// Whether `agent_id`'s trust percentile reaches `floor`, else why not.
pub(super) async fn above_floor(
    conn: &mut PgConnection,
    agent_id: Uuid,
    floor: u32,
) -> Result<Result<(), String>, DelegationError> {
    // Every percentile is at least 0, so without a minimum there is nothing to read.
    if floor == 0 {
        return Ok(Ok(()));
    }
    let percentile = trust::percentile(conn, agent_id).await?;
    if percentile < i32::try_from(floor).unwrap_or(i32::MAX) {
        return Ok(Err(format!("the target's trust percentile {percentile} is below the minimum {floor}")));
    }
    Ok(Ok(()))
}

/// Why an agent may not take `kind` work from `requester`, if it may not: its offer read, then
/// judged, then its trust.
async fn eligibility(
    conn: &mut PgConnection,
    agent_id: Uuid,
    requester: Uuid,
    task_type: &str,
    custom_type: Option<&str>,
    floor: u32,
) -> Result<Result<Offered, String>, DelegationError> {
    let offer = store::target_offer(conn, agent_id, task_type, custom_type).await?;
    let offered = match judge(offer, agent_id, requester, task_type) {
        Ok(offered) => offered,
        Err(why) => return Ok(Err(why)),
    };
    Ok(above_floor(conn, agent_id, floor).await?.map(|()| offered))
}

impl Delegations {
    /// The first target of a new delegation: the named one (as [`store::open`] read it), or the
    /// best screened candidate that accepted the input and may take the work.
    /// [`DelegationError::Rescreen`] when the named target's capability changed since it was
    /// screened.
    pub(super) async fn first_target(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        opened: &store::Opened,
        screened: &Screened,
    ) -> Result<Target, DelegationError> {
        let floor = self.runtime.config.min_trust;
        if let Some(named) = d.requested_target {
            let (agent_id, _) = opened.target.filter(|(_, live)| *live).ok_or(DelegationError::UnknownTarget)?;
            let capability = judge(opened.offer.clone(), agent_id, d.requester_agent_id, &d.task_type)
                .map_err(DelegationError::NotEligible)?;
            above_floor(conn, agent_id, floor).await?.map_err(DelegationError::NotEligible)?;
            let verdict =
                screened.find(capability.capability_id, &capability.input_schema).ok_or(DelegationError::Rescreen)?;
            verdict.clone().map_err(DelegationError::InputInvalid)?;
            return Ok(Target {
                agent_id,
                anonymous_id: named,
                capability_id: capability.capability_id,
                output_schema: capability.output_schema,
            });
        }
        if let Some(target) = self.next_target(conn, d, &[], screened).await? {
            return Ok(target);
        }
        // No candidate that accepted the input may take it: say why the best refused it, if one did.
        Err(match screened.first_refusal() {
            Some(why) => DelegationError::InputInvalid(why),
            None => DelegationError::NotEligible(format!("no eligible agent offers {} work", d.task_type)),
        })
    }

    /// The best screened candidate not in `tried` that accepted the input and may still take
    /// the work, as it stands in the caller's transaction.
    pub(super) async fn next_target(
        &self,
        conn: &mut PgConnection,
        d: &Delegation,
        tried: &[Uuid],
        screened: &Screened,
    ) -> Result<Option<Target>, DelegationError> {
        for candidate in screened.accepted() {
            if tried.contains(&candidate.agent_id) {
                continue;
            }
            let eligible = eligibility(
                conn,
                candidate.agent_id,
                d.requester_agent_id,
                &d.task_type,
                d.custom_type.as_deref(),
                self.runtime.config.min_trust,
            )
            .await?;
            let Ok(capability) = eligible else { continue };
            // Changed since it was screened: its verdict is not this schema's.
            if capability.capability_id != candidate.capability_id || capability.input_schema != candidate.input_schema
            {
                continue;
            }
            return Ok(Some(Target {
                agent_id: candidate.agent_id,
                anonymous_id: candidate.anonymous_id,
                capability_id: capability.capability_id,
                output_schema: capability.output_schema,
            }));
        }
        Ok(None)
    }
}
