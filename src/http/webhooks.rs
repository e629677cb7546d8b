//! `/api/webhooks`: Standard Webhooks endpoints, registered by the platform (its service token:
//! every event) or by a person (a user token: the events that person may see, as the event
//! stream scopes them). Each caller manages its own endpoints only; anyone else's is not found.
//!
//! - `POST /api/webhooks` `{url, events?}`: 201 with the endpoint and its `whsec_` secret, shown
//!   this once; `GET` lists the caller's, `GET/PATCH/DELETE /api/webhooks/{id}` read, change
//!   (`url`, `events`, `status`: enabled again or disabled) and delete one; never the secret.
//! - `POST /api/webhooks/{id}/rotate`: a new secret; the old one keeps signing beside it for
//!   `PARLEY_WEBHOOK_SECRET_OVERLAP` (the signature header carries both).
//! - `GET /api/webhooks/{id}/deliveries`: the delivery log, newest event first;
//!   `POST /api/webhooks/{id}/redeliver` `{ids}` or `{since}` queues events again under their
//!   own `webhook-id`.
//!
//! A URL must pass the outbound address rule (`crate::outbox::targets::check_url`): a loopback or
//! private one is refused `400 url_refused` unless `PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true`. How
//! deliveries are made is `crate::outbox`'s.

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    AppState,
    api_docs::WebhookPath,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, OptionalJson},
};
use crate::{
    error_code::ErrorCode,
    outbox::{body, sign, targets},
    store::{
        outbox as deliveries,
        webhooks::{self, Change, Webhook},
    },
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/webhooks", post(create_webhook).get(list_webhooks))
        .route("/api/webhooks/{id}", get(get_webhook).patch(update_webhook).delete(delete_webhook))
        .route("/api/webhooks/{id}/rotate", post(rotate_secret))
        .route("/api/webhooks/{id}/deliveries", get(list_deliveries))
        .route("/api/webhooks/{id}/redeliver", post(redeliver))
}

/// Events a redelivery by time queues at most.
pub const MAX_REDELIVER_SINCE: i64 = 10_000;
/// Ids a redelivery by id names at most.
pub const MAX_REDELIVER_IDS: usize = 100;

/// Whose endpoints the caller manages: `None` for the platform.
fn owner(caller: &Caller) -> Option<&str> {
    if caller.is_service() { None } else { Some(caller.sub.as_str()) }
}

/// Body of `POST /api/webhooks`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookIn {
    /// Where deliveries are POSTed: http or https, at most 2 048 characters, a public address
    /// (loopback and private ones only with `PARLEY_A2A_ALLOW_PRIVATE_TARGETS=true`).
    #[schema(max_length = 2048, example = "https://platform.example.com/parley/webhooks")]
    pub url: String,
    /// The event types to receive; left out, every type but `negotiation.turn` (opt-in).
    #[schema(example = json!(["opportunity.status", "negotiation.outcome", "delegation.status"]))]
    pub events: Option<Vec<String>>,
}

/// Body of `PATCH /api/webhooks/{id}`: what to change.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookChange {
    /// A new URL (checked as at registration).
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    /// New event types.
    pub events: Option<Vec<String>>,
    /// `enabled` (again: its failures forgotten, what it had pending sent) or `disabled`.
    #[schema(pattern = "^(enabled|disabled)$")]
    pub status: Option<String>,
}

