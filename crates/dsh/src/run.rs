//! `dsh run`: a parent agent with `subagent` (spawn) and `subagent_fork` (fork).

use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_subagent::SubagentService;
use dsh_subagent_api::ToolFilter;
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{CancellationToken, ToolRegistry};

use crate::cli::RunArgs;
use crate::progress::Progress;
use crate::{Failure, model, wording};

/// Children of `dsh run` do their task themselves: they neither see nor call
/// the delegation tools, and the depth cap backs that up.
fn child_policy(config: SubagentToolConfig) -> SubagentToolConfig {
    config.max_depth(MaxDepth::Limit(1)).tool_filter(ToolFilter {
        allow: None,
        deny: Some(vec!["subagent".into(), "subagent_fork".into()]),
    })
}

pub(crate) async fn run(args: RunArgs) -> Result<(), Failure> {
    let choice = model::choose(&args, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
    if !args.quiet {
        eprintln!("{}", choice.banner);
    }

    let service = SubagentService::new();
    let tools = ToolRegistry::new();
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
    .map(|config| SubagentToolPlugin::apply(child_policy(config), &service, &tools))
    .collect::<Result<Vec<_>, _>>()
    .map_err(|error| Failure::internal(error.to_string()))?;

    let progress = Arc::new(Progress::new(args.quiet));
    let runtime = AgentRuntime::new(choice.model, tools)
        .with_data_dir(&args.data_dir)
        .with_observer(progress.clone());
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
