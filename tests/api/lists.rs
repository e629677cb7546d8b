//! A person's lists (their agent's negotiations, their opportunities, their events) read each
//! side of the person's history from its own index and merge the two: they answer the same rows,
//! in the same order, page after page, as the single query over both columns did, for a person
//! in most of the history as for one in three rows of it.

use reqwest::{Method, StatusCode};
use uuid::Uuid;

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp},
};

const HEAVY: &str = "user-heavy";
const LIGHT: &str = "user-light";

/// 140 more negotiations cloned from a real one: the heavy user in three of four (as source or
/// as candidate), the light user in three, every task state and opportunity status, turns parked
/// or claimed for either side.
async fn history(app: &TestApp) {
    app.start(&fixtures::good_match()).await;
    sqlx::query(
        r#"DO $$
        DECLARE
            t tasks;
            i integer;
            s text;
            c text;
            st text;
            waits text;
            o uuid;
            cv uuid;
        BEGIN
            SELECT * INTO t FROM tasks LIMIT 1;
            FOR i IN 1..140 LOOP
                IF i IN (17, 50, 90) THEN
                    s := CASE WHEN i = 50 THEN 'user-x' ELSE 'user-light' END;
                    c := CASE WHEN i = 50 THEN 'user-light' ELSE 'user-y' END;
                ELSIF i % 4 = 3 THEN
                    s := 'user-x'; c := 'user-y';
                ELSIF i % 2 = 0 THEN
                    s := 'user-heavy'; c := CASE WHEN i % 3 = 0 THEN 'user-x' ELSE 'user-y' END;
                ELSE
                    s := 'user-y'; c := 'user-heavy';
                END IF;
                st := (ARRAY['submitted', 'working', 'waiting_for_agent', 'claimed', 'completed', 'canceled', 'failed'])[1 + i % 7];
                waits := CASE WHEN st IN ('waiting_for_agent', 'claimed') THEN CASE WHEN i % 5 < 3 THEN s ELSE c END END;
                o := gen_random_uuid();
                cv := gen_random_uuid();
                INSERT INTO opportunities (opportunity_id, status, score, source_user_id, candidate_user_id, seed_assessment)
                VALUES (o, (ARRAY['negotiating', 'pending', 'accepted', 'rejected', 'stalled', 'expired'])[1 + i % 6], 70, s, c,
                        t.seed_assessment);
                INSERT INTO conversations (conversation_id, opportunity_id) VALUES (cv, o);
                INSERT INTO tasks (task_id, conversation_id, opportunity_id, state, source_user_id, candidate_user_id,
                                   source_kind, candidate_kind, source_context, candidate_context, seed_assessment,
                                   max_turns, awaiting_user_id, first_parked_at, claim_expires_at, completed_at)
                VALUES (gen_random_uuid(), cv, o, st, s, c, 'personal', 'system', t.source_context, t.candidate_context,
                        t.seed_assessment, 6, waits, CASE WHEN waits IS NOT NULL THEN now() END,
                        CASE WHEN st = 'claimed' THEN now() + interval '1 hour' END,
                        CASE WHEN st IN ('completed', 'canceled', 'failed') THEN now() END);
            END LOOP;
        END $$"#,
    )
    .execute(&app.pool)
    .await
    .unwrap();
}

