//! Every model-facing string of the `subagent` tool, in one place.
//!
//! Texts quoted from the reference contract are reproduced byte for byte; the
//! snapshot tests in `tests/wording.rs` pin all of them. Nothing outside this
//! module formats text the model reads.

use std::borrow::Cow;

use dsh_subagent_api::StopReason;

/// Tool description for a provider whose child starts with a fresh conversation.
pub const STANDALONE_DESCRIPTION: &str = "Delegate a self-contained task to a subagent (a separate agent that works in its own context) and return its final result. Use this to offload focused, independent work — research, a scoped implementation, an analysis — so it does not consume this conversation's context. The subagent runs to completion and you receive only its final answer, not its intermediate steps. Give it a complete, standalone prompt: it does not see this conversation.";

/// Tool description for a provider whose child inherits the parent's completed turns.
pub const INHERITED_DESCRIPTION: &str = "Delegate a task to a subagent that INHERITS this conversation: a child agent seeded with all completed turns so far (it does not see the current in-flight turn), returning only its final result. Use this when the subtask builds on this conversation's context — a follow-up analysis, a review, a continuation — without consuming this conversation's context for the work itself. You receive only its final answer, not its intermediate steps.";

/// `prompt` parameter description, fresh-conversation wording.
pub const STANDALONE_PROMPT: &str = "The complete, self-contained task for the subagent. It does not share this conversation's context, so include everything it needs.";

/// `prompt` parameter description, inherited-context wording.
pub const INHERITED_PROMPT: &str = "The task for the subagent. It already sees this conversation's completed turns, so build on them freely and state only what is new.";

/// `description` parameter description (both wordings).
pub const DESCRIPTION_PARAMETER: &str = "A short (3-5 word) description of the delegated task, for display.";

/// The wording a provider calls for, chosen by whether its child inherits the parent's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wording {
    /// The child works in its own context and sees nothing of this conversation.
    Standalone,
    /// The child is seeded with this conversation's completed turns.
    Inherited,
}

impl Wording {
    /// The wording for a provider that does (`true`) or does not inherit the parent's context.
    pub fn for_provider(inherits_parent_context: bool) -> Self {
        if inherits_parent_context {
            Self::Inherited
        } else {
            Self::Standalone
        }
    }

    /// The tool description.
    pub fn description(self) -> &'static str {
        match self {
            Self::Standalone => STANDALONE_DESCRIPTION,
            Self::Inherited => INHERITED_DESCRIPTION,
        }
    }

    /// The `prompt` parameter description.
    pub fn prompt_description(self) -> &'static str {
        match self {
            Self::Standalone => STANDALONE_PROMPT,
            Self::Inherited => INHERITED_PROMPT,
        }
    }
}

// ---- background (07-23 task vocabulary) --------------------------------------

/// Appended to the description when one-shot background runs are enabled.
pub const ONE_SHOT_SUFFIX: &str =
    " Set `run_in_background: true` to return a task id; collect with `task_output` and stop with `task_kill`.";

/// `run_in_background` parameter description, one-shot route.
pub const RUN_IN_BACKGROUND_ONE_SHOT: &str =
    "Run as a background task and return its id; collect with task_output or stop with task_kill.";

/// What a one-shot background call returns.
pub fn started_background(task_id: &str) -> String {
    format!("started background subagent task {task_id}")
}

/// The continuable background suffix (verbatim), chosen when the
/// provider can continue its children.
pub const CONTINUABLE_SUFFIX: &str = " Set `run_in_background: true` to start a continuable background subagent: you receive its subagent id and a task id; collect the result with `task_output`, stop it with `task_kill`, and send follow-up messages with `send_message`.";

/// The `run_in_background` parameter of the continuable route (verbatim).
pub const RUN_IN_BACKGROUND_CONTINUABLE: &str = "Run as a continuable background subagent and return its subagent and task ids; collect with task_output, stop with task_kill, follow up with send_message.";

/// The continuable route's result (verbatim).
pub fn started_continuable(subagent_id: &str, task_id: &str) -> String {
    format!("started subagent {subagent_id} as task {task_id}")
}

/// The continuable route without a control service (our crate names).
pub const CONTROL_UNAVAILABLE: &str =
    "continuable background subagents unavailable: load dsh-subagent's SubagentControl and dsh-tool-tasks";

