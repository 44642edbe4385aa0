#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod args;
mod plugin;
mod shelf;
mod tools;

pub use args::{DEFAULT_WAIT_MS, MAX_WAIT_MS};
pub use plugin::TaskToolsPlugin;
pub use shelf::TaskShelf;

/// How many finished tasks `task_list` shows (the most recently finished),
/// besides every running task; one last line counts the older ones kept.
pub const LISTED_FINISHED: usize = 20;

/// The names the plugin registers: `task_output`, `task_kill`, `task_list`.
pub const TOOL_NAMES: [&str; 3] = [
    dsh_tasks::wording::TASK_OUTPUT,
    dsh_tasks::wording::TASK_KILL,
    dsh_tasks::wording::TASK_LIST,
];