/// Pages through `first_page` and the ones its cursors lead to, returning every id listed.
async fn page_through(
    app: &TestApp,
    fetch: impl Fn(Option<String>) -> (String, Option<TestAgent>),
    list: &str,
    id: &str,
) -> Vec<Uuid> {
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let (path, agent) = fetch(cursor.clone());
        let page = match agent {
            Some(agent) => app.agent_call(&agent, Method::GET, &path, None).await,
            None => app.get(&path, &app.service_token()).await,
        };
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        ids.extend(
            page.body[list].as_array().unwrap().iter().map(|n| n[id].as_str().unwrap().parse::<Uuid>().unwrap()),
        );
        match page.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn an_agents_negotiations_are_listed_as_the_single_query_did_page_after_page() {
    let app = TestApp::spawn().await;
    history(&app).await;
    for user in [HEAVY, LIGHT] {
        let agent = app.register_agent(user).await;
        for (status, states, awaiting) in [
            ("waiting_for_agent", &["waiting_for_agent", "claimed"][..], true),
            ("active", &["submitted", "working", "waiting_for_agent", "claimed"][..], false),
            ("completed", &["completed", "canceled", "failed"][..], false),
            (
                "all",
                &["submitted", "working", "waiting_for_agent", "claimed", "completed", "canceled", "failed"][..],
                false,
            ),
        ] {
            // What the one query over both columns answered.
            let before: Vec<Uuid> = sqlx::query_scalar(
                "SELECT task_id FROM tasks
                  WHERE (source_user_id = $1 OR candidate_user_id = $1) AND state = ANY($2)
                    AND (NOT $3 OR awaiting_user_id = $1)
                  ORDER BY task_id DESC",
            )
            .bind(user)
            .bind(states)
            .bind(awaiting)
            .fetch_all(&app.pool)
            .await
            .unwrap();
            let agent = agent.clone();
            let listed = page_through(
                &app,
                |cursor| {
                    let cursor = cursor.map(|c| format!("&cursor={c}")).unwrap_or_default();
                    (format!("/negotiations?status={status}&limit=7{cursor}"), Some(agent.clone()))
                },
                "negotiations",
                "negotiationId",
            )
            .await;
            assert_eq!(listed, before, "{user}, {status}");
            if user == HEAVY {
                assert!(before.len() > 7, "the heavy user's {status} list spans pages: {}", before.len());
            } else {
                assert!(before.len() <= 3, "{status}: {}", before.len());
            }
        }
    }
}

#[tokio::test]
async fn opportunities_are_listed_as_the_single_query_did_page_after_page() {
    let app = TestApp::spawn().await;
    history(&app).await;
    let statuses = [
        None,
        Some("negotiating"),
        Some("pending"),
        Some("accepted"),
        Some("rejected"),
        Some("stalled"),
        Some("expired"),
    ];
    for user in [None, Some(HEAVY), Some(LIGHT)] {
        for status in statuses {
            let before: Vec<Uuid> = sqlx::query_scalar(
                "SELECT opportunity_id FROM opportunities
                  WHERE ($1::text IS NULL OR source_user_id = $1 OR candidate_user_id = $1)
                    AND ($2::text IS NULL OR status = $2)
                  ORDER BY opportunity_id DESC",
            )
            .bind(user)
            .bind(status)
            .fetch_all(&app.pool)
            .await
            .unwrap();
            let listed = page_through(
                &app,
                |cursor| {
                    let mut query = vec!["limit=5".to_owned()];
                    query.extend(user.map(|u| format!("userId={u}")));
                    query.extend(status.map(|s| format!("status={s}")));
                    query.extend(cursor.map(|c| format!("cursor={c}")));
                    (format!("/api/opportunities?{}", query.join("&")), None)
                },
                "opportunities",
                "id",
            )
            .await;
            assert_eq!(listed, before, "{user:?}, {status:?}");
            assert!(!before.is_empty() || user == Some(LIGHT), "{user:?}, {status:?}");
        }
    }
}

#[tokio::test]
async fn a_persons_events_are_read_as_the_single_query_did() {
    let app = TestApp::spawn().await;
    sqlx::query(
        "INSERT INTO events (kind, source_user_id, candidate_user_id, data)
         SELECT 'negotiation.turn',
                CASE WHEN i % 3 = 0 THEN 'user-heavy' WHEN i = 40 THEN 'user-light' ELSE 'user-x' END,
                CASE WHEN i % 3 = 1 THEN 'user-heavy' WHEN i = 80 THEN 'user-light' ELSE 'user-y' END,
                jsonb_build_object('i', i)
           FROM generate_series(1, 200) i",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let mut conn = app.pool.acquire().await.unwrap();
    let since = chrono::Utc::now() - chrono::Duration::hours(1);
    for user in [None, Some(HEAVY), Some(LIGHT)] {
        let before: Vec<i64> = sqlx::query_scalar(
            "SELECT event_id FROM events WHERE ($1::text IS NULL OR source_user_id = $1 OR candidate_user_id = $1)
              ORDER BY event_id",
        )
        .bind(user)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let mut read = Vec::new();
        let mut after = 0;
        loop {
            let page = parley::events::after(&mut conn, after, user, since, 9).await.unwrap();
            let Some(last) = page.last() else { break };
            after = last.id;
            read.extend(page.iter().map(|e| e.id));
        }
        assert_eq!(read, before, "{user:?}");
    }
}
