//! Realistic people, negotiation requests and a capability to delegate to.

use serde_json::{Value, json};

/// A founder looking for a Rust engineer for a payments API.
pub fn founder() -> Value {
    json!({
        "id": "user-maya",
        "name": "Maya Chen",
        "profile": {
            "bio": "Founder of a fintech startup building payments infrastructure for small merchants",
            "skills": ["product management", "fundraising", "fintech"],
            "interests": ["payments", "startups", "rust"]
        },
        "intents": [{ "id": "i-1", "text": "Looking for a senior Rust backend engineer to build our payments API" }]
    })
}

/// A Rust engineer looking for a payments startup.
pub fn engineer() -> Value {
    json!({
        "id": "user-tomas",
        "name": "Tomas Novak",
        "profile": {
            "bio": "Senior backend engineer: eight years of Rust and PostgreSQL, built payments APIs at scale",
            "skills": ["rust", "postgresql", "backend engineering", "payments api", "distributed systems"],
            "interests": ["fintech", "startups", "payments"]
        },
        "intents": [{ "text": "Looking for a fintech startup to join as a senior backend engineer working on payments" }]
    })
}

/// A pastry chef looking for bakery investors.
pub fn pastry_chef() -> Value {
    json!({
        "id": "user-lea",
        "name": "Léa Martin",
        "profile": {
            "bio": "Pastry chef running a small artisan bakery in Lyon",
            "skills": ["baking", "pastry", "sourdough"],
            "interests": ["bread", "local food"]
        },
        "intents": [{ "text": "Seeking investors to open a second artisan bakery" }]
    })
}

/// A kernel developer looking for embedded work.
pub fn kernel_developer() -> Value {
    json!({
        "id": "user-raj",
        "name": "Raj Patel",
        "profile": {
            "bio": "Linux kernel developer specialising in device drivers for embedded boards",
            "skills": ["c", "linux kernel", "device drivers", "embedded"],
            "interests": ["open source", "hardware"]
        },
        "intents": [{ "text": "Looking for embedded Linux kernel contract work on device drivers" }]
    })
}

/// A climate startup's CTO hiring a data engineer with Python, Kubernetes and Terraform.
pub fn climate_cto() -> Value {
    json!({
        "id": "user-maya", "name": "Maya Chen",
        "profile": {"bio": "CTO of a climate analytics startup.", "skills": ["data architecture", "climate science"]},
        "intents": [{"text": "Looking for a data engineer with Python, Kubernetes and Terraform for our climate analytics platform"}]
    })
}

/// A data engineer with the Python, but neither the Kubernetes nor the Terraform.
pub fn data_engineer() -> Value {
    json!({
        "id": "user-tomas", "name": "Tomas Novak",
        "profile": {"bio": "Data engineer building Python pipelines with Spark and Airflow for climate research.",
            "skills": ["Python", "Spark", "Airflow", "data engineering"], "interests": ["climate"]},
        "intents": [{"text": "Looking for a mission-driven climate startup"}]
    })
}

/// A `POST /api/negotiations` body between two users.
pub fn request(source: Value, candidate: Value, score: f64) -> Value {
    json!({
        "sourceUser": source,
        "candidateUser": candidate,
        "seedAssessment": {
            "score": score,
            "reasoning": "Evaluator: the two profiles were matched on their stated intents"
        },
        "indexContext": { "index": "founders-and-engineers" },
        "discoveryQuery": "senior rust backend engineer for payments"
    })
}

/// The founder/engineer pair, which should end `pending`.
pub fn good_match() -> Value {
    request(founder(), engineer(), 88.0)
}

/// The chef/kernel pair, which should end `rejected`.
pub fn mismatch() -> Value {
    request(pastry_chef(), kernel_developer(), 35.0)
}

/// The CTO/data engineer pair: a partial fit (Tomas has the data engineering and the Python, not
/// the Kubernetes or the Terraform) with a middling seed, so Maya's system negotiator proposes,
/// and answers a first counter with a counter.
pub fn partial_fit() -> Value {
    request(climate_cto(), data_engineer(), 55.0)
}

/// A code-review capability taking `{code}` and giving `{feedback}` (both required), at `cost`
/// when given.
pub fn review_capability(cost: Option<f64>) -> Value {
    let mut capability = json!({
        "taskType": "code-review",
        "inputSchema": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
    });
    if let Some(cost) = cost {
        capability["estimatedCostUsd"] = json!(cost);
    }
    capability
}
