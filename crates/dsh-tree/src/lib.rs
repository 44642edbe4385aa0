#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod announced;
mod cost;
#[cfg(feature = "live")]
mod live;
mod load;
mod node;
mod wording;

pub use dsh_llm::Cost;
#[cfg(feature = "live")]
pub use live::LiveTree;
pub use load::{LoadError, load, valid_agent_id};
pub use node::{Ending, MAX_SHOWN_DEPTH, Node, Place, Problem, ResultSize, TREE_FORMAT_VERSION, Tokens, Tree, Turn};
