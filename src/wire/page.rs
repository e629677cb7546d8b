//! A listing's page request, parsed once for every adapter that lists.

use uuid::Uuid;

use super::error::ApiError;

/// A page request of a listing: `limit` (default 50, 1 to [`MAX_PAGE`]) and the previous
/// page's `nextCursor` (the last id it showed; ids are UUIDv7, so id order is time order).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// Rows to show.
    pub limit: i64,
    /// Show only rows older than this id.
    pub before: Option<Uuid>,
}

/// Largest page any listing serves.
pub const MAX_PAGE: i64 = 200;

impl Page {
    /// Validates a listing's `limit` and `cursor` query parameters.
    pub fn parse(limit: Option<i64>, cursor: Option<&str>) -> Result<Page, ApiError> {
        let limit = limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::invalid(format!("limit must be between 1 and {MAX_PAGE}")));
        }
        let before = match cursor {
            None => None,
            Some(c) => Some(Uuid::parse_str(c).map_err(|_| ApiError::invalid("cursor is not valid"))?),
        };
        Ok(Page { limit, before })
    }
}
