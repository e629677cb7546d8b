//! The JSON shapes of negotiations and opportunities (`crate::wire::views`, shared with MCP),
//! and how an HTTP caller reads a task.

use crate::{auth::Caller, store::tasks::Task};

pub use crate::wire::views::*;

impl Viewer {
    /// How `caller` reads `task`; `None` when the caller takes no part in it (show nothing).
    pub fn of_caller(caller: &Caller, task: &Task) -> Option<Viewer> {
        if caller.is_service() { Some(Viewer::Service) } else { task.side_of(&caller.sub).map(Viewer::Side) }
    }
}
