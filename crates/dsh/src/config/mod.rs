//! `dsh.toml`: the parent's model, its delegation tools and its MCP servers.
//!
//! [`load`] finds the file (`--config <path>`, else `dsh.toml` in the working
//! directory, else none: dsh then behaves as without a file) and [`parse`]
//! reads and checks it: unknown keys, wrong types and contradictions (an
//! acp-only key on an in-process provider, a numeric `max_depth` over a
//! provider that keeps its own budget, a persona for a child that cannot take
//! one, a tool name used twice) are refused with the file, line, column and
//! key path. Nothing is started while the file is read. The format is
//! documented in the crate README.
//!
//! Each section is read and checked by a module of its own, whose errors
//! name its keys: [`model`] (`[model]`), [`limits`] (`[limits]`),
//! [`subagents`] (`[[subagents]]`), [`mcp_servers`] (`[[mcp_servers]]`) and
//! [`data`] (`[data]`); [`parse`] composes them. The keys that say which
//! program runs and how (`command`, `args`, `env`, `pass_env`, `cwd`) mean
//! the same under `[[subagents]]` and `[[mcp_servers]]`, read by one module,
//! [`launch`].

mod data;
mod error;
mod file;
mod launch;
mod limits;
mod mcp_servers;
mod model;
mod subagents;
mod uncapped;

use std::ops::Range;
use std::path::{Path, PathBuf};

use dsh_mcp::McpServerSpec;
use toml::Spanned;

pub(crate) use error::ConfigFileError;
use file::RawConfig;
pub(crate) use file::RunConfig;
pub(crate) use limits::LimitsConfig;
pub(crate) use model::ModelConfig;
pub(crate) use subagents::{Provider, Subagent};

use crate::failure::Failure;
use crate::wording;

/// The file read when no `--config` is given, in the working directory.
pub(crate) const DEFAULT_FILE: &str = "dsh.toml";

/// A checked configuration file.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Where it was read from.
    pub(crate) path: PathBuf,
    /// `[model]`.
    pub(crate) model: ModelConfig,
    /// `[[subagents]]`, in file order.
    pub(crate) subagents: Vec<Subagent>,
    /// `[[mcp_servers]]`, in file order.
    pub(crate) mcp_servers: Vec<McpServerSpec>,
    /// `[limits]`: what the file sets; flags override it, defaults fill it.
    pub(crate) limits: LimitsConfig,
    /// `[data]`: the bounds on the transcripts kept, over dsh's defaults.
    pub(crate) data: crate::retention::DataPolicy,
    /// `[record]` `file`: the cassette every run records into (resolved
    /// against the file's directory); `--record` and `--replay` win.
    pub(crate) record: Option<PathBuf>,
    /// `[run]`: how `dsh run` ends.
    pub(crate) run: RunConfig,
    /// The text's [`fingerprint`], for the self-mount check ([`crate::self_mount`]).
    pub(crate) fingerprint: String,
}

/// Finds and reads the configuration: `explicit` (which must exist), else
/// [`DEFAULT_FILE`] in `cwd` if there is one, else `None`.
pub(crate) fn load(explicit: Option<&Path>, cwd: &Path) -> Result<Option<Config>, ConfigFileError> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => {
            let path = cwd.join(DEFAULT_FILE);
            if !path.is_file() {
                return Ok(None);
            }
            PathBuf::from(DEFAULT_FILE)
        }
    };
    let full = if path.is_absolute() {
        path.clone()
    } else {
        cwd.join(&path)
    };
    let text = std::fs::read_to_string(&full).map_err(|error| ConfigFileError::unreadable(&path, &error))?;
    let base = full.parent().map_or_else(|| cwd.to_owned(), Path::to_owned);
    parse(&path, &text, &base).map(Some)
}

/// [`load`] from the process's working directory, as a [`Failure`].
pub(crate) fn load_from_cwd(explicit: Option<&Path>) -> Result<Option<Config>, Failure> {
    let cwd = std::env::current_dir().map_err(|error| Failure::usage(wording::cwd_unreadable(&error)))?;
    load(explicit, &cwd).map_err(|error| Failure::usage(wording::failed(&error)))
}

/// Parses and checks a configuration. `path` names the file in errors;
/// relative `cwd`s (of ACP children and MCP servers) are resolved against
/// `base`.
pub(crate) fn parse(path: &Path, text: &str, base: &Path) -> Result<Config, ConfigFileError> {
    let at =
        |span: Option<Range<usize>>, key: String, message: String| ConfigFileError::at(path, text, span, key, message);
    let deserializer =
        toml::Deserializer::parse(text).map_err(|error| at(error.span(), String::new(), error.message().to_owned()))?;
    let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let key = key_path(error.path());
        let error = error.into_inner();
        at(error.span(), key, error.message().to_owned())
    })?;
    let model = raw
        .model
        .map(|model| model::resolve_model(model, &at))
        .transpose()?
        .unwrap_or_default();
    let subagents = subagents::resolve_subagents(raw.subagents, base, &at)?;
    let mcp_servers = mcp_servers::resolve_mcp_servers(raw.mcp_servers, base, &at)?;
    let limits = raw.limits.unwrap_or_default();
    let data = raw
        .data
        .map(|data| data::resolve_data(data.max_age, data.max_size))
        .unwrap_or_default();
    let record = raw.record.map(|record| resolve_record(record, base, &at)).transpose()?;
    Ok(Config {
        path: path.to_owned(),
        model,
        subagents,
        mcp_servers,
        limits,
        data,
        record,
        run: raw.run.unwrap_or_default(),
        fingerprint: fingerprint(text),
    })
}

/// The fingerprint of a configuration file's text, by which the self-mount
/// check ([`crate::self_mount`]) knows a file an ancestor loaded: the
/// 64-bit FNV-1a hash of its bytes, in 16 hex digits.
pub(crate) fn fingerprint(text: &str) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = text
        .bytes()
        .fold(OFFSET, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME));
    format!("{hash:016x}")
}

/// A key path as the file's author wrote it (`subagents[1].max_depth`),
/// without the wrappers that carry spans.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } if name.starts_with("$__serde_spanned") => {}
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => {}
        }
    }
    key
}

/// Makes the error at a span of the file, for a key path, with a message.
type At<'a> = dyn Fn(Option<Range<usize>>, String, String) -> ConfigFileError + 'a;

/// A text value that is not blank; `key` names it in the error.
fn non_empty(value: Spanned<String>, key: &str, at: &At<'_>) -> Result<String, ConfigFileError> {
    let span = value.span();
    let value = value.into_inner();
    if value.trim().is_empty() {
        return Err(at(Some(span), key.to_owned(), wording::CONFIG_EMPTY_VALUE.to_owned()));
    }
    Ok(value)
}

/// `[record]` `file`: a cassette's path, relative to `base`; not blank,
/// and not a directory.
fn resolve_record(raw: file::RawRecord, base: &Path, at: &At<'_>) -> Result<PathBuf, ConfigFileError> {
    let span = raw.file.span();
    let file = non_empty(raw.file, "record.file", at)?;
    let path = base.join(&file);
    if file.ends_with('/') || path.is_dir() {
        return Err(at(
            Some(span),
            "record.file".to_owned(),
            wording::config_record_directory(&file),
        ));
    }
    Ok(path)
}

/// Whether `name` can name an environment variable.
fn variable_name(name: &str) -> bool {
    dsh_process::valid_variable_name(name)
}

#[cfg(test)]
mod tests;
