//! The credential Parley presents to an agent's own endpoint, as its owner gave it at
//! registration: a scheme and the credential, sent as `Authorization: <Scheme> <credential>`.
//!
//! Parley must present it, so it is kept as given (it cannot be hashed), held as a
//! [`SecretString`] (never printed by `Debug`, zeroed on drop) and never returned by a read.

use secrecy::SecretString;

/// The longest credential taken.
pub const MAX_CREDENTIAL_CHARS: usize = 4096;

/// How the credential is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthScheme {
    /// `Authorization: Bearer <credential>`.
    Bearer,
    /// `Authorization: Basic <credential>` (the credential is already base64 of `user:password`).
    Basic,
}

impl AuthScheme {
    /// Every scheme.
    pub const ALL: [AuthScheme; 2] = [AuthScheme::Bearer, AuthScheme::Basic];

    /// The stored (and wire) name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthScheme::Bearer => "bearer",
            AuthScheme::Basic => "basic",
        }
    }

    /// Parses a stored (and wire) name.
    pub fn parse(s: &str) -> Option<AuthScheme> {
        AuthScheme::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A scheme and its credential.
#[derive(Debug, Clone)]
pub struct A2aAuth {
    /// How it is sent.
    pub scheme: AuthScheme,
    /// What is sent.
    pub credential: SecretString,
}

impl A2aAuth {
    /// Checks a credential as given: 1 to [`MAX_CREDENTIAL_CHARS`] visible ASCII characters
    /// (what a header value may carry, without spaces).
    pub fn new(scheme: AuthScheme, credential: &str) -> Result<A2aAuth, String> {
        let n = credential.chars().count();
        if n == 0 || n > MAX_CREDENTIAL_CHARS || !credential.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "a2aAuth.credential must be 1 to {MAX_CREDENTIAL_CHARS} visible ASCII characters without spaces"
            ));
        }
        Ok(A2aAuth { scheme, credential: SecretString::from(credential.to_owned()) })
    }
}

impl A2aAuth {
    /// The `Authorization` header value: `Bearer <credential>` or `Basic <credential>`.
    pub fn authorization(&self) -> String {
        use secrecy::ExposeSecret;
        let scheme = match self.scheme {
            AuthScheme::Bearer => "Bearer",
            AuthScheme::Basic => "Basic",
        };
        format!("{scheme} {}", self.credential.expose_secret())
    }
}
