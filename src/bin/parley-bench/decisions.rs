//! The decisions phase (`--only decisions`, never in a default run): what one decision of the
//! system negotiator's rules costs on people it has never seen, read from the service's own
//! `parley_negotiator_decision_seconds` histogram.
//!
//! The people are those of the labelled scenario sets in `tests/api/` (175 pairs in trades, care,
//! academia, farming, law, the arts and start-ups). Each pair is played as a system-vs-system
//! negotiation, one at a time so that no decision waits for a core: a first pass meets every
//! person and word for the first time in this process (the lexicon's per-word caches are cold
//! for them), a second pass plays the same pairs again under new ids (warm). The figures are the
//! histogram's differences over each pass: the mean from its sum and count, and the share of
//! decisions within a bucket's bound.

use serde_json::{Value, json};

use crate::{
    harness::Bench,
    report::{Results, note},
};

/// The labelled scenario sets whose people are played.
const SETS: [&str; 2] =
    [include_str!("../../../tests/api/judgment_fields.json"), include_str!("../../../tests/api/judgment_cases.json")];

/// The histogram's series.
const SERIES: &str = "parley_negotiator_decision_seconds";

/// The histogram as `/metrics` shows it: `(le, cumulative count)` per bucket, sum and count.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Histogram {
    /// The histogram's lines of a Prometheus text exposition.
    fn parse(text: &str) -> Histogram {
        let mut h = Histogram::default();
        for line in text.lines().filter(|l| l.starts_with(SERIES)) {
            let Some((name, value)) = line.rsplit_once(' ') else { continue };
            let Ok(value) = value.parse::<f64>() else { continue };
            if let Some(le) = name.strip_prefix(&format!("{SERIES}_bucket{{le=\"")) {
                let le = le.trim_end_matches("\"}");
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::INFINITY) };
                h.buckets.push((le, value));
            } else if name == format!("{SERIES}_sum") {
                h.sum = value;
            } else if name == format!("{SERIES}_count") {
                h.count = value;
            }
        }
        h
    }

    /// What was recorded after `before`.
    fn since(&self, before: &Histogram) -> Histogram {
        let earlier = |le: f64| before.buckets.iter().find(|(b, _)| *b == le).map_or(0.0, |(_, n)| *n);
        Histogram {
            buckets: self.buckets.iter().map(|(le, n)| (*le, n - earlier(*le))).collect(),
            sum: self.sum - before.sum,
            count: self.count - before.count,
        }
    }

    /// The share of decisions that took at most `bound` seconds (a bucket's bound).
    fn within(&self, bound: f64) -> f64 {
        let n = self.buckets.iter().find(|(le, _)| (*le - bound).abs() < 1e-12).map_or(0.0, |(_, n)| *n);
        if self.count > 0.0 { n / self.count } else { 0.0 }
    }

    /// The least bucket bound at or under which `q` of the decisions fall (an upper bound of
    /// the quantile).
    fn quantile_bound(&self, q: f64) -> f64 {
        let need = q * self.count;
        self.buckets.iter().find(|(_, n)| *n >= need).map_or(f64::INFINITY, |(le, _)| *le)
    }
}

/// The pairs of people of every scenario, as create bodies whose user ids carry `pass`.
fn pairs(pass: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for set in SETS {
        let set: Value = serde_json::from_str(set)?;
        for sc in set["scenarios"].as_array().into_iter().flatten() {
            let id = sc["id"].as_str().unwrap_or("scenario");
            let user = |side: &str| {
                let mut u = sc[side].clone();
                u["id"] = json!(format!("bench-{pass}-{id}.{}", u["id"].as_str().unwrap_or(side)));
                u
            };
            let mut body = json!({"sourceUser": user("sourceUser"), "candidateUser": user("candidateUser"), "seedAssessment": sc["seedAssessment"]});
            for field in ["indexContext", "discoveryQuery"] {
                if !sc[field].is_null() {
                    body[field] = sc[field].clone();
                }
            }
            out.push(body);
        }
    }
    Ok(out)
}

async fn histogram(bench: &Bench) -> anyhow::Result<Histogram> {
    let text = bench.client.get(format!("{}/metrics", bench.base)).bearer_auth(&bench.service).send().await?;
    anyhow::ensure!(text.status().is_success(), "/metrics answered {}", text.status());
    let h = Histogram::parse(&text.text().await?);
    anyhow::ensure!(!h.buckets.is_empty(), "/metrics has no {SERIES}");
    Ok(h)
}

/// Plays every pair twice (first sight, then warm) and records each pass's decision costs.
pub async fn decisions(bench: &Bench, r: &mut Results) -> anyhow::Result<()> {
    for pass in ["first_sight", "warm"] {
        let bodies = pairs(pass)?;
        note(format!("decisions ({pass}): {} system-vs-system negotiations, one at a time", bodies.len()));
        let before = histogram(bench).await?;
        for body in &bodies {
            let created = bench.create(body).await?;
            anyhow::ensure!(
                created["negotiation"]["status"] == "completed",
                "a system-vs-system negotiation did not end"
            );
        }
        let h = histogram(bench).await?.since(&before);
        r.set(format!("decisions_{pass}"), h.count);
        r.set_rounded(format!("decision_{pass}_mean_us"), 1e6 * h.sum / h.count.max(1.0), 0);
        r.set_rounded(format!("decision_{pass}_p99_bound_ms"), 1e3 * h.quantile_bound(0.99), 2);
        r.set_rounded(format!("decision_{pass}_within_1ms"), h.within(0.001), 3);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_read_from_the_exposition_and_differenced() {
        let text = |n: [u32; 3], sum: f64| {
            format!(
                "# TYPE {SERIES} histogram\n{SERIES}_bucket{{le=\"0.0005\"}} {}\n{SERIES}_bucket{{le=\"0.001\"}} {}\n\
                 {SERIES}_bucket{{le=\"+Inf\"}} {}\n{SERIES}_sum {sum}\n{SERIES}_count {}\nother_series 7\n",
                n[0], n[1], n[2], n[2]
            )
        };
        let before = Histogram::parse(&text([1, 1, 2], 0.004));
        let after = Histogram::parse(&text([5, 9, 12], 0.014));
        let h = after.since(&before);
        assert_eq!(h.count, 10.0);
        assert!((h.sum - 0.010).abs() < 1e-9);
        assert!((h.within(0.001) - 0.8).abs() < 1e-9);
        assert_eq!(h.quantile_bound(0.4), 0.0005);
        assert_eq!(h.quantile_bound(0.5), 0.001);
        assert_eq!(h.quantile_bound(0.99), f64::INFINITY);
    }
}
