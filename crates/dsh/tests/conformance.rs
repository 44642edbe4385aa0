//! The provider kit (dsh-subagent-conformance) over the `acp` provider
//! with `dsh acp` as its child: every delegation is a real process.
//!
//! One test in a file of its own: the kit counts the processes this test
//! binary starts while a cell runs, so nothing else may start any.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_conformance::{Status, Subject};

#[test]
fn the_acp_provider_over_dsh_acp_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_owned();
    let began = Instant::now();
    let report = Subject::new("acp (dsh acp)", move || {
        let config = AcpConfig::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["acp", "--quiet"])
            .cwd(&cwd);
        Arc::new(AcpProvider::new(config).unwrap())
    })
    .check();
    println!("{report}\n({:?})", began.elapsed());
    report.assert_conforms();
    for finding in &report.findings {
        // One-shot: no continuation to check; every other requirement holds.
        let expect = if finding.id == "continuation.remade" {
            Status::Skipped
        } else {
            Status::Pass
        };
        assert_eq!(finding.status, expect, "{}: {:?}", finding.id, finding.detail);
    }
}
