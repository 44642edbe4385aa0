//! The keys that say which program runs and how, read the same way under
//! `[[subagents]]` (`provider = "acp"`) and `[[mcp_servers]]`: `command`
//! (one program, looked up on `PATH`, never a shell line), `args` (its
//! arguments, each as written), `env` (variables set, a table), `pass_env`
//! (names passed on from dsh's environment into a scrubbed one) and `cwd`
//! (relative to the file's directory). Together they fill one
//! [`Program`], over the launch its table starts from.

use std::path::{Path, PathBuf};

use dsh_process::{Environment, Launch, Program, valid_variable_name};
use toml::Spanned;

use super::file::RawEnv;
use super::{At, ConfigFileError, non_empty};
use crate::wording;

/// The launch keys of one entry, as written, other than `command` (whose
/// absence each table answers its own way).
pub(super) struct LaunchKeys<'r> {
    pub(super) args: Option<&'r Spanned<Vec<String>>>,
    pub(super) env: Option<&'r Spanned<RawEnv>>,
    pub(super) pass_env: Option<&'r Spanned<Vec<String>>>,
    pub(super) cwd: Option<&'r Spanned<PathBuf>>,
}

impl LaunchKeys<'_> {
    /// The keys written, with their spans, in the order above.
    pub(super) fn written(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        [
            ("args", self.args.map(Spanned::span)),
            ("env", self.env.map(Spanned::span)),
            ("pass_env", self.pass_env.map(Spanned::span)),
            ("cwd", self.cwd.map(Spanned::span)),
        ]
        .into_iter()
        .filter_map(|(key, span)| span.map(|span| (key, span)))
        .collect()
    }
}

/// Where an entry is, for the errors: its key paths and the file's directory.
pub(super) struct Place<'a, 'b> {
    /// The key path of one of the entry's keys (`mcp_servers[0].env`).
    pub(super) key: &'a dyn Fn(&str) -> String,
    /// Makes the error.
    pub(super) at: &'a At<'b>,
    /// The directory a relative `cwd` is resolved against.
    pub(super) base: &'a Path,
}

/// The program `command` and `keys` describe, launched as `launch` says
/// with what the keys add: arguments appended, variables set, names passed
/// on (only into a scrubbed environment: an inherited one has them all, so
/// `pass_env` there is refused), and the working directory.
pub(super) fn program(
    command: &Spanned<String>,
    keys: &LaunchKeys<'_>,
    launch: Launch,
    place: &Place<'_, '_>,
) -> Result<Program, ConfigFileError> {
    let (key, at) = (place.key, place.at);
    let name = non_empty(command.clone(), &key("command"), at)?;
    if name.contains(char::is_whitespace) && !name.contains('/') {
        return Err(at(
            Some(command.span()),
            key("command"),
            wording::config_command_is_a_line(&name),
        ));
    }
    let mut program = Program::new(name, launch);
    if let Some(args) = keys.args {
        program = program.args(args.get_ref().iter().cloned());
    }
    if let Some(env) = keys.env {
        if let Some(bad) = env.get_ref().0.keys().find(|name| !valid_variable_name(name)) {
            return Err(at(Some(env.span()), key("env"), wording::config_bad_variable(bad)));
        }
        for (name, value) in &env.get_ref().0 {
            program = program.env(name.clone(), value.clone());
        }
    }
    if let Some(pass) = keys.pass_env {
        if program.launch.environment == Environment::Inherited {
            return Err(at(
                Some(pass.span()),
                key("pass_env"),
                wording::CONFIG_MCP_PASS_ENV.to_owned(),
            ));
        }
        if let Some(bad) = pass.get_ref().iter().find(|name| !valid_variable_name(name)) {
            return Err(at(
                Some(pass.span()),
                key("pass_env"),
                wording::config_bad_variable(bad),
            ));
        }
        for name in pass.get_ref() {
            program = program.pass_env(name.clone());
        }
    }
    if let Some(cwd) = keys.cwd {
        let dir = place.base.join(cwd.get_ref());
        if !dir.is_dir() {
            return Err(at(
                Some(cwd.span()),
                key("cwd"),
                wording::config_cwd_not_a_directory(&dir),
            ));
        }
        program = program.cwd(dir);
    }
    Ok(program)
}
