#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod cell;
mod cells;
mod observed;
mod processes;
mod report;
mod subject;
mod wording;

pub use cell::PROMPT;
pub use cells::capability::{PERSONA, output_schema};
pub use cells::continuation::FOLLOW_UP;
pub use cells::requirements;
pub use report::{Finding, REPORT_VERSION, Report, Status, Tier, Verdict};
pub use subject::{CANCEL_DEADLINE, CONCURRENT_STARTS, Instance, Probe, STAGE_DEADLINE, Subject};
