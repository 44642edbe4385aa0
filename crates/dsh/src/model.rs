//! Which model `dsh run` and `dsh acp` talk to.

use std::path::Path;
use std::sync::Arc;

use dsh_agent::ContextWindow;
use dsh_llm::cassette::{Cassette, Recorder, RecordingModel, ReplayModel, Timing};
use dsh_llm::{ChatModel, OpenAiChatModel, OpenAiConfig, ScriptedModel};

use crate::cli::AgentArgs;
use crate::config::ModelConfig;
use crate::wording;

/// The chosen model and the line that names it.
pub(crate) struct ModelChoice {
    model: Chosen,
    pub(crate) banner: String,
}

/// What answers: an endpoint (recorded at the HTTP level), or a model
/// (recorded at the events level).
enum Chosen {
    Endpoint(OpenAiChatModel),
    Model(Arc<dyn ChatModel>),
}

impl ModelChoice {
    /// The endpoint what its server teaches is kept under, for a live
    /// endpoint: a replay and a scripted model teach nothing of a server.
    pub(crate) fn endpoint(&self) -> Option<String> {
        match &self.model {
            Chosen::Endpoint(client) => Some(client.endpoint()),
            Chosen::Model(_) => None,
        }
    }

    /// The model, recording into `recorder` when there is one.
    pub(crate) fn model(self, recorder: Option<&Recorder>) -> Result<Arc<dyn ChatModel>, String> {
        let recorded = match (self.model, recorder) {
            (Chosen::Endpoint(client), None) => return Ok(Arc::new(client)),
            (Chosen::Model(model), None) => return Ok(model),
            (Chosen::Endpoint(client), Some(recorder)) => client
                .recorded(recorder)
                .map(|client| Arc::new(client) as Arc<dyn ChatModel>),
            (Chosen::Model(model), Some(recorder)) => {
                RecordingModel::new(model, recorder).map(|model| Arc::new(model) as Arc<dyn ChatModel>)
            }
        };
        recorded.map_err(|error| error.to_string())
    }
}

/// The variable that sets the model's context window, in tokens.
pub(crate) const ENV_CONTEXT_WINDOW: &str = "DSH_CONTEXT_WINDOW";

