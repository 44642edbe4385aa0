//! Authentication: what the child offered and what to configure.

use crate::config::AcpAuth;
use crate::transport::AuthOffer;

/// The methods a child offered, one per line.
fn offers_list(offers: &[AuthOffer]) -> String {
    let mut text = String::from("the child offers these authentication methods:");
    for offer in offers {
        text.push_str(&format!("\n- \"{}\"", offer.id));
        if !offer.name.is_empty() {
            text.push_str(&format!(" ({})", offer.name));
        }
        if let Some(var) = &offer.env_var {
            text.push_str(&format!(", env_var {var}"));
        }
        if let Some(description) = &offer.description {
            text.push_str(&format!(": {description}"));
        }
    }
    text
}

/// How to choose a method, after the list.
const AUTH_HOW: &str = "`AcpAuth::Method(\"<id>\")` calls authenticate with that id; `AcpAuth::FirstEnvVar` uses the first env_var method whose variable is set in the child's environment (pass it with `inherit_env` or `env`)";

/// A child that refused with "authentication required", with what it offered
/// and what to configure.
pub(crate) fn auth_required(offers: &[AuthOffer], auth: &AcpAuth) -> String {
    if offers.is_empty() {
        return "the child requires authentication but offered no method at initialize; give it its credentials (`inherit_env`, `env`) or log it in beforehand".to_owned();
    }
    let list = offers_list(offers);
    match auth {
        AcpAuth::FirstEnvVar => format!(
            "{list}\nno env_var method had its variable set in the child's environment; pass one with `inherit_env` or `env`, or choose a method with `AcpAuth::Method(\"<id>\")`"
        ),
        AcpAuth::Method(id) => format!("{list}\nthe configured method \"{id}\" did not authenticate the child"),
        AcpAuth::None => format!("{list}\nno authentication method is configured; choose one: {AUTH_HOW}"),
    }
}

/// A configured method the child does not offer.
pub(crate) fn auth_not_offered(id: &str, offers: &[AuthOffer]) -> String {
    let head = format!("the configured authentication method \"{id}\" is not among those the child offers");
    if offers.is_empty() {
        format!("{head} (it offered none)")
    } else {
        format!("{head}\n{}", offers_list(offers))
    }
}
