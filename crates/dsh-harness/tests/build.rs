//! What `HarnessBuilder::build` refuses, in which words, and that a refused
//! build leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_harness::provider::{
    BoxFuture, Capabilities, ContinuableProvider, ContinuationDescriptor, ResumeRequest, StartRequest, SubagentError,
    SubagentProvider, SubagentRun, ToolFilter,
};
use dsh_harness::{
    Background, BuildCode, BuildError, BuildErrorCode, HarnessBuilder, Limits, MaxDepth, SubagentToolConfig, Tool,
};
use dsh_subagent_api::{ChildCount, CostLimit, QueueLimit};
use dsh_subagent_testing::{MemoryChildStore, ScriptedProvider};
use dsh_tools::{ToolError, ToolExecution, ToolOutput};
use serde_json::{Value, json};

/// A provider that continues its children; the build never starts one.
struct Durable;

impl SubagentProvider for Durable {
    fn name(&self) -> &str {
        "durable"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(&self, _: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("not started in these tests")) })
    }
    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(self)
    }
}

impl ContinuableProvider for Durable {
    fn start_continuable(
        &self,
        _: String,
        _: ContinuationDescriptor,
        _: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("not started in these tests")) })
    }
    fn resume(&self, _: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("not resumed in these tests")) })
    }
}

/// A tool of the harness's own.
struct Lookup(Value);

impl Tool for Lookup {
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Look a key up."
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn execute(&self, _: Value, _: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::text("found")) })
    }
}

fn lookup() -> Arc<dyn Tool> {
    Arc::new(Lookup(json!({"type": "object"})))
}

fn spawn() -> Arc<ScriptedProvider> {
    ScriptedProvider::builder("spawn").build()
}

fn continuable() -> Background {
    Background::Continuable(Arc::new(MemoryChildStore::new()))
}

fn denying(names: &[&str]) -> ToolFilter {
    ToolFilter::denying(names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>())
}

