//! Every text this crate shows a model or a person, in one place.

use std::time::Duration;

/// A mounted tool whose server is no longer running.
pub fn server_gone(server: &str, tool: &str, how: &str) -> String {
    format!("MCP server \"{server}\" is not running ({how}), so its tool \"{tool}\" cannot be called")
}

/// A call whose server exited before answering.
pub fn server_exited_mid_call(server: &str, tool: &str, how: &str) -> String {
    format!("MCP server \"{server}\" exited during the call to its tool \"{tool}\" ({how})")
}

/// A call the server answered with a protocol error.
pub fn call_failed(server: &str, tool: &str, error: &str) -> String {
    format!("MCP server \"{server}\" failed the call to its tool \"{tool}\": {error}")
}

/// A call cancelled by the caller.
pub fn call_cancelled(server: &str, tool: &str) -> String {
    format!("the call to MCP tool \"{tool}\" of server \"{server}\" was cancelled")
}

/// Arguments that are not a JSON object.
pub fn arguments_not_object(tool: &str, kind: &str) -> String {
    format!("the arguments of {tool} must be an object, got {kind}")
}

/// A content block that is not text, as the model reads it.
pub fn non_text_content(kind: &str, mime: &str) -> String {
    format!("[{kind} content ({mime}) omitted]")
}

/// The progress message sent while a served call runs.
pub fn progress(tool: &str, elapsed: Duration) -> String {
    format!("{tool} still running after {} s", elapsed.as_secs())
}

/// Why a server could not start: spawning its program failed.
pub fn cannot_run(program: &str, error: &std::io::Error) -> String {
    format!("cannot run \"{program}\": {error}")
}
