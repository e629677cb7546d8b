//! The skills agents offer (`agent_skills`) and where plain A2A messages were routed
//! (`a2a_routes`).
//!
//! An agent registered by its AgentCard offers the card's skills: [`replace_from_card`] rewrites
//! its rows from the card document in the transaction that stores the card, so they are always
//! the stored card's. A skill's text (name, tags, description, examples) is kept as a `tsvector`
//! for PostgreSQL's full-text ranking; [`candidates`] ranks every live agent's skills for a
//! message's words, beside the agent's trust percentile (an agent that polls offers its
//! capabilities as skills). Routes remember, per requester, which
//! target a task (or a context) of a routed message lives at.

use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

/// The most skills kept of one card.
pub const MAX_SKILLS: usize = 100;
/// The longest skill id, name and description kept (longer are cut).
const MAX_ID: usize = 200;
const MAX_NAME: usize = 200;
const MAX_DESCRIPTION: usize = 2000;
/// The most tags, examples and modes kept of a skill, and the longest of each.
const MAX_LIST: usize = 20;
const MAX_ITEM: usize = 300;

/// A skill, as a card gives it (bounded).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// Its id on the card.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Example requests.
    pub examples: Vec<String>,
    /// The media types it takes.
    pub input_modes: Vec<String>,
    /// The media types it answers.
    pub output_modes: Vec<String>,
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).take(MAX_LIST).map(|s| cut(s, MAX_ITEM)).collect())
        .unwrap_or_default()
}

/// The skills of a card document: those with a non-empty string id (the first of a repeated
/// id), at most [`MAX_SKILLS`], their texts bounded; a skill's modes default to the card's.
pub fn of_card(card: &Value) -> Vec<Skill> {
    let default_in = strings(card.get("defaultInputModes"));
    let default_out = strings(card.get("defaultOutputModes"));
    let mut seen = std::collections::HashSet::new();
    card.get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let id = cut(s.get("id").and_then(Value::as_str)?.trim(), MAX_ID);
            if id.is_empty() || !seen.insert(id.clone()) {
                return None;
            }
            let text = |k: &str, n: usize| cut(s.get(k).and_then(Value::as_str).unwrap_or_default(), n);
            let modes = |k: &str, default: &Vec<String>| {
                let own = strings(s.get(k));
                if own.is_empty() { default.clone() } else { own }
            };
            Some(Skill {
                name: Some(text("name", MAX_NAME)).filter(|n| !n.is_empty()).unwrap_or_else(|| id.clone()),
                description: text("description", MAX_DESCRIPTION),
                tags: strings(s.get("tags")),
                examples: strings(s.get("examples")),
                input_modes: modes("inputModes", &default_in),
                output_modes: modes("outputModes", &default_out),
                id,
            })
        })
        .take(MAX_SKILLS)
        .collect()
}

/// Replaces agent `agent_id`'s skills from `source` (`card` or `declared`) with `skills`.
pub async fn replace(conn: &mut PgConnection, agent_id: Uuid, source: &str, skills: &[Skill]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM agent_skills WHERE agent_id = $1", agent_id).execute(&mut *conn).await?;
    if skills.is_empty() {
        return Ok(());
    }
    let rows = json!(skills);
    sqlx::query!(
        r#"INSERT INTO agent_skills (agent_id, skill_id, name, description, tags, examples, input_modes,
                                     output_modes, source, search)
           SELECT $1, s.id, s.name, s.description,
                  ARRAY(SELECT jsonb_array_elements_text(s.tags)),
                  ARRAY(SELECT jsonb_array_elements_text(s.examples)),
                  ARRAY(SELECT jsonb_array_elements_text(s."inputModes")),
                  ARRAY(SELECT jsonb_array_elements_text(s."outputModes")),
                  $3,
                  setweight(to_tsvector('english', s.name || ' ' || s.id), 'A')
                  || setweight(to_tsvector('english', coalesce((SELECT string_agg(t, ' ')
                                                               FROM jsonb_array_elements_text(s.tags) t), '')), 'A')
                  || setweight(to_tsvector('english', s.description), 'B')
                  || setweight(to_tsvector('english', coalesce((SELECT string_agg(e, ' ')
                                                               FROM jsonb_array_elements_text(s.examples) e), '')), 'C')
             FROM jsonb_to_recordset($2) AS s(id text, name text, description text, tags jsonb, examples jsonb,
                                             "inputModes" jsonb, "outputModes" jsonb)"#,
        agent_id,
        rows,
        source
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Replaces agent `agent_id`'s skills with those of its card document.
pub async fn replace_from_card(conn: &mut PgConnection, agent_id: Uuid, card: &Value) -> sqlx::Result<()> {
    replace(conn, agent_id, "card", &of_card(card)).await
}

/// A skill a message may go to, with how well its text matches the message and its agent's
/// trust.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The agent offering it.
    pub agent_id: Uuid,
    /// The agent's current anonymous id, when it has one.
    pub anonymous_id: Option<Uuid>,
    /// The skill's id.
    pub skill_id: String,
    /// Its name.
    pub name: String,
    /// For an agent that polls, the capability the skill is (task type, custom type); `None`
    /// for a card skill of an agent Parley calls.
    pub polled: Option<(String, Option<String>)>,
    /// Full-text rank of the skill's text for the message's words, in [0, 1).
    pub text_rank: f64,
    /// The agent's trust percentile (50 without a record).
    pub trust: i32,
}

