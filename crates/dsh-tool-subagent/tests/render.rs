//! Every stop reason's error, with and without a diagnostic and partial
//! output (docs/contract.md, "Results"), pinned in one place.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_subagent_api::StopReason;
use dsh_tool_subagent::wording;

#[test]
fn every_stop_reason_error_in_every_combination() {
    let mut rendered = Vec::new();
    for reason in ["aborted", "error", "max-tokens", "refusal", "frobnicated"] {
        let reason = StopReason::parse(reason);
        for (diagnostic, partial) in [
            (None, ""),
            (Some("Claude Code denied a tool request"), ""),
            (None, "partial assistant text"),
            (Some("Claude Code denied a tool request"), "partial assistant text"),
        ] {
            rendered.push(format!("Error: {}", wording::stopped_run(&reason, diagnostic, partial)));
        }
    }
    insta::assert_snapshot!("stop_reason_matrix", rendered.join("\n---\n"));
}
