//! The steps of the check, in the order an ACP client takes them, each
//! one requirement of the report: initialize, authenticate, session/new,
//! a prompt, a cancelled prompt, an error, then the teardown.

use std::time::{Duration, Instant};

use dsh_subagent_conformance::{Finding, Status, Tier};
use serde_json::{Value, json};

use super::client::{Answer, Client, NoAnswer};
use crate::wording;

/// The prompts the check sends.
const PROMPT: &str = dsh_subagent_conformance::PROMPT;

/// How a step went: passed (with a note), or what was seen.
pub(super) type Step = Result<Option<String>, (Status, String)>;

/// The findings, as the steps produce them.
pub(super) struct Findings {
    found: Vec<Finding>,
    began: Instant,
}

impl Findings {
    pub(super) fn new() -> Self {
        Self {
            found: Vec::new(),
            began: Instant::now(),
        }
    }

    /// Records the outcome of requirement `id` (timed since the last one).
    pub(super) fn record(&mut self, id: &'static str, tier: Tier, step: Step) {
        let (status, detail) = match step {
            Ok(note) => (Status::Pass, note),
            Err((status, seen)) => (status, Some(seen)),
        };
        let mut finding = Finding::new(id, tier, status, wording::check_title(id)).with_elapsed(self.began.elapsed());
        if let Some(detail) = detail {
            finding = finding.with_detail(detail);
        }
        self.began = Instant::now();
        self.found.push(finding);
    }

    /// Records `id` as skipped, for `why`.
    pub(super) fn skip(&mut self, id: &'static str, tier: Tier, why: impl Into<String>) {
        self.record(id, tier, Err((Status::Skipped, why.into())));
    }

    pub(super) fn into_vec(self) -> Vec<Finding> {
        self.found
    }
}

/// A failure seen.
pub(super) fn fail(seen: impl Into<String>) -> (Status, String) {
    (Status::Fail, seen.into())
}

/// What the agent knows of itself, from its `initialize` answer.
pub(super) struct Initialized {
    pub(super) auth_methods: Vec<Value>,
}

/// `acp.initialize`: a protocol version in the answer.
pub(super) fn initialized(answer: Answer) -> Result<Initialized, (Status, String)> {
    let result = answer.map_err(|error| fail(wording::check_error_answer("initialize", &error)))?;
    if !result.get("protocolVersion").is_some_and(Value::is_u64) {
        return Err(fail(wording::check_no_protocol_version(&result)));
    }
    Ok(Initialized {
        auth_methods: result
            .get("authMethods")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    })
}

/// The `initialize` request of a client without a file system or
/// terminal, that takes subagent sessions (the Subagents RFD), as dsh
/// does as the parent of every ACP child.
pub(super) fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false, "subagents": {}},
        "clientInfo": {"name": "dsh check acp", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// `acp.authenticate`: the method to use, if the agent offers one the
/// check can use without a person (an `env_var` method whose variable the
/// agent was given).
pub(super) fn auth_method(methods: &[Value], passed: &[String]) -> Result<Option<String>, String> {
    if methods.is_empty() {
        return Ok(None);
    }
    let usable = methods.iter().find(|method| {
        method["type"] == "env_var"
            && method["varName"]
                .as_str()
                .is_some_and(|name| passed.iter().any(|p| p == name) && std::env::var_os(name).is_some())
    });
    match usable.and_then(|method| method["id"].as_str()) {
        Some(id) => Ok(Some(id.to_owned())),
        None => Err(wording::check_auth_unusable(methods)),
    }
}

/// `acp.session-new`: a session id.
pub(super) fn session(answer: Answer) -> Result<String, (Status, String)> {
    let result = answer.map_err(|error| fail(wording::check_error_answer("session/new", &error)))?;
    match result.get("sessionId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(fail(wording::check_no_session_id(&result))),
    }
}

/// The params of a prompt in `session`.
pub(super) fn prompt_params(session: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]})
}

/// The stop reason of a prompt's answer.
fn stop_reason(answer: &Answer) -> Option<&str> {
    answer.as_ref().ok()?.get("stopReason")?.as_str()
}

/// `acp.prompt`: answered `end_turn`, with text.
pub(super) fn answered(answer: Result<Answer, NoAnswer>, client: &mut Client, deadline: Duration) -> Step {
    let answer = answer.map_err(|no| fail(no.said("session/prompt", deadline)))?;
    let text = client.take_text();
    match stop_reason(&answer) {
        Some("end_turn") if !text.trim().is_empty() => Ok(Some(wording::check_answered(&text, &client.updates))),
        Some("end_turn") => Err(fail(wording::CHECK_NO_TEXT)),
        Some(other) => Err(fail(wording::check_stopped(other))),
        None => Err(fail(match &answer {
            Err(error) => wording::check_error_answer("session/prompt", error),
            Ok(result) => wording::check_no_stop_reason(result),
        })),
    }
}

/// `acp.cancel`: a prompt cancelled at once ends `cancelled` in time.
pub(super) async fn cancelled(client: &mut Client, session: &str, deadline: Duration) -> Step {
    let sent = client.send_request("session/prompt", prompt_params(session)).await;
    let id = sent.map_err(|no| fail(no.said("session/prompt", deadline)))?;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await
        .map_err(|no| fail(no.said("session/cancel", deadline)))?;
    let began = Instant::now();
    let answer = client.answer(id, deadline).await.map_err(|no| {
        fail(wording::check_cancel_unanswered(
            &no.said("the cancelled session/prompt", deadline),
        ))
    })?;
    let _ = client.take_text();
    match stop_reason(&answer) {
        Some("cancelled") => Ok(Some(wording::check_cancelled_in(began.elapsed()))),
        Some("end_turn") => Ok(Some(wording::CHECK_ENDED_BEFORE_CANCEL.to_owned())),
        Some(other) => Err(fail(wording::check_cancel_stopped(other))),
        None => Err(fail(match &answer {
            Err(error) => wording::check_error_answer("session/prompt", error),
            Ok(result) => wording::check_no_stop_reason(result),
        })),
    }
}

/// `acp.error-message`: a method the agent does not have is refused with
/// an error whose message says so (not only its `data`).
pub(super) async fn error_message(client: &mut Client, deadline: Duration) -> Step {
    let answer = client
        .request("dsh/conformance-no-such-method", json!({}), deadline)
        .await
        .map_err(|no| fail(no.said("an unknown method", deadline)))?;
    let Err(error) = answer else {
        return Err(fail(wording::CHECK_UNKNOWN_METHOD_ANSWERED));
    };
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    let code = error.get("code").and_then(Value::as_i64);
    match code {
        None => Err(fail(wording::check_error_without_code(&error))),
        Some(_) if message.trim().is_empty() => Err(fail(wording::check_error_without_message(&error))),
        Some(code) => Ok(Some(wording::check_error_read(code, message))),
    }
}
