//! Arithmetic on samples that every phase shares: the nearest-rank percentile of sorted samples,
//! rounding for the report, and durations as milliseconds, so that each figure is computed the
//! same way wherever it is taken.

use std::time::{Duration, Instant};

/// The nearest-rank `p`th percentile of `sorted` (ascending); NaN when there are no samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `x` rounded to `dp` decimal places.
pub fn round(x: f64, dp: i32) -> f64 {
    let m = 10f64.powi(dp);
    (x * m).round() / m
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Milliseconds since `t`.
pub fn ms_since(t: Instant) -> f64 {
    ms(t.elapsed())
}

/// Milliseconds from `earlier` to `later` of the wall clock, negative when `later` came first.
pub fn ms_between(earlier: std::time::SystemTime, later: std::time::SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(d) => ms(d),
        Err(e) => -ms(e.duration()),
    }
}

/// The mean of `values` (0 when there are none).
pub fn mean(values: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = values.len().max(1) as f64;
    values.sum::<f64>() / n
}
