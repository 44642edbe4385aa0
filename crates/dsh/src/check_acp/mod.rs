//! `dsh check acp -- <command> [args]`: runs an ACP agent as `dsh` runs
//! one as a child (its own process group, a scrubbed environment, the
//! teardown ladder) and checks what a parent relies on: `initialize`,
//! authentication where offered, `session/new`, a prompt answered, a
//! cancel honoured in time, errors that say what went wrong, the whole
//! process group gone after stdin closes and after the ladder, stderr
//! kept small, and, where the agent announces subagents, their updates in
//! the order the Subagents RFD asks ([`rfd`]). Prints the report as a table (or `--json`), saves it for
//! `dsh config check`, and exits 1 when a MANDATORY requirement fails.

pub(crate) mod client;
mod rfd;
pub(crate) mod saved;
mod steps;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_process::{Child, ChildSpec, Teardown};
use dsh_subagent_acp::AcpConfig;
use dsh_subagent_conformance::{Report, Status, Tier};

use self::client::{Client, NoAnswer};
use self::steps::{Findings, fail};
use crate::cli::CheckAcpArgs;
use crate::failure::Failure;
use crate::wording;

/// How long each step may take, unless `--timeout` says otherwise.
pub(crate) const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a cancelled turn may take to end: the `subagent` tool's release grace.
const CANCEL_DEADLINE: Duration = dsh_tool_subagent::RELEASE_GRACE;

/// The most stderr the agent may write during the check.
const STDERR_BOUND: usize = 1024 * 1024;

/// The requirements after `acp.start`, skipped when the agent does not start.
const CONVERSATION: [(&str, Tier); 6] = [
    ("acp.initialize", Tier::Mandatory),
    ("acp.authenticate", Tier::Capability),
    ("acp.session-new", Tier::Mandatory),
    ("acp.prompt", Tier::Mandatory),
    ("acp.cancel", Tier::Mandatory),
    ("acp.error-message", Tier::Advisory),
];

/// `dsh check acp`.
pub(crate) async fn run(args: CheckAcpArgs) -> Result<(), Failure> {
    let Some((command, rest)) = args.command.split_first() else {
        return Err(Failure::usage(wording::CHECK_NO_COMMAND));
    };
    let mut config = AcpConfig::new(command).args(rest.iter().cloned());
    for name in &args.pass_env {
        config = config.pass_env(name.clone());
    }
    let report = check(&config, args.timeout.get()).await;
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
    }
    if let Err(error) = saved::save(&args.data_dir, &config, &report) {
        eprintln!("{}", wording::check_not_saved(&args.data_dir, &error));
    }
    if report.passed() {
        Ok(())
    } else {
        Err(Failure::failed(wording::check_failed(&report)))
    }
}

/// Checks the agent `config` runs, each step within `timeout`.
pub(crate) async fn check(config: &AcpConfig, timeout: Duration) -> Report {
    let began = Instant::now();
    let subject = wording::check_subject(config);
    let mut findings = Findings::new();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let cwd = config
        .program
        .launch
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let spec = ChildSpec::of(&config.program.clone().cwd(&cwd)).log_stderr(move |text| {
        counter.fetch_add(text.len(), Ordering::Relaxed);
    });
    let (child, mut client) = match client::spawn(&spec) {
        Ok(spawned) => spawned,
        Err(error) => {
            findings.record(
                "acp.start",
                Tier::Mandatory,
                Err(fail(wording::check_spawn_failed(config, &error))),
            );
            for (id, tier) in CONVERSATION.into_iter().chain(AFTER) {
                findings.skip(id, tier, wording::CHECK_NOT_STARTED);
            }
            return Report::new(subject, findings.into_vec(), began.elapsed());
        }
    };
    findings.record("acp.start", Tier::Mandatory, Ok(None));
    let rfd = match converse(&mut client, &child, &mut findings, config, timeout, &cwd).await {
        Ok(session) => client.trail.judge(&[session]),
        Err(why) => Err((Status::Skipped, why.to_owned())),
    };
    findings.record("acp.subagents-rfd", Tier::Capability, rfd);
    client.close();
    released(&child, &mut findings, config).await;
    let stderr = written.load(Ordering::Relaxed);
    let bounded = if stderr <= STDERR_BOUND {
        Ok(Some(wording::check_stderr_bytes(stderr)))
    } else {
        Err(fail(wording::check_stderr_flood(stderr, STDERR_BOUND)))
    };
    findings.record("acp.stderr-bounded", Tier::Advisory, bounded);
    Report::new(subject, findings.into_vec(), began.elapsed())
}

/// The requirements after the conversation, skipped with it when the agent does not start.
const AFTER: [(&str, Tier); 4] = [
    ("acp.subagents-rfd", Tier::Capability),
    ("acp.exit-at-eof", Tier::Advisory),
    ("acp.teardown", Tier::Mandatory),
    ("acp.stderr-bounded", Tier::Advisory),
];

