//! The people a negotiation is about, as the platform describes them.
//!
//! Parley stores these documents as given (they are the "full context" each side argues from);
//! only the fields the negotiator reads are typed, the rest are kept verbatim.

use serde::{Deserialize, Serialize};

/// One user as the platform hands it over in `POST /api/negotiations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserContext {
    /// The platform's user id (opaque string).
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the user is and offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// What the user is looking for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intents: Vec<Intent>,
}

/// A user's profile; unknown fields are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// Free-text description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bio: Option<String>,
    /// Things the user can do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Things the user cares about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interests: Vec<String>,
    /// Any other profile fields, passed through untouched.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Something the user wants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    /// The platform's id for the intent, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The intent in the user's words.
    pub text: String,
}

/// One actor of the evaluator's seed assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedActor {
    /// The user.
    pub user_id: String,
    /// The role the evaluator gave them.
    pub role: crate::domain::turn::Role,
}

/// The matching platform's evaluation that proposed this match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedAssessment {
    /// 0-100; stays the opportunity's score whatever the negotiation says.
    pub score: f64,
    /// Why the evaluator proposed the match.
    pub reasoning: String,
    /// The source user's role, when the evaluator decided one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valency_role: Option<crate::domain::turn::Role>,
    /// Roles per user, when the evaluator decided them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actors: Option<Vec<SeedActor>>,
}