/// The last delivery attempt to an endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastDelivery {
    /// The `webhook-id` it was sent under.
    pub webhook_id: String,
    /// The event's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it was made.
    pub at: DateTime<Utc>,
    /// Whether the endpoint answered 2xx.
    pub ok: bool,
    /// The HTTP status answered, if any.
    pub status_code: Option<i32>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// A webhook endpoint (never its secret).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookOut {
    /// Its id.
    pub id: Uuid,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The event types it receives.
    pub events: Vec<String>,
    /// `enabled`, or `disabled` (by its owner, by a 410 answer, or after days of failures).
    #[schema(pattern = "^(enabled|disabled)$")]
    pub status: String,
    /// Why it is disabled.
    pub disabled_reason: Option<String>,
    /// Since when.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Its deliveries have all failed since then (it is disabled after
    /// `PARLEY_WEBHOOK_DISABLE_AFTER` of that).
    pub failing_since: Option<DateTime<Utc>>,
    /// After a rotation: until when the previous secret signs beside the current one.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The last delivery attempt, if any.
    pub last_delivery: Option<LastDelivery>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<Webhook> for WebhookOut {
    fn from(w: Webhook) -> Self {
        let last_delivery = match (w.last_attempt_at, w.last_event_id, w.last_event_kind) {
            (Some(at), Some(event), Some(kind)) => Some(LastDelivery {
                webhook_id: body::webhook_id(event),
                kind,
                at,
                ok: w.last_attempt_ok.unwrap_or(false),
                status_code: w.last_status_code,
                error: w.last_error,
            }),
            _ => None,
        };
        WebhookOut {
            id: w.id,
            url: w.url,
            events: w.event_types,
            status: w.status,
            disabled_reason: w.disabled_reason,
            disabled_at: w.disabled_at,
            failing_since: w.failing_since,
            previous_secret_expires_at: w.previous_secret_until.filter(|until| *until > Utc::now()),
            last_delivery,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// A webhook just registered, with its secret (shown this once).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookCreated {
    /// The endpoint.
    #[serde(flatten)]
    pub webhook: WebhookOut,
    /// The signing secret (`whsec_...`): verify each delivery's `webhook-signature` with it.
    /// Never shown again; rotate it to get a new one.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
}

/// The caller's webhooks.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookList {
    /// Oldest first.
    pub webhooks: Vec<WebhookOut>,
}

/// A new secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    /// The new signing secret (`whsec_...`), shown this once.
    pub secret: String,
    /// Until when the previous secret signs beside it (both signatures in `webhook-signature`).
    pub previous_secret_expires_at: DateTime<Utc>,
}

/// A URL's refusal as answered: 400 `invalid_body` or `url_refused`.
fn url_refusal(e: targets::UrlError) -> ApiError {
    match e {
        targets::UrlError::Invalid(m) => ApiError::invalid(m),
        targets::UrlError::Refused(m) => ApiError::BadRequest { code: ErrorCode::UrlRefused, message: m },
    }
}

/// Registers a webhook endpoint for the caller: the platform's gets every event of its types,
/// a person's the events that person may see. The secret is in this answer only.
#[utoipa::path(post, path = "/api/webhooks", tag = "webhooks", operation_id = "createWebhook",
    security(("bearerJwt" = [])),
    request_body(content = WebhookIn, example = json!({
        "url": "https://platform.example.com/parley/webhooks",
        "events": ["opportunity.status", "negotiation.outcome", "delegation.status"]
    })),
    responses(
        (status = 201, description = "Registered; the secret is shown this once", body = WebhookCreated),
        (status = 400, description = "Invalid body or URL (`invalid_body`), or a URL the outbound address rule refuses (`url_refused`)"),
        (status = 409, description = "The caller has as many webhooks as it may (`limit_reached`)"),
    ))]
pub async fn create_webhook(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<WebhookIn>,
) -> ApiResult<(StatusCode, Json<WebhookCreated>)> {
    let events = targets::event_types(body.events.as_deref()).map_err(ApiError::invalid)?;
    let config = state.engine.config();
    let url = targets::check_url(&body.url, config.a2a_allow_private_targets).await.map_err(url_refusal)?;
    let limit = config.webhooks.max_per_owner;
    let owner = owner(&caller);
    let secret = sign::new_secret();
    let mut tx = state.pool().begin().await?;
    webhooks::lock_owner(&mut tx, owner).await?;
    if webhooks::count(&mut tx, owner).await? >= i64::from(limit) {
        return Err(ApiError::LimitReached {
            message: format!("at most {limit} webhooks per owner (PARLEY_MAX_WEBHOOKS_PER_OWNER)"),
            limit,
        });
    }
    let webhook = webhooks::create(&mut tx, Uuid::now_v7(), owner, url.as_str(), &events, &secret).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(WebhookCreated { webhook: webhook.into(), secret })))
}

