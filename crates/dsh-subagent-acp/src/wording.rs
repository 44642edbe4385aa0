//! Every text this provider shows a model or a person, in one place.

use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason as AcpStop;
use dsh_subagent_api::bound_diagnostic;

use crate::config::AcpAuth;
use crate::diagnostic::Diagnostic;
use crate::provider::stop_name;
use crate::transport::AuthOffer;

/// A start whose token was already cancelled: nothing was spawned.
pub(crate) const ABORTED_BEFORE_START: &str = "subagent request was aborted before the ACP child started";

/// A start cancelled during the handshake: the child was reaped first.
pub(crate) const ABORTED_WHILE_STARTING: &str =
    "subagent request was aborted while the ACP child was starting; the child was stopped";

pub(crate) fn no_cwd(error: &std::io::Error) -> String {
    format!(
        "subagent-acp: no working directory for the child — configure `cwd` (the parent's working directory is unavailable: {error})"
    )
}

pub(crate) fn spawn_failed(command: &Path, error: &std::io::Error) -> String {
    format!(
        "subagent ACP child could not be started: `{}`: {error}",
        command.display()
    )
}

pub(crate) fn start_failed(diagnostic: &Diagnostic) -> String {
    bound_diagnostic(format!("subagent ACP child failed to start: {diagnostic}"))
}

pub(crate) fn error_stop(stop: AcpStop) -> String {
    format!("the child ended the turn with stop reason {}", stop_name(stop))
}

pub(crate) fn cancel_ignored(grace: Duration) -> String {
    format!(
        "ACP stage session/cancel: the child did not end the turn within {} ms of session/cancel; it was stopped at release",
        grace.as_millis()
    )
}

/// A turn that ran out of time; `acknowledged` when the child ended it at
/// `session/cancel`.
pub(crate) fn turn_timed_out(limit: Duration, acknowledged: bool, grace: Duration) -> String {
    let mut text = format!(
        "the turn did not end within the turn timeout ({} ms), so it was cancelled",
        limit.as_millis()
    );
    if !acknowledged {
        text.push_str(&format!(
            "; the child did not end the turn within {} ms of session/cancel and was stopped at release",
            grace.as_millis()
        ));
    }
    text
}

/// The methods a child offered, one per line.
fn offers_list(offers: &[AuthOffer]) -> String {
    let mut text = String::from("the child offers these authentication methods:");
    for offer in offers {
        text.push_str(&format!("\n- \"{}\"", offer.id));
        if !offer.name.is_empty() {
            text.push_str(&format!(" ({})", offer.name));
        }
        if let Some(var) = &offer.env_var {
            text.push_str(&format!(", env_var {var}"));
        }
        if let Some(description) = &offer.description {
            text.push_str(&format!(": {description}"));
        }
    }
    text
}

/// How to choose a method, after the list.
const AUTH_HOW: &str = "`AcpAuth::Method(\"<id>\")` calls authenticate with that id; `AcpAuth::FirstEnvVar` uses the first env_var method whose variable is set in the child's environment (pass it with `inherit_env` or `env`)";

/// A child that refused with "authentication required", with what it offered
/// and what to configure.
pub(crate) fn auth_required(offers: &[AuthOffer], auth: &AcpAuth) -> String {
    if offers.is_empty() {
        return "the child requires authentication but offered no method at initialize; give it its credentials (`inherit_env`, `env`) or log it in beforehand".to_owned();
    }
    let list = offers_list(offers);
    match auth {
        AcpAuth::FirstEnvVar => format!(
            "{list}\nno env_var method had its variable set in the child's environment; pass one with `inherit_env` or `env`, or choose a method with `AcpAuth::Method(\"<id>\")`"
        ),
        AcpAuth::Method(id) => format!("{list}\nthe configured method \"{id}\" did not authenticate the child"),
        AcpAuth::None => format!("{list}\nno authentication method is configured; choose one: {AUTH_HOW}"),
    }
}

/// A configured method the child does not offer.
pub(crate) fn auth_not_offered(id: &str, offers: &[AuthOffer]) -> String {
    let head = format!("the configured authentication method \"{id}\" is not among those the child offers");
    if offers.is_empty() {
        format!("{head} (it offered none)")
    } else {
        format!("{head}\n{}", offers_list(offers))
    }
}
