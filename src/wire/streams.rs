//! How many event streams are open: by token, by user and in all, each within its limit.
//!
//! An event stream lives as long as its token, and holds a connection (and a file descriptor)
//! all that time, so one token could otherwise open streams until the process runs out of
//! descriptors. A new stream takes a [`Slot`] first: one token may hold `PARLEY_SSE_PER_TOKEN`
//! streams, one user (the platform counts as one) `PARLEY_SSE_PER_USER`, and the process
//! `PARLEY_SSE_MAX`; past any of them the stream is refused `429 rate_limited`. The slot is
//! given back when the stream ends, however it ends. The number open is the
//! `parley_sse_streams` gauge. The A2A task streams are counted the same way, apart: the agent
//! in the token's place (`PARLEY_A2A_STREAMS_PER_AGENT`), its user
//! (`PARLEY_A2A_STREAMS_PER_USER`), and in all (`PARLEY_SSE_MAX`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use sha2::{Digest, Sha256};

/// The limits and what is open now.
#[derive(Debug)]
pub struct StreamLimits {
    per_token: u32,
    per_user: u32,
    max: u32,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    tokens: HashMap<[u8; 32], u32>,
    users: HashMap<String, u32>,
    all: u32,
}

/// Which limit a refused stream hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// This token's.
    Token(u32),
    /// This user's.
    User(u32),
    /// The process's.
    All(u32),
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::Token(n) => {
                write!(f, "this token holds {n} event streams open already (PARLEY_SSE_PER_TOKEN); close one first")
            }
            Full::User(n) => {
                write!(f, "this user holds {n} event streams open already (PARLEY_SSE_PER_USER); close one first")
            }
            Full::All(n) => write!(f, "the service holds {n} event streams open (PARLEY_SSE_MAX); retry later"),
        }
    }
}

/// An open stream's place in the counts, given back when dropped.
pub struct Slot {
    limits: Arc<StreamLimits>,
    token: [u8; 32],
    user: String,
    _counted: crate::metrics::Open,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("user", &self.user).finish_non_exhaustive()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.tokens.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                open.tokens.remove(&self.token);
            }
        }
        if let Some(n) = open.users.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                open.users.remove(&self.user);
            }
        }
        open.all -= 1;
    }
}

impl StreamLimits {
    /// Limits per token, per user and in all.
    pub fn new(per_token: u32, per_user: u32, max: u32) -> StreamLimits {
        StreamLimits { per_token, per_user, max, open: Mutex::default() }
    }

    /// A place for a new stream of `token` (the credential as sent) and `user`, or which limit
    /// is reached.
    pub fn open(self: &Arc<Self>, token: &str, user: &str) -> Result<Slot, Full> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.all >= self.max {
            return Err(Full::All(self.max));
        }
        if open.users.get(user).copied().unwrap_or(0) >= self.per_user {
            return Err(Full::User(self.per_user));
        }
        if open.tokens.get(&key).copied().unwrap_or(0) >= self.per_token {
            return Err(Full::Token(self.per_token));
        }
        *open.tokens.entry(key).or_default() += 1;
        *open.users.entry(user.to_owned()).or_default() += 1;
        open.all += 1;
        Ok(Slot {
            limits: self.clone(),
            token: key,
            user: user.to_owned(),
            _counted: crate::metrics::Open::sse_stream(),
        })
    }

    /// How many streams are open.
    pub fn open_now(&self) -> u32 {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_holds_and_slots_come_back() {
        let limits = Arc::new(StreamLimits::new(2, 3, 4));
        let a1 = limits.open("token-a", "user-1").unwrap();
        let _a2 = limits.open("token-a", "user-1").unwrap();
        assert_eq!(limits.open("token-a", "user-1").unwrap_err(), Full::Token(2));
        let _b1 = limits.open("token-b", "user-1").unwrap();
        assert_eq!(limits.open("token-c", "user-1").unwrap_err(), Full::User(3));
        let _c1 = limits.open("token-c", "user-2").unwrap();
        assert_eq!(limits.open("token-d", "user-3").unwrap_err(), Full::All(4));
        drop(a1);
        assert_eq!(limits.open_now(), 3);
        let _again = limits.open("token-a", "user-1").unwrap();
    }
}
