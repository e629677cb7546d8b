//! The optional embeddings provider for `/agent/negotiation`: an OpenAI-compatible
//! `POST {url}/embeddings`, turned into one cosine per skill for the scoring calculator.
//!
//! Skill texts are embedded once (name, description, tags, assessment keywords and capability
//! keys, like Bindu's skill embedder); task texts are cached in an LRU of 1 000 entries. The
//! provider is a nicety, never a dependency: if it fails, one warning is logged and the request
//! is scored keyword-only, exactly as without a provider. An answer is read within
//! `PARLEY_EMBEDDINGS_ANSWER_MIB` ([`crate::bounded_body`]): a larger one is such a failure,
//! never read whole.

use std::{
    num::NonZeroUsize,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use lru::LruCache;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::OnceCell;

use crate::{bounded_body, config::EmbeddingsConfig, scoring::Skill};

/// Task embeddings kept.
pub const CACHE_SIZE: usize = 1000;

/// The provider client with its caches.
pub struct Embeddings {
    config: EmbeddingsConfig,
    http: reqwest::Client,
    skill_texts: Vec<String>,
    skill_vectors: OnceCell<Vec<Vec<f64>>>,
    tasks: Mutex<LruCache<String, Vec<f64>>>,
    warned: AtomicBool,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f64>,
    #[serde(default)]
    index: Option<usize>,
}

/// The text a skill is embedded as.
pub fn skill_text(skill: &Skill) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(skill.name.clone());
    parts.extend(skill.description.clone());
    if !skill.tags.is_empty() {
        parts.push(skill.tags.join(", "));
    }
    if let Some(a) = &skill.assessment
        && !a.keywords.is_empty()
    {
        parts.push(a.keywords.join(", "));
    }
    if !skill.capabilities_detail.is_empty() {
        parts.push(skill.capabilities_detail.keys().cloned().collect::<Vec<_>>().join(", "));
    }
    parts.join("\n")
}

/// Cosine similarity; 0 for empty or zero vectors or mismatched lengths.
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

impl Embeddings {
    /// A client for the hub's `skills`.
    pub fn new(config: EmbeddingsConfig, skills: &[Skill]) -> Embeddings {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Embeddings {
            config,
            http,
            skill_texts: skills.iter().map(skill_text).collect(),
            skill_vectors: OnceCell::new(),
            tasks: Mutex::new(LruCache::new(NonZeroUsize::new(CACHE_SIZE).unwrap_or(NonZeroUsize::MIN))),
            warned: AtomicBool::new(false),
        }
    }

    async fn embed(&self, inputs: &[String]) -> anyhow::Result<Vec<Vec<f64>>> {
        let mut req = self
            .http
            .post(format!("{}/embeddings", self.config.url))
            .json(&json!({ "model": self.config.model, "input": inputs }));
        if let Some(key) = &self.config.api_key {
            req = req.bearer_auth(secrecy::ExposeSecret::expose_secret(key));
        }
        let resp = req.send().await?.error_for_status()?;
        let mut body: EmbeddingsResponse =
            serde_json::from_slice(&bounded_body::read(resp, self.config.max_answer).await?)?;
        anyhow::ensure!(
            body.data.len() == inputs.len(),
            "expected {} embeddings, got {}",
            inputs.len(),
            body.data.len()
        );
        body.data.sort_by_key(|d| d.index.unwrap_or(0));
        Ok(body.data.into_iter().map(|d| d.embedding).collect())
    }

    /// The cosine of each skill against the task, or `None` (keyword-only) if the provider fails.
    pub async fn cosines(&self, summary: &str, details: Option<&str>) -> Option<Vec<f64>> {
        match self.try_cosines(summary, details).await {
            Ok(c) => Some(c),
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    let error = crate::quote::logged(&format!("{e:#}"));
                    tracing::warn!(%error, "the embeddings provider failed; scoring keyword-only");
                }
                None
            }
        }
    }

    async fn try_cosines(&self, summary: &str, details: Option<&str>) -> anyhow::Result<Vec<f64>> {
        let skills = self.skill_vectors.get_or_try_init(|| self.embed(&self.skill_texts)).await?;
        let text = match details.filter(|d| !d.is_empty()) {
            Some(d) => format!("{summary} {d}"),
            None => summary.to_owned(),
        };
        let cached = self.tasks.lock().unwrap_or_else(|e| e.into_inner()).get(&text).cloned();
        let task = match cached {
            Some(v) => v,
            None => {
                let v = self.embed(std::slice::from_ref(&text)).await?.remove(0);
                self.tasks.lock().unwrap_or_else(|e| e.into_inner()).put(text, v.clone());
                v
            }
        };
        Ok(skills.iter().map(|s| cosine(&task, s)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_known_vectors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[1.0, 0.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn a_skill_text_names_what_the_skill_is_about() {
        let t = skill_text(&crate::scoring::default_skill());
        assert!(t.contains("Bilateral Match Negotiation"));
        assert!(t.contains("negotiation"));
    }
}
