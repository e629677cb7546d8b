//! Text PostgreSQL cannot store is refused at the door: the one check lives beneath both
//! adapters (`crate::wire::input`); the HTTP extractors and authentication call it from here.

pub use crate::wire::input::*;
