//! Which model `dsh run` and `dsh acp` talk to.

use std::sync::Arc;

use dsh_llm::{ChatModel, OpenAiChatModel, OpenAiConfig, ScriptedModel};

use crate::cli::AgentArgs;
use crate::config::ModelConfig;
use crate::wording;

/// The chosen model and the line that names it.
pub(crate) struct ModelChoice {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) banner: String,
}

/// A script file wins; then an endpoint, when a base URL or key is
/// configured; else the embedded scripted model. Flags win over the
/// configuration file's `[model]`, which wins over the `DSH_*` variables;
/// its `api_key_env` names the variable that holds the key.
pub(crate) fn choose(
    args: &AgentArgs,
    file: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ModelChoice, String> {
    if let Some(path) = &args.script {
        let model = ScriptedModel::from_path(path).map_err(|error| error.to_string())?;
        return Ok(ModelChoice {
            model: Arc::new(model),
            banner: wording::banner_script(path),
        });
    }
    let key_variable = file.api_key_env.as_deref().unwrap_or(dsh_llm::openai::ENV_API_KEY);
    let env = |name: &str| {
        if name == dsh_llm::openai::ENV_API_KEY {
            env(key_variable)
        } else {
            env(name)
        }
    };
    let base_url = args.base_url.as_ref().or(file.base_url.as_ref());
    let configured = base_url.is_some()
        || [dsh_llm::openai::ENV_BASE_URL, dsh_llm::openai::ENV_API_KEY]
            .iter()
            .any(|key| env(key).is_some_and(|value| !value.is_empty()));
    if !configured {
        let model = ScriptedModel::builtin();
        return Ok(ModelChoice {
            model: Arc::new(model),
            banner: wording::BANNER_BUILTIN.to_owned(),
        });
    }
    let mut config = OpenAiConfig::from_lookup(env);
    if let Some(base_url) = base_url {
        config = config.with_base_url(base_url.clone());
    }
    if let Some(model) = args.model.as_ref().or(file.model.as_ref()) {
        config = config.with_model(model.clone());
    }
    let client = OpenAiChatModel::new(config).map_err(|error| error.to_string())?;
    let banner = wording::banner_endpoint(client.model_name(), client.url());
    Ok(ModelChoice {
        model: Arc::new(client),
        banner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(base_url: Option<&str>, model: Option<&str>) -> AgentArgs {
        AgentArgs {
            config: None,
            base_url: base_url.map(str::to_owned),
            model: model.map(str::to_owned),
            script: None,
            max_turns: 4,
            mcp_servers: Vec::new(),
            max_concurrent: None,
            max_queued: None,
            max_children: None,
            token_budget: None,
        }
    }

    fn banner(args: &AgentArgs, file: &ModelConfig, env: &[(&str, &str)]) -> String {
        let lookup = |key: &str| {
            env.iter()
                .find(|(name, _)| *name == key)
                .map(|(_, value)| (*value).to_owned())
        };
        match choose(args, file, lookup) {
            Ok(choice) => choice.banner,
            Err(error) => error,
        }
    }

    #[test]
    fn the_file_sits_between_flags_and_variables() {
        let file = ModelConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some("file-model".into()),
            api_key_env: None,
        };
        let env = [("DSH_BASE_URL", "http://127.0.0.1:8/v1"), ("DSH_MODEL", "env-model")];
        assert_eq!(
            banner(&args(None, None), &file, &env),
            "dsh: using model file-model at http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            banner(&args(Some("http://127.0.0.1:7/v1"), Some("flag-model")), &file, &env),
            "dsh: using model flag-model at http://127.0.0.1:7/v1/chat/completions"
        );
        assert_eq!(
            banner(&args(None, None), &ModelConfig::default(), &env),
            "dsh: using model env-model at http://127.0.0.1:8/v1/chat/completions"
        );
    }

    #[test]
    fn api_key_env_names_the_variable_that_configures_an_endpoint() {
        let file = ModelConfig {
            api_key_env: Some("MY_KEY".into()),
            ..ModelConfig::default()
        };
        // Only the named variable counts: DSH_API_KEY alone leaves the embedded model.
        assert_eq!(
            banner(&args(None, None), &file, &[("DSH_API_KEY", "k")]),
            wording::BANNER_BUILTIN
        );
        assert!(banner(&args(None, None), &file, &[("MY_KEY", "k")]).starts_with("dsh: using model "));
    }
}
