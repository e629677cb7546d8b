//! `GET /api/events`: Server-Sent Events for the web UI.
//!
//! A user sees events of their own opportunities and of the delegations their agents asked for
//! or were offered; the service sees all. Events come from the process's
//! [`crate::live::EventHub`], fed by the process's reader of the event log
//! ([`crate::live::tail_events`]: at once after a local commit, within 250 ms of another
//! process's). `Last-Event-ID` replays what the client missed from the event log, up to
//! [`RESUME_WINDOW`] back and at most [`RESUME_LIMIT`] events. A client that falls more than
//! `EventHub::CAPACITY` events behind gets a final `reconnect` event and is dropped. A `: ping`
//! comment every 15 s keeps proxies from closing the stream.
//!
//! Streams are limited per token, per user and in all ([`crate::wire::streams`]): past a limit a new
//! one is refused `429 rate_limited`.
//!
//! A stream lives no longer than the token that opened it: when the token expires the stream
//! sends a final `reconnect` event with `code: ErrorCode::TokenExpired` and ends; the client reconnects
//! with a fresh token and `Last-Event-ID`, and misses nothing.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::State,
    http::HeaderMap,
    response::sse::{Event as SseEvent, KeepAlive, Sse},
    routing::get,
};
use futures::{Stream, StreamExt, stream};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, ApiResult},
};
use crate::store::events::{self, Event};

/// How far back `Last-Event-ID` can resume.
pub const RESUME_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// At most this many events are replayed on resume.
pub const RESUME_LIMIT: i64 = 1000;
/// Interval of the keep-alive comment.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/events", get(stream_events))
}

fn to_sse(e: &Event) -> SseEvent {
    SseEvent::default().id(e.id.to_string()).event(e.kind.clone()).data(e.data.to_string())
}

struct Live {
    rx: Receiver<Arc<Event>>,
    user: Option<String>,
    /// The client's `Last-Event-ID` (it has everything up to there), else the newest event
    /// when it connected.
    seen_up_to: i64,
    /// What the replay sent.
    replayed: std::collections::HashSet<i64>,
    done: bool,
}

/// The caller's event stream.
#[utoipa::path(get, path = "/api/events", tag = "events", operation_id = "streamEvents",
    security(("bearerJwt" = [])),
    params(("Last-Event-ID" = Option<i64>, Header, description = "Resume after this event id (up to 24 hours back, at most 1 000 events)")),
    responses(
        (status = 429, description = "The token, the user or the service holds as many streams open as it may (`rate_limited`)"),
        (status = 200, description = "A Server-Sent Events stream: `opportunity.status`, `negotiation.turn`, \
`negotiation.outcome`, `negotiation.round` (a reactivated opportunity's new negotiation), `delegation.status` \
(`{requestId, attempt, status, taskId, taskType, requesterAnonymousId, targetAnonymousId}`, to the owners of both the requester and the target), \
`negotiation.question` (to the asking person), `a2a.task` (a task a plain A2A message of the person's agent started at another agent, in a new \
state; only while the task has push notification configurations) (and a final `reconnect` for a client that fell behind, or with `code: token_expired` \
when the token expires: reconnect with a fresh token and `Last-Event-ID`); a `: ping` comment every 15 s",
            content_type = "text/event-stream", body = String),
    ))]
pub async fn stream_events(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let user = if caller.is_service() { None } else { Some(caller.sub.clone()) };
    let token = crate::auth::bearer_of(&headers).unwrap_or_default();
    let counted_as =
        if caller.is_service() { format!("service:{}", caller.sub) } else { format!("user:{}", caller.sub) };
    let slot = state
        .streams
        .open(token, &counted_as)
        .map_err(|full| ApiError::TooMany(full.to_string(), Duration::from_secs(5)))?;
    // Subscribe before reading the log, so nothing falls between the two.
    let rx = state.events.subscribe();
    let last_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let replay = match last_id {
        None => Vec::new(),
        Some(after) => {
            let since = chrono::Utc::now() - chrono::Duration::from_std(RESUME_WINDOW).unwrap_or_default();
            let mut conn = state.pool().acquire().await?;
            events::after(&mut conn, after, user.as_deref(), since, RESUME_LIMIT).await?
        }
    };
    // Live events skip what the replay sent and what the client said it has. An event whose
    // transaction committed after one with a higher id still comes (ids are taken in insert
    // order, not commit order).
    // A stream without Last-Event-ID starts now: the log's reader may still publish events
    // committed before it connected, which it must not show.
    let seen_up_to = match last_id {
        Some(id) => id,
        None => events::newest_id(&mut *state.pool().acquire().await?).await?,
    };
    let live_state = Live { rx, user, seen_up_to, replayed: replay.iter().map(|e| e.id).collect(), done: false };
    let replayed = stream::iter(replay.into_iter().map(|e| Ok(to_sse(&e))));
    let live = stream::unfold(live_state, |mut s| async move {
        if s.done {
            return None;
        }
        loop {
            match s.rx.recv().await {
                Ok(e) => {
                    let visible = s.user.as_deref().is_none_or(|u| e.visible_to(u));
                    if visible && e.id > s.seen_up_to && !s.replayed.contains(&e.id) {
                        return Some((Ok(to_sse(&e)), s));
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::info!(missed, "dropping a slow event stream");
                    s.done = true;
                    let bye = SseEvent::default().event("reconnect").data(
                        serde_json::json!({ "reason": "the client fell behind; reconnect with Last-Event-ID" })
                            .to_string(),
                    );
                    return Some((Ok(bye), s));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    // The token's expiry, as an instant of the stream's clock.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let expires = tokio::time::Instant::now() + Duration::from_secs(caller.expires_at).saturating_sub(now);
    let expired = stream::once(async move {
        (tokio::time::Instant::now() >= expires).then(|| {
            Ok(SseEvent::default().event("reconnect").data(
                serde_json::json!({
                    "reason": "the token has expired; reconnect with a fresh token and Last-Event-ID",
                    "code": crate::error_code::ErrorCode::TokenExpired,
                })
                .to_string(),
            ))
        })
    })
    .filter_map(futures::future::ready);
    let stream = replayed
        .chain(live)
        .take_until(tokio::time::sleep_until(expires))
        .chain(expired)
        .take_until(state.stopped())
        // The slot goes back when the stream ends, however it ends.
        .map(move |event| {
            let _held = &slot;
            event
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(HEARTBEAT).text("ping")))
}
