//! Every text this crate shows a model or a person, in one place.
//!
//! The rule: errors (their `#[error]` attributes call the items here), the
//! results and progress a model reads, exit descriptions and log messages
//! are written here, and the rest of the crate only calls these items. The
//! `pub` items are the texts a mounted tool's caller reads; the `pub(crate)`
//! ones are errors and log lines whose text reaches a person through this
//! crate's error types or `tracing`. Names a program matches stay beside the
//! code: MCP method names, error codes, the tool-name prefix and separator.

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

/// The progress message sent while a served call runs and nothing was
/// reported for a while (the heartbeat).
pub fn progress(tool: &str, elapsed: Duration) -> String {
    format!("{tool} still running after {} s", elapsed.as_secs())
}

/// One progress message carrying what a served call reported since the
/// last one, oldest first (`skipped` older reports were left out).
pub fn progress_reports(reports: &[String], skipped: usize) -> String {
    let joined = reports.join("; ");
    match skipped {
        0 => joined,
        n => format!("({n} earlier) {joined}"),
    }
}

/// A served `tools/call` of a tool that is not mounted (a JSON-RPC error).
pub fn unknown_tool(tool: &str) -> String {
    format!("unknown tool \"{tool}\"")
}

/// A served call that arrives after its session ended (a JSON-RPC error).
pub const SESSION_ENDED: &str = "the MCP session has ended";

/// A call whose remote server could no longer be reached.
pub fn connection_lost_mid_call(server: &str, tool: &str, how: &str) -> String {
    format!("MCP server \"{server}\" became unreachable during the call to its tool \"{tool}\" ({how})")
}

/// Why a remote server could not be used: connecting failed.
pub fn unreachable(url: &str, error: &str) -> String {
    format!("cannot reach {url}: {error}")
}

/// Why a remote server could not be used: it answered with an HTTP error.
pub fn http_refused(url: &str, status: u16) -> String {
    let shown = reqwest::StatusCode::from_u16(status).map_or_else(|_| status.to_string(), |code| code.to_string());
    let hint = match status {
        401 => " (missing or wrong credentials: see bearer_token_env)",
        403 => " (the credentials do not allow this)",
        404 => " (no MCP endpoint at that URL?)",
        _ => "",
    };
    format!("{url} answered HTTP {shown}{hint}")
}

/// How a remote server went away when nothing more is known.
pub fn connection_closed(url: &str) -> String {
    format!("the connection to {url} closed")
}

