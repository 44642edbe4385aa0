//! Stable error codes.

dsh_subagent_api::error_codes! {
    /// The stable codes of dsh-tools' errors (the tool registry's and every tool's
    /// shared ones): importable, matchable, and what `code()` returns as text. The
    /// text of a code never changes; the table of every code is in
    /// `docs/errors.md`.
    pub enum ErrorCode {
        /// `INVALID_ARGUMENTS`: the call's arguments are malformed; the message names the field.
        InvalidArguments => "INVALID_ARGUMENTS",
        /// `NO_CALLING_AGENT`: the tool acts for its caller, and the call named none.
        NoCallingAgent => "NO_CALLING_AGENT",
        /// `UNKNOWN_TOOL`: no tool of that name is registered.
        UnknownTool => "UNKNOWN_TOOL",
        /// `ABORTED_BEFORE_DISPATCH`: the call was cancelled before the tool ran.
        AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
        /// `TOOL_PANICKED`: the tool panicked; the panic became this error.
        ToolPanicked => "TOOL_PANICKED",
    }
}
