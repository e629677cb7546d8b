//! A2A push notification configurations: a requester asks Parley to POST its task's updates to a
//! URL of its own, instead of streaming or polling them.
//!
//! - 1.0: `CreateTaskPushNotificationConfig` (params: a `TaskPushNotificationConfig`, `{taskId,
//!   id?, url, token?, authentication?: {scheme, credentials?}}`), `GetTaskPushNotificationConfig`
//!   and `DeleteTaskPushNotificationConfig` (`{taskId, id}`), `ListTaskPushNotificationConfigs`
//!   (`{taskId}`); field names in camelCase or as the protocol's snake_case.
//! - 0.3: `tasks/pushNotificationConfig/set` (`{taskId, pushNotificationConfig: {id?, url, token?,
//!   authentication?: {schemes, credentials?}}}`), `.../get` and `.../delete` (`{id,
//!   pushNotificationConfigId}`), `.../list` (`{id}`).
//! - Either version's send may carry one in `configuration` (`taskPushNotificationConfig`, or
//!   `pushNotificationConfig`): it is checked before the delegation is made, and stored once it
//!   is, with every status event the delegation had meanwhile ([`attach`]).
//!
//! Only the task's requester reaches its configurations (anyone else: -32001, as for an unknown
//! task). A configuration's id is the requester's (the task's id when it gives none); setting
//! one of an id the task has replaces it. Its URL must pass the outbound address rule, as a
//! webhook's does (-32602 `url_refused` otherwise). The credentials are never read back.
//!
//! A task is a delegation or a task a plain message started at an agent Parley routed it to
//! (`super::route`): the configurations of both are Parley's (a routed task's are never
//! forwarded to its agent, which need not speak push at all).
//!
//! What is sent, and how, is the outbox's (`crate::outbox`): each configuration is an outbox
//! target that gets its delegation's `delegation.status` events, each POSTed as the task then
//! stands, or its routed task's `a2a.task` events, each POSTed as a status update of the state
//! Parley saw, in the version the configuration was set in (`crate::outbox::body`).

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    A2aState,
    rpc::{Call, RpcError, Version},
};
use crate::{
    directory::delegation::{DelegationError, Record},
    error_code::ErrorCode,
    outbox::targets::{self, MAX_PUSH_CONFIGS_PER_TASK, UrlError},
    runtime::AgentIdentity,
    store::{
        push_configs::{self, NewPushConfig, PushConfig, PushTask},
        skills,
    },
};

/// The longest configuration id taken.
const MAX_ID_LEN: usize = 256;
/// The longest token taken.
const MAX_TOKEN_LEN: usize = 1024;
/// The longest credentials taken.
const MAX_CREDENTIALS_LEN: usize = 4096;
/// The longest scheme taken.
const MAX_SCHEME_LEN: usize = 64;

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::invalid_params(ErrorCode::InvalidBody, message)
}

fn internal(e: impl std::fmt::Display) -> RpcError {
    tracing::error!(error = %e, "a push notification configuration call failed");
    RpcError::internal()
}

/// A configuration as sent, checked (its URL judged by the outbound address rule).
#[derive(Debug, Clone)]
pub struct Wanted {
    /// Its id, if the requester gave one.
    id: Option<String>,
    /// Where to POST.
    url: String,
    /// The token to send back.
    token: Option<String>,
    /// The `Authorization` scheme and credentials.
    scheme: Option<String>,
    credentials: Option<String>,
}