/// Every live, active agent's skills but `requester`'s own (at most 500), ranked for `query`
/// (a `to_tsquery` text; empty ranks nothing): the card skills of agents Parley calls, and the
/// enabled capabilities taking delegations of agents that poll (a capability is a skill: its id
/// the custom type, else the task type; its text the id, description and tags).
pub async fn candidates(conn: &mut PgConnection, requester: Uuid, query: &str) -> sqlx::Result<Vec<Candidate>> {
    let rows = sqlx::query!(
        r#"WITH q AS (SELECT CASE WHEN $2 = '' THEN NULL ELSE to_tsquery('english', $2) END AS q),
           offered AS (
               SELECT s.agent_id, s.skill_id, s.name, s.search, NULL::text AS task_type, NULL::text AS custom_type
                 FROM agent_skills s
                WHERE EXISTS (SELECT 1 FROM agent_cards c WHERE c.agent_id = s.agent_id)
               UNION ALL
               SELECT c.agent_id, coalesce(c.custom_type, c.task_type), coalesce(c.custom_type, c.task_type),
                      setweight(to_tsvector('english', coalesce(c.custom_type, c.task_type)), 'A')
                      || setweight(to_tsvector('english', coalesce((SELECT string_agg(t, ' ')
                                                                   FROM jsonb_array_elements_text(c.tags) t), '')), 'A')
                      || setweight(to_tsvector('english', coalesce(c.description, '')), 'B'),
                      c.task_type, c.custom_type
                 FROM capabilities c
                WHERE c.enabled AND c.accept_delegations
                  AND NOT EXISTS (SELECT 1 FROM agent_cards k WHERE k.agent_id = c.agent_id)
           )
           SELECT o.agent_id AS "agent_id!", o.skill_id AS "skill_id!", o.name AS "name!",
                  o.task_type, o.custom_type,
                  (SELECT i.anonymous_id FROM anonymous_ids i WHERE i.agent_id = o.agent_id AND i.current) AS anonymous_id,
                  coalesce(ts_rank(o.search, q.q, 32), 0)::float8 AS "text_rank!",
                  coalesce(tp.percentile, 50) AS "trust!"
             FROM offered o
             CROSS JOIN q
             JOIN agents a ON a.agent_id = o.agent_id AND a.deleted_at IS NULL AND a.status = 'active'
             LEFT JOIN trust_percentiles tp ON tp.agent_id = o.agent_id
            WHERE o.agent_id <> $1
            ORDER BY o.agent_id, o.skill_id
            LIMIT 500"#,
        requester,
        query
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Candidate {
            agent_id: r.agent_id,
            anonymous_id: r.anonymous_id,
            skill_id: r.skill_id,
            name: r.name,
            polled: r.task_type.map(|t| (t, r.custom_type)),
            text_rank: r.text_rank,
            trust: r.trust,
        })
        .collect())
}

/// The agent whose current (or not yet expired) anonymous id is `anonymous_id`.
pub async fn agent_of_anonymous(conn: &mut PgConnection, anonymous_id: Uuid) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!(
        "SELECT agent_id FROM anonymous_ids WHERE anonymous_id = $1 AND (current OR expires_at > now())",
        anonymous_id
    )
    .fetch_optional(conn)
    .await
}

/// A routed task (or context) of a requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The target's task id (or the message id of a Message answer).
    pub task_id: String,
    /// The context.
    pub context_id: Option<String>,
    /// The target agent.
    pub target_agent_id: Uuid,
    /// The skill the first message went to.
    pub skill_id: String,
}

/// Remembers that `requester`'s task `route.task_id` lives at `route.target_agent_id`.
pub async fn remember(conn: &mut PgConnection, requester: Uuid, route: &Route) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO a2a_routes (requester_agent_id, task_id, context_id, target_agent_id, skill_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (requester_agent_id, task_id) DO NOTHING",
        requester,
        route.task_id,
        route.context_id,
        route.target_agent_id,
        route.skill_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// `requester`'s routed task `task_id`, if it routed one.
pub async fn route_of_task(conn: &mut PgConnection, requester: Uuid, task_id: &str) -> sqlx::Result<Option<Route>> {
    sqlx::query_as!(
        Route,
        "SELECT task_id, context_id, target_agent_id, skill_id FROM a2a_routes
          WHERE requester_agent_id = $1 AND task_id = $2",
        requester,
        task_id
    )
    .fetch_optional(conn)
    .await
}

/// The latest of `requester`'s routed tasks in context `context_id`, if any.
pub async fn route_of_context(
    conn: &mut PgConnection,
    requester: Uuid,
    context_id: &str,
) -> sqlx::Result<Option<Route>> {
    sqlx::query_as!(
        Route,
        "SELECT task_id, context_id, target_agent_id, skill_id FROM a2a_routes
          WHERE requester_agent_id = $1 AND context_id = $2
          ORDER BY created_at DESC LIMIT 1",
        requester,
        context_id
    )
    .fetch_optional(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cards_skills_are_read_bounded_with_the_cards_modes_by_default() {
        let card = json!({
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "translate", "name": "Translate", "description": "Translates text", "tags": ["language"],
                 "examples": ["translate hello to French"], "inputModes": ["text/plain", "application/json"]},
                {"id": "translate", "name": "again"},
                {"id": "", "name": "no id"},
                {"name": "no id at all"},
                {"id": "x".repeat(500)},
            ]
        });
        let skills = of_card(&card);
        assert_eq!(skills.len(), 2);
        assert_eq!(skills[0].input_modes, ["text/plain", "application/json"]);
        assert_eq!(skills[0].output_modes, ["text/plain"]);
        assert_eq!(skills[1].id.len(), MAX_ID);
        assert_eq!(skills[1].name, skills[1].id, "a skill without a name is named by its id");
        assert!(of_card(&json!({"skills": "none"})).is_empty());
    }
}
