//! The domain's stored vocabularies (task states, opportunity statuses, who plays a side, which
//! side, actions) as `sqlx` types over `TEXT`, so that a query reads them typed
//! (`state AS "state: TaskState"`) and the domain stays free of `sqlx`.
//!
//! Each is decoded by its own name table, and a stored name that is none of them fails the read
//! with a [`CorruptRow`]: a garbage value is an error, never some default.

use sqlx::{
    Decode, Encode, Postgres, Type,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
};

use super::CorruptRow;
use crate::domain::{Action, OpportunityStatus, Side, SideKind, TaskState};

/// A vocabulary stored as its names.
pub(crate) trait TextName: Sized + Copy + 'static {
    /// What it is, for a decode error.
    const WHAT: &'static str;
    /// Every value.
    const ALL: &'static [Self];
    /// Its stored name.
    fn name(self) -> &'static str;
    /// The value stored as `name`, or a [`CorruptRow`].
    fn from_name(name: &str) -> Result<Self, CorruptRow> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name() == name)
            .ok_or_else(|| CorruptRow { what: Self::WHAT, value: name.to_owned() })
    }
}

/// Implements [`TextName`], and `Type`, `Decode` and `Encode` over `TEXT`, for `$ty`, named by
/// its `as_str`; `$what` names the vocabulary in a decode error.
macro_rules! text_type {
    ($ty:ty, $what:literal, $all:expr) => {
        impl TextName for $ty {
            const WHAT: &'static str = $what;
            const ALL: &'static [Self] = &$all;
            fn name(self) -> &'static str {
                self.as_str()
            }
        }

        impl Type<Postgres> for $ty {
            fn type_info() -> PgTypeInfo {
                <str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <str as Type<Postgres>>::compatible(ty)
            }
        }

        impl<'r> Decode<'r, Postgres> for $ty {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(<$ty>::from_name(<&str as Decode<Postgres>>::decode(value)?)?)
            }
        }

        impl Encode<'_, Postgres> for $ty {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }
    };
}

text_type!(TaskState, "task state", TaskState::ALL);
text_type!(OpportunityStatus, "opportunity status", OpportunityStatus::ALL);
text_type!(SideKind, "side kind", [SideKind::System, SideKind::Personal]);
text_type!(Side, "side", [Side::Source, Side::Candidate]);
text_type!(Action, "action", Action::ALL);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: TextName + PartialEq + std::fmt::Debug>() {
        for v in T::ALL {
            assert_eq!(T::from_name(v.name()).ok(), Some(*v));
        }
        let e = T::from_name("Working").expect_err("no vocabulary has capitals");
        assert_eq!(e.to_string(), format!(r#"corrupt {} in the database: "Working""#, T::WHAT));
        assert!(T::from_name("").is_err());
    }

    #[test]
    fn every_name_reads_back_and_a_stranger_fails_the_read() {
        round_trips::<TaskState>();
        round_trips::<OpportunityStatus>();
        round_trips::<SideKind>();
        round_trips::<Side>();
        round_trips::<Action>();
    }
}
