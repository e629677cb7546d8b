//! The benchmark's personal agent and the negotiations that wait for it: the agents registered
//! for the phases, their two calls (pickup, respond) as a personal-agent runtime makes them, what
//! they answer, and the people and bodies of the negotiations the turn-cycle, wake-latency and
//! system-vs-system phases create.

use std::sync::Arc;

use anyhow::{Context, bail};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    harness::{Bench, call},
    timing::for_each_concurrent,
};

/// An agent's API, as a personal agent runtime would call it.
#[derive(Clone)]
pub struct AgentClient {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl AgentClient {
    /// Agent `id` with API key `key` of the service at `service` (`http://host:port`).
    pub fn new(client: &reqwest::Client, service: &str, id: &str, key: &str) -> AgentClient {
        AgentClient {
            client: client.clone(),
            base: format!("{service}/api/agents/{id}/negotiations"),
            key: key.to_owned(),
        }
    }

    /// Claims the agent's next parked turn, long-polling `wait` seconds when given; `None` when
    /// there is none.
    pub async fn pickup(&self, wait: Option<u64>) -> anyhow::Result<Option<Value>> {
        let url = match wait {
            Some(w) => format!("{}/pickup?wait={w}", self.base),
            None => format!("{}/pickup", self.base),
        };
        let r = self.client.post(url).header("x-api-key", &self.key).send().await?;
        match r.status() {
            StatusCode::NO_CONTENT => Ok(None),
            StatusCode::OK => Ok(Some(r.json().await?)),
            s => bail!("pickup: {s} {}", r.text().await.unwrap_or_default()),
        }
    }

    /// Answers a claimed turn with `action` and [`answer_message`]; returns the answer's body.
    pub async fn respond(&self, turn: &Value, action: &str) -> anyhow::Result<Value> {
        let id = turn["negotiationId"].as_str().context("negotiationId")?;
        let body = json!({
            "claimToken": turn["claimToken"],
            "action": action,
            "message": answer_message(turn),
            "assessment": {
                "reasoning": "Holding out for a clearer picture before agreeing.",
                "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}
            }
        });
        let req = self.client.post(format!("{}/{id}/respond", self.base)).header("x-api-key", &self.key).json(&body);
        call(req, StatusCode::OK, "respond").await
    }
}

impl Bench {
    /// Registers agents for users `<prefix>-0` to `<prefix>-<n-1>`, eight at a time; returns
    /// their clients in the order the registrations finished.
    pub async fn register_agents(self: &Arc<Self>, prefix: &str, n: usize) -> anyhow::Result<Vec<AgentClient>> {
        let (b, prefix) = (self.clone(), prefix.to_owned());
        let registered = for_each_concurrent(n, 8, move |i| {
            let (b, user) = (b.clone(), format!("{prefix}-{i}"));
            async move { b.register_agent(&user).await }
        })
        .await?;
        Ok(registered.iter().map(|(id, key)| AgentClient::new(&self.client, &self.base, id, key)).collect())
    }
}

/// What the benchmark's agent says: at each of its turns one more of the source's needs, in the
/// order of [`CLAIMS`]. The system negotiator counters again only when something new came up
/// and decides at once otherwise, so an agent that said the same thing every turn would end each
/// negotiation at the system's next turn, and the turn cycle would no longer be the same unit of
/// work (a claim, the agent's turn, a system counter, the next park).
fn answer_message(turn: &Value) -> String {
    let number = turn["turn"]["number"].as_u64().unwrap_or(1) as usize;
    let claim = CLAIMS[(number / 2).min(CLAIMS.len() - 1)];
    format!("I have {claim} experience; tell me more about how you would work together.")
}

/// The source's needs the candidate's profile does not show, claimed one per turn.
const CLAIMS: [&str; 4] = ["senior", "kubernetes", "compliance", "security"];

/// The source side (played by the system negotiator): a partial match with many needs, so that
/// it proposes (the seed carries it), then counters each claim that adds one need rather than
/// accepting or rejecting at once, and the turn parks again for the agent.
pub fn source_user(n: usize) -> Value {
    json!({
        "id": format!("bench-source-{n}"),
        "name": "Source founder",
        "profile": {
            "bio": "Founder of a fintech startup building payments infrastructure",
            "skills": ["product management", "fundraising"],
            "interests": ["payments", "startups"]
        },
        "intents": [{"text": "Looking for a senior rust engineer with payments, kubernetes, compliance, security, terraform, observability and fraud experience"}]
    })
}

/// The candidate side: user `id`, whose agent (when it has one) plays the seat.
pub fn candidate_user(id: &str) -> Value {
    json!({
        "id": id,
        "name": "Candidate engineer",
        "profile": {
            "bio": "Backend engineer working with rust on payments systems",
            "skills": ["rust", "payments"],
            "interests": ["startups"]
        },
        "intents": [{"text": "Looking for a startup to join as an engineer"}]
    })
}

/// A create request for a match between `source` and `candidate`.
pub fn negotiation_body(source: Value, candidate: Value) -> Value {
    json!({
        "sourceUser": source,
        "candidateUser": candidate,
        "seedAssessment": {"score": 70, "reasoning": "Evaluator: partially overlapping intents"}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_claims_one_more_need_at_each_of_its_turns() {
        let turn = |number: u64| json!({ "turn": { "number": number, "history": [] } });
        assert!(answer_message(&turn(1)).starts_with("I have senior experience;"));
        assert!(answer_message(&turn(3)).starts_with("I have kubernetes experience;"));
        assert!(answer_message(&turn(5)).starts_with("I have compliance experience;"));
        assert!(answer_message(&turn(41)).starts_with("I have security experience;"));
    }
}
