//! What a cassette never holds: credentials in a URL.

use crate::wording;

/// Query parameters whose values are never written (their names contain one of these).
const SECRET_QUERY_NAMES: &[&str] = &["key", "token", "secret", "auth", "sig", "password"];

/// `url` without credentials: no user or password, and the value of every
/// query parameter that names a key, token or signature replaced.
pub(crate) fn scrub_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.to_owned();
    };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(name, value)| {
                let lower = name.to_ascii_lowercase();
                let secret = SECRET_QUERY_NAMES.iter().any(|part| lower.contains(part));
                let value = if secret {
                    wording::REDACTED.to_owned()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            scrub_url("https://user:pw@example.com/v1/chat/completions?api-key=abc&x=1"),
            "https://example.com/v1/chat/completions?api-key=%5Bredacted%5D&x=1"
        );
        assert_eq!(scrub_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
    }
}
