//! Capabilities claimed honestly: each one claimed is honoured (the start
//! is taken and what shows of it outside the child holds), each one not
//! claimed is refused by the service before the provider is called.

use std::sync::Arc;

use dsh_subagent_api::{
    BudgetScope, Capability, DepthLimit, Lineage, StartRequest, SubagentError, SubagentProvider, SubagentResult,
    TokenBudget, TokenLimit, ToolFilter,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::cell::{Checked, Env, Seen, stage};
use crate::wording;

/// The persona the kit asks for.
pub const PERSONA: &str = "You are a conformance check. Answer in one short line.";

/// The output schema the kit asks for: an object with a string `answer`.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"]
    })
}

/// The tree budget the kit's `tokenBudget` requests spend from.
const TREE_TOKENS: u64 = 1_000_000_000;

/// The child budget the kit's `tokenBudget` requests set.
const CHILD_TOKENS: u64 = 1_000_000;

pub(crate) fn output_schema_cell(env: &Env) -> BoxFuture<'_, Checked> {
    capability(env, Capability::OutputSchema).boxed()
}

pub(crate) fn depth_limit_cell(env: &Env) -> BoxFuture<'_, Checked> {
    capability(env, Capability::DepthLimit).boxed()
}

pub(crate) fn tool_filter_cell(env: &Env) -> BoxFuture<'_, Checked> {
    capability(env, Capability::ToolFilter).boxed()
}

pub(crate) fn persona_cell(env: &Env) -> BoxFuture<'_, Checked> {
    capability(env, Capability::Persona).boxed()
}

pub(crate) fn token_budget_cell(env: &Env) -> BoxFuture<'_, Checked> {
    capability(env, Capability::TokenBudget).boxed()
}

/// A request that sets `capability`'s field, and the tree budget it
/// spends from (for `tokenBudget`).
fn asking(env: &Env, capability: Capability) -> (StartRequest, Option<Arc<TokenBudget>>) {
    let (mut request, _cancel) = env.request();
    let mut tree = None;
    let settings = request.settings_mut();
    match capability {
        Capability::OutputSchema => settings.output_schema = Some(output_schema()),
        Capability::DepthLimit => settings.max_depth = DepthLimit::new(env.parent.depth().saturating_add(1)).ok(),
        Capability::ToolFilter => settings.tool_filter = Some(ToolFilter::allowing(Vec::<String>::new())),
        Capability::Persona => settings.persona = Some(PERSONA.to_owned()),
        Capability::TokenBudget => {
            settings.token_limit = TokenLimit::new(CHILD_TOKENS).ok();
            let budget = TokenBudget::new(BudgetScope::Tree, TREE_TOKENS, None);
            request.parent = request
                .parent
                .clone()
                .with_lineage(Lineage::new().with_token_budget(budget.clone()));
            tree = Some(budget);
        }
        _ => {}
    }
    (request, tree)
}

async fn capability(env: &Env, capability: Capability) -> Checked {
    let (request, tree) = asking(env, capability);
    if !env.provider.capabilities().supports(capability) {
        return refused(env, request, capability).await;
    }
    let mut run = match env.start(request).await? {
        Ok(run) => run,
        Err(error) => return Err(Seen::Fail(wording::claimed_but_refused(capability, &error))),
    };
    let result = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await;
    env.dispose(&mut run).await?;
    let result = result?.map_err(|error| wording::result_failed(&error))?;
    match capability {
        Capability::OutputSchema => structured(&result),
        Capability::DepthLimit => over_the_cap(env).await,
        Capability::TokenBudget => {
            let spent = tree.map_or(0, |tree| tree.spent());
            if spent == 0 {
                return Err(Seen::Fail(wording::no_usage(&result)));
            }
            Ok(Some(wording::usage_counted(spent)))
        }
        _ => Ok(Some(wording::accepted(&result))),
    }
}

/// Not claimed: the service refuses it before the provider is called.
async fn refused(env: &Env, request: StartRequest, capability: Capability) -> Checked {
    let before = env.provider.starts();
    match env.start(request).await? {
        Err(SubagentError::UnsupportedCapability { capability: named, .. })
            if named == capability && env.provider.starts() == before =>
        {
            Ok(Some(wording::not_claimed_refused(capability)))
        }
        Err(error) => Err(Seen::Fail(wording::not_claimed_other(capability, &error))),
        Ok(mut run) => {
            env.dispose(&mut run).await?;
            Err(Seen::Fail(wording::not_claimed_started(capability)))
        }
    }
}

/// `outputSchema`: a completed run carries the structured answer.
fn structured(result: &SubagentResult) -> Checked {
    if !result.stop_reason.is_completed() {
        return Err(Seen::Fail(wording::not_completed(result)));
    }
    match &result.structured {
        Some(value) if value.get("answer").is_some_and(Value::is_string) => Ok(Some(wording::structured(value))),
        Some(value) => Err(Seen::Fail(wording::structured_mismatch(value))),
        None => Err(Seen::Fail(wording::NO_STRUCTURED.to_owned())),
    }
}

/// `depthLimit`: a child over the cap is refused before the provider is called.
async fn over_the_cap(env: &Env) -> Checked {
    let (mut request, _cancel) = env.request();
    request.settings_mut().max_depth = DepthLimit::new(env.parent.depth()).ok();
    let before = env.provider.starts();
    match env.start(request).await? {
        Err(SubagentError::DepthExceeded { .. }) if env.provider.starts() == before => {
            Ok(Some(wording::DEPTH_HONOURED.to_owned()))
        }
        Err(error) => Err(Seen::Fail(wording::depth_other(&error))),
        Ok(mut run) => {
            env.dispose(&mut run).await?;
            Err(Seen::Fail(wording::DEPTH_STARTED.to_owned()))
        }
    }
}
