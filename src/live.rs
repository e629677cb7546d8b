//! Live notifications between and within Parley processes.
//!
//! - [`send_wakeups`]: the keys this process announced after its commits ([`Wakeups::announce`]),
//!   sent to the other processes in batches, one NOTIFY per batch on `parley_wake`, from a short
//!   transaction of its own with synchronous commit off. A state change's commit never waits on
//!   PostgreSQL's notification lock, which serialises the commits of notifying transactions.
//! - [`listen`]: one LISTEN connection per process; wakes this process's waiters of the keys the
//!   others announced (and of the user ids the few wake-ups still sent from SQL name).
//! - [`tail_events`]: reads the event log in id order, on a poke from a local commit or every
//!   [`EVENTS_TICK`], and fans new rows out to this process's SSE streams ([`EventHub`]).
//!
//! A NOTIFY can be lost between a commit and its sending (the process dies in that millisecond),
//! so nothing depends on it alone: waiters look again every [`RECHECK`](crate::runtime::wakeups::RECHECK)
//! and the event log is read every [`EVENTS_TICK`].

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::broadcast;

use crate::{
    runtime::wakeups::{TURNS_CHANNEL, WAKE_CHANNEL, WakePayload, Wakeups},
    store::events::{self, Event},
};

/// How long the sender gathers keys after the first before sending them.
pub const COALESCE: Duration = Duration::from_millis(1);

/// How long the event log's reader waits after a poke before reading, gathering the pokes of
/// other commits meanwhile.
pub const EVENTS_COALESCE: Duration = Duration::from_millis(2);

/// How often the event log is read when nothing pokes it.
pub const EVENTS_TICK: Duration = Duration::from_millis(250);

/// How long an id skipped in the event log is looked for again (its transaction may still
/// commit; a rolled-back one never will).
const GAP_TTL: Duration = Duration::from_secs(30);

/// At most this many skipped ids are looked for at once.
const MAX_GAPS: usize = 10_000;

/// A NOTIFY payload is at most 8 000 bytes; keys are split into batches under this.
const PAYLOAD_BUDGET: usize = 7_000;

/// Fan-out of committed events to this process's SSE streams.
///
/// A bounded broadcast: each stream has its own cursor into a ring of [`EventHub::CAPACITY`]
/// events; a stream that falls further behind than that is told so (`Lagged`) and dropped with a
/// final `reconnect` event, so a slow client never slows the others.
pub struct EventHub {
    sender: broadcast::Sender<Arc<Event>>,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub { sender: broadcast::channel(Self::CAPACITY).0 }
    }
}

impl EventHub {
    /// Events a stream may fall behind by before it is dropped.
    pub const CAPACITY: usize = 1024;

    /// A new subscription, starting now.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }

    /// Delivers one event to every subscription.
    pub fn publish(&self, event: Event) {
        let _ = self.sender.send(Arc::new(event));
    }
}

