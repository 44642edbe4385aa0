//! Soak: 1,000,000 delegations with random cancellations, then memory must
//! be back at its baseline. Ignored by default (about 6 s in a release build
//! on 2 cores, far longer in a debug build); run it with
//!
//! ```sh
//! cargo test --release -p dsh-tool-subagent --test soak -- --ignored --nocapture
//! ```
//!
//! Tolerance: resident memory after the soak may exceed the baseline (taken
//! after a warm-up of the same batch shape) by at most 10 % of the baseline
//! plus 16 MiB, allocator slack; a leak of even 100 bytes per delegation
//! (100 MB over the run) fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{alive_tasks, exec_with, task};
use dsh_subagent::SubagentService;
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{DEFAULT_REPLY, ResultBehavior, ScriptedProvider};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{CancellationToken, ToolRegistry};

const TOTAL: usize = 1_000_000;
const BATCH: usize = 10_000;

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One batch: a quarter of the calls go to a child that only ends when
/// cancelled (all cancelled), and a random third of the rest are cancelled
/// while they race to finish.
async fn batch(tools: &ToolRegistry, rng: &mut Rng) -> (usize, usize) {
    let mut calls = Vec::with_capacity(BATCH);
    let mut tokens = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let slow = rng.next().is_multiple_of(4);
        let cancel = CancellationToken::new();
        let tools = tools.clone();
        let exec = exec_with(cancel.clone());
        let name = if slow { "subagent_slow" } else { "subagent" };
        calls.push(tokio::spawn(async move { tools.call(name, task(), exec).await }));
        tokens.push((slow || rng.next().is_multiple_of(3), cancel));
    }
    for (cancel_it, token) in &tokens {
        if *cancel_it {
            token.cancel();
        }
    }
    let (mut replies, mut errors) = (0, 0);
    for call in calls {
        let result = call.await.unwrap();
        if !result.is_error && result.text == DEFAULT_REPLY {
            replies += 1;
        } else {
            assert!(
                result.text == "Error: tool call aborted before dispatch"
                    || result.text.starts_with("Error: subagent run was cancelled")
                    || result.text == format!("Error: {}", dsh_subagent_testing::scripted::START_ABORTED),
                "{}",
                result.text
            );
            errors += 1;
        }
    }
    (replies, errors)
}

#[test]
#[ignore = "soak test: cargo test --release -p dsh-tool-subagent --test soak -- --ignored --nocapture"]
fn a_million_delegations_with_random_cancels_return_memory_to_baseline() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let fast = ScriptedProvider::builder("fast").record_requests(false).build();
        let never_opened = Gate::new();
        let slow = ScriptedProvider::builder("slow")
            .on_result(ResultBehavior::Gated(never_opened))
            .record_requests(false)
            .build();
        let _fast = service.register_provider(fast.clone()).unwrap();
        let _slow = service.register_provider(slow.clone()).unwrap();
        let _tool = SubagentToolPlugin::apply(SubagentToolConfig::new("fast"), &service, &tools).unwrap();
        let _slow_tool = SubagentToolPlugin::apply(
            SubagentToolConfig::new("slow").tool_name("subagent_slow"),
            &service,
            &tools,
        )
        .unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

        for _ in 0..5 {
            batch(&tools, &mut rng).await;
        }
        let baseline = rss_kb();
        let (mut replies, mut errors) = (0, 0);
        for round in 0..TOTAL / BATCH {
            let (r, e) = batch(&tools, &mut rng).await;
            replies += r;
            errors += e;
            if round % 20 == 19 {
                eprintln!("soak: {} delegations, RSS {} kB", (round + 1) * BATCH, rss_kb());
            }
        }
        let after = rss_kb();
        eprintln!("soak: {replies} replies, {errors} cancelled; RSS baseline {baseline} kB, after {after} kB");
        assert_eq!(replies + errors, TOTAL);
        assert!(replies > 0 && errors > 0, "both paths were exercised");
        for provider in [&fast, &slow] {
            let stats = provider.stats();
            assert_eq!(stats.disposes(), stats.published(), "dispose once per published run");
            assert_eq!(stats.live(), 0, "no child left running");
        }
        assert_eq!(alive_tasks(), 0, "no task left running");
        let tolerance = baseline / 10 + 16 * 1024;
        assert!(
            after <= baseline + tolerance,
            "RSS grew from {baseline} kB to {after} kB (tolerance {tolerance} kB)"
        );
    });
}
