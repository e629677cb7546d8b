//! Users and the platform by JWT (HS256, `sub`, `role`, `exp`, optional `nbf`).
//!
//! The keys are built once from configuration and live in the application state. A missing,
//! malformed, expired, not yet valid (`nbf`) or wrongly signed token is refused (401), and so is
//! a token whose `exp` lies further out than the configured maximum lifetime
//! (`PARLEY_JWT_MAX_TTL`): a leaked token cannot be good for years. Whether a valid token's role
//! may call a route is the route's [`Policy`](super::Policy).

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::AuthError;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CallerRole {
    /// A person, seeing their own opportunities.
    #[default]
    User,
    /// The matching platform's backend.
    Service,
    /// An operator; may do what the service may.
    Admin,
}

impl CallerRole {
    /// Every role.
    pub const ALL: &[CallerRole] = &[CallerRole::User, CallerRole::Service, CallerRole::Admin];

    /// Parses a role name.
    pub fn parse(s: &str) -> Option<CallerRole> {
        match s {
            "user" => Some(CallerRole::User),
            "service" => Some(CallerRole::Service),
            "admin" => Some(CallerRole::Admin),
            _ => None,
        }
    }
}

/// The claims Parley reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user id (or the platform's service name).
    pub sub: String,
    /// Defaults to `user`.
    #[serde(default)]
    pub role: CallerRole,
    /// Expiry, seconds since the epoch; required.
    pub exp: u64,
    /// Not before, seconds since the epoch; optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
}

/// The longest lifetime a token may have unless configured otherwise (30 days).
pub const DEFAULT_MAX_TTL: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// HS256 keys from the configured secret.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    max_ttl: std::time::Duration,
}

impl JwtKeys {
    /// Keys for `secret`, refusing tokens that live longer than [`DEFAULT_MAX_TTL`].
    pub fn new(secret: &[u8]) -> JwtKeys {
        JwtKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            max_ttl: DEFAULT_MAX_TTL,
        }
    }

    /// The same keys with another maximum token lifetime.
    pub fn with_max_ttl(self, max_ttl: std::time::Duration) -> JwtKeys {
        JwtKeys { max_ttl, ..self }
    }

    /// The longest lifetime a token may have.
    pub fn max_ttl(&self) -> std::time::Duration {
        self.max_ttl
    }

    /// Signs a token for `sub` with `role`, valid for `ttl`.
    pub fn mint(&self, sub: &str, role: CallerRole, ttl: std::time::Duration) -> anyhow::Result<String> {
        let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() + ttl.as_secs();
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &Claims { sub: sub.to_owned(), role, exp, nbf: None },
            &self.encoding,
        )?)
    }

    /// Verifies a token: signature, algorithm, `exp` and `nbf` (no leeway), and that `exp` is
    /// no further out than the maximum lifetime.
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let mut v = Validation::new(Algorithm::HS256);
        v.leeway = 0;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &v).map(|d| d.claims).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            AuthError::Unauthorized(
                match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
                    ErrorKind::InvalidSignature => "the token's signature is not valid",
                    _ => "the token is not a valid JWT",
                }
                .into(),
            )
        })?;
        if claims.exp > now_secs().saturating_add(self.max_ttl.as_secs()) {
            return Err(AuthError::Unauthorized(format!(
                "the token's expiry is further out than the longest lifetime allowed ({})",
                crate::config::format_duration(self.max_ttl)
            )));
        }
        Ok(claims)
    }

    /// The caller a verified token names: its subject must be a user id (not empty, no NUL,
    /// which no user id can hold: PostgreSQL could not even compare it).
    pub fn caller(&self, token: &str) -> Result<Caller, AuthError> {
        let claims = self.verify(token)?;
        if claims.sub.trim().is_empty() {
            return Err(AuthError::Unauthorized("the token has an empty subject".into()));
        }
        if claims.sub.contains('\0') {
            return Err(AuthError::Unauthorized("the token's subject contains a NUL character".into()));
        }
        Ok(Caller { sub: claims.sub, role: claims.role, expires_at: claims.exp })
    }
}

/// An authenticated user, platform or operator.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's subject.
    pub sub: String,
    /// The token's role.
    pub role: CallerRole,
    /// The token's expiry, seconds since the epoch (an event stream ends then).
    pub expires_at: u64,
}

impl Caller {
    /// Whether the caller may see and do everything (service or admin).
    pub fn is_service(&self) -> bool {
        matches!(self.role, CallerRole::Service | CallerRole::Admin)
    }
}
