//! The kit over providers that break the contract on purpose: each report
//! must name the failure, and every run must finish, however the provider
//! behaves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_subagent_api::{
    Capabilities, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentResult, SubagentRun,
};
use dsh_subagent_conformance::{Instance, Probe, Report, Status, Subject};
use dsh_subagent_testing::ScriptedProvider;
use dsh_subagent_testing::scripted::{DisposeBehavior, ResultBehavior, StartBehavior};
use futures::future::BoxFuture;

/// Counts releases and live children, as a provider author would.
#[derive(Default)]
struct Counts {
    releases: AtomicUsize,
    live: AtomicUsize,
}

impl Probe for Counts {
    fn releases(&self) -> usize {
        self.releases.load(Ordering::SeqCst)
    }
    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

/// How a broken provider breaks.
#[derive(Clone, Copy, PartialEq)]
enum Breaks {
    /// Its release runs its teardown twice.
    ReleasesTwice,
    /// Its child runs 150 ms to completion whatever the token says.
    IgnoresCancellation,
}

struct Broken {
    breaks: Breaks,
    counts: Arc<Counts>,
}

impl SubagentProvider for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        let (breaks, counts) = (self.breaks, self.counts.clone());
        Box::pin(async move {
            if request.cancel.is_cancelled() {
                return Err(SubagentError::aborted("broken: cancelled before start"));
            }
            counts.live.fetch_add(1, Ordering::SeqCst);
            let token = request.cancel.clone();
            let result = async move {
                if breaks == Breaks::IgnoresCancellation {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                } else if token.is_cancelled() {
                    return Ok(SubagentResult::new(StopReason::Aborted, Vec::new()));
                }
                Ok(SubagentResult::completed("broken answer"))
            };
            let release = move || async move {
                let teardowns = if breaks == Breaks::ReleasesTwice { 2 } else { 1 };
                for _ in 0..teardowns {
                    counts.releases.fetch_add(1, Ordering::SeqCst);
                }
                counts.live.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            };
            Ok(SubagentRun::new("broken-run", result, release))
        })
    }
}

fn broken(breaks: Breaks) -> Subject {
    Subject::new("broken", move || {
        let counts = Arc::new(Counts::default());
        Instance::from(Arc::new(Broken {
            breaks,
            counts: counts.clone(),
        }))
        .probe(counts)
    })
    .cancel_deadline(Duration::from_secs(1))
}

fn detail(report: &Report, id: &str) -> String {
    let finding = report.finding(id).unwrap();
    assert_eq!(finding.status, Status::Fail, "{id}: {report}");
    finding.detail.clone().unwrap()
}

#[test]
fn a_provider_that_releases_twice_is_named() {
    let report = broken(Breaks::ReleasesTwice).check();
    println!("{report}");
    assert!(!report.passed());
    for id in [
        "delegation.settles",
        "release.once",
        "cancel.after-publication",
        "drop.caller",
    ] {
        let seen = detail(&report, id);
        assert!(
            seen.contains("the provider released twice for 1 published run"),
            "{id}: {seen}"
        );
    }
}

#[test]
fn a_provider_that_ignores_cancellation_is_named() {
    let report = broken(Breaks::IgnoresCancellation).check();
    println!("{report}");
    assert!(!report.passed());
    for id in ["cancel.after-publication", "cancel.during-result"] {
        let seen = detail(&report, id);
        assert!(seen.starts_with("cancelled, the run settled completed"), "{id}: {seen}");
    }
    let seen = detail(&report, "release.settles-result");
    assert!(seen.contains("an answer published after the release"), "{seen}");
    assert_eq!(report.finding("delegation.settles").unwrap().status, Status::Pass);
}

/// A hang in every stage the kit reaches ends as a failure of each cell
/// that reaches it, within the deadlines: the check itself finishes.
#[test]
fn a_provider_that_hangs_fails_each_cell_and_the_check_finishes() {
    for (stage, hangs) in [
        ("the start did not finish within 100 ms", true),
        ("did not finish within", false),
    ] {
        let began = Instant::now();
        let report = Subject::new("hangs", move || {
            let builder = ScriptedProvider::builder("hangs").capabilities(Capabilities::NONE);
            if hangs {
                builder.on_start(StartBehavior::Hang).build()
            } else {
                builder
                    .on_result(ResultBehavior::Hang)
                    .on_dispose(DisposeBehavior::Hang)
                    .build()
            }
        })
        .stage_deadline(Duration::from_millis(100))
        .cancel_deadline(Duration::from_millis(100))
        .concurrent_starts(4)
        .check();
        println!("{report}\n({:?})", began.elapsed());
        assert!(!report.passed());
        let cells = [
            "delegation.settles",
            "cancel.after-publication",
            "release.once",
            "concurrency.independent",
        ];
        for id in cells.into_iter().chain((!hangs).then_some("drop.caller")) {
            let seen = detail(&report, id);
            assert!(seen.contains(stage), "{id}: {seen}");
        }
    }
}

#[test]
fn a_provider_whose_constructor_panics_is_one_report_line() {
    let report = Subject::new("unmade", || -> Arc<ScriptedProvider> {
        panic!("no configuration found")
    })
    .check();
    println!("{report}");
    let seen = detail(&report, "provider.made");
    assert_eq!(
        seen,
        "the factory panicked while making the provider: no configuration found"
    );
    assert!(
        report
            .findings
            .iter()
            .skip(1)
            .all(|finding| finding.status == Status::Skipped),
        "{report}"
    );
    // Every requirement's title, tier and the skip, as a person reads them.
    insta::assert_snapshot!(report.to_string());
}