/// The caller's webhooks, with their last delivery.
#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks", operation_id = "listWebhooks",
    security(("bearerJwt" = [])),
    responses((status = 200, description = "The caller's webhooks, oldest first", body = WebhookList)))]
pub async fn list_webhooks(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<WebhookList>> {
    let mut conn = state.pool().acquire().await?;
    let list = webhooks::list(&mut conn, owner(&caller)).await?;
    Ok(Json(WebhookList { webhooks: list.into_iter().map(Into::into).collect() }))
}

/// One of the caller's webhooks.
#[utoipa::path(get, path = "/api/webhooks/{id}", tag = "webhooks", operation_id = "getWebhook",
    security(("bearerJwt" = [])),
    params(WebhookPath),
    responses(
        (status = 200, description = "The webhook", body = WebhookOut),
        (status = 404, description = "Unknown, or not the caller's"),
    ))]
pub async fn get_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<WebhookOut>> {
    let mut conn = state.pool().acquire().await?;
    let webhook = webhooks::get(&mut conn, id, owner(&caller)).await?.ok_or(ApiError::NotFound("webhook"))?;
    Ok(Json(webhook.into()))
}

/// Changes one of the caller's webhooks: its URL, its event types, or its status (enabled
/// again, its failures forgotten and what it had pending sent; or disabled).
#[utoipa::path(patch, path = "/api/webhooks/{id}", tag = "webhooks", operation_id = "updateWebhook",
    security(("bearerJwt" = [])),
    params(WebhookPath),
    request_body(content = WebhookChange, example = json!({"status": "enabled"})),
    responses(
        (status = 200, description = "The webhook as now", body = WebhookOut),
        (status = 400, description = "Invalid body or URL (`invalid_body`), or a URL the outbound address rule refuses (`url_refused`)"),
        (status = 404, description = "Unknown, or not the caller's"),
    ))]
pub async fn update_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
    ApiJson(body): ApiJson<WebhookChange>,
) -> ApiResult<Json<WebhookOut>> {
    let events = match &body.events {
        None => None,
        Some(named) => Some(targets::event_types(Some(named)).map_err(ApiError::invalid)?),
    };
    let enabled = match body.status.as_deref() {
        None => None,
        Some("enabled") => Some(true),
        Some("disabled") => Some(false),
        Some(_) => return Err(ApiError::invalid("status must be enabled or disabled")),
    };
    let url = match &body.url {
        None => None,
        Some(url) => {
            Some(targets::check_url(url, state.engine.config().a2a_allow_private_targets).await.map_err(url_refusal)?)
        }
    };
    let change = Change { url: url.as_ref().map(|u| u.as_str()), event_types: events.as_deref(), enabled };
    let mut tx = state.pool().begin().await?;
    let webhook = webhooks::update(&mut tx, id, owner(&caller), &change).await?.ok_or(ApiError::NotFound("webhook"))?;
    if enabled == Some(true) {
        // What it had pending goes out now.
        let job = parley_jobs::OutboxDelivery { event_id: None, target_id: Some(id) };
        parley_jobs::schedule_outbox(&mut tx, &job, Utc::now()).await.map_err(anyhow::Error::new)?;
    }
    tx.commit().await?;
    Ok(Json(webhook.into()))
}