/// Why a remote server could not be used: its token's variable is not set.
pub fn token_variable_unset(variable: &str) -> String {
    format!("the environment variable {variable} (its bearer token) is not set or empty")
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

/// A server that could not be mounted, and why.
pub(crate) fn start_error(server: &str, cause: &str) -> String {
    format!("MCP server \"{server}\" failed to start: {cause}")
}

/// A server whose process group could not be released, and what was left.
pub(crate) fn release_error(server: &str, cause: &str) -> String {
    format!("MCP server \"{server}\" was not released: {cause}")
}

/// Log line: a listed tool whose name cannot become a tool name here.
pub(crate) const LOG_SKIPPED_TOOL: &str = "skipping an MCP tool whose name cannot be a tool name";

/// How a server's process ended: `it exited with <exit>` (the exit itself,
/// `exit code 3` or `killed by signal SIGKILL`, is worded by `dsh-process`),
/// or a closed connection when its exit is not known yet.
pub(crate) fn exited_with(exit: Option<&dyn std::fmt::Display>) -> String {
    match exit {
        Some(info) => format!("it exited with {info}"),
        None => "its connection closed".to_owned(),
    }
}

/// [`exited_with`] followed by the last line the server wrote to stderr.
pub(crate) fn with_last_stderr(how: &str, line: &str) -> String {
    format!("{how}; its last stderr line: {line}")
}

/// Piped stdio that did not come back from the spawn.
pub(crate) const PIPES_UNAVAILABLE: &str = "the server's pipes were not available";

/// What a failed teardown of the server's group met, in our words.
pub(crate) fn teardown_failed(error: &dsh_process::TeardownError) -> String {
    match error {
        dsh_process::TeardownError::Signal { error, .. } => cannot_signal(error),
        dsh_process::TeardownError::SurvivedKill { .. } => SURVIVED_KILL.to_owned(),
        other => other.to_string(),
    }
}

/// A signal to the server's group that the system refused.
pub(crate) fn cannot_signal(error: &dyn std::fmt::Display) -> String {
    format!("cannot signal the MCP server's process group: {error}")
}

/// A server group that outlived SIGKILL and the wait after it.
pub(crate) const SURVIVED_KILL: &str = "the MCP server's process group outlived SIGKILL";

/// Why a served session ended early.
pub(crate) fn session_failed(error: &str) -> String {
    format!("MCP session failed: {error}")
}

/// Why the HTTP server stopped or could not start.
pub(crate) fn http_serve_failed(error: &str) -> String {
    format!("the MCP HTTP server failed: {error}")
}

/// An HTTP server asked to listen beyond loopback without a token.
pub(crate) fn needs_bearer_token(address: &str) -> String {
    format!(
        "refusing to serve MCP on {address} without a bearer token: anyone who reaches it could start agents on your model key (listen on 127.0.0.1, or set a token)"
    )
}

/// The body of a 401 from the HTTP server.
pub(crate) const HTTP_UNAUTHORIZED: &str = "Unauthorized: this MCP server needs Authorization: Bearer <token>";

/// The message of a 400 for a `Host` that is missing or cannot be read.
pub(crate) const HTTP_BAD_HOST: &str = "Bad Request: the Host header is missing or cannot be read";

/// The message of a 403 for a `Host` the server does not accept.
pub(crate) const HTTP_HOST_NOT_ALLOWED: &str =
    "Forbidden: this Host is not one the server accepts (a DNS rebinding attempt?)";

/// The message of a 403 for an `Origin` the server does not accept.
pub(crate) const HTTP_ORIGIN_NOT_ALLOWED: &str = "Forbidden: pages of this Origin may not use this server";

/// The message of a 404 for a session that does not exist (ended, or never opened).
pub(crate) const HTTP_SESSION_NOT_FOUND: &str =
    "Session not found: it has ended or never existed; open a new one with initialize";

/// The message of a 408 for a request body that did not arrive in time.
pub(crate) fn http_body_timeout(timeout: Duration) -> String {
    format!(
        "Request Timeout: the request body did not arrive within {} ms",
        timeout.as_millis()
    )
}

/// The message of a 400 for a request body that could not be read.
pub(crate) fn http_body_unreadable(error: &dyn std::fmt::Display) -> String {
    format!("Bad Request: the request body could not be read: {error}")
}

/// A message that is not JSON (a JSON-RPC parse error).
pub(crate) fn not_json(error: &serde_json::Error) -> String {
    format!("Parse error: the message is not JSON ({error})")
}

/// JSON that is not a JSON-RPC message the server takes (an invalid request).
pub(crate) fn not_a_message(error: &serde_json::Error) -> String {
    format!("Invalid Request: not a JSON-RPC request, notification or response ({error})")
}

/// A message past the size limit (an invalid request).
pub(crate) fn message_too_large(limit: usize) -> String {
    let shown = match limit % (1 << 20) {
        0 => format!("{} MiB ({limit} bytes)", limit >> 20),
        _ => format!("{limit} bytes"),
    };
    format!("Invalid Request: the message is larger than the limit of {shown} and was not read")
}

/// Params that do not fit their method (invalid params).
pub(crate) fn invalid_params(method: &str, error: &str) -> String {
    format!("Invalid params for {method}: {error}")
}

/// Why params were refused: there are none where the method needs some.
pub(crate) const PARAMS_MISSING: &str = "params are required";

/// Why params were refused when they deserialize alone.
pub(crate) const PARAMS_REFUSED: &str = "the request does not fit the method";

/// The body of a 404 for a path other than the endpoint's.
pub(crate) fn http_not_served(path: &str) -> String {
    format!("Not Found: the MCP endpoint is {path}")
}

/// A new session past the bound (the message of a JSON-RPC error).
pub(crate) fn too_many_sessions(max: usize) -> String {
    format!("too many MCP sessions ({max} are open): end one (HTTP DELETE) or try again later")
}

/// An HTTP error status with a prefix of its body.
pub(crate) fn http_status_body(status: &str, body: &str) -> String {
    match body.trim() {
        "" => format!("HTTP {status}"),
        body => format!("HTTP {status}: {body}"),
    }
}

/// An SSE event from a remote server past the size limit.
pub(crate) fn sse_event_too_large(limit: usize) -> String {
    format!("an SSE event exceeded {limit} bytes")
}

/// Log line: accepting a connection failed for now.
pub(crate) fn log_accept_failed(error: &dyn std::fmt::Display) -> String {
    format!("MCP HTTP server: accepting a connection failed: {error}")
}

/// Log line: a message past the size limit was refused.
pub(crate) fn log_message_too_large(limit: usize) -> String {
    format!("MCP session: refused a message larger than {limit} bytes")
}

/// Log line: a message that could not be served was refused.
pub(crate) fn log_message_refused(message: &str) -> String {
    format!("MCP session: refused a message: {message}")
}

/// A bearer token too short to guard a server.
pub(crate) fn token_too_short(length: usize, minimum: usize) -> String {
    format!(
        "the bearer token is {length} bytes long: it must be at least {minimum} (for example 64 hex digits from `openssl rand -hex 32`)"
    )
}

/// Log line: one connection ended with an error.
pub(crate) fn log_connection_failed(error: &dyn std::fmt::Display) -> String {
    format!("MCP HTTP connection ended with an error: {error}")
}

/// Log line: the served session's input ended with an error.
pub(crate) fn log_input_ended(error: &dyn std::fmt::Display) -> String {
    format!("MCP session input ended: {error}")
}

/// Log line: calls still running when a served session's wind-down ended.
pub(crate) fn log_calls_outlived_session(wind_down: Duration) -> String {
    format!(
        "MCP session closed with calls still running after {} s",
        wind_down.as_secs()
    )
}

/// A `--mcp-server` value without `=`.
pub(crate) fn spec_missing_name(text: &str) -> String {
    format!("expected <name>=<command line>, got \"{text}\"")
}

/// A server name a tool name cannot carry.
pub(crate) fn spec_bad_name(name: &str) -> String {
    format!(
        "MCP server name \"{name}\" is not valid: use ASCII letters, digits, '-' and '_' (not \"__\", which separates the server from the tool in mcp__<server>__<tool>)"
    )
}

/// A server with an empty command line.
pub(crate) fn spec_empty_command(name: &str) -> String {
    format!("MCP server \"{name}\" has an empty command")
}

/// A URL that is not an `http://` or `https://` URL with a host.
pub(crate) fn spec_bad_url(url: &str, reason: &str) -> String {
    format!("MCP server URL \"{url}\" is not valid: {reason}")
}

/// Why a URL is refused: another scheme.
pub(crate) const URL_NOT_HTTP: &str = "only http:// and https:// are supported";

/// Why a URL is refused: no host.
pub(crate) const URL_WITHOUT_HOST: &str = "it has no host";

/// A header HTTP cannot carry.
pub(crate) fn spec_bad_header(name: &str) -> String {
    format!("MCP server header \"{name}\" is not a valid HTTP header name and value")
}

/// An environment variable name that cannot be one.
pub(crate) fn spec_bad_env_name(variable: &str) -> String {
    format!("\"{variable}\" cannot be the name of an environment variable")
}

/// A command line that cannot be split into words.
pub(crate) fn spec_bad_command_line(name: &str, line: &str) -> String {
    format!("MCP server \"{name}\": cannot split the command line \"{line}\" (an unclosed quote?)")
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
            progress_reports(&["started".to_owned(), "model call 1".to_owned()], 0),
            progress_reports(&["model call 9".to_owned()], 3),
            unknown_tool("nope"),
            SESSION_ENDED.to_owned(),
            connection_lost_mid_call("docs", "search", "the connection to http://127.0.0.1:9/mcp closed"),
            unreachable("http://127.0.0.1:9/mcp", "error sending request: Connection refused"),
            http_refused("https://mcp.example.com/mcp", 401),
            http_refused("https://mcp.example.com/mcp", 404),
            http_refused("https://mcp.example.com/mcp", 502),
            token_variable_unset("DOCS_TOKEN"),
        ];
        insta::assert_snapshot!(texts.join("\n"));
    }

    #[test]
    fn every_refusal_text_is_pinned() {
        let json_error = serde_json::from_str::<serde_json::Value>("{not json").unwrap_err();
        let texts = [
            HTTP_UNAUTHORIZED.to_owned(),
            HTTP_BAD_HOST.to_owned(),
            HTTP_HOST_NOT_ALLOWED.to_owned(),
            HTTP_ORIGIN_NOT_ALLOWED.to_owned(),
            HTTP_SESSION_NOT_FOUND.to_owned(),
            http_not_served("/mcp"),
            http_body_timeout(Duration::from_secs(30)),
            http_body_unreadable(&"connection reset"),
            too_many_sessions(16),
            not_json(&json_error),
            not_a_message(&json_error),
            message_too_large(16 << 20),
            message_too_large(4 << 20),
            message_too_large(100),
            invalid_params("tools/call", "invalid type: integer `5`, expected a string"),
            PARAMS_MISSING.to_owned(),
            PARAMS_REFUSED.to_owned(),
            token_too_short(7, 32),
            log_message_too_large(16 << 20),
            log_message_refused("Parse error: the message is not JSON (expected value at line 1 column 1)"),
        ];
        insta::assert_snapshot!(texts.join("\n"));
    }
}
