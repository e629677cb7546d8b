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
    /// How the user wants Parley's system negotiator to act for them (when it plays their
    /// side); the platform sends it with the user, from the person's own setting. Never shown
    /// to the other side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negotiation_preferences: Option<NegotiationPreferences>,
}

/// A user's settings for the system negotiator that plays for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NegotiationPreferences {
    /// Ask me when unsure (off by default): where its evidence is genuinely split, the system
    /// negotiator asks the person one yes/no question on their status page (the
    /// `negotiation.question` event, `pendingQuestion`) and decides by the answer; when no
    /// answer comes within the answer window it decides as it would have. At most one question
    /// per negotiation.
    #[serde(default)]
    pub ask_when_unsure: bool,
}

impl UserContext {
    /// This user as the other side of a negotiation may see them: the intents the platform
    /// shares (not those marked private) and the profile without `dealBreakers`, which are the
    /// user's own criteria, and without their negotiation preferences. Every other profile field
    /// the platform gave is shown.
    pub fn as_seen_by_other_side(&self) -> UserContext {
        let mut seen = self.clone();
        seen.intents.retain(|i| !i.private);
        seen.negotiation_preferences = None;
        if let Some(p) = seen.profile.as_mut() {
            p.extra.remove("dealBreakers");
        }
        seen
    }

    /// This newer context of the same user, keeping `earlier`'s display name when it gives none:
    /// a reactivation's context replaces what it says, and a name it leaves out is not a name
    /// withdrawn (people would otherwise be shown by their ids).
    pub fn keeping_name_of(mut self, earlier: &UserContext) -> UserContext {
        if self.name.as_deref().is_none_or(|n| n.trim().is_empty()) {
            self.name = earlier.name.clone();
        }
        self
    }
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
    /// A short form for display; derived from `text` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How sure the platform is of this intent (0 to 1), when it knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Whether the intent stays with its own side. By default intents are shared with the other
    /// side's negotiator (agent or system), as Index Network shares them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

impl Intent {
    /// Longest derived title, in characters (an ellipsis marks a cut).
    pub const TITLE_CHARS: usize = 60;

    /// The title as given, or the text's first sentence cut to [`Self::TITLE_CHARS`] at a word
    /// boundary.
    pub fn display_title(&self) -> String {
        if let Some(title) = self.title.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            return title.to_owned();
        }
        let text = self.text.trim();
        let sentence =
            text.split_terminator(['.', '!', '?', '\n']).map(str::trim).find(|s| !s.is_empty()).unwrap_or(text);
        if sentence.chars().count() <= Self::TITLE_CHARS {
            return sentence.to_owned();
        }
        let mut title = String::new();
        for word in sentence.split_whitespace() {
            if title.chars().count() + word.chars().count() + 1 > Self::TITLE_CHARS - 1 {
                break;
            }
            if !title.is_empty() {
                title.push(' ');
            }
            title.push_str(word);
        }
        if title.is_empty() {
            title = sentence.chars().take(Self::TITLE_CHARS - 1).collect();
        }
        title.push('…');
        title
    }
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

#[cfg(test)]
mod tests {
    use super::{Intent, UserContext};

    #[test]
    fn a_newer_context_without_a_name_keeps_the_earlier_name() {
        let earlier =
            UserContext { id: "user-tomas".into(), name: Some("Tomas Novak".into()), ..UserContext::default() };
        let unnamed = UserContext { id: "user-tomas".into(), ..UserContext::default() };
        assert_eq!(unnamed.keeping_name_of(&earlier).name.as_deref(), Some("Tomas Novak"));
        let blank = UserContext { id: "user-tomas".into(), name: Some(" ".into()), ..UserContext::default() };
        assert_eq!(blank.keeping_name_of(&earlier).name.as_deref(), Some("Tomas Novak"));
        let renamed =
            UserContext { id: "user-tomas".into(), name: Some("Tomáš Novák".into()), ..UserContext::default() };
        assert_eq!(renamed.keeping_name_of(&earlier).name.as_deref(), Some("Tomáš Novák"));
    }

    fn intent(text: &str) -> Intent {
        Intent { text: text.into(), ..Intent::default() }
    }

    #[test]
    fn a_title_is_given_or_the_first_sentence_cut_at_a_word() {
        assert_eq!(intent("Find a co-founder. Must know Rust.").display_title(), "Find a co-founder");
        let long = "Looking for a senior Rust backend engineer to build our payments API and mentor the team";
        let title = intent(long).display_title();
        assert_eq!(title, "Looking for a senior Rust backend engineer to build our…");
        assert!(title.chars().count() <= Intent::TITLE_CHARS);
        let given = Intent { title: Some("Rust hire".into()), ..intent(long) };
        assert_eq!(given.display_title(), "Rust hire");
        let one_word = "x".repeat(100);
        assert_eq!(intent(&one_word).display_title().chars().count(), Intent::TITLE_CHARS);
    }
}
