#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod announced;
mod live;
mod load;
mod node;
mod wording;

pub use live::LiveTree;
pub use load::{LoadError, load, valid_agent_id};
pub use node::{
    Cost, Ending, MAX_SHOWN_DEPTH, Node, Place, Problem, ResultSize, TREE_FORMAT_VERSION, Tokens, Tree, Turn,
};