/// The conversation's steps; once one fails, those that need it are
/// skipped. Returns the session it opened, or why none was.
async fn converse(
    client: &mut Client,
    child: &Child,
    findings: &mut Findings,
    config: &AcpConfig,
    timeout: Duration,
    cwd: &std::path::Path,
) -> Result<String, &'static str> {
    let skip_from = |findings: &mut Findings, from: usize, why: &str| {
        for (id, tier) in &CONVERSATION[from..] {
            findings.skip(id, *tier, why);
        }
    };
    let initialized = match client.request("initialize", steps::initialize_params(), timeout).await {
        Ok(answer) => steps::initialized(answer),
        Err(no) => Err(fail(described(&no, child, "initialize", timeout).await)),
    };
    let initialized = match initialized {
        Ok(initialized) => {
            findings.record("acp.initialize", Tier::Mandatory, Ok(None));
            initialized
        }
        Err(seen) => {
            findings.record("acp.initialize", Tier::Mandatory, Err(seen));
            skip_from(findings, 1, wording::CHECK_AFTER_INITIALIZE);
            return Err(wording::CHECK_AFTER_INITIALIZE);
        }
    };
    let passed = passed_variables(config);
    match steps::auth_method(&initialized.auth_methods, &passed) {
        Ok(None) => findings.skip("acp.authenticate", Tier::Capability, wording::CHECK_NO_AUTH),
        Err(why) => findings.skip("acp.authenticate", Tier::Capability, why),
        Ok(Some(method)) => {
            let answer = client
                .request("authenticate", serde_json::json!({"methodId": method}), timeout)
                .await;
            let step = match answer {
                Ok(Ok(_)) => Ok(Some(wording::check_authenticated(&method))),
                Ok(Err(error)) => Err(fail(wording::check_error_answer("authenticate", &error))),
                Err(no) => Err(fail(described(&no, child, "authenticate", timeout).await)),
            };
            findings.record("acp.authenticate", Tier::Capability, step);
        }
    }
    let params = serde_json::json!({"cwd": cwd, "mcpServers": []});
    let session = match client.request("session/new", params, timeout).await {
        Ok(answer) => steps::session(answer),
        Err(no) => Err(fail(described(&no, child, "session/new", timeout).await)),
    };
    let session = match session {
        Ok(session) => {
            findings.record("acp.session-new", Tier::Mandatory, Ok(None));
            session
        }
        Err(seen) => {
            findings.record("acp.session-new", Tier::Mandatory, Err(seen));
            skip_from(findings, 3, wording::CHECK_AFTER_SESSION);
            return Err(wording::CHECK_AFTER_SESSION);
        }
    };
    turns(client, child, findings, &session, timeout).await;
    Ok(session)
}

/// A prompt, a cancelled prompt, and an error.
async fn turns(client: &mut Client, child: &Child, findings: &mut Findings, session: &str, timeout: Duration) {
    let answer = client
        .request("session/prompt", steps::prompt_params(session), timeout)
        .await;
    let answered = match answer {
        Err(no) => Err(fail(described(&no, child, "session/prompt", timeout).await)),
        answer => steps::answered(answer, client, timeout),
    };
    findings.record("acp.prompt", Tier::Mandatory, answered);
    if client.broken {
        findings.skip("acp.cancel", Tier::Mandatory, wording::CHECK_AFTER_BREAK);
        findings.skip("acp.error-message", Tier::Advisory, wording::CHECK_AFTER_BREAK);
        return;
    }
    let cancelled = steps::cancelled(client, session, CANCEL_DEADLINE).await;
    findings.record("acp.cancel", Tier::Mandatory, cancelled);
    if client.broken {
        return findings.skip("acp.error-message", Tier::Advisory, wording::CHECK_AFTER_BREAK);
    }
    let error = steps::error_message(client, timeout).await;
    findings.record("acp.error-message", Tier::Advisory, error);
}

/// The variables the agent is given beyond the base ones.
fn passed_variables(config: &AcpConfig) -> Vec<String> {
    match &config.program.launch.environment {
        dsh_process::Environment::Scrubbed { pass } => pass.clone(),
        _ => Vec::new(),
    }
}

/// What the agent did instead of answering `method`, with how it ended
/// and its last stderr line when it closed the connection.
async fn described(no: &NoAnswer, child: &Child, method: &str, deadline: Duration) -> String {
    let said = no.said(method, deadline);
    if !matches!(no, NoAnswer::Closed | NoAnswer::Write(_)) {
        return said;
    }
    let exit = child.wait_exit(Duration::from_secs(1)).await;
    let stderr = child.stderr_tail_after_close(Duration::from_millis(200)).await;
    wording::check_with_exit(&said, exit, stderr.last_line().as_deref())
}

/// `acp.exit-at-eof` and `acp.teardown`: the ladder, climbed from closed stdin.
async fn released(child: &Child, findings: &mut Findings, config: &AcpConfig) {
    let ladder = &config.program.launch.teardown;
    let (at_eof, torn) = match child.teardown(ladder).await {
        Ok(Teardown::Eof) => (Ok(None), Ok(Some(wording::CHECK_GONE_AT_EOF.to_owned()))),
        Ok(how) => (
            Err(fail(wording::check_outlived_eof(ladder.eof_grace, how))),
            Ok(Some(wording::check_gone_after(how))),
        ),
        Err(error) => (
            Err(fail(wording::check_outlived_eof(ladder.eof_grace, Teardown::Killed))),
            Err(fail(wording::check_survived(&error))),
        ),
    };
    findings.record("acp.exit-at-eof", Tier::Advisory, at_eof);
    findings.record("acp.teardown", Tier::Mandatory, torn);
}
