#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod arguments;
pub mod budget;
mod code;
mod registry;
mod schema;
mod shelf;
mod tool;
pub mod trace;
pub mod wording;

pub use arguments::{ArgumentWording, Arguments};
pub use budget::{Cut, InvalidResultLimit, PagedRead, ResultLimit};
pub use code::ErrorCode;
pub use dsh_subagent_api::{AgentId, AgentRef, RecordedChild, Rerun};
pub use dsh_subagent_api::{BoxFuture, CancellationToken, StableCode, TextSource, error_code_text, error_codes};
pub use registry::{
    ABORTED_BEFORE_DISPATCH, MountedTool, NameReservation, RegistryError, ToolRegistration, ToolRegistry, ToolSpec,
    execute, panic_message,
};
pub use schema::parameters_schema;
pub use shelf::{KeptResult, ResultPolicy, ResultShelf, ShelfPlace};
pub use tool::{INVALID_ARGUMENTS, Tool, ToolError, ToolExecution, ToolOutput, ToolResult, json_kind};
