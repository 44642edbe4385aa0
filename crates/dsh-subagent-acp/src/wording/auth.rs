//! Authentication: what the child offered and what to configure.

/// The head of the list of methods a child offered.
const OFFERS_HEAD: &str = "the child offers these authentication methods:";

/// The methods a child offered, one per line after [`OFFERS_HEAD`]: each
/// offer's id, name, `env_var` and description.
pub(crate) fn offers_list<'a>(
    offers: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>, Option<&'a str>)>,
) -> String {
    let mut text = String::from(OFFERS_HEAD);
    for (id, name, env_var, description) in offers {
        text.push_str(&format!("\n- \"{id}\""));
        if !name.is_empty() {
            text.push_str(&format!(" ({name})"));
        }
        if let Some(var) = env_var {
            text.push_str(&format!(", env_var {var}"));
        }
        if let Some(description) = description {
            text.push_str(&format!(": {description}"));
        }
    }
    text
}

/// How to choose a method, after the list.
const AUTH_HOW: &str = "`AcpAuth::Method(\"<id>\")` calls authenticate with that id; `AcpAuth::FirstEnvVar` uses the first env_var method whose variable is set in the child's environment (pass it with `pass_env` or `env`)";

/// A child that requires authentication and offered no method.
pub(crate) const AUTH_REQUIRED_NO_OFFER: &str = "the child requires authentication but offered no method at initialize; give it its credentials (`pass_env`, `env`) or log it in beforehand";

/// A child that refused with "authentication required" under
/// `AcpAuth::FirstEnvVar`: the list of its offers, and what to do.
pub(crate) fn auth_required_env_var(list: &str) -> String {
    format!(
        "{list}\nno env_var method had its variable set in the child's environment; pass one with `pass_env` or `env`, or choose a method with `AcpAuth::Method(\"<id>\")`"
    )
}

/// … under `AcpAuth::Method(id)`.
pub(crate) fn auth_required_method(list: &str, id: &str) -> String {
    format!("{list}\nthe configured method \"{id}\" did not authenticate the child")
}

/// … under `AcpAuth::None`.
pub(crate) fn auth_required_none(list: &str) -> String {
    format!("{list}\nno authentication method is configured; choose one: {AUTH_HOW}")
}

/// A configured method the child does not offer; `list` is what it offered
/// ([`offers_list`]), `None` when it offered none.
pub(crate) fn auth_not_offered(id: &str, list: Option<&str>) -> String {
    let head = format!("the configured authentication method \"{id}\" is not among those the child offers");
    match list {
        Some(list) => format!("{head}\n{list}"),
        None => format!("{head} (it offered none)"),
    }
}
