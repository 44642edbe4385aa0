//! Every crate's error codes have one shape (`dsh_subagent_api::StableCode`),
//! so each enum lists its codes and the table in `docs/errors.md` is checked
//! against them: every code of every enum has its row, under its symbol, and
//! reads back from its text.

use dsh_subagent_api::StableCode;

/// One enum's codes as `(text, symbol)`, read through the shared shape.
fn rows<C: StableCode>(path: &str) -> Vec<(String, String)> {
    C::ALL
        .iter()
        .map(|&code| {
            assert_eq!(C::from_text(code.as_str()), Some(code), "{path}: {code:?}");
            assert_eq!(code.to_string(), code.as_str(), "{path}: {code:?}");
            (code.as_str().to_owned(), format!("{path}::{code:?}"))
        })
        .collect()
}

#[test]
fn every_code_of_every_crate_has_its_row_in_docs_errors_md_and_reads_back_from_its_text() {
    let table = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md")).unwrap();
    let codes = [
        rows::<dsh_subagent_api::ErrorCode>("dsh_subagent_api::ErrorCode"),
        rows::<dsh_tools::ErrorCode>("dsh_tools::ErrorCode"),
        rows::<dsh_tasks::ErrorCode>("dsh_tasks::ErrorCode"),
        rows::<dsh_agent::ErrorCode>("dsh_agent::ErrorCode"),
        rows::<dsh_tool_subagent::ErrorCode>("dsh_tool_subagent::ErrorCode"),
        rows::<dsh_harness::BuildErrorCode>("dsh_harness::BuildErrorCode"),
        rows::<dsh_mcp::ErrorCode>("dsh_mcp::ErrorCode"),
        rows::<dsh_subagent_acp::ErrorCode>("dsh_subagent_acp::ErrorCode"),
    ];
    let mut missing = Vec::new();
    for (text, symbol) in codes.iter().flatten() {
        let found = table
            .lines()
            .any(|line| line.starts_with(&format!("| `{text}` |")) && line.contains(&format!("`{symbol}`")));
        if !found {
            missing.push(format!("{text} ({symbol})"));
        }
    }
    assert!(missing.is_empty(), "docs/errors.md has no row for: {missing:?}");
    assert!(codes.iter().all(|rows| !rows.is_empty()));
}
