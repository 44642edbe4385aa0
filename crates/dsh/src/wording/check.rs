//! `dsh check acp`: the requirements' titles, what the check saw, and the
//! lines `dsh config check` prints of a configured ACP child's check.

use std::fmt::Display;
use std::path::Path;
use std::time::Duration;

use dsh_process::{ExitInfo, Teardown, TeardownError};
use dsh_subagent_acp::AcpConfig;
use dsh_subagent_conformance::Report;
use serde_json::Value;

/// The title of each requirement of the ACP check.
pub(crate) fn check_title(id: &str) -> String {
    let title = match id {
        "acp.start" => "the command starts, in a process group of its own, with a scrubbed environment",
        "acp.initialize" => "initialize is answered with a protocol version",
        "acp.authenticate" => "where authentication methods are advertised, one the parent can use succeeds",
        "acp.session-new" => "session/new opens a session",
        "acp.prompt" => "a prompt is answered end_turn, with streamed text",
        "acp.cancel" => "a turn cancelled with session/cancel ends cancelled within 5 s",
        "acp.error-message" => "an error says what went wrong in its message, with a code",
        "acp.subagents-rfd" => "where the agent announces subagents, its updates follow the Subagents RFD",
        "acp.exit-at-eof" => "the whole process group is gone soon after stdin closes",
        "acp.teardown" => {
            "after the teardown ladder (end of input, SIGTERM, SIGKILL) nothing of the process group remains"
        }
        "acp.stderr-bounded" => "stderr stays under 1 MiB for the whole check",
        other => other,
    };
    title.to_owned()
}

