//! When a failed delivery is tried again, when it is given up, and when its endpoint is.
//!
//! Pure rules, the clock and the randomness handed in:
//! - the n-th retry waits about `PARLEY_WEBHOOK_RETRY_FIRST` x 2^(n-1), at most [`MAX_DELAY`],
//!   with jitter (between half and all of it), so that the deliveries that failed together do not
//!   come back together; a `Retry-After` the receiver answered (seconds or an HTTP date) is
//!   waited at least, up to [`MAX_RETRY_AFTER`];
//! - an attempt that would fall after `PARLEY_WEBHOOK_RETRY_FOR` from the delivery's queueing
//!   is not made: the delivery is given up;
//! - a target whose attempts have all failed for `PARLEY_WEBHOOK_DISABLE_AFTER` is disabled, and
//!   one that answered 410 Gone at once.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::WebhookConfig;

/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(6 * 3600);
/// The longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The wait before the retry after failed attempt `attempt` (1 for the first), `jitter` in
/// `[0, 1)`: between half and all of `first` x 2^(attempt-1), at most [`MAX_DELAY`].
pub fn backoff(first: Duration, attempt: i32, jitter: f64) -> Duration {
    let doublings = u32::try_from(attempt.saturating_sub(1)).unwrap_or(0).min(30);
    let full = first.saturating_mul(1u32 << doublings.min(20)).min(MAX_DELAY);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// A `Retry-After` header's wait from `now`: whole seconds, or an HTTP date; at most
/// [`MAX_RETRY_AFTER`]. `None` when it is neither.
pub fn retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = DateTime::parse_from_rfc2822(value).ok()?.with_timezone(&Utc);
            (at - now).to_std().unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// When the delivery queued at `queued_at`, whose attempt `attempt` just failed at `now`, is
/// tried again; `None` when that would be after its retry window: it is given up.
pub fn next_attempt(
    cfg: &WebhookConfig,
    now: DateTime<Utc>,
    queued_at: DateTime<Utc>,
    attempt: i32,
    retry_after: Option<Duration>,
    jitter: f64,
) -> Option<DateTime<Utc>> {
    let wait = backoff(cfg.retry_first, attempt, jitter).max(retry_after.unwrap_or(Duration::ZERO));
    let next = now + chrono::Duration::from_std(wait).ok()?;
    let window_end = queued_at + chrono::Duration::from_std(cfg.retry_for).ok()?;
    (next <= window_end).then_some(next)
}

/// Why a target that has been failing since `failing_since` is disabled at `now`, if it is.
pub fn disable_reason(cfg: &WebhookConfig, now: DateTime<Utc>, failing_since: DateTime<Utc>) -> Option<String> {
    let after = chrono::Duration::from_std(cfg.disable_after).ok()?;
    (now - failing_since >= after).then(|| {
        format!(
            "every delivery failed for {} (since {})",
            crate::config::format_duration(cfg.disable_after),
            failing_since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    })
}

/// Why a target that answered 410 is disabled.
pub const GONE: &str = "the endpoint answered 410 Gone";

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> WebhookConfig {
        WebhookConfig::default()
    }

    #[test]
    fn retries_double_with_jitter_and_stop_growing_at_six_hours() {
        let first = Duration::from_secs(5);
        assert_eq!(backoff(first, 1, 0.999_999).as_secs(), 4); // just under 5 s
        assert_eq!(backoff(first, 1, 0.0), Duration::from_millis(2500));
        assert_eq!(backoff(first, 2, 0.0), Duration::from_secs(5));
        assert_eq!(backoff(first, 4, 0.0), Duration::from_secs(20));
        assert_eq!(backoff(first, 40, 0.0), MAX_DELAY / 2);
        assert_eq!(backoff(first, 40, 1.0), MAX_DELAY);
        let spread: std::collections::BTreeSet<u128> =
            [0.0, 0.25, 0.5, 0.75].iter().map(|j| backoff(first, 3, *j).as_millis()).collect();
        assert_eq!(spread.len(), 4, "jitter spreads deliveries that failed together");
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_a_date_and_bounded() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after("Thu, 01 Jan 2026 00:01:30 GMT", now), Some(Duration::from_secs(90)));
        assert_eq!(retry_after("Wed, 31 Dec 2025 00:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(retry_after("999999999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }

    #[test]
    fn a_delivery_is_retried_for_three_days_then_given_up() {
        let queued = Utc::now();
        let c = cfg();
        // The attempts of a delivery that always fails, each at the latest time allowed.
        let (mut now, mut attempt, mut made) = (queued, 1, 1);
        while let Some(next) = next_attempt(&c, now, queued, attempt, None, 1.0) {
            assert!(next > now && next <= queued + chrono::Duration::days(3));
            now = next;
            attempt += 1;
            made += 1;
        }
        assert!((15..=25).contains(&made), "{made} attempts in three days");
        assert!(now > queued + chrono::Duration::days(2), "the last attempt is near the window's end");
    }

    #[test]
    fn retry_after_is_waited_at_least() {
        let now = Utc::now();
        let next = next_attempt(&cfg(), now, now, 1, Some(Duration::from_secs(600)), 0.0).unwrap();
        assert_eq!(next - now, chrono::Duration::seconds(600));
        let short = WebhookConfig { retry_for: Duration::from_secs(60), ..cfg() };
        assert_eq!(next_attempt(&short, now, now, 1, Some(Duration::from_secs(600)), 0.0), None);
    }

    #[test]
    fn five_days_of_failures_disable() {
        let now = Utc::now();
        assert_eq!(disable_reason(&cfg(), now, now - chrono::Duration::days(4)), None);
        let reason = disable_reason(&cfg(), now, now - chrono::Duration::days(5)).unwrap();
        assert!(reason.starts_with("every delivery failed for 5d"), "{reason}");
    }
}
