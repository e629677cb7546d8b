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
    assert_eq!(functions(pool.clone()).await, parley::db::definitions::DEFINITIONS.len() as i64);
    parley::db::MIGRATOR.undo(&pool, 0).await.expect("running every migration down");
    assert_eq!(tables(pool.clone()).await, 0, "down migrations leave no table behind");
    assert_eq!(functions(pool.clone()).await, 0, "nor any SQL function");
    parley::db::migrate(&pool).await.expect("and up again");
    assert!(tables(pool.clone()).await >= 10);
    assert_eq!(functions(pool.clone()).await, parley::db::definitions::DEFINITIONS.len() as i64);
}
