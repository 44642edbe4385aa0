//! What `dsh` does with model traffic: nothing, record it, record one part
//! of a parent's recording, or replay it (docs/cassettes.md).
//!
//! A `dsh` that records or replays gives every ACP child it starts the
//! variable [`ENV`], so a `dsh acp` child records its own part beside the
//! parent's cassette (`FILE.part-<n>`, which loading `FILE` reads with it),
//! or replays from the same cassette: one name finds the whole recording.

use std::path::{Path, PathBuf};

use dsh_llm::cassette::{Recorder, Timing};

use crate::cli::AgentArgs;
use crate::failure::Failure;
use crate::wording;

/// The variable a recording or replaying `dsh` gives its ACP children:
/// `record:<cassette>`, `replay:<cassette>` or `replay-timing:<cassette>`,
/// with the cassette's absolute path.
pub(crate) const ENV: &str = "DSH_CASSETTE";

/// What happens to the model traffic of one `dsh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CassetteMode {
    /// Nothing: the model is asked, nothing is kept.
    Off,
    /// Record into this cassette (`--record`).
    Record(PathBuf),
    /// Record one part of this cassette, which the parent `dsh` records.
    RecordPart(PathBuf),
    /// Answer from this cassette.
    Replay(PathBuf, Timing),
}

impl CassetteMode {
    /// The flags (`--record`, `--replay`, `--replay-timing`) win; then the
    /// [`ENV`] a parent `dsh` gave (its value names the variable when it
    /// is not one of the three forms); then `[record]` `file` of dsh.toml.
    pub(crate) fn resolve(
        args: &AgentArgs,
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<CassetteMode, String> {
        if let Some(file) = &args.record {
            return Ok(CassetteMode::Record(file.clone()));
        }
        if let Some(file) = &args.replay {
            let timing = if args.replay_timing {
                Timing::Recorded
            } else {
                Timing::Fast
            };
            return Ok(CassetteMode::Replay(file.clone(), timing));
        }
        let Some(value) = env(ENV).filter(|value| !value.is_empty()) else {
            return Ok(file.map_or(CassetteMode::Off, |file| CassetteMode::Record(file.to_path_buf())));
        };
        let mode = match value.split_once(':') {
            Some(("record", file)) if !file.is_empty() => CassetteMode::RecordPart(PathBuf::from(file)),
            Some(("replay", file)) if !file.is_empty() => CassetteMode::Replay(PathBuf::from(file), Timing::Fast),
            Some(("replay-timing", file)) if !file.is_empty() => {
                CassetteMode::Replay(PathBuf::from(file), Timing::Recorded)
            }
            _ => return Err(wording::cassette_env_invalid(ENV, &value)),
        };
        Ok(mode)
    }

    /// The recorder, when this records: the cassette (or its part) is
    /// created now, so one that cannot be stops `dsh` before anything runs.
    pub(crate) fn recorder(&self) -> Result<Option<Recorder>, Failure> {
        let created = match self {
            CassetteMode::Record(file) => Recorder::create(file),
            CassetteMode::RecordPart(whole) => Recorder::create_part(whole),
            CassetteMode::Off | CassetteMode::Replay(..) => return Ok(None),
        };
        created.map(Some).map_err(|error| Failure::usage(error.to_string()))
    }

    /// The cassette this replays, and how fast.
    pub(crate) fn replay(&self) -> Option<(&Path, Timing)> {
        match self {
            CassetteMode::Replay(file, timing) => Some((file, *timing)),
            CassetteMode::Off | CassetteMode::Record(_) | CassetteMode::RecordPart(_) => None,
        }
    }

    /// [`ENV`] for the ACP children this `dsh` starts, when it records or
    /// replays: they record their parts of the same cassette, or replay it.
    pub(crate) fn child_env(&self) -> Option<(String, String)> {
        let absolute = |file: &Path| std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        let value = match self {
            CassetteMode::Off => return None,
            CassetteMode::Record(file) | CassetteMode::RecordPart(file) => {
                format!("record:{}", absolute(file).display())
            }
            CassetteMode::Replay(file, Timing::Recorded) => format!("replay-timing:{}", absolute(file).display()),
            CassetteMode::Replay(file, _) => format!("replay:{}", absolute(file).display()),
        };
        Some((ENV.to_owned(), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &AgentArgs, value: Option<&str>) -> Result<CassetteMode, String> {
        CassetteMode::resolve(args, None, |key| {
            (key == ENV).then(|| value.map(str::to_owned)).flatten()
        })
    }

    #[test]
    fn flags_win_then_the_parents_variable() {
        let mut args = AgentArgs::plain();
        assert_eq!(resolve(&args, None), Ok(CassetteMode::Off));
        assert_eq!(
            resolve(&args, Some("record:/r/run.jsonl")),
            Ok(CassetteMode::RecordPart("/r/run.jsonl".into()))
        );
        assert_eq!(
            resolve(&args, Some("replay-timing:/r/run.jsonl")),
            Ok(CassetteMode::Replay("/r/run.jsonl".into(), Timing::Recorded))
        );
        args.record = Some("own.jsonl".into());
        assert_eq!(
            resolve(&args, Some("replay:/r/run.jsonl")),
            Ok(CassetteMode::Record("own.jsonl".into()))
        );
        // The file's `[record]` comes last.
        let file = Some(Path::new("/c/runs.jsonl"));
        let none = |_: &str| None;
        assert_eq!(
            CassetteMode::resolve(&AgentArgs::plain(), file, none),
            Ok(CassetteMode::Record("/c/runs.jsonl".into()))
        );
        let from_parent = |_: &str| Some("replay:/r/run.jsonl".to_owned());
        assert_eq!(
            CassetteMode::resolve(&AgentArgs::plain(), file, from_parent),
            Ok(CassetteMode::Replay("/r/run.jsonl".into(), Timing::Fast))
        );
        let err = resolve(&AgentArgs::plain(), Some("tape:x")).unwrap_err();
        assert!(err.contains("DSH_CASSETTE") && err.contains("tape:x"), "{err}");
    }

    #[test]
    fn children_get_the_cassettes_absolute_path() {
        let mode = CassetteMode::RecordPart("/r/run.jsonl".into());
        assert_eq!(
            mode.child_env(),
            Some((ENV.to_owned(), "record:/r/run.jsonl".to_owned()))
        );
        let relative = CassetteMode::Replay("run.jsonl".into(), Timing::Fast)
            .child_env()
            .unwrap();
        assert!(relative.1.starts_with("replay:/"), "{relative:?}");
        assert_eq!(CassetteMode::Off.child_env(), None);
    }
}
