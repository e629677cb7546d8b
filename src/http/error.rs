//! The HTTP edge's errors: the wire's one error type and body (`crate::wire::error`), named here
//! for the handlers.

pub use crate::wire::error::{ApiError, ApiResult, ErrorBody};
