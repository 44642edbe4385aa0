//! `dsh run`: a parent agent (new, or resumed) with the delegation tools.

use std::sync::{Arc, OnceLock};

use dsh_agent::{Agent, AgentStop};
use dsh_tools::CancellationToken;

use crate::cli::RunArgs;
use crate::failure::Failure;
use crate::harness::Surface;
use crate::progress::Progress;
use crate::runtime::SharedRuntime;
use crate::wording;

/// Runs `task` (read and checked from the arguments, [`crate::task_input`]).
pub(crate) async fn run(args: RunArgs, task: String) -> Result<(), Failure> {
    let config = crate::self_mount::load_for_mounting(args.agent.config.as_deref())?;
    // The summary names the children's transcripts.
    let progress = Arc::new(Progress::for_run(args.quiet, args.plain).listing_children());
    let mut shared = SharedRuntime::new(
        &args.agent,
        config.as_ref(),
        Some(&args.data_dir),
        progress.clone(),
        Surface::Agent,
    )?;
    let parent = match &args.resume {
        Some(id) => {
            let (parent, repairs) = shared.resume(id)?;
            for repair in repairs {
                eprintln!("{}", wording::resume_repaired(id, &repair));
            }
            parent
        }
        None => shared.parent(wording::RUN_LABEL)?,
    };
    // After the parent is found: an unknown id starts no server.
    shared.mount_mcp_servers().await?;
    // SIGINT or SIGTERM cancels the run, which then ends cleanly: its
    // children released, its recording closed as interrupted. Caught from
    // here on, before the banner says the run began.
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let stopped = Arc::new(OnceLock::new());
    let stopped_by = stopped.clone();
    let stop = crate::signal::stopped();
    tokio::spawn(async move {
        let _ = stopped_by.set(stop.await);
        on_interrupt.cancel();
    });
    if !args.quiet {
        eprintln!("{}", shared.banner);
    }
    let info = parent.info();
    let label = info.label.as_deref().unwrap_or(wording::RUN_LABEL);
    progress.start_tree(info.id.as_str(), label, &info.model);

    let outcome = parent.run(task, &cancel).await;
    progress.finish_tree(&outcome.stop.to_string());
    // Taken before background children still running are killed: those
    // are not failures of the run.
    let all_failed = progress.delegations().all_failed();
    // Nothing the parent started outlives it: background children still
    // running are killed and released before dsh exits.
    shared.tasks().dispose_owner(parent.id(), wording::RUN_FINISHED).await;
    shared.release_mcp_servers().await;
    // The run is over: what the [data] bounds no longer keep goes (this
    // run's own transcripts were just written, so they stay).
    if let Some(retention) = shared.retention() {
        retention.sweep().await;
    }
    let recorded = shared.finish_recording(args.quiet, stopped.get().copied());

    summary(&args, &progress, &parent, all_failed);
    match outcome.stop {
        AgentStop::Completed => {
            println!("{}", outcome.text);
            recorded
        }
        AgentStop::Cancelled => Err(Failure::interrupted(wording::CANCELLED)),
        stop => {
            if !outcome.text.is_empty() {
                println!("{}", outcome.text);
            }
            Err(Failure::failed(wording::run_unfinished(&stop)))
        }
    }
}

/// The run's closing lines on stderr: where the transcripts are and what
/// was spent (unless quiet), then, last and whatever the parent's model
/// wrote, that every delegation failed when every one did (its answer may
/// read as a success while none of its children did any of the work).
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
