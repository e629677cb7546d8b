//! The schema's migrations run down as well as up.

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
    parley::db::MIGRATOR.undo(&pool, 0).await.expect("running every migration down");
    assert_eq!(tables(pool.clone()).await, 0, "down migrations leave no table behind");
    parley::db::MIGRATOR.run(&pool).await.expect("and up again");
    assert!(tables(pool.clone()).await >= 10);
}
