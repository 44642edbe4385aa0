//! `dsh run`: a parent agent with `subagent` (spawn) and `subagent_fork` (fork).

use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_subagent::SubagentService;
use dsh_subagent_api::ToolFilter;
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, CancellationToken, ToolRegistry};

use crate::cli::RunArgs;
use crate::progress::Progress;
use crate::{Failure, model, wording};

/// Children of `dsh run` do their task themselves: they neither see nor call
/// the delegation tools (nor the task tools that collect background ones),
/// and the depth cap backs that up. The parent may run them in the background.
fn child_policy(config: SubagentToolConfig) -> SubagentToolConfig {
    let mut deny = vec!["subagent".to_owned(), "subagent_fork".to_owned()];
    deny.extend(dsh_tool_tasks::TOOL_NAMES.iter().map(|name| (*name).to_owned()));
    config
        .max_depth(MaxDepth::Limit(1))
        .enable_run_in_background(true)
        .tool_filter(ToolFilter {
            allow: None,
            deny: Some(deny),
        })
}

pub(crate) async fn run(args: RunArgs) -> Result<(), Failure> {
    let choice = model::choose(&args, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
    if !args.quiet {
        eprintln!("{}", choice.banner);
    }

    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let _task_tools = TaskToolsPlugin::apply(&tasks, &tools).map_err(|error| Failure::internal(error.to_string()))?;
    let _providers = [
        service.register_provider(Arc::new(SpawnProvider::new())),
        service.register_provider(Arc::new(ForkProvider::new())),
    ]
    .into_iter()
    .collect::<Result<Vec<_>, _>>()
    .map_err(|error| Failure::internal(error.to_string()))?;
    let _tools = [
        SubagentToolConfig::new("spawn"),
        SubagentToolConfig::new("fork").tool_name("subagent_fork"),
    ]
    .into_iter()
    .map(|config| SubagentToolPlugin::apply_with_tasks(child_policy(config), &service, &tools, &tasks))
    .collect::<Result<Vec<_>, _>>()
    .map_err(|error| Failure::internal(error.to_string()))?;

    let progress = Arc::new(Progress::new(args.quiet));
    let notices = tasks.clone();
    let runtime = AgentRuntime::new(choice.model, tools)
        .with_data_dir(&args.data_dir)
        .with_observer(progress.clone())
        .with_notices(Arc::new(move |agent: &AgentId| notices.take_notices(agent)));
    let parent = Agent::builder(Arc::new(runtime))
        .system_prompt(wording::PARENT_SYSTEM_PROMPT)
        .max_turns(args.max_turns)
        .label(Some("dsh run".to_owned()))
        .build()
        .map_err(|error| Failure::internal(error.to_string()))?;

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let outcome = parent.run(args.task, &cancel).await;
    // Nothing the parent started outlives it: background children still
    // running are killed and released before dsh exits.
    tasks.dispose_owner(parent.id(), "dsh run finished").await;

    if !args.quiet {
        let children = progress.children();
        let dir = args.data_dir.join("agents");
        let mut line = format!("dsh: transcripts in {}: {} (parent)", dir.display(), parent.id());
        for child in &children {
            line.push_str(&format!(", {child}"));
        }
        eprintln!("{line}; read one with `dsh transcript <id>`");
    }
    match outcome.stop {
        AgentStop::Completed => {
            println!("{}", outcome.text);
            Ok(())
        }
        AgentStop::Cancelled => Err(Failure::interrupted("dsh: cancelled")),
        stop => {
            if !outcome.text.is_empty() {
                println!("{}", outcome.text);
            }
            Err(Failure::failed(format!("dsh: the run did not finish: {stop}")))
        }
    }
}
