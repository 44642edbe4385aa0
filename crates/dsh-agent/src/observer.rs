//! Live observation of what happens inside an agent's run, for progress
//! displays and streaming front ends (such as an ACP agent).

use dsh_llm::{ToolCall, Usage};
use dsh_tools::{AgentId, ToolResult};

use crate::Priced;

/// Receives what happens inside the runs of every agent of a runtime,
/// parents and in-process children: streamed text, model calls, tool calls.
///
/// A child's start and end are not reported here: the subagent service's run
/// events (`dsh_subagent::SubagentEvent`) report them for every provider,
/// in-process or not; a harness takes them from there. A run's own end is
/// the [`RunOutcome`](crate::RunOutcome) that [`Agent::run`](crate::Agent::run) returns.
///
/// Called synchronously from the agents' tasks: keep implementations quick.
/// Every method has an empty default.
pub trait AgentObserver: Send + Sync + 'static {
    /// A piece of an agent's answer text, as the model streams it. Pieces of
    /// a model call that is then cancelled or fails have been reported too.
    fn text_delta(&self, _agent: &AgentId, _delta: &str) {}
    /// An agent finished one model call; `steps` counts them in this run,
    /// `usage` is what they spent (marked when estimated), and `cost` what
    /// that cost where its model's price is known.
    fn step_finished(&self, _agent: &AgentId, _steps: u32, _usage: Option<Usage>, _cost: Priced) {}
    /// An agent is about to run a tool call the model made. Every start is
    /// followed by exactly one [`tool_call_finished`](Self::tool_call_finished)
    /// for the same call, also when the run is cancelled.
    fn tool_call_started(&self, _agent: &AgentId, _call: &ToolCall) {}
    /// A tool call ended; `result` is what the model reads.
    fn tool_call_finished(&self, _agent: &AgentId, _call: &ToolCall, _result: &ToolResult) {}
}
