//! `dsh run`: a parent agent (new, or resumed with its whole tree) with the
//! delegation tools.
//!
//! No way out of a run drops work silently. When the parent's model answers
//! while children it started in the background still run, the run waits for
//! them (or, with `--no-wait`, stops them resumably); the first SIGINT or
//! SIGTERM stops the whole tree resumably, and a second exits at once. A run
//! that leaves work behind says which and gives the command that goes on.

use std::sync::{Arc, OnceLock};

use dsh_agent::transcript::TreeLock;
use dsh_agent::{Agent, AgentStop, EndOfRun, RunOutcome};
use dsh_tools::{AgentId, CancellationToken};

use crate::cli::RunArgs;
use crate::failure::Failure;
use crate::harness::Surface;
use crate::progress::Progress;
use crate::resume::PendingCalls;
use crate::runtime::SharedRuntime;
use crate::wording;

/// Runs `task` (read and checked from the arguments, [`crate::task_input`]);
/// with `--resume`, the task is the optional message that joins the resumed
/// turn.
pub(crate) async fn run(args: RunArgs, task: Option<String>) -> Result<(), Failure> {
    let config = crate::self_mount::load_for_mounting(args.agent.config.as_deref())?;
    // Once per run: a resume goes on with a run that was warned when it began.
    if args.resume.is_none() {
        crate::config_check::warn_uncapped(config.as_ref());
    }
    // A resume is asked for to let the work finish: it waits unless told
    // not to on its own command line; `[run] wait` is for new runs.
    let waits = !args.no_wait && (args.resume.is_some() || config.as_ref().is_none_or(|config| config.run.wait));
    // The summary names the children's transcripts.
    let progress = Arc::new(Progress::for_run(args.quiet, args.plain).listing_children());
    let mut shared = SharedRuntime::new(
        &args.agent,
        config.as_ref(),
        Some(&args.data_dir),
        progress.clone(),
        Surface::Agent,
    )?;
    shared.set_end_of_run(if waits {
        EndOfRun::WaitForBackground
    } else {
        EndOfRun::Leave
    });
    // One process runs a tree at a time; the lock also tells `dsh tree`
    // that it runs, and is let go however this process ends.
    let (parent, pending, _running) = parent(&args, &shared)?;
    // After the parent is found: an unknown id starts no server.
    shared.mount_mcp_servers().await?;
    // Every tool is mounted: a resumed turn whose calls need a tool no
    // longer offered is refused before any request is sent.
    if let Some(pending) = &pending {
        pending.check(&parent)?;
    }
    // SIGINT or SIGTERM stops the run resumably: its children are stopped
    // and released, their turns left open, its recording closed as
    // interrupted. A second signal exits at once. Caught from here on,
    // before the banner says the run began.
    let cancel = CancellationToken::new();
    let stopped = Arc::new(OnceLock::new());
    watch_signals(&shared, cancel.clone(), stopped.clone(), args.quiet);
    if !args.quiet {
        eprintln!("{}", shared.banner);
    }
    let info = parent.info();
    let label = info.label.as_deref().unwrap_or(wording::RUN_LABEL);
    progress.start_tree(info.id.as_str(), label, &info.model);

    let outcome = if pending.is_some() {
        parent.resume(task, &cancel).await
    } else {
        parent.run(task.unwrap_or_default(), &cancel).await
    };
    progress.finish_tree(&outcome.stop.to_string());
    // Taken before background children still running are stopped: those
    // are not failures of the run.
    let all_failed = progress.delegations().all_failed();
    // Background children still running (`--no-wait`, a parent that ended
    // on a limit) are stopped resumably, never dropped: they go on when the
    // run is resumed.
    let left = shared.running_tasks(parent.id());
    if !left.is_empty() || outcome.stop == AgentStop::Interrupted {
        shared.interrupt();
    }
    shared.tasks().dispose_owner(parent.id(), wording::RUN_FINISHED).await;
    shared.release_mcp_servers().await;
    // The run is over: what the [data] bounds no longer keep goes (this
    // run's own transcripts were just written, so they stay).
    if let Some(retention) = shared.retention() {
        retention.sweep().await;
    }
    let recorded = shared.finish_recording(args.quiet, stopped.get().copied());

    summary(&args, &progress, &parent, all_failed);
    ended(&args, &parent, outcome, &left, recorded)
}

