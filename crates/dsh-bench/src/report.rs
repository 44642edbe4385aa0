//! What a run measures and how it prints: the runtime flavors, the plan,
//! and the table of rows.

use std::fmt;

/// A tokio runtime flavor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `new_current_thread`: everything on the calling thread.
    CurrentThread,
    /// `new_multi_thread` with one worker per available core.
    MultiThread,
}

impl Flavor {
    /// Both flavors, current-thread first.
    pub const ALL: [Flavor; 2] = [Flavor::CurrentThread, Flavor::MultiThread];

    /// The flavor's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::CurrentThread => "current-thread",
            Self::MultiThread => "multi-thread",
        }
    }

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|flavor| flavor.name() == name)
    }

    /// A runtime of this flavor with the time driver (the cancellation path may need it).
    pub fn runtime(self) -> Result<tokio::runtime::Runtime, String> {
        let mut builder = match self {
            Self::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Self::MultiThread => tokio::runtime::Builder::new_multi_thread(),
        };
        builder.enable_time().build().map_err(|error| error.to_string())
    }
}

/// How much to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Rounds per figure; each figure reports its median round.
    pub rounds: usize,
    /// Delegations per sequential round.
    pub sequential: usize,
    /// In-flight counts of the concurrent figures.
    pub concurrent: Vec<usize>,
    /// Cancellations measured per flavor.
    pub cancel_samples: usize,
    /// Delegations held in flight for the memory figure (0: skip it).
    pub in_flight: usize,
    /// Catalog renders measured.
    pub catalog_samples: usize,
    /// Delegations to a `dsh acp` child measured per flavor (0: skip them).
    pub acp_samples: usize,
    /// Whether to time `dsh tree` on a generated data directory (it runs
    /// the `dsh` binary, as the `dsh acp` rows do).
    pub tree: bool,
    /// `dsh run --resume`s of a crashed tree timed when `tree` is set.
    pub resume_runs: usize,
    /// `dsh run`s of each kind for the live view's rows (0: skip them; they
    /// run the `dsh` binary).
    pub live_runs: usize,
}

impl Plan {
    /// The figures `docs/benchmarks.md` reports.
    pub fn full() -> Self {
        Self {
            rounds: 7,
            sequential: 20_000,
            concurrent: vec![1_000, 10_000, 100_000],
            cancel_samples: 5_000,
            in_flight: 100_000,
            catalog_samples: 200,
            acp_samples: 30,
            tree: true,
            resume_runs: 5,
            live_runs: 15,
        }
    }

    /// A smaller run of the same figures, for a quick look.
    pub fn quick() -> Self {
        Self {
            rounds: 3,
            sequential: 2_000,
            concurrent: vec![1_000, 10_000],
            cancel_samples: 500,
            in_flight: 10_000,
            catalog_samples: 20,
            acp_samples: 5,
            tree: true,
            resume_runs: 3,
            live_runs: 5,
        }
    }

    /// A run small enough for a test (no memory child process, no `dsh`).
    pub fn smoke() -> Self {
        Self {
            rounds: 1,
            sequential: 20,
            concurrent: vec![50],
            cancel_samples: 10,
            in_flight: 0,
            catalog_samples: 1,
            acp_samples: 0,
            tree: false,
            resume_runs: 0,
            live_runs: 0,
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub figure: String,
    /// The runtime flavor, or `-`.
    pub flavor: &'static str,
    /// Our figure, with its unit.
    pub ours: String,
    /// The floor of the same shape, with its unit, or `-`.
    pub floor: String,
    /// Ours divided by the floor, or `-`.
    pub ratio: String,
    /// The target and whether it is met.
    pub target: String,
}

/// The measured table and the machine it ran on.
#[derive(Clone, Debug)]
pub struct Report {
    /// The machine: cores, CPU model, memory.
    pub machine: String,
    /// The rows, in print order.
    pub rows: Vec<Row>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "machine: {}", self.machine)?;
        writeln!(f)?;
        writeln!(f, "| figure | flavor | ours | floor | ratio | target |")?;
        writeln!(f, "|---|---|---|---|---|---|")?;
        for row in &self.rows {
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} |",
                row.figure, row.flavor, row.ours, row.floor, row.ratio, row.target
            )?;
        }
        Ok(())
    }
}
