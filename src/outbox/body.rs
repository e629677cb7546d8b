//! What each kind of target is sent: the body and the headers of one delivery.
//!
//! - A webhook gets the Standard Webhooks message `{type, timestamp, data, sequence}` (the
//!   event's kind, when it happened, its data as the event stream carries it, and its place in
//!   the log), with `webhook-id` (`evt_` and the event's sequence: the same on every attempt and
//!   for every endpoint), `webhook-timestamp` (the attempt's time, in unix seconds) and
//!   `webhook-signature` ([`super::sign`]).
//! - An A2A push notification configuration gets the task as it stands when the notification is
//!   sent, in the version the configuration was set in: in 1.0 a `StreamResponse`, a
//!   `statusUpdate` while the task runs and the whole `task` (its artifacts with it) once it
//!   has ended; in 0.3 the task. A configuration of a routed task (one a plain message started
//!   at another agent) gets the status its `a2a.task` event tells: a 1.0 `statusUpdate`, a 0.3
//!   `status-update` (Parley keeps no copy of what the target answered; the requester reads the
//!   task through Parley for that). With `Authorization: {scheme} {credentials}` when the
//!   configuration has them, and `X-A2A-Notification-Token` when it has a token.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::sign;
use crate::{
    directory::delegation::Record,
    store::outbox::{Claimed, Target},
    wire::{a2a_render as render, a2a_render::Version, delegation_task},
};

/// The `webhook-id` of the event `event_id`.
pub fn webhook_id(event_id: i64) -> String {
    format!("evt_{event_id}")
}

/// The event `webhook_id` names, if it names one.
pub fn event_of_webhook_id(webhook_id: &str) -> Option<i64> {
    webhook_id.strip_prefix("evt_")?.parse().ok().filter(|id| *id > 0)
}

/// A delivery as sent.
pub struct Request {
    /// The body's bytes.
    pub body: Vec<u8>,
    /// The headers beside `content-type`.
    pub headers: Vec<(&'static str, String)>,
}

/// The webhook message of `event` to `target`, signed at `now`.
pub fn webhook(target: &Target, event: &Claimed, now: DateTime<Utc>) -> Request {
    let body = json!({
        "type": event.kind,
        "timestamp": event.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        "data": event.data,
        "sequence": event.event_id,
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let id = webhook_id(event.event_id);
    let timestamp = now.timestamp();
    let mut secrets: Vec<&str> = target.secret.as_deref().into_iter().collect();
    if let (Some(previous), Some(until)) = (&target.previous_secret, target.previous_secret_until)
        && until > now
    {
        secrets.push(previous);
    }
    let signature = sign::header(&secrets, &id, timestamp, &body);
    Request {
        body,
        headers: vec![
            ("webhook-id", id),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ],
    }
}

/// The version a push configuration was set in.
fn version_of(target: &Target) -> Version {
    match target.a2a_version.as_deref() {
        Some("0.3") => Version::V03,
        _ => Version::V1,
    }
}

/// The A2A push notification of a routed task's `a2a.task` event (`{taskId, contextId, state,
/// route}`, the state in 1.0's words), as `target` was configured.
pub fn routed_push(target: &Target, event: &Claimed) -> Request {
    let d = &event.data;
    let state = d["state"].as_str().unwrap_or_default();
    let timestamp = event.created_at.to_rfc3339_opts(SecondsFormat::Millis, true);
    let metadata = json!({ "parley": { "route": d["route"] } });
    let body = match version_of(target) {
        Version::V1 => json!({ "statusUpdate": {
            "taskId": d["taskId"], "contextId": d["contextId"],
            "status": { "state": state, "timestamp": timestamp }, "metadata": metadata,
        }}),
        Version::V03 => {
            let state = render::state_v03(state);
            let last = render::final_v03(&state);
            json!({
                "kind": "status-update", "taskId": d["taskId"], "contextId": d["contextId"],
                "status": { "state": state, "timestamp": timestamp }, "final": last, "metadata": metadata,
            })
        }
    };
    Request { body: serde_json::to_vec(&body).unwrap_or_default(), headers: push_headers(target) }
}

/// A push notification's headers: its configuration's authentication and token.
fn push_headers(target: &Target) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    if let (Some(scheme), Some(credentials)) = (&target.auth_scheme, &target.auth_credentials) {
        headers.push(("authorization", format!("{scheme} {credentials}")));
    }
    if let Some(token) = &target.push_token {
        headers.push(("x-a2a-notification-token", token.clone()));
    }
    headers
}

/// The A2A push notification of `record`'s task, as `target` was configured.
pub fn push(target: &Target, record: &Record) -> Request {
    let version = version_of(target);
    let task = delegation_task::task(&record.delegation, &record.attempts);
    let ended = record.delegation.status.is_terminal();
    let body: Value = match version {
        Version::V03 => render::task(&task, Version::V03, None),
        Version::V1 if ended => render::sent(render::task(&task, Version::V1, None), Version::V1),
        Version::V1 => render::status_event(&task, Version::V1, false),
    };
    Request { body: serde_json::to_vec(&body).unwrap_or_default(), headers: push_headers(target) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_ids_name_their_event() {
        assert_eq!(webhook_id(42), "evt_42");
        assert_eq!(event_of_webhook_id("evt_42"), Some(42));
        for bad in ["42", "evt_", "evt_-1", "evt_0", "msg_42", "evt_4 2"] {
            assert_eq!(event_of_webhook_id(bad), None, "{bad}");
        }
    }
}