/// The parent model's context window: `--context-window`, else the file's
/// `[model] context_window`, else `DSH_CONTEXT_WINDOW`, else none (the
/// window is then learned from the server's first refusal that names it).
pub(crate) fn context_window(
    args: &AgentArgs,
    file: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<ContextWindow>, String> {
    if let Some(window) = args.context_window {
        return Ok(Some(window));
    }
    if file.context_window.is_some() {
        return Ok(file.context_window);
    }
    let Some(value) = env(ENV_CONTEXT_WINDOW).filter(|value| !value.trim().is_empty()) else {
        return Ok(None);
    };
    value
        .parse::<ContextWindow>()
        .map(Some)
        .map_err(|error| wording::variable_invalid(ENV_CONTEXT_WINDOW, &error))
}

/// A cassette to replay wins; then a script file; then an endpoint, when a base URL or key is
/// configured; else the embedded scripted model. Flags win over the
/// configuration file's `[model]`, which wins over the `DSH_*` variables;
/// its `api_key_env` names the variable that holds the key.
pub(crate) fn choose(
    args: &AgentArgs,
    replay: Option<(&Path, Timing)>,
    file: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ModelChoice, String> {
    if let Some((path, timing)) = replay {
        let cassette = Cassette::load(path).map_err(|error| error.to_string())?;
        let banner = wording::banner_replay(path, cassette.len(), cassette.level().as_str());
        return Ok(ModelChoice {
            model: Chosen::Model(Arc::new(ReplayModel::new(cassette, timing))),
            banner,
        });
    }
    if let Some(path) = &args.script {
        let model = ScriptedModel::from_path(path).map_err(|error| error.to_string())?;
        return Ok(ModelChoice {
            model: Chosen::Model(Arc::new(model)),
            banner: wording::banner_script(path),
        });
    }
    let Some(config) = endpoint_config(args.base_url.as_ref(), args.model.as_ref(), file, env) else {
        let model = ScriptedModel::builtin();
        return Ok(ModelChoice {
            model: Chosen::Model(Arc::new(model)),
            banner: wording::BANNER_BUILTIN.to_owned(),
        });
    };
    let client = OpenAiChatModel::new(config).map_err(|error| error.to_string())?;
    let banner = wording::banner_endpoint(client.model_name(), client.url());
    Ok(ModelChoice {
        model: Chosen::Endpoint(client),
        banner,
    })
}

/// The endpoint's configuration when one is configured (a base URL or a
/// key, by flag, file or variable), else `None` (the embedded model).
fn endpoint_config(
    base_url: Option<&String>,
    model: Option<&String>,
    file: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Option<OpenAiConfig> {
    let key_variable = file.api_key_env.as_deref().unwrap_or(dsh_llm::openai::ENV_API_KEY);
    let env = |name: &str| {
        if name == dsh_llm::openai::ENV_API_KEY {
            env(key_variable)
        } else {
            env(name)
        }
    };
    let base_url = base_url.or(file.base_url.as_ref());
    let configured = base_url.is_some()
        || [dsh_llm::openai::ENV_BASE_URL, dsh_llm::openai::ENV_API_KEY]
            .iter()
            .any(|key| env(key).is_some_and(|value| !value.is_empty()));
    if !configured {
        return None;
    }
    let mut config = OpenAiConfig::from_lookup(env);
    if let Some(base_url) = base_url {
        config = config.with_base_url(base_url.clone());
    }
    if let Some(model) = model.or(file.model.as_ref()) {
        config = config.with_model(model.clone());
    }
    if let Some(limit) = file.max_concurrent {
        config = config.with_max_concurrent(limit);
    }
    Some(config)
}

/// The endpoint `dsh run` would talk to without flags, as what it teaches
/// is kept under ([`OpenAiChatModel::endpoint`]); `None` for the embedded
/// model or a base URL that is not one.
pub(crate) fn configured_endpoint(file: &ModelConfig, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let config = endpoint_config(None, None, file, env)?;
    OpenAiChatModel::new(config).ok().map(|client| client.endpoint())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(base_url: Option<&str>, model: Option<&str>) -> AgentArgs {
        AgentArgs {
            base_url: base_url.map(str::to_owned),
            model: model.map(str::to_owned),
            ..AgentArgs::plain()
        }
    }

    fn banner(args: &AgentArgs, file: &ModelConfig, env: &[(&str, &str)]) -> String {
        let lookup = |key: &str| {
            env.iter()
                .find(|(name, _)| *name == key)
                .map(|(_, value)| (*value).to_owned())
        };
        match choose(args, None, file, lookup) {
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
            context_window: None,
            price: None,
            max_concurrent: None,
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
    fn the_context_window_comes_from_the_flag_the_file_or_the_variable() {
        let env = |value: &'static str| move |key: &str| (key == ENV_CONTEXT_WINDOW).then(|| value.to_owned());
        let window = |tokens| ContextWindow::new(tokens).ok();
        let file = ModelConfig {
            context_window: window(32_000),
            ..ModelConfig::default()
        };
        let mut flagged = args(None, None);
        flagged.context_window = window(16_000);
        assert_eq!(context_window(&flagged, &file, env("64000")), Ok(window(16_000)));
        assert_eq!(
            context_window(&args(None, None), &file, env("64000")),
            Ok(window(32_000))
        );
        let none = ModelConfig::default();
        assert_eq!(
            context_window(&args(None, None), &none, env(" 64000 ")),
            Ok(window(64_000))
        );
        assert_eq!(context_window(&args(None, None), &none, env("")), Ok(None));
        let errors = [
            context_window(&args(None, None), &none, env("lots")),
            context_window(&args(None, None), &none, env("100")),
        ];
        let errors: Vec<String> = errors.into_iter().map(|result| result.unwrap_err()).collect();
        insta::assert_snapshot!("context_window_errors", errors.join("\n"));
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