/// Sends the keys this process announced to the other processes until the process ends.
pub async fn send_wakeups(pool: PgPool, wakeups: Arc<Wakeups>) {
    let Some(mut outbox) = wakeups.open_outbox() else {
        return;
    };
    while let Some(first) = outbox.recv().await {
        tokio::time::sleep(COALESCE).await;
        let mut keys = BTreeSet::from([first]);
        while let Ok(key) = outbox.try_recv() {
            keys.insert(key);
        }
        let payloads = payloads(wakeups.origin(), keys.into_iter());
        for attempt in 0..2 {
            match send(&pool, &payloads).await {
                Ok(()) => break,
                Err(e) if attempt == 0 => {
                    tracing::warn!(error = %e, "sending wake-ups failed; trying once more");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // The waiters in other processes look again within RECHECK.
                Err(e) => tracing::warn!(error = %e, keys = payloads.len(), "wake-ups dropped"),
            }
        }
    }
}

/// The NOTIFY payloads for `keys`, each under [`PAYLOAD_BUDGET`] bytes.
fn payloads(origin: uuid::Uuid, keys: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut batch: Vec<String> = Vec::new();
    let mut size = 0;
    for key in keys {
        if !batch.is_empty() && size + key.len() + 3 > PAYLOAD_BUDGET {
            out.push(
                serde_json::to_string(&WakePayload { origin, keys: std::mem::take(&mut batch) }).unwrap_or_default(),
            );
            size = 0;
        }
        size += key.len() + 3;
        batch.push(key);
    }
    if !batch.is_empty() {
        out.push(serde_json::to_string(&WakePayload { origin, keys: batch }).unwrap_or_default());
    }
    out
}

async fn send(pool: &PgPool, payloads: &[String]) -> sqlx::Result<()> {
    // One statement, so one transaction: nothing to make durable, hence no WAL flush to wait for.
    sqlx::query("SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind(WAKE_CHANNEL)
        .bind(payloads)
        .execute(pool)
        .await?;
    Ok(())
}

/// Listens for the other processes' wake-ups until the process ends, reconnecting as needed.
pub async fn listen(database_url: String, wakeups: Arc<Wakeups>) {
    loop {
        match PgListener::connect(&database_url).await {
            Ok(mut listener) => {
                if let Err(e) = listener.listen_all([WAKE_CHANNEL, TURNS_CHANNEL]).await {
                    tracing::warn!(error = %e, "LISTEN failed; retrying");
                } else {
                    // Anything announced while we were not listening must be looked at.
                    wakeups.wake_all();
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(n)) if n.channel() == TURNS_CHANNEL => wakeups.wake(n.payload()),
                            Ok(Some(n)) => match serde_json::from_str::<WakePayload>(n.payload()) {
                                Ok(p) if p.origin == wakeups.origin() => {}
                                Ok(p) => p.keys.iter().for_each(|k| wakeups.wake(k)),
                                Err(e) => tracing::warn!(error = %e, "an undecodable wake-up"),
                            },
                            // The connection was lost and re-established.
                            Ok(None) => wakeups.wake_all(),
                            Err(e) => {
                                tracing::warn!(error = %e, "the notification listener failed; reconnecting");
                                break;
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "connecting the notification listener failed; retrying"),
        }
        wakeups.wake_all();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Reads the event log in id order and publishes each new event to this process's streams,
/// until the process ends: at once when a local commit pokes it, else every [`EVENTS_TICK`].
///
/// Ids are taken in insert order but committed in any order, so a read may see id 11 while
/// the transaction of id 10 has not committed yet. Such skipped ids are looked for again on
/// every read for [`GAP_TTL`] (a rolled-back transaction's ids never appear), and published
/// when they do: an event can reach a stream after one with a higher id, never not at all.
pub async fn tail_events(pool: PgPool, wakeups: Arc<Wakeups>, hub: Arc<EventHub>) {
    let mut cursor = loop {
        match pool.acquire().await {
            Ok(mut conn) => match events::newest_id(&mut conn).await {
                Ok(id) => break id,
                Err(e) => tracing::warn!(error = %e, "reading the event log failed; retrying"),
            },
            Err(e) => tracing::warn!(error = %e, "reading the event log failed; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut gaps: BTreeMap<i64, Instant> = BTreeMap::new();
    loop {
        if tokio::time::timeout(EVENTS_TICK, wakeups.events_poked().notified()).await.is_ok() {
            // Let the commits of the next moment join this read: under load one read then
            // serves many commits instead of one each.
            tokio::time::sleep(EVENTS_COALESCE).await;
        }
        let now = Instant::now();
        gaps.retain(|_, since| now.duration_since(*since) < GAP_TTL);
        let looked_for: Vec<i64> = gaps.keys().copied().collect();
        let read = match pool.acquire().await {
            Ok(mut conn) => events::tail(&mut conn, cursor, &looked_for, 1000).await,
            Err(e) => Err(e),
        };
        match read {
            Ok(rows) => {
                for e in rows {
                    if e.id > cursor {
                        for skipped in (cursor + 1)..e.id {
                            if gaps.len() >= MAX_GAPS {
                                break;
                            }
                            gaps.insert(skipped, now);
                        }
                        cursor = e.id;
                    } else {
                        gaps.remove(&e.id);
                    }
                    hub.publish(e);
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading the event log failed"),
        }
    }
}
