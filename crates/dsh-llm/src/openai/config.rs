//! Configuration of [`super::OpenAiChatModel`].

use std::time::Duration;

use crate::Concurrency;

/// Default base URL: DeepSeek's OpenAI-compatible API.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// Default model name.
pub const DEFAULT_MODEL: &str = "deepseek-chat";
/// Environment variable holding the base URL.
pub const ENV_BASE_URL: &str = "DSH_BASE_URL";
/// Environment variable holding the API key (optional: local servers need none).
pub const ENV_API_KEY: &str = "DSH_API_KEY";
/// Environment variable holding the model name.
pub const ENV_MODEL: &str = "DSH_MODEL";

/// Settings of an OpenAI-compatible chat-completions client.
///
/// Build it with [`OpenAiConfig::new`] (or [`Default`]) and the `with_*`
/// methods, or read it from the environment with [`OpenAiConfig::from_env`].
/// `Debug` never prints the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// Base URL; the client POSTs to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Bearer token; `None` sends no `Authorization` header.
    pub api_key: Option<String>,
    /// Model used when a request does not name one.
    pub model: String,
    /// Limit for connecting and receiving the response headers, per attempt.
    pub request_timeout: Duration,
    /// Limit for the gap between two chunks of a streamed body: any bytes
    /// end a gap, a comment's (a server's `: ping`) too.
    pub idle_timeout: Duration,
    /// How many times a failed attempt (408, 409, 429, 5xx, connection
    /// error, timeout before the response) is retried; 0 disables retries.
    /// Any other 4xx is never retried.
    pub max_retries: u32,
    /// First retry delay; doubles on each further retry.
    pub retry_base_delay: Duration,
    /// Upper bound of any retry delay, including one asked for by `Retry-After`.
    pub max_retry_delay: Duration,
    /// The most requests to one model of the endpoint in flight at once;
    /// `None` sends as many as are made, until the server cuts a stream
    /// while another request to it is in flight (then one at a time).
    pub max_concurrent: Option<Concurrency>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: DEFAULT_MODEL.to_owned(),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            max_retry_delay: Duration::from_secs(30),
            max_concurrent: None,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("max_retry_delay", &self.max_retry_delay)
            .field("max_concurrent", &self.max_concurrent)
            .finish()
    }
}

impl OpenAiConfig {
    /// The defaults: DeepSeek, `deepseek-chat`, no key, 3 retries.
    pub fn new() -> Self {
        OpenAiConfig::default()
    }

    /// Reads `DSH_BASE_URL`, `DSH_API_KEY` and `DSH_MODEL` (unset or empty
    /// ones keep their defaults).
    pub fn from_env() -> Self {
        OpenAiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiConfig::from_env`], with a custom variable lookup (for tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut config = OpenAiConfig::default();
        if let Some(base_url) = get(ENV_BASE_URL) {
            config.base_url = base_url;
        }
        config.api_key = get(ENV_API_KEY);
        if let Some(model) = get(ENV_MODEL) {
            config.model = model;
        }
        config
    }

    /// Sets the base URL (e.g. `http://127.0.0.1:8080/v1`).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the default model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets the connect + response-headers timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the timeout between streamed chunks.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the retry count.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the first retry delay.
    pub fn with_retry_base_delay(mut self, delay: Duration) -> Self {
        self.retry_base_delay = delay;
        self
    }

    /// Sets the retry delay cap.
    pub fn with_max_retry_delay(mut self, delay: Duration) -> Self {
        self.max_retry_delay = delay;
        self
    }

    /// Sends at most `limit` requests to one model of the endpoint at
    /// once, from the start: for a server known to serve one request at a
    /// time and cut a running stream when another arrives.
    pub fn with_max_concurrent(mut self, limit: Concurrency) -> Self {
        self.max_concurrent = Some(limit);
        self
    }

    /// The delay before retry number `retry` (0-based): `Retry-After` when
    /// the server sent one, else `retry_base_delay * 2^retry`, capped.
    pub(crate) fn retry_delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self.retry_base_delay.saturating_mul(2u32.saturating_pow(retry.min(16)));
        retry_after.unwrap_or(backoff).min(self.max_retry_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_lookup_and_defaults() {
        let config = OpenAiConfig::from_lookup(|_| None);
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.model, DEFAULT_MODEL);
        assert_eq!(config.api_key, None);

        let config = OpenAiConfig::from_lookup(|name| match name {
            ENV_BASE_URL => Some("http://localhost:1/v1".into()),
            ENV_API_KEY => Some("sk-secret".into()),
            ENV_MODEL => Some(" ".into()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://localhost:1/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-secret"));
        assert_eq!(config.model, DEFAULT_MODEL);
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn retry_delays_double_and_cap() {
        let config = OpenAiConfig::new()
            .with_retry_base_delay(Duration::from_millis(100))
            .with_max_retry_delay(Duration::from_secs(1));
        assert_eq!(config.retry_delay(0, None), Duration::from_millis(100));
        assert_eq!(config.retry_delay(2, None), Duration::from_millis(400));
        assert_eq!(config.retry_delay(10, None), Duration::from_secs(1));
        assert_eq!(config.retry_delay(u32::MAX, None), Duration::from_secs(1));
        assert_eq!(config.retry_delay(0, Some(Duration::from_secs(0))), Duration::ZERO);
        assert_eq!(
            config.retry_delay(0, Some(Duration::from_secs(99))),
            Duration::from_secs(1)
        );
    }
}
