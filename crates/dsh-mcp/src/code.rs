//! Stable error codes.

dsh_tools::error_codes! {
    /// The stable codes of the errors a mounted MCP tool returns: importable,
    /// matchable, and what [`ToolError::code`](dsh_tools::ToolError::code)
    /// returns as text. The text of a code never changes; the table of every
    /// code is in `docs/errors.md`.
    pub enum ErrorCode {
        /// `MCP_TOOL_ERROR`: the MCP server itself returned an error result
        /// (`isError: true`).
        ToolError => "MCP_TOOL_ERROR",
        /// `MCP_SERVER_GONE`: the server is no longer running, or exited during
        /// the call.
        ServerGone => "MCP_SERVER_GONE",
        /// `MCP_CALL_FAILED`: the server answered the call with a protocol error.
        CallFailed => "MCP_CALL_FAILED",
        /// `MCP_CALL_CANCELLED`: the call was cancelled by its caller.
        CallCancelled => "MCP_CALL_CANCELLED",
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn codes_keep_their_text() {
        let all = [
            (ErrorCode::ToolError, "MCP_TOOL_ERROR"),
            (ErrorCode::ServerGone, "MCP_SERVER_GONE"),
            (ErrorCode::CallFailed, "MCP_CALL_FAILED"),
            (ErrorCode::CallCancelled, "MCP_CALL_CANCELLED"),
        ];
        for (code, text) in all {
            assert_eq!(code.as_str(), text);
            assert_eq!(code.to_string(), text);
            assert_eq!(code, text);
            assert_eq!(text, code);
        }
    }
}
