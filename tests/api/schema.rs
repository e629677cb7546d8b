//! The schema's migrations run down as well as up, and the SQL functions with them.

use sqlx::PgPool;

#[tokio::test]
async fn every_migration_is_reversible() {
    let url = crate::helpers::fresh_database().await;
    let pool = PgPool::connect(&url).await.unwrap();
    let tables = |pool: PgPool| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert!(tables(pool.clone()).await >= 10);
    let functions = |pool: PgPool| async move {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pg_proc WHERE proname LIKE 'parley\\_%'")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(functions(pool.clone()).await, parley::database::definitions::DEFINITIONS.len() as i64);
    parley::database::MIGRATOR.undo(&pool, 0).await.expect("running every migration down");
    assert_eq!(tables(pool.clone()).await, 0, "down migrations leave no table behind");
    assert_eq!(functions(pool.clone()).await, 0, "nor any SQL function");
    parley::database::migrate(&pool).await.expect("and up again");
    assert!(tables(pool.clone()).await >= 10);
    assert_eq!(functions(pool.clone()).await, parley::database::definitions::DEFINITIONS.len() as i64);
}

/// Every foreign key that deletes or nulls rows when what it points at is deleted leads an index,
/// so that the delete finds those rows without reading their whole table.
#[tokio::test]
async fn every_deleting_foreign_key_has_an_index() {
    let url = crate::helpers::fresh_database().await;
    let pool = PgPool::connect(&url).await.unwrap();
    let unindexed: Vec<String> = sqlx::query_scalar(
        "SELECT c.conrelid::regclass::text || '.' || a.attname
           FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
          WHERE c.contype = 'f' AND c.confdeltype IN ('c', 'n', 'd')
            AND NOT EXISTS (SELECT 1 FROM pg_index i
                             WHERE i.indrelid = c.conrelid
                               AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] = c.conkey)
          ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(unindexed, Vec::<String>::new());
    let keys: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confdeltype IN ('c', 'n')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(keys >= 18, "{keys}");
}

/// Deleting an agent's row by hand still nulls the records that name it (the turns it answered,
/// the claims it held) and deletes what is its own, with the indexes under those keys.
#[tokio::test]
async fn deleting_an_agents_row_nulls_its_turns_and_claims() {
    let app = crate::helpers::TestApp::spawn().await;
    let (agent, negotiation) = app.mixed_negotiation().await;
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.body["negotiationId"], negotiation.as_str());
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let answered = app.respond(&agent, &negotiation, &crate::helpers::answer("counter", Some(&token))).await;
    assert_eq!(answered.status, reqwest::StatusCode::OK, "{}", answered.text);
    // And it holds the claim of a turn (this one's next, or another negotiation's).
    app.start(&crate::fixtures::good_match()).await;
    assert_eq!(app.pickup(&agent, None).await.status, reqwest::StatusCode::OK);
    let id: uuid::Uuid = agent.id.parse().unwrap();
    let named = |sql: &'static str| {
        let pool = app.pool.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).bind(id).fetch_one(&pool).await.unwrap() }
    };
    assert_eq!(named("SELECT count(*) FROM messages WHERE agent_id = $1").await, 1);
    assert_eq!(named("SELECT count(*) FROM tasks WHERE claim_agent_id = $1").await, 1);
    sqlx::query("DELETE FROM agents WHERE agent_id = $1").bind(id).execute(&app.pool).await.unwrap();
    assert_eq!(named("SELECT count(*) FROM messages WHERE agent_id = $1").await, 0);
    assert_eq!(named("SELECT count(*) FROM tasks WHERE claim_agent_id = $1").await, 0);
    assert_eq!(named("SELECT count(*) FROM api_keys WHERE agent_id = $1").await, 0);
    assert_eq!(app.counted("SELECT count(*) FROM messages WHERE played_by = 'personal' AND agent_id IS NULL").await, 1);
}
