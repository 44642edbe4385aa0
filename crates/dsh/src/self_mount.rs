//! The self-mount check: a `dsh` started by a `dsh` refuses to mount
//! the configuration that started it.
//!
//! A `dsh acp` child started in its parent's directory, or a `dsh mcp`
//! server of a `dsh` there, reads the parent's `dsh.toml` and would start
//! itself again, and again. So every `dsh` gives each process it starts (ACP
//! children, MCP servers, the client-supplied MCP servers of `dsh acp`) the
//! variable [`ENV`]: the fingerprints of the configuration files its own
//! ancestors loaded, and its own, oldest first, separated by commas. A `dsh`
//! whose configuration has one of those fingerprints refuses to start (exit
//! 2) and says how to give the child its own configuration.
//!
//! A fingerprint ([`crate::config::fingerprint`]) is the 64-bit FNV-1a hash of the file's bytes, in 16 hex
//! digits: the same file and a byte-identical copy elsewhere are the same
//! configuration, since either would mount the same children again. A `dsh`
//! without a configuration file passes what it inherited on unchanged.

use std::path::Path;

use crate::config::Config;
use crate::failure::Failure;
use crate::wording;

/// The variable that carries the ancestors' configuration fingerprints.
pub(crate) const ENV: &str = "DSH_PARENT_CONFIGS";

/// [`config::load_from_cwd`](crate::config::load_from_cwd) for a command
/// that mounts what the file configures (`dsh run`, `dsh acp`, `dsh mcp`): a
/// file that a `dsh` which started this one loaded is refused (exit 2),
/// since mounting it would start this `dsh` again.
pub(crate) fn load_for_mounting(explicit: Option<&Path>) -> Result<Option<Config>, Failure> {
    let config = crate::config::load_from_cwd(explicit)?;
    check(config.as_ref(), inherited().as_deref())?;
    Ok(config)
}

/// The fingerprints in a value of [`ENV`] (empty entries ignored).
fn ancestors(inherited: &str) -> impl Iterator<Item = &str> {
    inherited.split(',').map(str::trim).filter(|entry| !entry.is_empty())
}

/// Refuses a configuration an ancestor loaded (`inherited` is this
/// process's [`ENV`]): mounting it would start this `dsh` again.
pub(crate) fn check(config: Option<&Config>, inherited: Option<&str>) -> Result<(), Failure> {
    let (Some(config), Some(inherited)) = (config, inherited) else {
        return Ok(());
    };
    if ancestors(inherited).any(|entry| entry == config.fingerprint) {
        return Err(Failure::usage(wording::started_by_own_config(&config.path)));
    }
    Ok(())
}

/// The value of [`ENV`] for the processes this `dsh` starts: what it
/// inherited, then its own configuration's fingerprint. `None` when there is
/// nothing to carry.
pub(crate) fn for_children(config: Option<&Config>, inherited: Option<&str>) -> Option<String> {
    let mut entries: Vec<&str> = inherited.map(ancestors).into_iter().flatten().collect();
    if let Some(config) = config {
        entries.push(&config.fingerprint);
    }
    (!entries.is_empty()).then(|| entries.join(","))
}

/// The variables for every process this `dsh` starts: [`ENV`] from
/// [`for_children`], when there is something to carry.
pub(crate) fn child_env(config: Option<&Config>) -> Vec<(String, String)> {
    for_children(config, inherited().as_deref())
        .map(|value| (ENV.to_owned(), value))
        .into_iter()
        .collect()
}

/// This process's [`ENV`], as it inherited it.
pub(crate) fn inherited() -> Option<String> {
    std::env::var(ENV).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::config::fingerprint;

    fn config(text: &str) -> Config {
        crate::config::parse(Path::new("dsh.toml"), text, Path::new(".")).unwrap()
    }

    #[test]
    fn fingerprints_are_fnv1a_of_the_bytes() {
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_eq!(fingerprint("a"), "af63dc4c8601ec8c");
        assert_ne!(fingerprint("[model]\n"), fingerprint("[model] \n"));
    }

    #[test]
    fn a_configuration_an_ancestor_loaded_is_refused() {
        let own = config("[model]\nmodel = \"m\"\n");
        let other = config("");
        let chain = for_children(Some(&other), None).unwrap();
        assert_eq!(chain, fingerprint(""));
        // A child with another configuration, or none, starts.
        assert!(check(Some(&own), Some(&chain)).is_ok());
        assert!(check(None, Some(&chain)).is_ok());
        // Its own children inherit the whole chain.
        let grandchild = for_children(Some(&own), Some(&chain)).unwrap();
        assert_eq!(grandchild, format!("{},{}", fingerprint(""), own.fingerprint));
        assert_eq!(for_children(None, Some(&chain)), Some(chain.clone()));
        assert_eq!(for_children(None, None), None);
        // Any ancestor's configuration is refused, with exit 2.
        let refused = check(Some(&other), Some(&grandchild)).err().unwrap();
        assert_eq!(refused.code(), 2);
        assert!(refused.message().contains("--config"), "{}", refused.message());
        assert!(check(Some(&own), Some(&grandchild)).is_err());
        assert!(check(Some(&own), Some(" , ")).is_ok());
    }
}
