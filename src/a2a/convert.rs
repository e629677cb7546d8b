//! A2A's two versions' shapes of the same things, each written in the other's: what a routed
//! message needs when the requester and its target speak different versions.
//!
//! | | 1.0 (ProtoJSON) | 0.3 |
//! |---|---|---|
//! | part | `{text}`, `{raw, mediaType, filename}`, `{url, mediaType, filename}`, `{data}` | `{kind: "text", text}`, `{kind: "file", file: {bytes \| uri, mimeType, name}}`, `{kind: "data", data}` |
//! | role | `ROLE_USER`, `ROLE_AGENT` | `user`, `agent` |
//! | state | `TASK_STATE_INPUT_REQUIRED` | `input-required` |
//! | send's answer | `{task}` or `{message}` | the task or message, with its `kind` |
//! | stream event | `{task}`, `{message}`, `{statusUpdate}`, `{artifactUpdate}` | with `kind`: `task`, `message`, `status-update` (with `final`), `artifact-update` |
//! | non-blocking send | `configuration.returnImmediately: true` | `configuration.blocking: false` |
//!
//! Fields either version does not know are kept as they are.

use serde_json::{Map, Value, json};

/// A task state in 1.0's words (`TASK_STATE_WORKING`), from either version's.
pub fn state_v1(s: &str) -> String {
    if s.starts_with("TASK_STATE_") {
        s.to_owned()
    } else {
        format!("TASK_STATE_{}", s.replace('-', "_").to_uppercase())
    }
}

/// A task state in 0.3's words (`working`), from either version's.
pub fn state_v03(s: &str) -> String {
    crate::wire::a2a_render::state_v03(s)
}