/// The continuable route without `send_message` among the caller's tools (our crate names).
pub const SEND_MESSAGE_UNAVAILABLE: &str = "continuable background subagents unavailable: load dsh-tool-subagent-control (the advertised send_message tool is not registered)";

/// A background call whose caller cannot collect the result (no `task_output`).
pub const NO_CONTROL_SURFACE: &str =
    "background tasks unavailable: no control surface is attached (load dsh-tool-tasks)";

// ---- call-time errors -------------------------------------------------------

/// The call came without a calling agent.
pub const NO_CALLING_AGENT: &str = "subagent tool requires a calling agent (exec.agent was undefined)";

/// `run_in_background: true` on an instance that does not allow it.
pub const BACKGROUND_DISABLED: &str =
    "run_in_background is disabled for this tool instance (enableRunInBackground: false)";

/// The headline of a run that stopped for `reason` (never called for `completed`).
pub fn stop_headline(reason: &StopReason) -> Cow<'static, str> {
    match reason {
        StopReason::Aborted => dsh_subagent::wording::RUN_CANCELLED.into(),
        StopReason::Interrupted => {
            "subagent run was interrupted: its process is stopping, and a resume goes on with it".into()
        }
        StopReason::Error => "subagent run failed".into(),
        StopReason::MaxTokens => "subagent run hit its token limit before finishing".into(),
        StopReason::Refusal => "subagent declined the task".into(),
        _ => format!("subagent run ended abnormally ({reason})").into(),
    }
}

/// A non-completed run: the headline, then the diagnostic and the partial
/// output when there are any.
pub fn stopped_run(reason: &StopReason, diagnostic: Option<&str>, partial_output: &str) -> String {
    let mut message = stop_headline(reason).into_owned();
    if let Some(diagnostic) = diagnostic {
        message.push_str("\nDiagnostic: ");
        message.push_str(diagnostic);
    }
    if !partial_output.is_empty() {
        message.push_str("\nPartial output before the run ended:\n");
        message.push_str(partial_output);
    }
    message
}

/// Whether a failed run's message already starts with the headline
/// `subagent run failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunHeadline {
    /// It does: the run stopped `error`, and its message says so.
    Present,
    /// It does not (a start that failed, a run that stopped otherwise): the
    /// headline is prefixed.
    Absent,
}

/// A failed run whose release failed too: one headline, then the release
/// failure. The release failure goes on its own line after a multi-line
/// message (diagnostic, partial output) or one with its own headline, so it
/// is never glued to the child's text, and after `; ` after a one-line
/// message.
pub fn run_and_dispose_failed(run_error: &str, headline: RunHeadline, dispose_error: &str) -> String {
    let run = match headline {
        RunHeadline::Present => Cow::Borrowed(run_error),
        RunHeadline::Absent => Cow::Owned(format!("subagent run failed: {run_error}")),
    };
    let separator = if run.contains('\n') || headline == RunHeadline::Present {
        "\n"
    } else {
        "; "
    };
    format!("{run}{separator}dispose failed: {dispose_error}")
}

/// An argument that is not a JSON object.
pub fn arguments_not_object(kind: &str) -> String {
    format!("subagent arguments must be a JSON object with \"description\" and \"prompt\" strings, got {kind}")
}

/// A required argument is missing.
pub fn argument_missing(field: &str) -> String {
    format!("subagent argument \"{field}\" is required")
}

/// An argument has the wrong JSON type.
pub fn argument_wrong_type(field: &str, expected: &str, kind: &str) -> String {
    format!("subagent argument \"{field}\" must be {expected}, got {kind}")
}

/// A text argument is empty or only white space.
pub fn argument_empty(field: &str) -> String {
    format!("subagent argument \"{field}\" must not be empty")
}

/// The call was cancelled while the provider's `start` was pending, and the
/// start did not react within one poll, so the tool dropped it (a
/// cancellation under the provider contract).
pub const START_ABANDONED: &str = "subagent start was cancelled before a child was published; the provider did not stop on its own, so the start was dropped";

pub use dsh_subagent::wording::{RELEASE_ABANDONED, STAGE_DISPOSE, STAGE_RUN, STAGE_START, provider_panicked};

// ---- configuration and mount errors ------------------------------------------

/// `maxDepth` is neither a non-negative safe integer nor `"provider-managed"`.
pub const MAX_DEPTH_INVALID: &str = "subagent maxDepth must be a non-negative safe integer";

