//! The words the delegation statements answer with, one small enum per SQL function: an accept
//! (`parley_delegation_accept`) and a complete (`parley_delegation_complete`) each say what they
//! did, or why not, as an `outcome`. The same refusal means different things to the two calls
//! (`past_deadline` is a 409 `invalid_state` on accept, a 409 `claim_stale` on complete), so each
//! call has its own type and matches it exhaustively; a word that is none of the type's fails
//! the read.
//!
//! The tests pin every word each function's source can answer (`migrations/functions/`) to its
//! enum, and the terminal statuses the SQL writes as literals to [`super::Status::is_terminal`].

#[cfg(test)]
use super::state::Status;

/// What `parley_delegation_accept` answered, with a valid key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum AcceptOutcome {
    /// The attempt moved `request -> accepted`.
    Accepted,
    /// No delegation of the request id was ever addressed to the agent.
    NotFound,
    /// Its live attempt is addressed to another agent now.
    NotAddressed,
    /// The live attempt is not in `request` (its status comes back with it).
    InvalidState,
    /// The attempt's accept deadline (or its deadline) has passed.
    PastDeadline,
}

/// What `parley_delegation_complete` answered, with a valid key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum CompleteOutcome {
    /// The attempt moved `accepted -> completed` and the delegation ended with its output.
    Completed,
    /// No delegation of the request id was ever addressed to the agent.
    NotFound,
    /// Its live attempt is addressed to another agent now.
    NotAddressed,
    /// The live attempt is not the accepted one named (its status comes back with it).
    InvalidState,
    /// The attempt's deadline has passed.
    PastDeadline,
}

#[cfg(test)]
impl AcceptOutcome {
    const ALL: [AcceptOutcome; 5] = [
        AcceptOutcome::Accepted,
        AcceptOutcome::NotFound,
        AcceptOutcome::NotAddressed,
        AcceptOutcome::InvalidState,
        AcceptOutcome::PastDeadline,
    ];
}

#[cfg(test)]
impl CompleteOutcome {
    const ALL: [CompleteOutcome; 5] = [
        CompleteOutcome::Completed,
        CompleteOutcome::NotFound,
        CompleteOutcome::NotAddressed,
        CompleteOutcome::InvalidState,
        CompleteOutcome::PastDeadline,
    ];
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::store::sql_source::{
        assigned_words, case_words, function_source, in_lists, snake_name, without_comments,
    };

    /// The outcomes `parley_delegation_live` hands on as they stand: every word of its `outcome`
    /// but `live`, which the callers replace.
    fn passed_on() -> BTreeSet<String> {
        let live = function_source("parley_delegation_live");
        let mut passed = case_words(&live, "outcome := CASE");
        assert!(passed.remove("live"), "parley_delegation_live answers `live` for a live attempt");
        passed
    }

    #[test]
    fn every_word_the_accept_statement_answers_is_an_accept_outcome() {
        let mut answered = assigned_words(&function_source("parley_delegation_accept"), "outcome");
        answered.extend(passed_on());
        let typed: BTreeSet<String> = AcceptOutcome::ALL.iter().map(snake_name).collect();
        assert_eq!(answered, typed);
    }

    #[test]
    fn every_word_the_complete_statement_answers_is_a_complete_outcome() {
        let mut answered = assigned_words(&function_source("parley_delegation_complete"), "outcome");
        answered.extend(passed_on());
        let typed: BTreeSet<String> = CompleteOutcome::ALL.iter().map(snake_name).collect();
        assert_eq!(answered, typed);
    }

    #[test]
    fn the_statuses_the_sql_writes_are_the_tables_statuses() {
        for f in ["parley_delegation_accept", "parley_delegation_complete"] {
            for word in assigned_words(&function_source(f), "status") {
                assert!(Status::parse(&word).is_some(), "{f} answers the status {word:?}");
            }
        }
    }

    #[test]
    fn the_terminal_statuses_in_the_sql_are_the_tables() {
        let terminal: BTreeSet<String> =
            Status::ALL.into_iter().filter(|s| s.is_terminal()).map(|s| s.as_str().to_owned()).collect();
        let live: BTreeSet<String> =
            Status::ALL.into_iter().filter(|s| !s.is_terminal()).map(|s| s.as_str().to_owned()).collect();
        // Where an attempt or a delegation ends (`ended_at`, the trust count).
        let moved = in_lists(&function_source("parley_delegation_move"));
        assert_eq!(moved.len(), 2, "parley_delegation_move tests for an end twice");
        for list in moved {
            assert_eq!(list, terminal);
        }
        // What the store writes itself, and what it reads as open.
        let store = without_comments(concat!(include_str!("store.rs"), include_str!("store/lists.rs")));
        let lists = in_lists(&store);
        assert!(lists.contains(&terminal), "store.rs's end of a delegation");
        assert!(lists.contains(&live), "store.rs's open attempts");
        for list in lists {
            assert!(list == terminal || list == live, "store.rs names the statuses {list:?}");
        }
    }
}