/// Deletes one of the caller's webhooks, with its delivery log; what it had pending is dropped.
#[utoipa::path(delete, path = "/api/webhooks/{id}", tag = "webhooks", operation_id = "deleteWebhook",
    security(("bearerJwt" = [])),
    params(WebhookPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown, or not the caller's"),
    ))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<StatusCode> {
    let mut conn = state.pool().acquire().await?;
    if !webhooks::delete(&mut conn, id, owner(&caller)).await? {
        return Err(ApiError::NotFound("webhook"));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// A new signing secret for one of the caller's webhooks. The previous one keeps signing beside
/// it for `PARLEY_WEBHOOK_SECRET_OVERLAP` (24 h by default): `webhook-signature` carries both,
/// so receivers can switch without missing a delivery.
#[utoipa::path(post, path = "/api/webhooks/{id}/rotate", tag = "webhooks", operation_id = "rotateWebhookSecret",
    security(("bearerJwt" = [])),
    params(WebhookPath),
    responses(
        (status = 200, description = "The new secret, shown this once", body = RotatedSecret),
        (status = 404, description = "Unknown, or not the caller's"),
    ))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<RotatedSecret>> {
    let secret = sign::new_secret();
    let overlap = state.engine.config().webhooks.secret_overlap;
    let mut conn = state.pool().acquire().await?;
    let until = webhooks::rotate(&mut conn, id, owner(&caller), &secret, overlap)
        .await?
        .ok_or(ApiError::NotFound("webhook"))?;
    Ok(Json(RotatedSecret { secret, previous_secret_expires_at: until }))
}

/// Query of the delivery log.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Page size (default 50, at most 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// The previous page's `nextBefore`: only events before this sequence.
    #[param(minimum = 1)]
    pub before: Option<i64>,
}

/// One event's delivery to the endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryOut {
    /// The `webhook-id` it is sent under, every time.
    pub webhook_id: String,
    /// The event's sequence (its place in the event log).
    pub sequence: i64,
    /// The event's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// `pending` (not yet delivered; retried), `delivered`, or `failed` (given up).
    #[schema(pattern = "^(pending|delivered|failed)$")]
    pub status: String,
    /// Attempts made.
    pub attempts: i32,
    /// The last attempt's HTTP status, if it got one.
    pub last_status_code: Option<i32>,
    /// The last attempt's error, if it failed.
    pub last_error: Option<String>,
    /// How long the last attempt took, in milliseconds.
    pub last_response_ms: Option<i32>,
    /// When the delivery was made (when the event happened).
    pub created_at: DateTime<Utc>,
    /// When the last attempt was made.
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// While pending: when the next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When it was delivered.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// A page of the delivery log.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPage {
    /// Newest event first.
    pub deliveries: Vec<DeliveryOut>,
    /// Pass as `before` for the next page; null on the last page.
    pub next_before: Option<i64>,
}

/// The delivery log of one of the caller's webhooks, newest event first (kept for
/// `PARLEY_WEBHOOK_LOG_RETENTION` after each delivery ends).
#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries", tag = "webhooks", operation_id = "listWebhookDeliveries",
    security(("bearerJwt" = [])),
    params(WebhookPath, DeliveriesQuery),
    responses(
        (status = 200, description = "A page of the log", body = DeliveryPage),
        (status = 400, description = "Invalid query (`invalid_body`)"),
        (status = 404, description = "Unknown, or not the caller's"),
    ))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
    ApiQuery(q): ApiQuery<DeliveriesQuery>,
) -> ApiResult<Json<DeliveryPage>> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::invalid("limit must be between 1 and 100"));
    }
    if q.before.is_some_and(|b| b < 1) {
        return Err(ApiError::invalid("before must be a sequence (1 or more)"));
    }
    let mut conn = state.pool().acquire().await?;
    webhooks::get(&mut conn, id, owner(&caller)).await?.ok_or(ApiError::NotFound("webhook"))?;
    let rows = deliveries::log(&mut conn, id, q.before, limit + 1).await?;
    let more = rows.len() as i64 > limit;
    let deliveries: Vec<DeliveryOut> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| DeliveryOut {
            webhook_id: body::webhook_id(r.event_id),
            sequence: r.event_id,
            kind: r.kind,
            next_attempt_at: (r.status == "pending").then_some(r.next_at),
            status: r.status,
            attempts: r.attempts,
            last_status_code: r.last_status_code,
            last_error: r.last_error,
            last_response_ms: r.last_response_ms,
            created_at: r.created_at,
            last_attempt_at: r.last_attempt_at,
            delivered_at: r.delivered_at,
        })
        .collect();
    let next_before = if more { deliveries.last().map(|d| d.sequence) } else { None };
    Ok(Json(DeliveryPage { deliveries, next_before }))
}