/// What a `maxDepth` (`max_depth` in `dsh.toml`) may be, as a reader of a
/// configuration file says it expected.
pub const EXPECTING_MAX_DEPTH: &str = r#"a non-negative integer or "provider-managed""#;

/// A whole-number `maxDepth` past the safe-integer range, as a reader of a
/// configuration file says it.
pub const MAX_DEPTH_PAST_SAFE_INTEGER: &str = "must be at most 9007199254740991";

/// `toolFilter` names neither list.
pub const TOOL_FILTER_EMPTY: &str = "tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` — remove the key or fill the filter";

/// A numeric `maxDepth` over a provider that cannot enforce it.
pub fn cannot_enforce_max_depth(provider: &str) -> String {
    format!(
        "tool-subagent: provider \"{provider}\" cannot enforce maxDepth (no depthLimit capability) — set maxDepth: 'provider-managed' to leave the recursion budget to the provider"
    )
}

/// `enableRunInBackground` on an instance loaded without a task registry:
/// refused when it loads, since the model would be shown `run_in_background`
/// and every call using it refused. `dsh-harness` refuses the same
/// combination with this text.
pub fn background_without_tasks(tool_name: &str) -> String {
    format!(
        "tool-subagent: \"{tool_name}\" enables run_in_background but has no task registry to run background tasks in — load it with one (SubagentToolPlugin::apply_with_tasks or apply_with_control; in dsh-harness, Background::Tasks or Background::Continuable) or leave enableRunInBackground off"
    )
}

/// The info line logged while the provider is absent.
pub fn waiting_for_provider(provider: &str, tool_name: &str) -> String {
    format!(
        "subagent provider \"{provider}\" not registered yet; the \"{tool_name}\" tool will register when it appears"
    )
}

/// Another tool (or another instance) already holds the tool name.
pub fn duplicate_tool_name(name: &str) -> String {
    format!(
        "tool-subagent: a tool named \"{name}\" is already registered — give each tool-subagent instance its own `toolName`"
    )
}

/// Any other malformed configuration: `detail` names the key.
pub fn invalid_config(detail: &str) -> String {
    format!("tool-subagent: {detail}")
}

/// The configuration is not a JSON object.
pub fn config_not_object(kind: &str) -> String {
    format!("config must be a JSON object, got {kind}")
}

/// A configuration key the tool does not know.
pub fn config_unknown_key(key: &str, known: &[&str]) -> String {
    format!("unknown config key \"{key}\" (known keys: {})", known.join(", "))
}

/// `timeout` is not a positive duration with a unit.
pub fn config_timeout_invalid(got: &str) -> String {
    format!(
        "invalid config key \"timeout\": expected a positive duration such as \"90s\", \"10min\", \"1h\" or \"500ms\", got \"{got}\""
    )
}

/// A required configuration key is absent.
pub fn config_key_required(key: &str) -> String {
    format!("config key \"{key}\" is required")
}

/// A configuration key has the wrong JSON type.
pub fn config_key_wrong_type(key: &str, expected: &str, kind: &str) -> String {
    format!("config key \"{key}\" must be {expected}, got {kind}")
}

/// A text configuration key is empty.
pub fn config_key_empty(key: &str) -> String {
    format!("config key \"{key}\" must not be empty")
}

/// `agentOptions.maxTokens` outside 1 ..= the largest safe integer.
pub fn config_max_tokens_out_of_range(max: u64) -> String {
    format!("config key \"agentOptions.maxTokens\" must be an integer from 1 to {max}")
}

/// How a failed delegation kept for paged reads shows in its task's status
/// line: the first line of its error (the headline), at most
/// [`RECORDED_DETAIL_CHARS`] characters, ending in `…` when cut.
/// The same text as every kept result's ([`dsh_tasks::wording::recorded_failure_detail`]).
pub fn recorded_failure_detail(message: &str) -> String {
    dsh_tasks::wording::recorded_failure_detail(message)
}

/// The most characters of a headline [`recorded_failure_detail`] keeps.
pub const RECORDED_DETAIL_CHARS: usize = dsh_tasks::wording::RECORDED_DETAIL_CHARS;

/// A structured configuration key that does not parse.
pub fn config_key_invalid(key: &str, error: &str) -> String {
    format!("config key \"{key}\" is invalid: {error}")
}