fn object(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A part in 1.0's shape.
fn part_v1(p: &Value) -> Value {
    let mut p = object(p);
    let kind = p.remove("kind");
    if let Some(Value::Object(mut file)) = p.remove("file") {
        if let Some(bytes) = file.remove("bytes") {
            p.insert("raw".into(), bytes);
        }
        if let Some(uri) = file.remove("uri") {
            p.insert("url".into(), uri);
        }
        if let Some(m) = file.remove("mimeType") {
            p.insert("mediaType".into(), m);
        }
        if let Some(n) = file.remove("name") {
            p.insert("filename".into(), n);
        }
    }
    let _ = kind;
    Value::Object(p)
}

/// A part in 0.3's shape.
fn part_v03(p: &Value) -> Value {
    let mut p = object(p);
    if p.contains_key("kind") {
        return Value::Object(p);
    }
    if p.contains_key("text") {
        p.insert("kind".into(), json!("text"));
    } else if p.contains_key("data") {
        p.insert("kind".into(), json!("data"));
    } else if p.contains_key("raw") || p.contains_key("url") {
        let mut file = Map::new();
        if let Some(raw) = p.remove("raw") {
            file.insert("bytes".into(), raw);
        }
        if let Some(url) = p.remove("url") {
            file.insert("uri".into(), url);
        }
        if let Some(m) = p.remove("mediaType") {
            file.insert("mimeType".into(), m);
        }
        if let Some(n) = p.remove("filename") {
            file.insert("name".into(), n);
        }
        p.insert("kind".into(), json!("file"));
        p.insert("file".into(), Value::Object(file));
    }
    Value::Object(p)
}

fn parts(m: &mut Map<String, Value>, f: fn(&Value) -> Value) {
    if let Some(Value::Array(parts)) = m.get_mut("parts") {
        for p in parts.iter_mut() {
            *p = f(p);
        }
    }
}

/// A message in 1.0's shape.
pub fn message_v1(m: &Value) -> Value {
    let mut m = object(m);
    m.remove("kind");
    if let Some(role) = m.get("role").and_then(Value::as_str) {
        let role = match role {
            "user" => "ROLE_USER",
            "agent" => "ROLE_AGENT",
            other => other,
        };
        m.insert("role".into(), json!(role));
    }
    parts(&mut m, part_v1);
    Value::Object(m)
}

/// A message in 0.3's shape.
pub fn message_v03(m: &Value) -> Value {
    let mut m = object(m);
    m.insert("kind".into(), json!("message"));
    if let Some(role) = m.get("role").and_then(Value::as_str) {
        let role = match role {
            "ROLE_USER" => "user",
            "ROLE_AGENT" => "agent",
            other => other,
        };
        m.insert("role".into(), json!(role));
    }
    parts(&mut m, part_v03);
    Value::Object(m)
}

fn status(s: &Value, v1: bool) -> Value {
    let mut s = object(s);
    if let Some(state) = s.get("state").and_then(Value::as_str) {
        let state = if v1 { state_v1(state) } else { state_v03(state) };
        s.insert("state".into(), json!(state));
    }
    if let Some(m) = s.get("message").filter(|m| m.is_object()) {
        let m = if v1 { message_v1(m) } else { message_v03(m) };
        s.insert("message".into(), m);
    }
    Value::Object(s)
}

fn artifact(a: &Value, v1: bool) -> Value {
    let mut a = object(a);
    parts(&mut a, if v1 { part_v1 } else { part_v03 });
    Value::Object(a)
}

/// A task in `v1`'s shape (1.0 when true, else 0.3).
pub fn task(t: &Value, v1: bool) -> Value {
    let mut t = object(t);
    if v1 {
        t.remove("kind");
    } else {
        t.insert("kind".into(), json!("task"));
    }
    if let Some(s) = t.get("status") {
        let s = status(s, v1);
        t.insert("status".into(), s);
    }
    for (key, f) in [("history", true), ("artifacts", false)] {
        if let Some(Value::Array(items)) = t.get_mut(key) {
            for item in items.iter_mut() {
                *item = if f { if v1 { message_v1(item) } else { message_v03(item) } } else { artifact(item, v1) };
            }
        }
    }
    Value::Object(t)
}

/// A send's (or a stream event's) result, from 1.0's `{task}`/`{message}`/`{statusUpdate}`/
/// `{artifactUpdate}` to 0.3's object with its `kind`.
pub fn result_v03(r: &Value) -> Value {
    let Some(o) = r.as_object() else { return r.clone() };
    if let Some(t) = o.get("task") {
        return task(t, false);
    }
    if let Some(m) = o.get("message") {
        return message_v03(m);
    }
    if let Some(u) = o.get("statusUpdate") {
        let mut u = object(u);
        u.insert("kind".into(), json!("status-update"));
        if let Some(s) = u.get("status") {
            let s = status(s, false);
            let terminal = s["state"].as_str().is_some_and(crate::wire::a2a_render::final_v03);
            u.insert("status".into(), s);
            u.entry("final").or_insert(json!(terminal));
        }
        return Value::Object(u);
    }
    if let Some(u) = o.get("artifactUpdate") {
        let mut u = object(u);
        u.insert("kind".into(), json!("artifact-update"));
        if let Some(a) = u.get("artifact") {
            let a = artifact(a, false);
            u.insert("artifact".into(), a);
        }
        return Value::Object(u);
    }
    // A bare task (GetTask, CancelTask answer a task).
    if o.contains_key("status") && o.contains_key("id") {
        return task(r, false);
    }
    r.clone()
}

/// A 0.3 result (send, stream event, task) in 1.0's shape; `wrap` puts a task or message in
/// `{task}`/`{message}` (a send's or a stream's result; a read's task stays bare).
pub fn result_v1(r: &Value, wrap: bool) -> Value {
    let Some(o) = r.as_object() else { return r.clone() };
    match o.get("kind").and_then(Value::as_str) {
        Some("task") if wrap => json!({"task": task(r, true)}),
        Some("task") => task(r, true),
        Some("message") => json!({"message": message_v1(r)}),
        Some("status-update") => {
            let mut u = object(r);
            u.remove("kind");
            u.remove("final");
            if let Some(s) = u.get("status") {
                let s = status(s, true);
                u.insert("status".into(), s);
            }
            json!({"statusUpdate": u})
        }
        Some("artifact-update") => {
            let mut u = object(r);
            u.remove("kind");
            if let Some(a) = u.get("artifact") {
                let a = artifact(a, true);
                u.insert("artifact".into(), a);
            }
            json!({"artifactUpdate": u})
        }
        _ => r.clone(),
    }
}

/// A send's params in 1.0's shape (`blocking` becomes `returnImmediately`).
pub fn send_params_v1(p: &Map<String, Value>) -> Map<String, Value> {
    let mut p = p.clone();
    if let Some(m) = p.get("message") {
        let m = message_v1(m);
        p.insert("message".into(), m);
    }
    if let Some(Value::Object(c)) = p.get_mut("configuration") {
        if let Some(b) = c.remove("blocking") {
            c.insert("returnImmediately".into(), json!(b == Value::Bool(false)));
        }
        if let Some(push) = c.remove("pushNotificationConfig") {
            c.insert("taskPushNotificationConfig".into(), push);
        }
    }
    p
}

/// A send's params in 0.3's shape (`returnImmediately` becomes `blocking`).
pub fn send_params_v03(p: &Map<String, Value>) -> Map<String, Value> {
    let mut p = p.clone();
    if let Some(m) = p.get("message") {
        let m = message_v03(m);
        p.insert("message".into(), m);
    }
    if let Some(Value::Object(c)) = p.get_mut("configuration") {
        if let Some(r) = c.remove("returnImmediately") {
            c.insert("blocking".into(), json!(r != Value::Bool(true)));
        }
        if let Some(push) = c.remove("taskPushNotificationConfig") {
            c.insert("pushNotificationConfig".into(), push);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_roles_and_states_go_both_ways() {
        let v1 = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [
            {"text": "hi"}, {"raw": "dGNr", "mediaType": "text/plain", "filename": "o.txt"},
            {"url": "https://e.x/o", "mediaType": "text/plain"}, {"data": {"a": 1}}]});
        let v03 = message_v03(&v1);
        assert_eq!(v03["role"], "agent");
        assert_eq!(
            v03["parts"][1],
            json!({"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain", "name": "o.txt"}})
        );
        assert_eq!(v03["parts"][2]["file"]["uri"], "https://e.x/o");
        assert_eq!(v03["parts"][3]["kind"], "data");
        assert_eq!(message_v1(&v03), v1);
        assert_eq!(state_v03("TASK_STATE_INPUT_REQUIRED"), "input-required");
        assert_eq!(state_v1("input-required"), "TASK_STATE_INPUT_REQUIRED");
        let event = json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}});
        let old = result_v03(&event);
        assert_eq!((old["kind"].as_str(), old["final"].as_bool()), (Some("status-update"), Some(true)));
        assert_eq!(result_v1(&old, true), event);
        let sent = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(result_v1(&result_v03(&sent), true), sent);
    }
}
