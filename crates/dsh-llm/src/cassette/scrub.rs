//! What a cassette never holds: the secrets, taken out where secrets
//! travel, and nowhere else.
//!
//! A secret travels in the `Authorization` header (which no transport hands
//! up, so it is never written), in a URL (its user and password, a query
//! parameter that names a key, or a value that is the secret), and in any
//! header that carries it (only `content-type` and `retry-after` are ever
//! written). The text the model or the server wrote is never rewritten,
//! except where it holds a key-shaped secret (long, not a word: what no
//! text holds by chance). So a local server's dummy key (`x`, `none`,
//! vLLM's `EMPTY`) is kept out of the file without turning "context" into
//! "conte[redacted]t" in a tool's description, which would make the first
//! request miss on replay.

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};

use crate::wording;

/// Query parameters whose values are never written (their names contain one of these).
const SECRET_QUERY_NAMES: &[&str] = &["key", "token", "secret", "auth", "sig", "password"];

/// The fewest characters of a secret that is looked for in any text.
const KEY_SHAPED_CHARS: usize = 16;

/// The secrets a recording never writes.
#[derive(Debug, Default)]
pub(crate) struct Secrets(RwLock<Vec<String>>);

impl Secrets {
    /// Adds `secret` (an empty one is none).
    pub(crate) fn add(&self, secret: String) {
        if secret.is_empty() {
            return;
        }
        let mut secrets = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if !secrets.contains(&secret) {
            secrets.push(secret);
        }
    }

    /// Whether any text can hold a secret to take out ([`Secrets::in_text`]
    /// would change nothing otherwise).
    pub(crate) fn any_in_text(&self) -> bool {
        self.read().iter().any(|secret| key_shaped(secret))
    }

    /// `text` (a body, a chunk, an error), every key-shaped secret in it
    /// replaced; borrowed when none occurs. A short or word-like secret is
    /// left: such text is the model's or the server's, not a credential.
    pub(crate) fn in_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let secrets = self.read();
        let mut text = Cow::Borrowed(text);
        for secret in secrets.iter().filter(|secret| key_shaped(secret)) {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), wording::REDACTED));
            }
        }
        text
    }

    /// `url` without credentials: no user or password; the value of every
    /// query parameter that names a key, token or signature, and every
    /// query value or path segment that is a secret, replaced; a
    /// key-shaped secret anywhere in it replaced.
    pub(crate) fn in_url(&self, url: &str) -> String {
        let url = self.in_text(url);
        let Ok(mut parsed) = reqwest::Url::parse(&url) else {
            return url.into_owned();
        };
        let secrets = self.read();
        let is_secret = |value: &str| secrets.iter().any(|secret| secret == value);
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        if parsed.query().is_some() {
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(name, value)| {
                    let lower = name.to_ascii_lowercase();
                    let named = SECRET_QUERY_NAMES.iter().any(|part| lower.contains(part));
                    let value = if named || is_secret(&value) {
                        wording::REDACTED.to_owned()
                    } else {
                        value.into_owned()
                    };
                    (name.into_owned(), value)
                })
                .collect();
            parsed.query_pairs_mut().clear().extend_pairs(pairs);
        }
        let segments: Option<Vec<String>> = parsed.path_segments().map(|segments| {
            segments
                .map(|segment| {
                    let decoded = percent_decoded(segment);
                    if is_secret(&decoded) {
                        wording::REDACTED.to_owned()
                    } else {
                        segment.to_owned()
                    }
                })
                .collect()
        });
        if let Some(segments) = segments {
            parsed.set_path(&segments.join("/"));
        }
        parsed.to_string()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `secret` looks like a key, not like a word: long, without
/// spaces, and holding something other than letters. Only such a secret is
/// looked for in text the model or the server wrote.
fn key_shaped(secret: &str) -> bool {
    secret.chars().count() >= KEY_SHAPED_CHARS
        && !secret.chars().any(char::is_whitespace)
        && secret.chars().any(|c| !c.is_alphabetic())
}

/// A path segment with its `%XX` escapes decoded (left as is where one is
/// not valid UTF-8).
fn percent_decoded(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = bytes
            .get(index + 1..index + 3)
            .filter(|_| bytes[index] == b'%')
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                index += 3;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(values: &[&str]) -> Secrets {
        let secrets = Secrets::default();
        for value in values {
            secrets.add((*value).to_owned());
        }
        secrets
    }

    #[test]
    fn urls_lose_their_credentials() {
        let none = Secrets::default();
        assert_eq!(
            none.in_url("https://user:pw@example.com/v1/chat/completions?api-key=abc&x=1"),
            "https://example.com/v1/chat/completions?api-key=%5Bredacted%5D&x=1"
        );
        assert_eq!(none.in_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        // A short key is taken out where it is a whole value, and only there.
        let short = secrets(&["x", "none", "EMPTY"]);
        assert_eq!(
            short.in_url("http://x.example/EMPTY/v1/chat/completions?k=none&expand=x&mode=xx"),
            "http://x.example/[redacted]/v1/chat/completions?k=%5Bredacted%5D&expand=%5Bredacted%5D&mode=xx"
        );
        let long = secrets(&["sk-live-1234567890abcd"]);
        assert_eq!(
            long.in_url("http://example.com/v1/sk-live-1234567890abcd/chat?q=a"),
            "http://example.com/v1/[redacted]/chat?q=a"
        );
    }

    #[test]
    fn only_a_key_shaped_secret_is_taken_out_of_text() {
        let secrets = secrets(&[
            "x",
            "none",
            "EMPTY",
            "password",
            "internationalization",
            "sk-live-1234567890abcd",
        ]);
        let text = "its own context, while it has none, EMPTY, a password; sk-live-1234567890abcd";
        assert_eq!(
            secrets.in_text(text),
            "its own context, while it has none, EMPTY, a password; [redacted]"
        );
        assert!(matches!(secrets.in_text("nothing secret"), Cow::Borrowed(_)));
        assert!(secrets.any_in_text());
        let short = Secrets::default();
        short.add("EMPTY".into());
        short.add(String::new());
        assert!(!short.any_in_text());
        assert_eq!(percent_decoded("a%20b%zz%"), "a b%zz%");
    }
}
