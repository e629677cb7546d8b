//! The one service secret that tokens and handles are derived from, and the derivations.
//!
//! A claim token is derived, not stored: `ct_` + base64url(generation ‖ HMAC-SHA256(key,
//! id ‖ generation)). The turn engine makes one per claim of a task (the id is the task's, the
//! generation the claim's), the delegations one per accepted attempt (the delegation's id, the
//! attempt's number). Every claim gets a fresh unpredictable token, a retried call whose answer
//! was lost gets the very same token back, and the service can tell from the token alone which
//! claim it was made for ([`TokenKey::claim_proof`]).
//!
//! A capability is shown to other parties under a handle derived from its agent's anonymous id
//! ([`TokenKey::capability_handle`]), which changes with that id (see
//! `crate::directory::anonymity`).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

/// Bytes of a claim token after `ct_`: the generation, then the HMAC tag.
const TOKEN_BYTES: usize = 8 + 32;

/// What a call's claim token proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimProof {
    /// No token was sent (clients of Index Network's API): the holder alone is checked.
    Absent,
    /// A token this service made for this id, for the claim of this generation.
    Generation(i64),
    /// Something else: never the current claim.
    Forged,
}

impl ClaimProof {
    /// The generation, when the token is genuine.
    pub fn generation(self) -> Option<i64> {
        match self {
            ClaimProof::Generation(g) => Some(g),
            ClaimProof::Absent | ClaimProof::Forged => None,
        }
    }
}

/// The secret of claim tokens and capability handles.
pub struct TokenKey {
    secret: Box<[u8]>,
}

impl TokenKey {
    /// The key of `secret`.
    pub fn new(secret: &[u8]) -> TokenKey {
        TokenKey { secret: Box::from(secret) }
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length")
    }

    fn claim_mac(&self, id: Uuid, generation: i64) -> Hmac<Sha256> {
        let mut mac = self.mac();
        mac.update(id.as_bytes());
        mac.update(&generation.to_be_bytes());
        mac
    }

    /// The claim token of `id` at `generation`.
    pub fn claim_token(&self, id: Uuid, generation: i64) -> String {
        let mut raw = Vec::with_capacity(TOKEN_BYTES);
        raw.extend_from_slice(&generation.to_be_bytes());
        raw.extend_from_slice(&self.claim_mac(id, generation).finalize().into_bytes());
        format!("ct_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw))
    }

    /// What a presented claim token proves for `id` (the tag is compared in constant time).
    pub fn claim_proof(&self, id: Uuid, token: Option<&str>) -> ClaimProof {
        let Some(token) = token else { return ClaimProof::Absent };
        let raw = token
            .strip_prefix("ct_")
            .and_then(|t| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t).ok())
            .filter(|raw| raw.len() == TOKEN_BYTES);
        let Some(raw) = raw else { return ClaimProof::Forged };
        let (generation, tag) = raw.split_at(8);
        let generation = i64::from_be_bytes(generation.try_into().expect("8 bytes"));
        match self.claim_mac(id, generation).verify_slice(tag) {
            Ok(()) => ClaimProof::Generation(generation),
            Err(_) => ClaimProof::Forged,
        }
    }

    /// The API key Parley holds for agent `agent_id`, an agent it calls over A2A, to take that
    /// agent's turns through the same pickup and respond as a polling agent (see
    /// `crate::a2a_push::turn`): derived, never stored (only its hash is, as every key's).
    pub fn push_key(&self, agent_id: Uuid) -> String {
        let mut mac = self.mac();
        mac.update(b"a2a-push-key");
        mac.update(agent_id.as_bytes());
        format!("pk_a2a_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    /// The name under which others see capability `capability_id` of the agent now known as
    /// `anonymous_id`: the first 16 bytes of an HMAC of the two ids, as a UUID (version 8).
    /// Stable while the anonymous id lives, different under the next one, and telling nothing
    /// of the capability's stored id or of when it was made.
    pub fn capability_handle(&self, anonymous_id: Uuid, capability_id: Uuid) -> Uuid {
        let mut mac = self.mac();
        mac.update(b"capability-handle");
        mac.update(anonymous_id.as_bytes());
        mac.update(capability_id.as_bytes());
        let digest = mac.finalize().into_bytes();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_token_proves_its_id_and_generation_only() {
        let key = TokenKey::new(b"secret");
        let id = Uuid::now_v7();
        let token = key.claim_token(id, 7);
        assert_eq!(key.claim_token(id, 7), token, "the same claim, the same token");
        assert_eq!(key.claim_proof(id, Some(&token)), ClaimProof::Generation(7));
        assert_eq!(key.claim_proof(Uuid::now_v7(), Some(&token)), ClaimProof::Forged, "another id's");
        assert_eq!(TokenKey::new(b"another secret").claim_proof(id, Some(&token)), ClaimProof::Forged);
        assert_eq!(key.claim_proof(id, Some("ct_nonsense")), ClaimProof::Forged);
        assert_eq!(key.claim_proof(id, None), ClaimProof::Absent);
    }

    #[test]
    fn a_capability_handle_changes_with_the_anonymous_id_and_hides_the_capability_id() {
        let (key, capability) = (TokenKey::new(b"secret"), Uuid::now_v7());
        let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
        let h = key.capability_handle(old, capability);
        assert_eq!(h, key.capability_handle(old, capability), "stable while the anonymous id lives");
        assert_ne!(h, key.capability_handle(new, capability), "a new one under the next");
        assert_ne!(h, capability);
        assert_eq!(h.get_version_num(), 8);
        assert_ne!(h, TokenKey::new(b"another secret").capability_handle(old, capability));
    }
}