/// A duration as the check prints it: `500 ms`, `10 s`.
fn ms(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// The command line a report is about.
pub(crate) fn check_subject(config: &AcpConfig) -> String {
    let mut words = vec![config.program.command.display().to_string()];
    words.extend(config.program.args.iter().cloned());
    words.join(" ")
}

pub(crate) const CHECK_NO_COMMAND: &str =
    "dsh check acp: name the agent's command after `--`, as in `dsh check acp -- dsh acp`";
pub(crate) const CHECK_NO_SUCH_CLIENT_METHOD: &str =
    "dsh check acp offers no file system, terminal or other client method";
pub(crate) const CHECK_STDIN_CLOSED: &str = "the agent's stdin is closed";
pub(crate) const CHECK_NOT_STARTED: &str = "not checked: the agent did not start";
pub(crate) const CHECK_AFTER_INITIALIZE: &str = "not checked: initialize was not answered";
pub(crate) const CHECK_AFTER_SESSION: &str = "not checked: no session was opened";
pub(crate) const CHECK_AFTER_BREAK: &str = "not checked: the connection to the agent broke (see above)";
pub(crate) const CHECK_NO_AUTH: &str = "the agent advertises no authentication method";
pub(crate) const CHECK_RFD_NONE: &str =
    "the agent announced no subagent (the check advertised clientCapabilities.subagents, as dsh does)";
pub(crate) const CHECK_NO_TEXT: &str = "the turn ended end_turn without any agent_message_chunk text";
pub(crate) const CHECK_ENDED_BEFORE_CANCEL: &str =
    "the turn ended end_turn before the agent read session/cancel: nothing was left to cancel";
pub(crate) const CHECK_UNKNOWN_METHOD_ANSWERED: &str =
    "a request of a method the agent does not have was answered with a result, not an error";
pub(crate) const CHECK_GONE_AT_EOF: &str = "gone at the end of input";

pub(crate) fn check_spawn_failed(config: &AcpConfig, error: &dyn Display) -> String {
    format!("cannot start `{}`: {error}", config.program.command.display())
}

pub(crate) fn check_timed_out(method: &str, deadline: Duration) -> String {
    format!("{method} was not answered within {}", ms(deadline))
}

pub(crate) fn check_closed(method: &str) -> String {
    format!("the agent closed its stdout before answering {method}")
}

pub(crate) fn check_not_json(method: &str, start: &str) -> String {
    format!("the agent wrote a line to stdout that is not JSON before answering {method}: {start:?}")
}

pub(crate) fn check_line_too_long(method: &str, mib: usize) -> String {
    format!("the agent wrote a line longer than {mib} MiB to stdout before answering {method}")
}

pub(crate) fn check_flood(method: &str, mib: usize) -> String {
    format!("the agent wrote more than {mib} MiB to stdout without answering {method}")
}

pub(crate) fn check_not_sent(method: &str, error: &str) -> String {
    format!("could not send {method} to the agent: {error}")
}

/// `said`, with how the agent ended and its last stderr line.
pub(crate) fn check_with_exit(said: &str, exit: Option<ExitInfo>, stderr: Option<&str>) -> String {
    let mut text = said.to_owned();
    if let Some(exit) = exit {
        text.push_str(&format!(" (it ended: {exit})"));
    }
    if let Some(line) = stderr {
        text.push_str(&format!("; its last stderr line: {line}"));
    }
    text
}

/// An error answer, in a line: its code and message (and data, when the
/// message alone says little).
pub(crate) fn check_error_answer(method: &str, error: &Value) -> String {
    let code = error.get("code").map_or_else(|| "no code".to_owned(), Value::to_string);
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    match error.get("data") {
        Some(data) if !data.is_null() => format!("{method} was refused ({code}): {message}; data: {data}"),
        _ => format!("{method} was refused ({code}): {message}"),
    }
}

pub(crate) fn check_no_protocol_version(result: &Value) -> String {
    format!("the answer to initialize has no protocolVersion: {}", short(result))
}

pub(crate) fn check_no_session_id(result: &Value) -> String {
    format!("the answer to session/new has no sessionId: {}", short(result))
}

pub(crate) fn check_no_stop_reason(result: &Value) -> String {
    format!("the answer to session/prompt has no stopReason: {}", short(result))
}

/// A JSON value cut to 200 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

pub(crate) fn check_auth_unusable(methods: &[Value]) -> String {
    let ids: Vec<String> = methods
        .iter()
        .map(|method| {
            let id = method["id"].as_str().unwrap_or("?");
            match method["varName"].as_str() {
                Some(var) => format!("{id} (variable {var})"),
                None => id.to_owned(),
            }
        })
        .collect();
    format!(
        "the agent advertises {}, none usable without a person: pass an env_var method's variable with --pass-env VAR",
        ids.join(", ")
    )
}

pub(crate) fn check_authenticated(method: &str) -> String {
    format!("authenticated with {method}")
}

pub(crate) fn check_answered(text: &str, updates: &[String]) -> String {
    format!(
        "answered with {} bytes of text; updates seen: {}",
        text.len(),
        updates.join(", ")
    )
}

pub(crate) fn check_stopped(reason: &str) -> String {
    format!("the turn ended {reason}, not end_turn")
}

pub(crate) fn check_cancel_unanswered(said: &str) -> String {
    format!("{said}: a cancelled turn must end, with stopReason cancelled")
}

pub(crate) fn check_cancel_stopped(reason: &str) -> String {
    format!("the cancelled turn ended {reason}, not cancelled")
}

pub(crate) fn check_cancelled_in(elapsed: Duration) -> String {
    format!("ended cancelled {} after session/cancel", ms(elapsed))
}

pub(crate) fn check_error_without_code(error: &Value) -> String {
    format!("the error has no code: {}", short(error))
}

pub(crate) fn check_error_without_message(error: &Value) -> String {
    format!(
        "the error's message is empty, so a parent shows nothing of its cause: {}",
        short(error)
    )
}

pub(crate) fn check_error_read(code: i64, message: &str) -> String {
    format!("refused ({code}): {message}")
}

pub(crate) fn check_outlived_eof(grace: Duration, how: Teardown) -> String {
    let rung = match how {
        Teardown::Eof => "its end of input",
        Teardown::Terminated => "SIGTERM",
        Teardown::Killed => "SIGKILL",
    };
    format!("still running {} after its stdin closed; {rung} ended it", ms(grace))
}

pub(crate) fn check_gone_after(how: Teardown) -> String {
    match how {
        Teardown::Eof => CHECK_GONE_AT_EOF.to_owned(),
        Teardown::Terminated => "gone after SIGTERM".to_owned(),
        Teardown::Killed => "gone after SIGKILL".to_owned(),
    }
}

pub(crate) fn check_survived(error: &TeardownError) -> String {
    format!("the process group outlived the whole ladder: {error}")
}

/// A session id as the RFD check names it: quoted, cut to 60 characters.
fn sid(id: &str) -> String {
    match id.char_indices().nth(60) {
        Some((at, _)) => format!("`{}…`", &id[..at]),
        None => format!("`{id}`"),
    }
}

pub(crate) fn check_rfd_overflow(max: usize) -> String {
    format!("more than {max} session updates: their order was not judged")
}

/// The RFD check's finding when rules broke: the first few, and how many more.
pub(crate) fn check_rfd_broken(named: &[&str], more: usize) -> String {
    let named = named.join("; ");
    if more == 0 {
        named
    } else {
        format!("{named}; and {more} more")
    }
}

pub(crate) fn check_rfd_no_child(session: &str) -> String {
    format!("a subagent_update on {} names no sessionId", sid(session))
}

pub(crate) fn check_rfd_root_announced(child: &str) -> String {
    format!(
        "{}, a session the client opened, was announced as a subagent",
        sid(child)
    )
}

pub(crate) fn check_rfd_on_ended(child: &str, session: &str) -> String {
    format!(
        "{} was announced on {} after that subagent's terminal state",
        sid(child),
        sid(session)
    )
}

pub(crate) fn check_rfd_on_unknown(child: &str, session: &str) -> String {
    format!(
        "{} was announced on {}, neither a session the client opened nor an announced subagent",
        sid(child),
        sid(session)
    )
}

pub(crate) fn check_rfd_second_end(child: &str) -> String {
    format!("{} ended twice: an idle state after its terminal one", sid(child))
}

pub(crate) fn check_rfd_after_end(child: &str, kind: &str) -> String {
    format!("{kind} bearing {}'s id came after its terminal state", sid(child))
}

pub(crate) fn check_rfd_before_announce(child: &str, kind: &str) -> String {
    format!(
        "{kind} on {} came before its announcement: a subagent is announced on its parent's session before any update bearing its id",
        sid(child)
    )
}

pub(crate) fn check_rfd_never_announced(session: &str, kind: &str) -> String {
    format!(
        "{kind} on {}, a session neither opened by the client nor announced",
        sid(session)
    )
}

pub(crate) fn check_rfd_open_at_answer(child: &str, stop: &str) -> String {
    format!(
        "session/prompt answered {stop} while its subagent {} had not ended: each announced subagent ends, with its terminal state, before its parent's prompt returns",
        sid(child)
    )
}

/// The RFD check passed: how many children (and runs: a reusable child
/// runs again), and how each run ended.
pub(crate) fn check_rfd_followed(announced: usize, runs: usize, stops: &[(String, usize)]) -> String {
    let stops: Vec<String> = stops.iter().map(|(stop, count)| format!("{stop} {count}")).collect();
    let noun = if announced == 1 { "subagent" } else { "subagents" };
    let runs = if runs == announced {
        String::new()
    } else {
        format!(" ({runs} runs)")
    };
    format!(
        "{announced} {noun} announced{runs}, each on its parent's session before its own updates, each run ended once after its last update (idle: {})",
        stops.join(", ")
    )
}

pub(crate) fn check_stderr_bytes(bytes: usize) -> String {
    format!("{bytes} bytes of stderr")
}

pub(crate) fn check_stderr_flood(bytes: usize, bound: usize) -> String {
    format!("{bytes} bytes of stderr, more than {bound}")
}

/// The line `dsh check acp` exits with when a requirement failed.
pub(crate) fn check_failed(report: &Report) -> String {
    let failed: Vec<&str> = report.failures().map(|finding| finding.id.as_str()).collect();
    format!("dsh check acp: {} failed {}", report.subject, failed.join(", "))
}

pub(crate) fn check_not_saved(data_dir: &Path, error: &dyn Display) -> String {
    format!(
        "dsh check acp: the report was not saved under {}: {error}",
        data_dir.display()
    )
}

/// `dsh config check`: a configured ACP child's last saved check.
pub(crate) fn config_check_acp_saved(tool: &str, report: &Report, path: &Path) -> String {
    let failed: Vec<&str> = report.failures().map(|finding| finding.id.as_str()).collect();
    let verdict = if failed.is_empty() {
        "PASS".to_owned()
    } else {
        format!("FAIL ({})", failed.join(", "))
    };
    format!(
        "dsh: ACP child of {tool} ({}): last check {verdict} ({})",
        report.subject,
        path.display()
    )
}

/// `dsh config check`: a configured ACP child never checked.
pub(crate) fn config_check_acp_unchecked(tool: &str, config: &AcpConfig) -> String {
    format!(
        "dsh: ACP child of {tool} ({}): no saved check; `dsh check acp -- {}` or `dsh config check --probe` checks it",
        check_subject(config),
        check_subject(config)
    )
}

/// `dsh config check --probe`: a configured ACP child checked live.
pub(crate) fn config_check_acp_probed(tool: &str, report: &Report) -> String {
    format!("dsh: ACP child of {tool}, checked now:\n{report}")
}

/// `dsh config check --probe` when a probed child failed.
pub(crate) fn config_check_probe_failed(tools: &[String]) -> String {
    format!(
        "dsh config check: the check of the ACP child of {} failed",
        tools.join(", ")
    )
}
