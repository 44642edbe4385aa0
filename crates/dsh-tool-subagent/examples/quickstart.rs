//! Quickstart: mount the `subagent` tool over a scripted provider, show what
//! the model sees, then run one delegation that succeeds and one that fails.
//!
//! ```text
//! cargo run --example quickstart -p dsh-tool-subagent
//! ```

use dsh_subagent::SubagentService;
use dsh_subagent_api::StopReason;
use dsh_subagent_testing::ScriptedProvider;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();

    // Two scripted children: one answers, one declines partway through.
    let _spawn = service.register_provider(
        ScriptedProvider::builder("spawn")
            .reply("The three largest moons of Jupiter are Ganymede, Callisto and Io.")
            .build(),
    )?;
    let _picky = service.register_provider(
        ScriptedProvider::builder("picky")
            .stop_reason(StopReason::Refusal)
            .diagnostic("the child's policy forbids network access")
            .reply("I started looking, but")
            .build(),
    )?;

    // One tool instance per provider, each under its own name.
    let _subagent = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools)?;
    let _picky_tool = SubagentToolPlugin::apply(
        SubagentToolConfig::new("picky").tool_name("subagent_picky"),
        &service,
        &tools,
    )?;

    for spec in tools.specs() {
        println!("── tool `{}` ──", spec.name);
        println!("{}\n", spec.description);
        println!("{}\n", serde_json::to_string_pretty(&spec.parameters)?);
    }

    let parent = AgentRef::new("parent-1");
    let call = |name: &'static str, prompt: &'static str| {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(parent.clone());
        let tools = tools.clone();
        async move {
            let args = json!({"description": "moons of Jupiter", "prompt": prompt});
            tools.call(name, args, exec).await
        }
    };

    let ok = call("subagent", "Name the three largest moons of Jupiter.").await;
    println!(
        "── delegation via `subagent` (is_error: {}) ──\n{}\n",
        ok.is_error, ok.text
    );

    let failed = call("subagent_picky", "Look the moons up online.").await;
    println!(
        "── delegation via `subagent_picky` (is_error: {}) ──\n{}",
        failed.is_error, failed.text
    );
    Ok(())
}
