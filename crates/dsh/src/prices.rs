//! The models' prices of a run: `[model] price` for the parent's model and
//! each `[[subagents]]` entry's `agent_options.price` for its children's,
//! set on the runtime every agent shares; and, with a cost budget, the
//! check that every model of the tree has one, before anything starts.

use dsh_agent::AgentRuntime;
use dsh_llm::Price;

use crate::config::{Config, Provider};
use crate::failure::Failure;
use crate::wording;

/// A model's price and the key that gave it.
struct Priced {
    model: String,
    price: Price,
    key: String,
}

/// `runtime` with the prices of `config` set. A model priced twice
/// differently is refused naming both keys; with a cost budget, so is a
/// model of the tree without a price (the parent's, or an in-process
/// tool's children's), since what it spends could never be counted.
pub(crate) fn priced(
    runtime: AgentRuntime,
    config: Option<&Config>,
    cost_limit: bool,
) -> Result<AgentRuntime, Failure> {
    let parent = runtime.model().model_name().to_owned();
    let mut prices: Vec<Priced> = Vec::new();
    let mut needed = vec![(parent.clone(), wording::PRICE_NEEDED_PARENT.to_owned())];
    if let Some(config) = config {
        if let Some(price) = config.model.price {
            prices.push(Priced {
                model: parent.clone(),
                price,
                key: "model.price".to_owned(),
            });
        }
        for (index, subagent) in config.subagents.iter().enumerate() {
            let model = subagent
                .tool
                .agent_options
                .as_ref()
                .and_then(|options| options.model.clone())
                .unwrap_or_else(|| parent.clone());
            if !matches!(subagent.provider, Provider::Acp(_)) {
                needed.push((
                    model.clone(),
                    wording::price_needed_tool(index, &subagent.tool.tool_name),
                ));
            }
            if let Some(price) = subagent.price {
                let key = format!("subagents[{index}].agent_options.price");
                if let Some(first) = prices.iter().find(|known| known.model == model && known.price != price) {
                    return Err(Failure::usage(wording::price_given_twice(&model, &first.key, &key)));
                }
                prices.push(Priced { model, price, key });
            }
        }
    }
    if cost_limit
        && let Some((model, whose)) = needed
            .iter()
            .find(|(model, _)| prices.iter().all(|known| &known.model != model))
    {
        return Err(Failure::usage(wording::cost_budget_unpriced(model, whose)));
    }
    Ok(prices
        .into_iter()
        .fold(runtime, |runtime, known| runtime.with_price(known.model, known.price)))
}