/// Body of a redelivery: `ids` or `since`, one of them.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedeliverIn {
    /// `webhook-id`s of the endpoint's delivery log (at most 100).
    pub ids: Option<Vec<String>>,
    /// Every event since this time that the endpoint takes (those it missed while disabled
    /// too), as far back as the event log keeps them, at most 10 000.
    pub since: Option<DateTime<Utc>>,
}

/// What a redelivery queued.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Redelivered {
    /// Deliveries queued (sent again under their own `webhook-id`).
    pub queued: u64,
    /// Ids asked for that the log does not hold (or that are in flight right now).
    pub not_queued: Vec<String>,
}

/// Queues deliveries of one of the caller's webhooks again, at once and with a fresh retry
/// window: by `webhook-id` (`ids`), or every event since a time (`since`). The endpoint must be
/// enabled.
#[utoipa::path(post, path = "/api/webhooks/{id}/redeliver", tag = "webhooks", operation_id = "redeliverWebhook",
    security(("bearerJwt" = [])),
    params(WebhookPath),
    request_body(content = RedeliverIn, example = json!({"ids": ["evt_1042", "evt_1043"]})),
    responses(
        (status = 202, description = "Queued", body = Redelivered),
        (status = 400, description = "Neither or both of `ids` and `since`, or a bad id (`invalid_body`)"),
        (status = 404, description = "Unknown, or not the caller's"),
        (status = 409, description = "The endpoint is disabled: enable it first (`invalid_state`)"),
    ))]
pub async fn redeliver(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
    OptionalJson(body): OptionalJson<RedeliverIn>,
) -> ApiResult<(StatusCode, Json<Redelivered>)> {
    enum Which {
        Ids(Vec<(String, i64)>),
        Since(DateTime<Utc>),
    }
    let which = match (body.ids, body.since) {
        (Some(ids), None) => {
            if ids.is_empty() || ids.len() > MAX_REDELIVER_IDS {
                return Err(ApiError::invalid(format!("ids must name 1 to {MAX_REDELIVER_IDS} webhook-ids")));
            }
            let parsed = ids
                .into_iter()
                .map(|i| match body::event_of_webhook_id(&i) {
                    Some(event) => Ok((i, event)),
                    None => Err(ApiError::invalid(format!(
                        "ids: {} is not a webhook-id (evt_ and a sequence)",
                        crate::quote::quote(&i)
                    ))),
                })
                .collect::<ApiResult<Vec<_>>>()?;
            Which::Ids(parsed)
        }
        (None, Some(since)) => Which::Since(since),
        _ => return Err(ApiError::invalid("send either ids (webhook-ids) or since (a time), one of them")),
    };
    let mut tx = state.pool().begin().await?;
    let webhook = webhooks::get(&mut tx, id, owner(&caller)).await?.ok_or(ApiError::NotFound("webhook"))?;
    if webhook.status != "enabled" {
        return Err(ApiError::Conflict {
            code: ErrorCode::InvalidState,
            message: "the webhook is disabled; enable it (PATCH status: enabled) to redeliver".into(),
        });
    }
    let (queued, not_queued) = match which {
        Which::Ids(ids) => {
            let events: Vec<i64> = ids.iter().map(|(_, e)| *e).collect();
            let done = deliveries::redeliver(&mut tx, id, &events).await?;
            let missing = ids.into_iter().filter(|(_, e)| !done.contains(e)).map(|(i, _)| i).collect();
            (done.len() as u64, missing)
        }
        Which::Since(since) => {
            (deliveries::redeliver_since(&mut tx, id, since, MAX_REDELIVER_SINCE).await?, Vec::new())
        }
    };
    if queued > 0 {
        let job = parley_jobs::OutboxDelivery { event_id: None, target_id: Some(id) };
        parley_jobs::schedule_outbox(&mut tx, &job, Utc::now()).await.map_err(anyhow::Error::new)?;
    }
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(Redelivered { queued, not_queued })))
}