/// Runs a push configuration method.
pub async fn handle(state: &A2aState, agent: &AgentIdentity, call: &Call) -> Result<Value, RpcError> {
    let version = call.method.version;
    let p = &call.params;
    match call.method.name {
        "CreateTaskPushNotificationConfig" | "tasks/pushNotificationConfig/set" => {
            let task = task_of(state, agent, p, version).await?;
            let body = match version {
                Version::V1 => p.get("config").and_then(Value::as_object).unwrap_or(p),
                Version::V03 => p
                    .get("pushNotificationConfig")
                    .and_then(Value::as_object)
                    .ok_or_else(|| invalid("params.pushNotificationConfig must be an object"))?,
            };
            let wanted = read(body, version, state.engine.config().a2a_allow_private_targets).await?;
            let config = store(state, &task, &wanted, version, None).await?;
            Ok(render(&config, &task.id, version))
        }
        "GetTaskPushNotificationConfig" | "tasks/pushNotificationConfig/get" => {
            let task = task_of(state, agent, p, version).await?;
            let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
            let config = match config_id(p, version)? {
                Some(id) => push_configs::get(&mut conn, &task.push, &id).await,
                // 0.3 may name none: the task's own, else its first.
                None => push_configs::list(&mut conn, &task.push).await.map(|all| {
                    let first = all.first().cloned();
                    all.into_iter().find(|c| c.config_id == task.id).or(first)
                }),
            }
            .map_err(internal)?
            .ok_or_else(|| RpcError {
                code: -32001,
                message: "no such push notification configuration on this task".into(),
                parley_code: Some(ErrorCode::NotFound),
            })?;
            Ok(render(&config, &task.id, version))
        }
        "ListTaskPushNotificationConfigs" | "tasks/pushNotificationConfig/list" => {
            let task = task_of(state, agent, p, version).await?;
            let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
            let all = push_configs::list(&mut conn, &task.push).await.map_err(internal)?;
            let configs: Vec<Value> = all.iter().map(|c| render(c, &task.id, version)).collect();
            Ok(match version {
                Version::V1 => json!({ "configs": configs, "nextPageToken": "" }),
                Version::V03 => Value::Array(configs),
            })
        }
        "DeleteTaskPushNotificationConfig" | "tasks/pushNotificationConfig/delete" => {
            let task = task_of(state, agent, p, version).await?;
            let id = config_id(p, version)?.ok_or_else(|| invalid("the configuration's id is required"))?;
            let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
            // Deleting one that is gone already is no error: the call is idempotent.
            push_configs::delete(&mut conn, &task.push, &id).await.map_err(internal)?;
            Ok(match version {
                Version::V1 => json!({}),
                Version::V03 => Value::Null,
            })
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// The names a send's `configuration` may carry a push configuration under.
pub const IN_SEND: [&str; 3] =
    ["taskPushNotificationConfig", "pushNotificationConfig", "task_push_notification_config"];

/// The configuration a send's `configuration` carries, checked, if it carries one.
pub async fn wanted_in_send(
    state: &A2aState,
    params: &Map<String, Value>,
    version: Version,
) -> Result<Option<Wanted>, RpcError> {
    let Some(configuration) = params.get("configuration").and_then(Value::as_object) else { return Ok(None) };
    let body = IN_SEND.iter().find_map(|name| configuration.get(*name).filter(|v| !v.is_null()).map(|v| (name, v)));
    match body {
        None => Ok(None),
        Some((_, Value::Object(body))) => {
            Ok(Some(read(body, version, state.engine.config().a2a_allow_private_targets).await?))
        }
        Some((name, _)) => Err(invalid(format!("configuration.{name} must be an object"))),
    }
}

/// Stores `wanted` for the delegation a send just made (`record`), with a delivery of each of
/// its status events written after the event `before` (but the submission the send answers
/// with): the delegation may have moved before the configuration was stored.
pub async fn attach(
    state: &A2aState,
    agent: &AgentIdentity,
    record: &Record,
    wanted: &Wanted,
    version: Version,
    before: i64,
) -> Result<(), RpcError> {
    let task = Task::of_delegation(record);
    store(state, &task, wanted, version, Some((agent.owner_user_id.as_str(), before))).await.map(drop)
}

/// Stores `wanted` for the routed task `task_id` a send just started (`requester`'s); its
/// first state is told by the send's own observation (`super::route`), after this.
pub async fn attach_routed(
    state: &A2aState,
    requester: Uuid,
    task_id: &str,
    wanted: &Wanted,
    version: Version,
) -> Result<(), RpcError> {
    let task = Task { push: PushTask::Routed { requester, task_id: task_id.to_owned() }, id: task_id.to_owned() };
    store(state, &task, wanted, version, None).await.map(drop)
}

/// The newest event's id, before a send with a configuration (see [`attach`]).
pub async fn newest_event(state: &A2aState) -> Result<i64, RpcError> {
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    crate::store::events::newest_id(&mut conn).await.map_err(internal)
}

/// The task configurations are set on, and its id as the requester names it.
struct Task {
    push: PushTask,
    id: String,
}

impl Task {
    fn of_delegation(record: &Record) -> Task {
        let d = &record.delegation;
        Task {
            push: PushTask::Delegation { delegation_id: d.delegation_id, request_id: d.request_id },
            id: d.delegation_id.to_string(),
        }
    }
}

/// Sets `wanted` on `task` (under the task's lock, so that no status event falls between);
/// with `catch_up`, a delegation's events of the request by that owner after that event are
/// delivered too.
async fn store(
    state: &A2aState,
    task: &Task,
    wanted: &Wanted,
    version: Version,
    catch_up: Option<(&str, i64)>,
) -> Result<PushConfig, RpcError> {
    let id = wanted.id.clone().unwrap_or_else(|| task.id.clone());
    let new = NewPushConfig {
        task: &task.push,
        config_id: &id,
        a2a_version: match version {
            Version::V1 => "1.0",
            Version::V03 => "0.3",
        },
        url: &wanted.url,
        token: wanted.token.as_deref(),
        auth_scheme: wanted.scheme.as_deref(),
        auth_credentials: wanted.credentials.as_deref(),
    };
    let mut tx = state.engine.pool().begin().await.map_err(internal)?;
    if !push_configs::lock_task(&mut tx, &task.push).await.map_err(internal)? {
        return Err(RpcError::task_not_found());
    }
    let exists = push_configs::get(&mut tx, &task.push, &id).await.map_err(internal)?.is_some();
    if !exists && push_configs::count(&mut tx, &task.push).await.map_err(internal)? >= MAX_PUSH_CONFIGS_PER_TASK {
        return Err(RpcError::invalid_params(
            ErrorCode::LimitReached,
            format!("a task has at most {MAX_PUSH_CONFIGS_PER_TASK} push notification configurations"),
        ));
    }
    let target = push_configs::set(&mut tx, &new).await.map_err(internal)?;
    if let (Some((owner, before)), PushTask::Delegation { request_id, .. }) = (catch_up, &task.push)
        && push_configs::catch_up(&mut tx, target, owner, *request_id, before).await.map_err(internal)? > 0
    {
        let job = parley_jobs::OutboxDelivery { event_id: None, target_id: Some(target) };
        parley_jobs::schedule_outbox(&mut tx, &job, chrono::Utc::now()).await.map_err(internal)?;
    }
    let stored = push_configs::get(&mut tx, &task.push, &id).await.map_err(internal)?.ok_or_else(RpcError::internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(stored)
}

/// The caller's task the params name (`taskId`, `task_id`, or 0.3's `id`): a task a plain
/// message of theirs started at a routed agent, else a delegation of theirs; -32001 otherwise.
async fn task_of(
    state: &A2aState,
    agent: &AgentIdentity,
    p: &Map<String, Value>,
    version: Version,
) -> Result<Task, RpcError> {
    let names: &[&str] = match version {
        Version::V1 => &["taskId", "task_id"],
        Version::V03 => &["taskId", "id"],
    };
    let raw = names
        .iter()
        .find_map(|n| p.get(*n).and_then(Value::as_str))
        .ok_or_else(|| invalid(format!("params.{} must be a string: the task's id", names[0])))?;
    if raw.chars().count() <= 500 {
        let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
        if skills::route_of_task(&mut conn, agent.agent_id, raw).await.map_err(internal)?.is_some() {
            return Ok(Task {
                push: PushTask::Routed { requester: agent.agent_id, task_id: raw.to_owned() },
                id: raw.to_owned(),
            });
        }
    }
    let id = Uuid::parse_str(raw).map_err(|_| RpcError::task_not_found())?;
    match state.delegations.requested_by(id, agent.agent_id).await {
        Ok(record) => Ok(Task::of_delegation(&record)),
        Err(DelegationError::NotFound) => Err(RpcError::task_not_found()),
        Err(e) => Err(internal(e)),
    }
}

/// The configuration's id the params name (1.0 `id`; 0.3 `pushNotificationConfigId`).
fn config_id(p: &Map<String, Value>, version: Version) -> Result<Option<String>, RpcError> {
    let name = match version {
        Version::V1 => "id",
        Version::V03 => "pushNotificationConfigId",
    };
    optional_string(p, name, MAX_ID_LEN)
}

fn optional_string(o: &Map<String, Value>, name: &str, max: usize) -> Result<Option<String>, RpcError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{name} must be a string of at most {max} characters"))),
    }
}

/// A header value Parley will send: visible ASCII, no spaces.
fn header_safe(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_graphic())
}

/// A configuration's fields, checked: the URL by the outbound address rule too.
async fn read(body: &Map<String, Value>, version: Version, allow_private: bool) -> Result<Wanted, RpcError> {
    let id = optional_string(body, "id", MAX_ID_LEN)?;
    let url = body.get("url").and_then(Value::as_str).ok_or_else(|| invalid("url must be a string"))?;
    let url = targets::check_url(url, allow_private).await.map_err(|e| match e {
        UrlError::Invalid(m) => invalid(m),
        UrlError::Refused(m) => RpcError::invalid_params(ErrorCode::UrlRefused, m),
    })?;
    let token = optional_string(body, "token", MAX_TOKEN_LEN)?;
    if token.as_deref().is_some_and(|t| !header_safe(t)) {
        return Err(invalid("token must be visible ASCII characters (it is sent in a header)"));
    }
    let (scheme, credentials) = match body.get("authentication") {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(auth)) => {
            let scheme = match version {
                Version::V1 => optional_string(auth, "scheme", MAX_SCHEME_LEN)?,
                Version::V03 => match auth.get("schemes") {
                    Some(Value::Array(schemes)) => schemes.first().and_then(Value::as_str).map(str::to_owned),
                    _ => optional_string(auth, "scheme", MAX_SCHEME_LEN)?,
                },
            };
            let credentials = optional_string(auth, "credentials", MAX_CREDENTIALS_LEN)?;
            if scheme.as_deref().is_some_and(|s| s.len() > MAX_SCHEME_LEN || !header_safe(s)) {
                return Err(invalid("authentication.scheme must be an HTTP authentication scheme, like Bearer"));
            }
            if credentials.as_deref().is_some_and(|c| !header_safe(c)) {
                return Err(invalid("authentication.credentials must be visible ASCII characters"));
            }
            if credentials.is_some() && scheme.is_none() {
                return Err(invalid("authentication.credentials need a scheme (Bearer, Basic, ...)"));
            }
            (scheme, credentials)
        }
        Some(_) => return Err(invalid("authentication must be an object")),
    };
    Ok(Wanted { id, url: url.to_string(), token, scheme, credentials })
}

/// A configuration of the task `task_id` as `version` answers it (its credentials never).
fn render(c: &PushConfig, task_id: &str, version: Version) -> Value {
    let auth = c.auth_scheme.as_ref();
    match version {
        Version::V1 => {
            let mut v = json!({ "id": c.config_id, "taskId": task_id, "url": c.url });
            if let Some(token) = &c.token {
                v["token"] = json!(token);
            }
            if let Some(scheme) = auth {
                v["authentication"] = json!({ "scheme": scheme });
            }
            v
        }
        Version::V03 => {
            let mut config = json!({ "id": c.config_id, "url": c.url });
            if let Some(token) = &c.token {
                config["token"] = json!(token);
            }
            if let Some(scheme) = auth {
                config["authentication"] = json!({ "schemes": [scheme] });
            }
            json!({ "taskId": task_id, "pushNotificationConfig": config })
        }
    }
}
