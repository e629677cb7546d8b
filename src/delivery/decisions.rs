//! A person's decision on a pending opportunity, in one transaction under the opportunity's
//! row lock: recorded once per person; the first decline rejects the opportunity and the second
//! accept accepts it ([`Decision::event`]), and an opportunity the people decided has nothing
//! left to expire.

use sqlx::PgPool;
use uuid::Uuid;

use super::DeliveryError;
use crate::{
    domain::{Decision, OpportunityStatus},
    store::{decisions, opportunities},
};

/// Records `user_id`'s `decision` on the opportunity `id` and moves the opportunity when it
/// settles it. An opportunity the user is not part of is not found (as if it did not exist).
pub async fn decide(pool: &PgPool, id: Uuid, user_id: &str, decision: Decision) -> Result<(), DeliveryError> {
    let mut tx = pool.begin().await?;
    let o = opportunities::lock(&mut tx, id).await?.ok_or(DeliveryError::OpportunityNotFound)?;
    if !o.has_participant(user_id) {
        return Err(DeliveryError::OpportunityNotFound);
    }
    if o.status != OpportunityStatus::Pending {
        return Err(DeliveryError::NotPending(o.status));
    }
    if !decisions::insert(&mut tx, o.id, user_id, decision.as_str()).await? {
        return Err(DeliveryError::AlreadyDecided);
    }
    let made = decisions::for_opportunities(&mut tx, &[o.id]).await?.remove(&o.id).unwrap_or_default();
    let both_accepted = [&o.source_user_id, &o.candidate_user_id]
        .iter()
        .all(|u| made.get(u.as_str()).map(String::as_str) == Some(Decision::Accept.as_str()));
    if let Some(event) = decision.event(both_accepted) {
        opportunities::apply(&mut tx, &o, event).await??;
        // Decided: nothing is left to expire.
        parley_jobs::cancel_pending_expiry(&mut tx, o.id).await.map_err(|e| DeliveryError::Unexpected(e.into()))?;
    }
    tx.commit().await?;
    Ok(())
}
