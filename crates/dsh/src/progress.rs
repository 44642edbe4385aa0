//! Live progress of the agent tree on stderr.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use dsh_agent::{AgentInfo, AgentObserver, RunOutcome};
use dsh_llm::Usage;
use dsh_tools::AgentId;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Shows each child as it works (label, elapsed time, model calls, tokens):
/// progress bars on a terminal, one line per start and finish otherwise, or
/// nothing when quiet. Always remembers which agents ran, for the summary.
pub(crate) struct Progress {
    display: Display,
    children: Mutex<HashMap<AgentId, Child>>,
    order: Mutex<Vec<AgentId>>,
}

enum Display {
    Quiet,
    Lines,
    Bars(MultiProgress),
}

struct Child {
    label: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(crate) fn new(quiet: bool) -> Self {
        let display = if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            Display::Bars(MultiProgress::new())
        } else {
            Display::Lines
        };
        Self {
            display,
            children: Mutex::default(),
            order: Mutex::default(),
        }
    }

    /// The ids of the children that ran, in start order.
    pub(crate) fn children(&self) -> Vec<AgentId> {
        self.order.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn summary(steps: u32, usage: Option<Usage>) -> String {
    format!(
        "{steps} model call{} · {}",
        if steps == 1 { "" } else { "s" },
        crate::wording::tokens(usage)
    )
}

impl AgentObserver for Progress {
    fn run_started(&self, agent: &AgentInfo) {
        if agent.depth == 0 {
            return;
        }
        let label = agent.label.clone().unwrap_or_else(|| agent.id.to_string());
        let indent = "  ".repeat(agent.depth.saturating_sub(1) as usize);
        let bar = match &self.display {
            Display::Quiet => None,
            Display::Lines => {
                eprintln!("{indent}↳ subagent \"{label}\" started ({}, {})", agent.id, agent.model);
                None
            }
            Display::Bars(bars) => {
                let bar = bars.add(ProgressBar::new_spinner());
                if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} {elapsed:>4} {msg}") {
                    bar.set_style(style);
                }
                bar.set_prefix(format!("{indent}↳ {label}"));
                bar.set_message("working");
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(bar)
            }
        };
        self.order
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(agent.id.clone());
        self.children.lock().unwrap_or_else(PoisonError::into_inner).insert(
            agent.id.clone(),
            Child {
                label,
                started: Instant::now(),
                bar,
            },
        );
    }

    fn step_finished(&self, agent: &AgentId, steps: u32, usage: Option<Usage>) {
        let children = self.children.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(Child { bar: Some(bar), .. }) = children.get(agent) {
            bar.set_message(summary(steps, usage));
        }
    }

    fn run_finished(&self, agent: &AgentId, outcome: &RunOutcome) {
        let children = self.children.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(child) = children.get(agent) else { return };
        let line = format!("{} · {}", outcome.stop, summary(outcome.steps, outcome.usage));
        match (&self.display, &child.bar) {
            (Display::Bars(_), Some(bar)) => bar.finish_with_message(line),
            (Display::Lines, _) => eprintln!(
                "↳ subagent \"{}\" {line} · {:.1}s",
                child.label,
                child.started.elapsed().as_secs_f64()
            ),
            _ => {}
        }
    }
}
