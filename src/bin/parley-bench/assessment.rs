//! The assessment phase (`assess`): the Bindu calculator's self-assessment of a 10-skill agent
//! in process (alone, then with request parsing and answer JSON), and `/agent/negotiation` over
//! HTTP against the same server stack answering a fixed body, so that the HTTP figure is read
//! against what the stack itself costs.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};
use std::time::Instant;

use parley::assessment as scoring;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    Plan,
    harness::{Bench, send_expecting},
    report::{Results, note},
    timing::{HTTP_CONCURRENCY, Window, join_all, spawn_all},
};

/// The task the 10-skill agent assesses: it matches the pdf and finance skills.
fn assess_request() -> Value {
    json!({
        "task_summary": "Extract the tables from these PDF invoices and reconcile the payments ledger",
        "task_details": "Monthly invoices from three suppliers; the output feeds our fintech reconciliation report",
        "input_mime_types": ["application/pdf", "text/plain"],
        "output_mime_types": ["application/json"],
        "max_latency_ms": 5000,
        "min_score": 0.1
    })
}

/// POSTs `body` to `url` in `HTTP_CONCURRENCY` loops for `secs`; returns requests per second.
async fn http_rate(client: &reqwest::Client, url: String, body: Vec<u8>, secs: u64) -> anyhow::Result<f64> {
    let counter = Arc::new(AtomicU64::new(0));
    let window = Window::after_warmup(secs);
    let loops = (0..HTTP_CONCURRENCY).map(|_| {
        let (client, url, body, counter) = (client.clone(), url.clone(), body.clone(), counter.clone());
        let what = format!("POST {url}");
        async move {
            while window.open() {
                let req = client.post(&url).header("content-type", "application/json").body(body.clone());
                send_expecting(req, StatusCode::OK, &what).await?;
                if window.contains(Instant::now()) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }
    });
    join_all(spawn_all(loops)).await?;
    Ok(counter.load(Ordering::Relaxed) as f64 / secs as f64)
}

/// Calls of `f` a second on this thread over `secs` seconds, in batches of `batch`.
fn rate_in_process(secs: f64, batch: u64, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let (mut n, start) = (0u64, Instant::now());
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..batch {
            f()?;
        }
        n += batch;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Assessments in process and over HTTP, and the empty-handler HTTP baseline.
pub async fn assess(bench: &Arc<Bench>, plan: &Plan, r: &mut Results) -> anyhow::Result<()> {
    let skills = parley::hub_skills(&bench.state.config().clone())?;
    let calculator = scoring::Calculator::new(&skills, None);
    r.set("assess_skills", calculator.skill_count());
    let body = serde_json::to_vec(&assess_request())?;
    let parse = |body: &[u8]| scoring::parse_request(body).map_err(|e| anyhow::anyhow!("{e}"));
    let request = parse(&body)?;
    let first = calculator.assess(&request, Some(3), None);
    anyhow::ensure!(first.accepted, "the benchmark assessment should be accepted");

    note("assessments in process (one thread)");
    let secs = plan.assess_inprocess_secs as f64;
    let assessed = rate_in_process(secs, 256, || {
        std::hint::black_box(calculator.assess(std::hint::black_box(&request), Some(3), None));
        Ok(())
    })?;
    r.set_rounded("assess_per_s_inprocess", assessed, 0);
    let answered = rate_in_process(secs, 64, || {
        let req = parse(std::hint::black_box(&body))?;
        std::hint::black_box(scoring::assessment_json(&calculator.assess(&req, Some(3), None)));
        Ok(())
    })?;
    r.set_rounded("assess_with_parse_and_json_per_s_inprocess", answered, 0);

    // The baseline: the same router stack (body limit, trace layer) and the same `axum::serve`,
    // with one route answering a fixed body, in the same process and runtime.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let fixed = scoring::assessment_json(&first);
    let answer_fixed = move || {
        let fixed = fixed.clone();
        async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], fixed) }
    };
    let router = axum::Router::new()
        .route("/empty", axum::routing::post(answer_fixed))
        .layer(axum::extract::DefaultBodyLimit::max(parley::BODY_LIMIT))
        .layer(tower_http::trace::TraceLayer::new_for_http());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let baseline = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    note(format!("empty-handler HTTP baseline: {} s", plan.http_secs));
    let empty = format!("http://127.0.0.1:{port}/empty");
    let base = http_rate(&bench.client, empty, body.clone(), plan.http_secs).await?;
    let _ = stop_tx.send(());
    let _ = baseline.await;
    note(format!("assessments over HTTP: {} s", plan.http_secs));
    let http = http_rate(&bench.client, format!("{}/agent/negotiation", bench.base), body, plan.http_secs).await?;
    r.set_rounded("http_baseline_per_s", base, 1);
    r.set_rounded("assess_per_s_http", http, 1);
    r.set_rounded("assess_http_ratio", http / base, 3);
    Ok(())
}
