//! What was learned of an endpoint, kept for later runs and resumes: per
//! model, the context window its latest refusal named, the most requests
//! it takes at once, and how it counts tokens against the loop's estimate.
//!
//! One small versioned JSON file per endpoint, under the data directory
//! (`learned/<hash of the endpoint>.json`), holding its endpoint:
//!
//! ```json
//! {"format":"dsh-learned","version":1,"endpoint":"http://127.0.0.1:8080/v1",
//!  "models":{"smollm2":{"window":4096,"concurrency":1,"whole":[[1742,3060]]}}}
//! ```
//!
//! It is written whole: a temporary file beside it, renamed over it, so a
//! reader never sees half of it and two processes learning at once leave
//! the newer whole file (each writes its models over what it read, so the
//! other's models stay). A file that cannot be read as learned (torn, of
//! another version or another endpoint, a window or a concurrency of 0) is
//! ignored whole, with one line naming it, and the next write replaces it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use dsh_llm::Concurrency;
use dsh_transcript::owner_only;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wording;

/// The directory of kept facts under a data directory.
pub const KEPT_DIR: &str = "learned";

/// The kept-facts format's name, the file's first key.
const FORMAT: &str = "dsh-learned";

/// The version this code reads and writes.
pub const KEPT_VERSION: u64 = 1;

/// What is kept of one model of an endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptModel {
    /// The context window the server's latest refusal named, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// The most requests it takes at once (a server that cut a stream while
    /// another request was in flight takes one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// How it counted whole requests: `[its tokens, the loop's tokens]`,
    /// oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub whole: Vec<[u64; 2]>,
    /// How it counted what was added since a request it had counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<[u64; 2]>,
}

impl KeptModel {
    /// Whether nothing is kept of it.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The file of what one endpoint taught, under a data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptFacts {
    path: PathBuf,
    endpoint: String,
}

/// Why a kept-facts file was not read as learned: it names the file.
#[derive(Debug, thiserror::Error)]
#[error("{}", wording::kept_ignored(path, why))]
pub struct KeptError {
    path: PathBuf,
    why: String,
}

impl KeptFacts {
    /// The file of `endpoint` (a base URL without credentials) under
    /// `data_dir`.
    pub fn new(data_dir: &Path, endpoint: &str) -> Self {
        let name = format!("{:016x}.json", fnv1a(endpoint.as_bytes()));
        Self {
            path: data_dir.join(KEPT_DIR).join(name),
            endpoint: endpoint.to_owned(),
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The endpoint it keeps.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What is kept, per model: nothing when there is no file yet; an error
    /// naming the file when it cannot be read as learned.
    pub fn read(&self) -> Result<BTreeMap<String, KeptModel>, KeptError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(error) => return Err(self.refused(wording::kept_unreadable(&error))),
        };
        let file: Value = serde_json::from_str(&text).map_err(|error| self.refused(wording::kept_torn(&error)))?;
        if file["format"] != FORMAT {
            return Err(self.refused(wording::KEPT_NOT_KEPT_FACTS.to_owned()));
        }
        match file["version"].as_u64() {
            Some(KEPT_VERSION) => {}
            _ => return Err(self.refused(wording::kept_version(&file["version"], KEPT_VERSION))),
        }
        let endpoint = file["endpoint"].as_str().unwrap_or_default();
        if endpoint != self.endpoint {
            return Err(self.refused(wording::kept_other_endpoint(endpoint, &self.endpoint)));
        }
        let Value::Object(entries) = &file["models"] else {
            return Err(self.refused(wording::KEPT_NO_MODELS.to_owned()));
        };
        let mut models = BTreeMap::new();
        for (model, entry) in entries {
            let refused = |why: String| self.refused(wording::kept_model_invalid(model, &why));
            let kept = KeptModel::deserialize(entry).map_err(|error| refused(error.to_string()))?;
            check(&kept).map_err(refused)?;
            models.insert(model.clone(), kept);
        }
        Ok(models)
    }

    /// Writes `models` over what the file holds of them (the facts of other
    /// models stay; a model with nothing kept is dropped), whole: a
    /// temporary file beside it renamed over it. A file that cannot be read
    /// as learned is replaced.
    pub fn write(&self, models: &BTreeMap<String, KeptModel>) -> std::io::Result<()> {
        // One writer of this process at a time, so that none writes over
        // what another of its agents kept between its read and its rename.
        static WRITING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        let mut all = self.read().unwrap_or_default();
        for (model, kept) in models {
            if kept.is_empty() {
                all.remove(model);
            } else {
                all.insert(model.clone(), kept.clone());
            }
        }
        let file = FileOut {
            format: FORMAT,
            version: KEPT_VERSION,
            endpoint: &self.endpoint,
            models: &all,
        };
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        owner_only::dir(dir)?;
        let temporary = dir.join(temporary_name(&self.path));
        let written = write_new(&temporary, &file);
        let renamed = written.and_then(|()| std::fs::rename(&temporary, &self.path));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        renamed
    }