/// Each mis-assembly, the error it gets, and its code.
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn mis_assemblies() -> Vec<(&'static str, HarnessBuilder, BuildError)> {
    let background = SubagentToolConfig::new("spawn").enable_run_in_background(true);
    let limited = || Capabilities::NONE;
    vec![
        (
            "background without tasks",
            HarnessBuilder::new().subagent(background.clone(), spawn()),
            BuildError::BackgroundWithoutTasks {
                tool: "subagent".into(),
            },
        ),
        (
            "continuable background without a store",
            HarnessBuilder::new()
                .subagent(
                    SubagentToolConfig::new("durable").enable_run_in_background(true),
                    Arc::new(Durable),
                )
                .background(Background::Tasks),
            BuildError::ContinuableWithoutStore {
                tool: "subagent".into(),
                provider: "durable".into(),
            },
        ),
        (
            "a filter naming a tool that is not mounted",
            HarnessBuilder::new()
                .subagent(
                    SubagentToolConfig::new("spawn").tool_filter(denying(&["subagent", "lookp"])),
                    spawn(),
                )
                .tool(lookup()),
            BuildError::UnknownFilterTool {
                tool: "subagent".into(),
                name: "lookp".into(),
                mounted: vec!["lookup".into(), "subagent".into()],
            },
        ),
        (
            "a filter naming send_message without a child store",
            HarnessBuilder::new()
                .subagent(
                    SubagentToolConfig::new("spawn").tool_filter(denying(&["send_message"])),
                    spawn(),
                )
                .background(Background::Tasks),
            BuildError::UnknownFilterTool {
                tool: "subagent".into(),
                name: "send_message".into(),
                mounted: ["subagent", "task_kill", "task_list", "task_output"]
                    .map(String::from)
                    .to_vec(),
            },
        ),
        (
            "two subagent tools with one name",
            HarnessBuilder::new()
                .subagent(SubagentToolConfig::new("spawn"), spawn())
                .subagent(SubagentToolConfig::new("durable"), Arc::new(Durable)),
            BuildError::DuplicateToolName {
                name: "subagent".into(),
            },
        ),
        (
            "a tool named like a task tool",
            HarnessBuilder::new()
                .subagent(SubagentToolConfig::new("spawn").tool_name("task_list"), spawn())
                .background(continuable()),
            BuildError::DuplicateToolName {
                name: "task_list".into(),
            },
        ),
        (
            "two different providers with one name",
            HarnessBuilder::new()
                .subagent(SubagentToolConfig::new("spawn"), spawn())
                .provider(spawn()),
            BuildError::DuplicateProvider { name: "spawn".into() },
        ),
        (
            "a tool given another provider than its configuration names",
            HarnessBuilder::new().subagent(SubagentToolConfig::new("fork"), spawn()),
            BuildError::ProviderMismatch {
                tool: "subagent".into(),
                configured: "fork".into(),
                given: "spawn".into(),
            },
        ),
        (
            "a persona the provider cannot honour",
            HarnessBuilder::new().subagent(
                SubagentToolConfig::new("spawn").persona("a pirate"),
                ScriptedProvider::builder("spawn").capabilities(limited()).build(),
            ),
            BuildError::UnsupportedCapability {
                tool: "subagent".into(),
                provider: "spawn".into(),
                capability: dsh_harness::provider::Capability::Persona,
            },
        ),
        (
            "a numeric maxDepth the provider cannot enforce",
            HarnessBuilder::new().subagent(
                SubagentToolConfig::new("spawn").max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(1))),
                ScriptedProvider::builder("spawn").capabilities(limited()).build(),
            ),
            BuildError::Tool(dsh_tool_subagent::ConfigError::CannotEnforceMaxDepth {
                provider: "spawn".into(),
            }),
        ),
        (
            "an invalid tool configuration",
            HarnessBuilder::new().subagent(SubagentToolConfig::new("spawn").tool_name(""), spawn()),
            BuildError::Tool(dsh_tool_subagent::ConfigError::Invalid(
                "config key \"toolName\" must not be empty".into(),
            )),
        ),
        (
            "a tree token budget over a provider that reports no usage",
            HarnessBuilder::new()
                .subagent(SubagentToolConfig::new("spawn"), spawn())
                .provider(ScriptedProvider::builder("remote").capabilities(limited()).build())
                .limits(Limits::none().with_token_limit(dsh_subagent_api::TokenLimit::new(100_000).unwrap())),
            BuildError::TreeBudgetUnsupported {
                provider: "remote".into(),
                limit: 100_000,
            },
        ),
        (
            "a tree cost budget over a provider that reports no usage",
            HarnessBuilder::new()
                .subagent(SubagentToolConfig::new("spawn"), spawn())
                .provider(ScriptedProvider::builder("remote").capabilities(limited()).build())
                .limits(Limits::none().with_cost_limit(CostLimit::from_nanos(2_000_000_000).unwrap())),
            BuildError::TreeCostBudgetUnsupported {
                provider: "remote".into(),
            },
        ),
    ]
}

#[test]
fn every_mis_assembly_is_refused_in_its_own_words() {
    let mut pinned = String::new();
    for (case, builder, expected) in mis_assemblies() {
        let error = builder.build().unwrap_err();
        assert_eq!(error, expected, "{case}");
        pinned.push_str(&format!("{case}\n  {}: {error}\n", error.code()));
    }
    insta::assert_snapshot!("mis_assemblies", pinned);
}

/// Every refusal of the builder speaks as `dsh-harness:`, but the tool's own
/// refusal of its configuration, which it passes on in the tool's words.
#[test]
fn every_refusal_speaks_as_the_builder_but_the_tools_own() {
    for (case, builder, _) in mis_assemblies() {
        let error = builder.build().unwrap_err();
        let text = error.to_string();
        let speaker = match error {
            BuildError::Tool(_) => "tool-subagent: ",
            _ => "dsh-harness: ",
        };
        assert!(text.starts_with(speaker), "{case}: {text}");
    }
}

