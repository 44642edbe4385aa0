//! A client's message, screened before it reaches rmcp: what cannot be
//! served (not JSON, not a JSON-RPC message, an `initialize` whose params
//! are wrong, too large) is refused in JSON-RPC's own shape, with the
//! request's `id` whenever it could be read. Both transports use it: stdio
//! ([`crate::server::stdio`]) and Streamable HTTP ([`crate::server::http::front`]).

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ConstString, InitializeRequestParams, InitializeResultMethod};
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::{Value, json};

use crate::wording;

/// JSON-RPC's code for text that is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a request the server can take.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for params of the wrong shape.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The code MCP's transports give their own refusals (a server error).
pub(crate) const SERVER_ERROR: i64 = -32000;
/// The code MCP's transports give a session that does not exist.
pub(crate) const SESSION_NOT_FOUND: i64 = -32001;

/// Why a message is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Not JSON (`-32700`).
    NotJson,
    /// JSON, but not a JSON-RPC message (`-32600`).
    NotMessage,
    /// A message longer than the limit (`-32600`).
    TooLarge,
    /// A request whose params do not fit its method (`-32602`).
    BadParams,
}

/// A refused message: why, in words, and the id it carried when that could
/// be read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) kind: Kind,
    pub(crate) message: String,
    pub(crate) id: Option<Value>,
}

impl Refusal {
    /// The JSON-RPC error code.
    pub(crate) fn code(&self) -> i64 {
        match self.kind {
            Kind::NotJson => PARSE_ERROR,
            Kind::NotMessage | Kind::TooLarge => INVALID_REQUEST,
            Kind::BadParams => INVALID_PARAMS,
        }
    }

    /// The error response, `"id": null` when the id could not be read.
    pub(crate) fn body(&self) -> Value {
        error_body(self.code(), &self.message, self.id.as_ref())
    }

    /// A message of more than `limit` bytes, of which `prefix` was read.
    pub(crate) fn too_large(prefix: &[u8], limit: usize) -> Self {
        Self {
            kind: Kind::TooLarge,
            message: wording::message_too_large(limit),
            id: read_id(prefix),
        }
    }
}

/// A JSON-RPC error response.
pub(crate) fn error_body(code: i64, message: &str, id: Option<&Value>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The message in `bytes`, or why it cannot be served.
pub(crate) fn screen(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Refusal> {
    let value: Value = serde_json::from_slice(bytes).map_err(|error| Refusal {
        kind: Kind::NotJson,
        message: wording::not_json(&error),
        id: None,
    })?;
    let id = value.get("id").filter(|id| is_request_id(id)).cloned();
    let message: ClientJsonRpcMessage = serde_json::from_value(value).map_err(|error| Refusal {
        kind: Kind::NotMessage,
        message: wording::not_a_message(&error),
        id: id.clone(),
    })?;
    // An `initialize` that is not one never reaches a handler: rmcp takes
    // it for a method of its own and answers as if no session were open.
    // Other requests of a method the server serves are checked in-band by
    // the handler (`Session::on_custom_request`).
    if let ClientJsonRpcMessage::Request(request) = &message
        && let ClientRequest::CustomRequest(custom) = &request.request
        && custom.method == InitializeResultMethod::VALUE
    {
        let error = bad_params::<InitializeRequestParams>(custom.params.as_ref());
        return Err(Refusal {
            kind: Kind::BadParams,
            message: wording::invalid_params(&custom.method, &error),
            id,
        });
    }
    Ok(message)
}

/// Why `params` do not deserialize as `T`.
pub(crate) fn bad_params<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> String {
    match params.map(|params| serde_json::from_value::<T>(params.clone())) {
        Some(Err(error)) => error.to_string(),
        None => wording::PARAMS_MISSING.to_owned(),
        // rmcp refused what deserializes alone: something beside the params.
        Some(Ok(_)) => wording::PARAMS_REFUSED.to_owned(),
    }
}

/// What JSON-RPC accepts as a request id: a string or an integer.
fn is_request_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The top-level `"id"` of a JSON object whose text may be cut short (a
/// message past the size limit): found when it comes before the cut.
pub(crate) fn read_id(text: &[u8]) -> Option<Value> {
    /// Walks the top-level members until `id`, keeping its value.
    struct FindId<'a>(&'a mut Option<Value>);

    impl<'de> Visitor<'de> for FindId<'_> {
        type Value = ();

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<Value>()?);
                    // Stop here: the rest may be cut off.
                    return Err(serde::de::Error::custom("found"));
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let _ = deserializer.deserialize_map(FindId(&mut found));
    found.filter(is_request_id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn refused(text: &str) -> (i64, Option<Value>) {
        let refusal = screen(text.as_bytes()).unwrap_err();
        (refusal.code(), refusal.id)
    }

    #[test]
    fn what_is_refused_and_with_which_id() {
        assert_eq!(refused("{not json"), (PARSE_ERROR, None));
        assert_eq!(refused(""), (PARSE_ERROR, None));
        assert_eq!(refused(r#"{"hello": 1}"#), (INVALID_REQUEST, None));
        assert_eq!(
            refused(r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#),
            (INVALID_REQUEST, None)
        );
        assert_eq!(
            refused(r#"{"jsonrpc": "2.0", "id": "a", "method": 5}"#),
            (INVALID_REQUEST, Some(json!("a")))
        );
        assert_eq!(
            refused(r#"{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}"#),
            (INVALID_PARAMS, Some(json!(3)))
        );
        assert_eq!(
            refused(r#"{"jsonrpc": "2.0", "id": 4, "method": "initialize"}"#),
            (INVALID_PARAMS, Some(json!(4)))
        );
        // An id that is no id is not echoed.
        assert_eq!(
            refused(r#"{"jsonrpc": "2.0", "id": {"x": 1}, "method": 5}"#),
            (INVALID_REQUEST, None)
        );
        for served in [
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
            r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
            // Checked in-band by the handler, after the session is found.
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}"#,
        ] {
            assert!(screen(served.as_bytes()).is_ok(), "{served}");
        }
    }

    #[test]
    fn the_id_of_a_message_cut_short_is_read_when_it_comes_before_the_cut() {
        let cut = br#"{"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"name": "x", "arguments": {"text": "aaaa"#;
        assert_eq!(read_id(cut), Some(json!(42)));
        let late = br#"{"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {"text": "aaaa"#;
        assert_eq!(read_id(late), None);
        assert_eq!(read_id(br#"{"params": {"id": 7}, "id": "x"}"#), Some(json!("x")));
        assert_eq!(read_id(b"not json"), None);
        let refusal = Refusal::too_large(cut, 16);
        assert_eq!(refusal.body()["id"], json!(42));
        assert_eq!(refusal.body()["error"]["code"], json!(INVALID_REQUEST));
    }
}