    fn refused(&self, why: String) -> KeptError {
        KeptError {
            path: self.path.clone(),
            why,
        }
    }
}

/// Why `kept` is not learned, if it is not: a window of 0 (a concurrency
/// of 0 is refused as it is read; a count no lesson can give is left out
/// where it is learned from).
fn check(kept: &KeptModel) -> Result<(), String> {
    if kept.window == Some(0) {
        return Err(wording::KEPT_WINDOW_ZERO.to_owned());
    }
    Ok(())
}

/// The file as it is written, its keys in this order.
#[derive(Serialize)]
struct FileOut<'a> {
    format: &'a str,
    version: u64,
    endpoint: &'a str,
    models: &'a BTreeMap<String, KeptModel>,
}

/// Creates `path` (owner-only) holding `file`. Not synced: a crash that
/// leaves it torn leaves a file the next run ignores with one line, and
/// relearns; a sync would cost every run's end a disk flush.
fn write_new(path: &Path, file: &FileOut<'_>) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    owner_only::file_options(&mut options);
    let mut out = std::io::BufWriter::new(options.open(path)?);
    serde_json::to_writer(&mut out, file)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// A name for a temporary file beside `path` that no other writer, in this
/// process or another, picks at the same time.
fn temporary_name(path: &Path) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("learned");
    let next = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.{}-{next}.tmp", std::process::id())
}

/// 64-bit FNV-1a of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(window: u64) -> KeptModel {
        KeptModel {
            window: Some(window),
            concurrency: Some(Concurrency::ONE),
            whole: vec![[1742, 3060]],
            added: Vec::new(),
        }
    }

    #[test]
    fn written_whole_and_read_back_per_model() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptFacts::new(dir.path(), "http://127.0.0.1:8080/v1");
        assert!(kept.read().unwrap().is_empty(), "no file yet");
        kept.write(&BTreeMap::from([("a".to_owned(), model(4096))])).unwrap();
        // Another process writes its own model: the first one stays.
        kept.write(&BTreeMap::from([("b".to_owned(), model(8192))])).unwrap();
        let read = kept.read().unwrap();
        assert_eq!(read.get("a"), Some(&model(4096)));
        assert_eq!(read.get("b"), Some(&model(8192)));
        let text = std::fs::read_to_string(kept.path()).unwrap();
        assert!(
            text.starts_with(r#"{"format":"dsh-learned","version":1,"endpoint":"http://127.0.0.1:8080/v1","#),
            "{text}"
        );
        let leftovers = std::fs::read_dir(kept.path().parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left");
        assert_ne!(
            kept.path(),
            KeptFacts::new(dir.path(), "http://127.0.0.1:8081/v1").path()
        );
    }

    #[test]
    fn writers_at_once_never_tear_it() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptFacts::new(dir.path(), "http://e/v1");
        std::thread::scope(|scope| {
            for writer in 0..4u64 {
                let kept = kept.clone();
                scope.spawn(move || {
                    for round in 0..25 {
                        let window = 1024 + writer * 100 + round;
                        kept.write(&BTreeMap::from([(format!("m{writer}"), model(window))]))
                            .unwrap();
                        kept.read().expect("always whole");
                    }
                });
            }
        });
        assert!(!kept.read().unwrap().is_empty());
    }

    #[test]
    fn a_file_that_is_not_learned_is_ignored_with_one_line_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptFacts::new(dir.path(), "http://e/v1");
        std::fs::create_dir_all(kept.path().parent().unwrap()).unwrap();
        let head = r#"{"format":"dsh-learned","version":1,"endpoint":"http://e/v1","models":"#;
        let cases = [
            ("torn", format!("{head}{{\"m\":{{\"window\":40")),
            (
                "other version",
                r#"{"format":"dsh-learned","version":2,"endpoint":"http://e/v1","models":{}}"#.to_owned(),
            ),
            (
                "other endpoint",
                r#"{"format":"dsh-learned","version":1,"endpoint":"http://other/v1","models":{}}"#.to_owned(),
            ),
            ("window of 0", format!(r#"{head}{{"m":{{"window":0}}}}}}"#)),
            ("concurrency of 0", format!(r#"{head}{{"m":{{"concurrency":0}}}}}}"#)),
            ("not kept facts", "[1, 2]".to_owned()),
        ];
        let mut lines = Vec::new();
        for (case, text) in cases {
            std::fs::write(kept.path(), text).unwrap();
            let error = kept.read().expect_err(case).to_string();
            assert_eq!(error.lines().count(), 1, "{case}: {error}");
            lines.push(error.replace(&dir.path().display().to_string(), "DATA"));
        }
        insta::assert_snapshot!(lines.join("\n"));
        // The next write replaces it whole.
        kept.write(&BTreeMap::from([("m".to_owned(), model(2048))])).unwrap();
        assert_eq!(kept.read().unwrap().len(), 1);
    }
}