#[test]
fn the_codes_are_the_documented_symbols() {
    // Typed: each is one of the builder's own codes, not a text that
    // happens to match one.
    let codes: Vec<BuildErrorCode> = mis_assemblies()
        .into_iter()
        .map(|(case, builder, _)| match builder.build().unwrap_err().code() {
            BuildCode::Build(code) => code,
            other => panic!("{case}: not a build code: {other}"),
        })
        .collect();
    assert_eq!(
        codes,
        [
            BuildErrorCode::BackgroundWithoutTasks,
            BuildErrorCode::ContinuableWithoutStore,
            BuildErrorCode::UnknownFilterTool,
            BuildErrorCode::UnknownFilterTool,
            BuildErrorCode::DuplicateToolName,
            BuildErrorCode::DuplicateToolName,
            BuildErrorCode::DuplicateProvider,
            BuildErrorCode::ProviderMismatch,
            BuildErrorCode::UnsupportedCapability,
            BuildErrorCode::InvalidToolConfig,
            BuildErrorCode::InvalidToolConfig,
            BuildErrorCode::TreeBudgetUnsupported,
            BuildErrorCode::TreeCostBudgetUnsupported,
        ]
    );
}

/// A refused build registers and keeps nothing: the providers it was given
/// are referenced by no one else afterwards, and none was started.
#[test]
fn a_refused_build_keeps_nothing() {
    let provider = spawn();
    let error = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn"), provider.clone())
        .subagent(
            SubagentToolConfig::new("spawn")
                .tool_name("subagent_two")
                .enable_run_in_background(true),
            provider.clone(),
        )
        .build()
        .unwrap_err();
    assert_eq!(error.code(), "BACKGROUND_WITHOUT_TASKS");
    assert_eq!(Arc::strong_count(&provider), 1);
    assert_eq!(provider.stats().starts(), 0);
}

/// A tree token budget is kept only by providers that report their
/// children's usage: over one that does not, the budget would be accepted
/// and never enforced, so the build names that provider, whether a tool
/// uses it or it was given alone. Limits that count children, not tokens,
/// hold over any provider, and a budget over providers that report usage
/// builds.
#[test]
fn a_tree_token_limit_needs_every_provider_to_report_usage() {
    let budget = Limits::none()
        .with_max_concurrent(ChildCount::new(2).unwrap())
        .with_token_limit(dsh_subagent_api::TokenLimit::new(5_000).unwrap());
    let unmetered = || {
        ScriptedProvider::builder("acp")
            .capabilities(Capabilities::NONE)
            .build()
    };
    let error = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("acp"), unmetered())
        .limits(budget)
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        BuildError::TreeBudgetUnsupported {
            provider: "acp".into(),
            limit: 5_000,
        }
    );
    assert_eq!(error.code(), "TREE_BUDGET_UNSUPPORTED");

    let counted = Limits::none()
        .with_max_concurrent(ChildCount::new(2).unwrap())
        .with_max_queued(QueueLimit::new(4))
        .with_max_children(ChildCount::new(10).unwrap());
    HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("acp"), unmetered())
        .limits(counted)
        .build()
        .unwrap();
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn"), spawn())
        .limits(budget)
        .build()
        .unwrap();
    assert_eq!(harness.service().limits(), budget);

    // A provider registered once the harness is built is checked the same
    // way: refused, and not registered.
    let error = harness.service().register_provider(unmetered()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "subagent provider \"acp\" does not support the \"tokenBudget\" capability"
    );
    assert_eq!(error.code().as_str(), "UNSUPPORTED_CAPABILITY");
    assert_eq!(harness.service().list(), ["spawn"]);
    // One that reports its children's usage registers.
    let _metered = harness
        .service()
        .register_provider(ScriptedProvider::builder("local").build())
        .unwrap();
    assert_eq!(harness.service().list(), ["spawn", "local"]);
}

/// Filters may name the harness's own tools, the task tools and
/// `send_message` when they are mounted, and tools declared as mounted later.
#[test]
fn filters_may_name_every_tool_that_will_be_there() {
    let filter = denying(&["lookup", "subagent", "task_output", "send_message", "mcp__files__read"]);
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn").tool_filter(filter), spawn())
        .tool(lookup())
        .background(continuable())
        .later_tools("mcp__")
        .build()
        .unwrap();
    assert_eq!(
        harness.tools().names(),
        [
            "lookup",
            "send_message",
            "subagent",
            "task_kill",
            "task_list",
            "task_output"
        ]
    );
    // Without the declaration the MCP name is unknown.
    let error = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("spawn").tool_filter(denying(&["mcp__files__read"])),
            spawn(),
        )
        .build()
        .unwrap_err();
    assert_eq!(error.code(), "UNKNOWN_FILTER_TOOL");
}
