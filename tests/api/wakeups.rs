//! Wake-ups and events after commit: what stands in for a NOTIFY that never came.
//!
//! A change is announced after its commit: this process's waiters at once, the other
//! processes' through one NOTIFY per batch, and the live stream reads the event log itself. A
//! NOTIFY lost between the commit and its sending (the process died in that millisecond) must
//! delay a waiter by at most `RECHECK` and lose no event.

use std::time::{Duration, Instant};

use parley::{Application, ConnectionLimits, wakeups::RECHECK};
use reqwest::StatusCode;
use serde_json::json;

use crate::{
    fixtures,
    helpers::{SseReader, TestApp, test_config},
};

/// A second Parley on the same database that serves HTTP but never sends its wake-ups to the
/// other processes (its sender is not running): every announcement it makes is, for the
/// others, a NOTIFY lost after the commit.
async fn silent_instance(database_url: &str) -> String {
    let config = test_config(database_url);
    let pool = parley::database::pool(database_url, 4).await.unwrap();
    let app = Application::build(config, pool).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let limits = ConnectionLimits { header: Duration::from_secs(10), idle: Duration::from_secs(60), max: 64 };
    tokio::spawn(parley::serve(listener, parley::router(app.state().clone()), limits, std::future::pending()));
    base
}

#[tokio::test]
async fn a_long_poll_whose_wake_up_was_lost_still_answers_within_the_recheck() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let silent = silent_instance(&app.database_url).await;

    // Tomas's agent waits on the running instance.
    let waiting = {
        let (client, url, key) = (
            app.client.clone(),
            format!("{}/api/agents/{}/negotiations/pickup?wait=5", app.base, tomas.id),
            tomas.key.clone(),
        );
        tokio::spawn(async move {
            let r = client.post(url).header("x-api-key", key).send().await.unwrap();
            (r.status(), Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The turn is parked through the silent instance: nothing tells the running one.
    let created = app
        .client
        .post(format!("{silent}/api/negotiations"))
        .bearer_auth(app.service_token())
        .json(&fixtures::good_match())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let parked = Instant::now();
    let (status, answered) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "the long-poll found the turn on its own");
    let took = answered.duration_since(parked);
    assert!(took <= RECHECK + Duration::from_millis(500), "found after {took:?}, recheck {RECHECK:?}");
}

#[tokio::test]
async fn events_nobody_announced_or_committed_out_of_id_order_still_reach_the_stream() {
    let app = TestApp::spawn().await;
    let mut stream = SseReader::open(&app.base, &app.user_token("user-maya"), None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let insert = "INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
                  VALUES ('opportunity.status', gen_random_uuid(), 'user-maya', 'user-tomas', $1) RETURNING event_id";
    // The first insert takes the lower id but commits last.
    let mut first = app.pool.begin().await.unwrap();
    let low: i64 = sqlx::query_scalar(insert).bind(json!({"n": 1})).fetch_one(&mut *first).await.unwrap();
    let high: i64 = sqlx::query_scalar(insert).bind(json!({"n": 2})).fetch_one(&app.pool).await.unwrap();
    assert!(low < high);
    let e = stream.next(Duration::from_secs(3)).await.expect("the committed event, without any announcement");
    assert_eq!(e.data["n"], 2, "{e:?}");
    // Long after the higher id was streamed, the lower one commits: it is streamed too.
    tokio::time::sleep(Duration::from_millis(600)).await;
    first.commit().await.unwrap();
    let e = stream.next(Duration::from_secs(3)).await.expect("the event committed out of id order");
    assert_eq!(e.data["n"], 1, "{e:?}");
    assert!(stream.next(Duration::from_millis(600)).await.is_none(), "each event once");
}
