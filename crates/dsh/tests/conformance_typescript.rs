//! The provider kit (dsh-subagent-conformance) over the `acp` provider
//! with an agent written with the official TypeScript ACP SDK as its child
//! (scripts/acp-typescript-agent.mjs). Ignored in a plain `cargo test`: it
//! needs Node.js and the SDK, which scripts/acp-typescript-agent.sh
//! installs from npm before it runs this test with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_conformance::{Status, Subject};

#[test]
#[ignore = "needs Node.js and the TypeScript ACP SDK: run scripts/acp-typescript-agent.sh"]
fn the_acp_provider_over_a_typescript_sdk_agent_keeps_the_contract() {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| panic!("{name} is unset: run scripts/acp-typescript-agent.sh"))
    };
    let (node, agent, sdk) = (var("ACP_TS_NODE"), var("ACP_TS_AGENT"), var("ACP_TS_SDK"));
    let began = Instant::now();
    let report = Subject::new("acp (TypeScript SDK agent)", move || {
        let config = AcpConfig::new(&node).args([agent.clone(), sdk.clone()]);
        Arc::new(AcpProvider::new(config).unwrap())
    })
    // Each child is a Node.js process: a hundred of them take longer than
    // the default 5 s to start on a small machine.
    .stage_deadline(Duration::from_secs(60))
    .check();
    println!("{report}\n({:?})", began.elapsed());
    report.assert_conforms();
    for finding in &report.findings {
        let expect = if finding.id == "continuation.remade" {
            Status::Skipped
        } else {
            Status::Pass
        };
        assert_eq!(finding.status, expect, "{}: {:?}", finding.id, finding.detail);
    }
}
