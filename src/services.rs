//! The services of one process, built once over one shared runtime, and the dispatcher that
//! hands each due durable timer to the service that owns it.
//!
//! The turn engine ([`crate::delivery`]) and the delegations ([`crate::directory::delegation`])
//! know nothing of each other; both are built here over the same [`Runtime`] (one pool, one set
//! of wake-ups, one seen-throttle, one token key). `parley_jobs` runs one handler per process,
//! so the routing of job kinds to services sits here, above both: the turn timers and the model's
//! system turns go to the engine, the delegation timeout to the delegations (with the pusher's
//! last read of an attempt pushed to an agent before it, and the cancel of its task after), the
//! steps of pushes to agents Parley calls to [`Pusher`], the outbox's deliveries to [`Outbox`],
//! and housekeeping runs each side's share in turn. The queues and the job payloads are
//! `parley_jobs`'.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use parley_jobs::{
    A2aCall, ClaimTimeout, DelegationTimeout, HandlerError, NegotiationDeadline, OutboxDelivery, ParkTimeout,
    PendingExpiry, SystemTurn, TimerHandler,
};

use crate::{
    a2a_push::Pusher,
    config::Config,
    delivery::{Engine, negotiator_model::ModelNegotiator},
    directory::{self, delegation::Delegations},
    negotiator::NegotiatorConfig,
    outbox::Outbox,
    runtime::Runtime,
    store,
};

/// The most past days of insights housekeeping folds in one run.
const FOLD_DAYS_PER_RUN: i64 = 31;
/// Rows pruning deletes per transaction.
const PRUNE_BATCH: i64 = 1000;
/// The longest one run prunes for; what is left waits for the next run.
const PRUNE_BUDGET: Duration = Duration::from_secs(20);
/// How long a negotiation is left `submitted` or `working` before housekeeping resumes it.
const RECOVER_GRACE: Duration = Duration::from_secs(30);

/// The turn engine and the delegations of one process, over one runtime, and what pushes their
/// work to the agents Parley calls.
#[derive(Clone)]
pub struct Services {
    /// The negotiation engine.
    pub engine: Engine,
    /// The delegations.
    pub delegations: Delegations,
    /// The pushes to agents registered by their AgentCard (the `A2aCall` jobs).
    pub pusher: Pusher,
    /// The deliveries of events to webhooks and A2A push notification configurations.
    pub outbox: Outbox,
}

impl Services {
    /// Both services over one runtime on `pool`; `token_secret` is the secret claim tokens and
    /// capability handles are derived from (see [`Runtime::new`]).
    pub fn new(
        pool: sqlx::PgPool,
        config: Arc<Config>,
        token_secret: &[u8],
        model: Option<Arc<ModelNegotiator>>,
    ) -> anyhow::Result<Services> {
        let runtime = Runtime::new(pool, config, token_secret);
        Services::over(Engine::new(runtime.clone(), NegotiatorConfig::default(), model), Delegations::new(runtime))
    }

    /// The services of `engine` and `delegations` (built over one runtime), with their pusher.
    pub fn over(engine: Engine, delegations: Delegations) -> anyhow::Result<Services> {
        let pusher = Pusher::new(engine.clone(), delegations.clone(), engine.config())?;
        let outbox = Outbox::new(delegations.clone(), engine.config())?;
        Ok(Services { engine, delegations, pusher, outbox })
    }

    /// What both services share.
    pub fn runtime(&self) -> &Runtime {
        self.engine.runtime()
    }
}

fn failed(e: impl Into<anyhow::Error>) -> HandlerError {
    HandlerError::new(e.into())
}

impl TimerHandler for Services {
    async fn park_timeout(&self, t: ParkTimeout) -> Result<(), HandlerError> {
        self.engine.fall_back(t).await.map(|_| ()).map_err(failed)
    }

    async fn claim_timeout(&self, t: ClaimTimeout) -> Result<(), HandlerError> {
        self.engine.expire_claim(t).await.map(|_| ()).map_err(failed)
    }

    async fn negotiation_deadline(&self, t: NegotiationDeadline) -> Result<(), HandlerError> {
        self.engine.deadline(t).await.map(|_| ()).map_err(failed)
    }

    async fn pending_expiry(&self, t: PendingExpiry) -> Result<(), HandlerError> {
        self.engine.expire_pending(t).await.map(|_| ()).map_err(failed)
    }

    /// An attempt pushed to an agent Parley calls is read once more before it times out (work
    /// the agent finished by the deadline completes it), and its task, if it still works after
    /// the timeout, is cancelled at once.
    async fn delegation_timeout(&self, t: DelegationTimeout) -> Result<(), HandlerError> {
        if self.pusher.before_timeout(t.delegation_id, t.attempt).await? {
            return Ok(());
        }
        self.delegations.time_out_delegation(t).await.map_err(failed)?;
        self.pusher.after_timeout(t.delegation_id, t.attempt).await
    }

    async fn system_turn(&self, t: SystemTurn) -> Result<(), HandlerError> {
        self.engine.model_turn(t).await.map(|_| ()).map_err(failed)
    }

    async fn a2a_call(&self, t: A2aCall) -> Result<(), HandlerError> {
        self.pusher.step(t).await
    }

    async fn outbox_delivery(&self, t: OutboxDelivery) -> Result<(), HandlerError> {
        self.outbox.run(t).await
    }

    /// Resumes the negotiations left runnable, runs the outbox's share (stranded deliveries, the
    /// delivery log), runs the directory's upkeep, folds the past days' insights and forgets what
    /// is due (`store::retention` alone says what and when).
    async fn housekeeping(&self) -> Result<(), HandlerError> {
        self.engine.recover(RECOVER_GRACE).await.map_err(failed)?;
        self.outbox.housekeeping().await.map_err(HandlerError::new)?;
        let pool = self.runtime().pool();
        let config = self.runtime().config();
        let now = Utc::now();
        directory::upkeep::run(pool, config.anonymous_id_ttl).await?;
        // Past days' insights shards into one row per day and key (a day late: an ending that
        // committed after midnight may still count on the day before).
        let yesterday = now.date_naive() - chrono::Days::new(1);
        store::insight_rollups::fold(pool, yesterday, FOLD_DAYS_PER_RUN).await?;
        let pruned = store::retention::prune(pool, config.history_retention, now, PRUNE_BATCH, PRUNE_BUDGET)
            .await
            .map_err(HandlerError::new)?;
        if pruned != store::retention::Pruned::default() {
            tracing::info!(?pruned, "housekeeping pruned history");
        }
        Ok(())
    }
}