/// The run's parent, new or resumed (with the tools its open turn's calls
/// still need), and its tree's lock. A resumed tree is locked before its
/// transcript is touched (a torn tail is cut off), so a second resume of a
/// busy tree changes nothing.
fn parent(args: &RunArgs, shared: &SharedRuntime) -> Result<(Agent, Option<PendingCalls>, Option<TreeLock>), Failure> {
    Ok(match &args.resume {
        Some(id) => {
            let id = match id.as_str() {
                "" => crate::resume::most_recent_interrupted(&args.data_dir)
                    .ok_or_else(|| Failure::usage(wording::nothing_to_resume(&args.data_dir.join("agents"))))?,
                id => id.to_owned(),
            };
            let lock = match crate::resume::is_parent_id(&args.data_dir, &id) {
                true => Some(lock_tree(&args.data_dir, &AgentId::new(id.as_str()))?),
                // Unknown: the resume refuses it, listing the parents.
                false => None,
            };
            let resumed = shared.resume(&id)?;
            if !args.quiet {
                eprintln!("{}", wording::resuming(&id));
            }
            for repair in resumed.repairs {
                eprintln!("{}", wording::resume_repaired(&id, &repair));
            }
            (resumed.agent, Some(resumed.pending), lock)
        }
        None => {
            let parent = shared.parent(wording::RUN_LABEL)?;
            let lock = lock_tree(&args.data_dir, parent.id())?;
            (parent, None, Some(lock))
        }
    })
}

/// What the run's end prints, and how it exits: the answer, the children
/// left to resume and the command that goes on.
fn ended(
    args: &RunArgs,
    parent: &Agent,
    outcome: RunOutcome,
    left: &[String],
    recorded: Result<(), Failure>,
) -> Result<(), Failure> {
    let resume = wording::resume_command(&args.data_dir, parent.id());
    match outcome.stop {
        AgentStop::Completed if left.is_empty() => {
            println!("{}", outcome.text);
            recorded
        }
        AgentStop::Completed => {
            println!("{}", outcome.text);
            for task in left {
                eprintln!("{}", wording::left_running(task));
            }
            recorded?;
            Err(Failure::work_left(wording::work_left(left.len(), &resume)))
        }
        AgentStop::Interrupted | AgentStop::Cancelled => Err(Failure::interrupted(wording::interrupted(&resume))),
        stop => {
            if !outcome.text.is_empty() {
                println!("{}", outcome.text);
            }
            for task in left {
                eprintln!("{}", wording::left_running(task));
            }
            Err(Failure::failed(wording::run_unfinished(&stop)))
        }
    }
}

/// Takes the lock of `root`'s tree: refused while another process runs it.
fn lock_tree(data_dir: &std::path::Path, root: &AgentId) -> Result<TreeLock, Failure> {
    TreeLock::acquire(data_dir, root).map_err(|error| Failure::usage(wording::failed(&error)))
}

/// The run's closing lines on stderr: where the transcripts are and what
/// was spent (unless quiet), then that every delegation failed when every
/// one did, whatever the parent's model wrote (its answer may read as a
/// success while none of its children did any of the work). The lines of
/// work left to resume, when there is some, follow: every delegation that
/// was still running was not one that failed.
fn summary(args: &RunArgs, progress: &Progress, parent: &Agent, all_failed: Option<String>) {
    if !args.quiet {
        let started = progress.children();
        let dir = args.data_dir.join("agents");
        // Only in-process children write here; an ACP child keeps its own.
        let children: Vec<_> = started
            .iter()
            .filter(|id| dir.join(format!("{id}.jsonl")).is_file())
            .cloned()
            .collect();
        eprintln!("{}", wording::transcripts_line(&dir, parent.id(), &children));
        let waits = progress.waits();
        eprintln!(
            "{}",
            wording::usage_line(&parent.usage(), started.len(), waits.calls, waits.total)
        );
    }
    if let Some(line) = all_failed {
        eprintln!("{line}");
    }
}

/// Stops the run resumably at the first SIGINT or SIGTERM (the runtime is
/// interrupted, then `cancel` fires), and exits at once at the second.
fn watch_signals(
    shared: &SharedRuntime,
    cancel: CancellationToken,
    stopped: Arc<OnceLock<crate::signal::Stop>>,
    quiet: bool,
) {
    let interrupt = shared.interrupter();
    let first = crate::signal::stopped();
    tokio::spawn(async move {
        let stop = first.await;
        let _ = stopped.set(stop);
        if !quiet {
            eprintln!("{}", wording::STOPPING);
        }
        interrupt();
        cancel.cancel();
        crate::signal::stopped().await;
        // Nothing it started outlives it, even without the teardown ladder.
        dsh_process::kill_every_group();
        eprintln!("{}", wording::STOPPED_AT_ONCE);
        std::process::exit(i32::from(crate::failure::INTERRUPTED_EXIT));
    });
}
