//! Live notifications between Parley processes: one LISTEN connection per process.
//!
//! Two channels arrive on it: `parley_turns` (a turn was parked for a user: wake that user's
//! long-polls, [`Wakeups`]) and `parley_events` (a UI event was committed: fan it out to the SSE
//! streams of this process, [`EventHub`]). NOTIFY is transactional, so nothing is announced that
//! did not commit, and every process on the database hears everything.

use std::{sync::Arc, time::Duration};

use sqlx::postgres::PgListener;
use tokio::sync::broadcast;

use crate::{
    delivery::{TURNS_CHANNEL, wakeups::Wakeups},
    store::events::{EVENTS_CHANNEL, Event},
};

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

/// Listens on both channels until the process ends, reconnecting as needed.
pub async fn listen(database_url: String, wakeups: Arc<Wakeups>, events: Arc<EventHub>) {
    loop {
        match PgListener::connect(&database_url).await {
            Ok(mut listener) => {
                if let Err(e) = listener.listen_all([TURNS_CHANNEL, EVENTS_CHANNEL]).await {
                    tracing::warn!(error = %e, "LISTEN failed; retrying");
                } else {
                    // Anything parked while we were not listening must be looked at.
                    wakeups.wake_all();
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(n)) if n.channel() == TURNS_CHANNEL => wakeups.wake(n.payload()),
                            Ok(Some(n)) => match serde_json::from_str::<Event>(n.payload()) {
                                Ok(event) => events.publish(event),
                                Err(e) => tracing::warn!(error = %e, "an undecodable event notification"),
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
