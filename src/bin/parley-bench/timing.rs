//! The measurement windows and concurrent loops the timed phases share: a [`WARMUP`] that is not
//! counted, then a window of a fixed number of seconds that is, filled by tasks spawned on the
//! runtime's threads (so that the clients run in parallel, as separate clients would) or by a
//! bounded number of futures on one task (for setup work such as registrations).

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::task::JoinSet;

/// The start of every timed window that is not counted.
pub const WARMUP: Duration = Duration::from_secs(1);
/// Concurrent clients of the HTTP rate phases (system-vs-system creates, assessments).
pub const HTTP_CONCURRENCY: usize = 32;

/// The counted part of a timed phase: from the end of its warm-up to its deadline.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: Instant,
    pub to: Instant,
}

impl Window {
    /// `secs` seconds counted after a [`WARMUP`] that starts now.
    pub fn after_warmup(secs: u64) -> Window {
        let from = Instant::now() + WARMUP;
        Window { from, to: from + Duration::from_secs(secs) }
    }

    /// Whether the deadline is still ahead: loops start new work only while it is.
    pub fn open(&self) -> bool {
        Instant::now() < self.to
    }

    /// Whether a piece of work that ended at `t` counts.
    pub fn contains(&self, t: Instant) -> bool {
        t >= self.from && t <= self.to
    }

    /// Whether a piece of work that started at `t` (before the deadline) counts.
    pub fn started_in(&self, t: Instant) -> bool {
        t >= self.from
    }

    /// Seconds from the window's start to now.
    pub fn elapsed_secs(&self) -> f64 {
        Instant::now().saturating_duration_since(self.from).as_secs_f64()
    }
}

/// Spawns each of `tasks` on the runtime.
pub fn spawn_all<T, Fut>(tasks: impl IntoIterator<Item = Fut>) -> JoinSet<anyhow::Result<T>>
where
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut set = JoinSet::new();
    for task in tasks {
        set.spawn(task);
    }
    set
}

/// Waits for every task of `set` and returns their results in the order they ended; the first
/// failure is returned at once (dropping the set aborts the tasks still running).
pub async fn join_all<T: 'static>(mut set: JoinSet<anyhow::Result<T>>) -> anyhow::Result<Vec<T>> {
    let mut all = Vec::with_capacity(set.len());
    while let Some(res) = set.join_next().await {
        all.push(res??);
    }
    Ok(all)
}

/// Runs `f(i)` for i in 0..n with at most `concurrency` at once, on the calling task.
pub async fn for_each_concurrent<F, Fut, T>(n: usize, concurrency: usize, f: F) -> anyhow::Result<Vec<T>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    use futures::StreamExt;
    let f = Arc::new(f);
    let results: Vec<anyhow::Result<T>> =
        futures::stream::iter(0..n).map(|i| (f.clone())(i)).buffer_unordered(concurrency).collect().await;
    results.into_iter().collect()
}
