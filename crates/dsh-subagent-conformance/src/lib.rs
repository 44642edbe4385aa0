#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod cell;
mod cells;
mod finding;
mod observed;
mod processes;
mod report;
mod subject;
mod wording;

pub use cell::PROMPT;
pub use cells::capability::{PERSONA, output_schema};
pub use cells::continuation::FOLLOW_UP;
pub use cells::requirements;
pub use finding::{Finding, Status, Tier};
pub use report::{REPORT_VERSION, Report, Verdict};
pub use subject::{CANCEL_DEADLINE, CONCURRENT_STARTS, Instance, Probe, STAGE_DEADLINE, Subject};
