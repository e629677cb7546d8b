//! Every machine code an error answer carries (`code` in `{"error": ..., "code": ...}`), over
//! HTTP, MCP and the event stream, as one enum: a code is a variant, never a string written at
//! the place that refuses. The table of `docs/errors.md` lists each with its status and when it
//! happens; a unit test keeps the two the same.
//!
//! Lower layers (the capability and assessment checks) name their codes with it too, so this
//! module sits beside them, below the HTTP edge.

/// A machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the request is malformed or out of range.
    InvalidBody,
    /// 400: the respond's action is not allowed at this turn.
    ActionNotAllowed,
    /// 400: a delegation's input does not match the capability's input schema.
    InputInvalid,
    /// 400: a delegation's output does not match the capability's output schema.
    OutputInvalid,
    /// 400: the delegation's target may not take it.
    TargetNotEligible,
    /// 400: a capability's schema is past the bounds.
    SchemaTooComplex,
    /// 400: an AgentCard that cannot be fetched or used (the message says why).
    AgentCardInvalid,
    /// 400: a webhook's or push notification's URL leads where the outbound address rule
    /// refuses (loopback, private, link-local, ...).
    UrlRefused,
    /// 401: no or bad credentials.
    Unauthorized,
    /// 403: valid credentials that may not do this.
    Forbidden,
    /// 404: unknown, or not the caller's to see.
    NotFound,
    /// 404: a delegation's target anonymous id is unknown or expired.
    UnknownTarget,
    /// 400 (A2A -32602): no agent's skill fits a plain message; the message names the skills.
    NoSkillMatches,
    /// 405 (MCP's transport only): the method is not one the MCP endpoint takes.
    MethodNotAllowed,
    /// 406 (MCP's transport only): the client does not accept what MCP answers with.
    NotAcceptable,
    /// 400 (MCP's transport only): a request the MCP transport refused for another reason.
    InvalidRequest,
    /// 408: the request body did not arrive in time.
    RequestTimeout,
    /// 409: no claim on the turn.
    NotClaimed,
    /// 409: another agent holds the claim.
    ClaimedByOther,
    /// 409: the claim token is not the current claim's.
    ClaimStale,
    /// 409: the turn was answered already, with another body.
    TurnAlreadyAnswered,
    /// 409: a claim token never issued for this negotiation.
    UnknownClaimToken,
    /// 409: an opportunity id used before for another request.
    OpportunityIdReused,
    /// 409: a hand-back where no system negotiator plays.
    NoSystemNegotiator,
    /// 409: the negotiation has ended.
    AlreadyCompleted,
    /// 409: a race lost with another change, or a state that does not allow the call.
    InvalidState,
    /// 409: a delegation's request id used before with another body.
    RequestIdReused,
    /// 409: a delegation's request id that is another requester's.
    RequestIdTaken,
    /// 409: a target acts on a delegation that moved on to another target.
    NotAddressed,
    /// 409: a requester cancels a delegation that has ended already.
    DelegationEnded,
    /// 409: a decision on an opportunity that is not pending.
    NotPending,
    /// 409: the person decided already.
    AlreadyDecided,
    /// 409: only a stalled or expired opportunity can be reactivated.
    NotReactivatable,
    /// 409: the user has as many of something as they may.
    LimitReached,
    /// 409: an answer to a person's question that was answered already or ran out.
    QuestionClosed,
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 429: too many requests of a kind, or failed authentications.
    RateLimited,
    /// 500: a failure the caller cannot fix.
    Internal,
    /// 503: a dependency is down; retry.
    Unavailable,
    /// On the event stream only: the token expired; reconnect with a fresh one.
    TokenExpired,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 40] = [
        ErrorCode::InvalidBody,
        ErrorCode::ActionNotAllowed,
        ErrorCode::InputInvalid,
        ErrorCode::OutputInvalid,
        ErrorCode::TargetNotEligible,
        ErrorCode::SchemaTooComplex,
        ErrorCode::AgentCardInvalid,
        ErrorCode::UrlRefused,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::UnknownTarget,
        ErrorCode::NoSkillMatches,
        ErrorCode::MethodNotAllowed,
        ErrorCode::NotAcceptable,
        ErrorCode::InvalidRequest,
        ErrorCode::RequestTimeout,
        ErrorCode::NotClaimed,
        ErrorCode::ClaimedByOther,
        ErrorCode::ClaimStale,
        ErrorCode::TurnAlreadyAnswered,
        ErrorCode::UnknownClaimToken,
        ErrorCode::OpportunityIdReused,
        ErrorCode::NoSystemNegotiator,
        ErrorCode::AlreadyCompleted,
        ErrorCode::InvalidState,
        ErrorCode::RequestIdReused,
        ErrorCode::RequestIdTaken,
        ErrorCode::NotAddressed,
        ErrorCode::DelegationEnded,
        ErrorCode::NotPending,
        ErrorCode::AlreadyDecided,
        ErrorCode::NotReactivatable,
        ErrorCode::LimitReached,
        ErrorCode::QuestionClosed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
        ErrorCode::TokenExpired,
    ];

    /// The code as answered.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidBody => "invalid_body",
            ErrorCode::ActionNotAllowed => "action_not_allowed",
            ErrorCode::InputInvalid => "input_invalid",
            ErrorCode::OutputInvalid => "output_invalid",
            ErrorCode::TargetNotEligible => "target_not_eligible",
            ErrorCode::SchemaTooComplex => "schema_too_complex",
            ErrorCode::AgentCardInvalid => "agent_card_invalid",
            ErrorCode::UrlRefused => "url_refused",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UnknownTarget => "unknown_target",
            ErrorCode::NoSkillMatches => "no_skill_matches",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::NotAcceptable => "not_acceptable",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::NotClaimed => "not_claimed",
            ErrorCode::ClaimedByOther => "claimed_by_other",
            ErrorCode::ClaimStale => "claim_stale",
            ErrorCode::TurnAlreadyAnswered => "turn_already_answered",
            ErrorCode::UnknownClaimToken => "unknown_claim_token",
            ErrorCode::OpportunityIdReused => "opportunity_id_reused",
            ErrorCode::NoSystemNegotiator => "no_system_negotiator",
            ErrorCode::AlreadyCompleted => "already_completed",
            ErrorCode::InvalidState => "invalid_state",
            ErrorCode::RequestIdReused => "request_id_reused",
            ErrorCode::RequestIdTaken => "request_id_taken",
            ErrorCode::NotAddressed => "not_addressed",
            ErrorCode::DelegationEnded => "delegation_ended",
            ErrorCode::NotPending => "not_pending",
            ErrorCode::AlreadyDecided => "already_decided",
            ErrorCode::NotReactivatable => "not_reactivatable",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::QuestionClosed => "question_closed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::TokenExpired => "token_expired",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::ErrorCode;

    /// The codes of the table of `docs/errors.md` (its rows `| status | `code` | when |`).
    fn documented_codes() -> BTreeSet<String> {
        include_str!("../docs/errors.md")
            .lines()
            .filter_map(|line| line.strip_prefix("| ")?.split(" | `").nth(1)?.split('`').next().map(str::to_owned))
            .collect()
    }

    #[test]
    fn the_errors_page_lists_every_code_and_no_other() {
        let ours: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect();
        assert_eq!(ours.len(), ErrorCode::ALL.len(), "a code is listed twice in ALL");
        assert_eq!(documented_codes(), ours, "docs/errors.md's table and ErrorCode differ");
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
