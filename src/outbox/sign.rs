//! Standard Webhooks signing: the secrets and the `webhook-signature` header.
//!
//! A secret is `whsec_` and the base64 of 24 random bytes; the key is those bytes. A signature
//! is `v1,` and the base64 of HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`, the
//! body exactly as sent. While a rotated-out secret still signs, the header carries both
//! signatures, separated by a space, the current one first: a receiver that knows either
//! verifies (the Standard Webhooks libraries accept any one signature of the list).

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The prefix of every secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new secret.
pub fn new_secret() -> String {
    let mut key = [0u8; 24];
    rand::rng().fill_bytes(&mut key);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The key of `secret` (a stored secret is always one [`new_secret`] made).
fn key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// One `v1,` signature of `body`, sent as `id` at `timestamp` (unix seconds), with `secret`.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key(secret)?).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: a signature with each of `secrets` (the current one first).
pub fn header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().filter_map(|s| signature(s, id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries: this secret,
    /// id, timestamp and body sign to this signature.
    #[test]
    fn signs_as_the_reference_libraries_do() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn a_rotation_signs_with_both_secrets_the_current_first() {
        let (new, old) = (new_secret(), new_secret());
        let both = header(&[&new, &old], "evt_1", 1, b"{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(Some(parts[0].to_owned()), signature(&new, "evt_1", 1, b"{}"));
        assert_eq!(Some(parts[1].to_owned()), signature(&old, "evt_1", 1, b"{}"));
        assert_ne!(parts[0], parts[1]);
    }

    #[test]
    fn secrets_are_prefixed_random_and_decode_to_24_bytes() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with(SECRET_PREFIX));
        assert_ne!(a, b);
        assert_eq!(key(&a).map(|k| k.len()), Some(24));
        assert_eq!(signature("not a secret", "evt_1", 1, b"{}"), None);
    }
}
