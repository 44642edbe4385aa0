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

/// Why a server could not start: it exited during the handshake `step`.
pub fn exited_before_answering(how: &str, step: &str) -> String {
    format!("{how} before answering {step}")
}

/// Why a server could not start: the handshake `step` failed.
pub fn handshake_failed(step: &str, error: &str) -> String {
    format!("{step} failed: {error}")
}

/// Why a server could not start: it stayed silent.
pub fn startup_timed_out(timeout: Duration) -> String {
    format!(
        "it did not answer initialize and tools/list within {} ms",
        timeout.as_millis()
    )
}

/// A served call whose task ended without a result (it panicked or was aborted).
pub fn call_task_failed(tool: &str, error: &str) -> String {
    format!("tool \"{tool}\" failed: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_is_pinned() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let texts = [
            server_gone("files", "read", "it exited with exit code 1"),
            server_exited_mid_call("files", "read", "it exited with exit code 3"),
            call_failed("files", "read", "Mcp error: -32602: bad"),
            call_cancelled("files", "read"),
            arguments_not_object("mcp__files__read", "an array"),
            non_text_content("image", "image/png"),
            progress("subagent", Duration::from_millis(5400)),
            cannot_run("my-server", &io),
            exited_before_answering("it exited with exit code 4", "initialize"),
            handshake_failed("tools/list", "connection closed"),
            startup_timed_out(Duration::from_secs(30)),
            call_task_failed("subagent", "task panicked"),
        ];
        insta::assert_snapshot!(texts.join("\n"));
    }
}
