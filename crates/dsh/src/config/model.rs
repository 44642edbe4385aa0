//! `[model]`: the parent's endpoint, model, key variable, context window,
//! price and the most requests it is sent at once.

use dsh_agent::ContextWindow;
use dsh_llm::{Concurrency, Price, PriceError, PriceKey};
use toml::Spanned;

use super::file::{RawModel, RawPrice};
use super::{At, ConfigFileError, non_empty, variable_name};
use crate::wording;

/// `[model]`: each key, when set, overrides the matching `DSH_*` variable;
/// command-line flags override the file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ModelConfig {
    /// The OpenAI-compatible endpoint.
    pub(crate) base_url: Option<String>,
    /// The model name.
    pub(crate) model: Option<String>,
    /// The variable that holds the API key (instead of `DSH_API_KEY`).
    pub(crate) api_key_env: Option<String>,
    /// The model's context window (over `DSH_CONTEXT_WINDOW`; under
    /// `--context-window`).
    pub(crate) context_window: Option<ContextWindow>,
    /// What the parent's model's tokens cost, per million.
    pub(crate) price: Option<Price>,
    /// The most requests to one model of the endpoint in flight at once,
    /// from the start (else none until the server cuts a stream beside
    /// another request).
    pub(crate) max_concurrent: Option<Concurrency>,
}

/// `[model]` checked: no empty value, a key variable that can name one (the
/// context window and the most requests at once checked themselves as they
/// were read).
pub(super) fn resolve_model(raw: RawModel, at: &At<'_>) -> Result<ModelConfig, ConfigFileError> {
    let api_key_env = match raw.api_key_env {
        Some(name) if !variable_name(name.get_ref()) => {
            return Err(at(
                Some(name.span()),
                "model.api_key_env".into(),
                wording::config_bad_variable(name.get_ref()),
            ));
        }
        name => name.map(Spanned::into_inner),
    };
    Ok(ModelConfig {
        base_url: raw
            .base_url
            .map(|url| non_empty(url, "model.base_url", at))
            .transpose()?,
        model: raw.model.map(|model| non_empty(model, "model.model", at)).transpose()?,
        api_key_env,
        context_window: raw.context_window.map(Spanned::into_inner),
        price: raw.price.map(|value| price(value, "model.price", at)).transpose()?,
        max_concurrent: raw.max_concurrent.map(Spanned::into_inner),
    })
}

/// A `price` (of `[model]` or a subagent's `agent_options`): each of its
/// prices a number, zero or more; `key` names the table, and an error the
/// price in it that is wrong.
pub(super) fn price(value: Spanned<RawPrice>, key: &str, at: &At<'_>) -> Result<Price, ConfigFileError> {
    let raw = value.into_inner();
    let refused = |error: PriceError, span| at(Some(span), format!("{key}.{}", error.key.as_str()), error.to_string());
    let price = Price::new(*raw.input.get_ref(), *raw.output.get_ref()).map_err(|error| {
        let span = match error.key {
            PriceKey::Input => raw.input.span(),
            PriceKey::Output | PriceKey::CachedInput => raw.output.span(),
        };
        refused(error, span)
    })?;
    match raw.cached_input {
        Some(cached) => price
            .with_cached_input(*cached.get_ref())
            .map_err(|error| refused(error, cached.span())),
        None => Ok(price),
    }
}
