//! The model a system turn may be decided by: its client, its time limit and the permits that
//! bound its calls in this process. The engine holds one when `PARLEY_NEGOTIATOR_MODEL_URL` is
//! set; how it is asked and guarded is [`super::model_turns`].

use std::time::Duration;

use tokio::sync::Semaphore;

use crate::{config::NegotiatorModelConfig, llm::ChatModel};

/// The model, its time limit and the permits that bound its calls.
pub struct ModelNegotiator {
    pub(crate) chat: ChatModel,
    pub(crate) timeout: Duration,
    pub(crate) permits: Semaphore,
}

impl ModelNegotiator {
    /// The model the configuration names.
    pub fn new(cfg: &NegotiatorModelConfig) -> anyhow::Result<ModelNegotiator> {
        Ok(ModelNegotiator {
            chat: ChatModel::new(
                &cfg.url,
                &cfg.model,
                cfg.api_key.as_ref().map(|k| secrecy::ExposeSecret::expose_secret(k).to_owned()),
                cfg.max_answer,
            )?,
            timeout: cfg.timeout,
            permits: Semaphore::new(cfg.concurrency.max(1) as usize),
        })
    }
}
