//! The `acp` subagent provider: each delegation runs an out-of-process child
//! agent over the [Agent Client Protocol](https://agentclientprotocol.com/).
//!
//! Per run the provider spawns the configured command **in its own process
//! group**, with a scrubbed environment ([`BASE_ENV`] plus what the
//! [`AcpConfig`] lists), then speaks ACP v1 over the child's stdio through the
//! official `agent-client-protocol` SDK (pinned exactly; none of its types
//! appear in this crate's API): `initialize`, `authenticate` when
//! [`AcpConfig::auth`] chooses a method ([`AcpAuth`]), `session/new` with the
//! working directory, and one `session/prompt` with the task's text. The
//! answer is the streamed `agent_message_chunk` text.
//!
//! | ACP stop reason | [`StopReason`](dsh_subagent_api::StopReason) |
//! |---|---|
//! | `end_turn` | `completed` |
//! | `max_tokens` | `max-tokens` |
//! | `refusal` | `refusal` |
//! | `cancelled` | `aborted` |
//! | `max_turn_requests`, anything unknown | `error` |
//!
//! # Lifecycle
//!
//! - **Start.** A request whose token is already cancelled fails with
//!   `subagent request was aborted before the ACP child started` and spawns
//!   nothing. Failures before publication — the command cannot be spawned,
//!   the child dies, answers wrongly, with an error or not at all (within
//!   [`AcpConfig::startup_timeout`]) during `initialize`/`authenticate`/`session/new` —
//!   **reject `start`** with a [`SubagentError`](dsh_subagent_api::SubagentError)
//!   (code `ACP_SPAWN_FAILED` or `ACP_START_FAILED`, message
//!   `subagent ACP child failed to start: <diagnostic>`), after the child's
//!   process group is released. An "authentication required" refusal lists
//!   the methods the child offered and how to choose one. A cancellation
//!   during the handshake rejects with code `ABORTED`; one that arrives while
//!   a failed start is being released keeps the start's error. Either way
//!   the group is SIGKILLed at the cancellation and `start` returns at once,
//!   so a caller that stops waiting then still reads the real cause.
//! - **Run.** Once the session exists the run is published. Every failure
//!   after that is a *result*: [`StopReason::Error`](dsh_subagent_api::StopReason)
//!   with the partial answer and a bounded diagnostic naming the protocol
//!   stage, the fault, the exit status or signal and the tail of stderr —
//!   never the answer text. Faults: the child exits mid-turn, answers with a
//!   JSON-RPC error (quoted with its `data`; no exit status, since an error
//!   does not mean the child ended), writes a non-JSON line, calls a method
//!   we do not serve, writes a line longer than [`AcpConfig::max_line_bytes`],
//!   streams more than [`AcpConfig::max_output_bytes`] of answer, ends the
//!   turn with `max_turn_requests` or an unknown stop reason, or outlives
//!   [`AcpConfig::turn_timeout`] (then the turn is cancelled first). The
//!   stderr tail is quoted without terminal escape sequences.
//! - **Cancel.** Cancelling the request's token sends `session/cancel` and
//!   settles `aborted` (with the partial answer) as soon as the child ends
//!   the turn, or after [`AcpConfig::cancel_grace`] if it ignores the cancel
//!   — then with a diagnostic saying so. Local cancellation wins: a child
//!   that crashes after it still settles `aborted`.
//! - **Dispose.** Cancels what remains, lets the conversation end, closes the
//!   child's stdin and waits [`AcpConfig::dispose_eof_grace`]; then SIGTERMs
//!   the whole process group and waits [`AcpConfig::dispose_term_grace`];
//!   then SIGKILLs the group. It returns only when the direct child is reaped
//!   and no member of the group still runs: `killpg(pgid, 0)` answers
//!   `ESRCH`, or `/proc` shows only zombies. A zombie is not waited for —
//!   it has exited and waits for its reaper — and the ones reparented to us
//!   (when we are PID 1 or a child subreaper) are collected here, since
//!   nobody else would. The default graces add up to
//!   [`AcpConfig::release_budget`] = 4 s from a cancellation, inside the
//!   `subagent` tool's 5 s release grace; agent products seldom exit when
//!   their stdin closes, so the stdin-EOF grace is short.
//!   Dropping an unreleased run or a pending start SIGKILLs the group.
//!
//! Permission requests are answered automatically ([`PermissionPolicy`]).
//! The provider has no start capabilities ([`Capabilities::NONE`](dsh_subagent_api::Capabilities::NONE))
//! and its child does not see the parent's conversation, so a `subagent` tool
//! over it is mounted with `maxDepth: "provider-managed"`: the child keeps
//! its own recursion budget.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use dsh_subagent::SubagentService;
//! use dsh_subagent_acp::{AcpConfig, AcpProvider};
//! use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
//! use dsh_tools::ToolRegistry;
//!
//! let service = SubagentService::new();
//! let tools = ToolRegistry::new();
//! let acp = AcpProvider::new(AcpConfig::new("dsh").args(["acp"]))?;
//! let _provider = service.register_provider(Arc::new(acp))?;
//! let _tool = SubagentToolPlugin::apply(
//!     SubagentToolConfig::new("acp").tool_name("subagent_acp").max_depth(MaxDepth::ProviderManaged),
//!     &service,
//!     &tools,
//! )?;
//! assert_eq!(tools.names(), ["subagent_acp"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod code;
mod config;
mod diagnostic;
mod process;
mod provider;
mod session;
mod transport;
mod wording;

pub use code::ErrorCode;
pub use config::{AcpAuth, AcpConfig, DEFAULT_NAME, InvalidConfig, PermissionPolicy};
pub use process::BASE_ENV;
pub use provider::AcpProvider;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
