//! The environment a child starts with.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Variables of the parent's environment every scrubbed child keeps: what
/// programs need to run and nothing that is a credential.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
];

/// Where a child's environment comes from. Withheld names
/// ([`Launch::withheld_env`](crate::Launch::withheld_env)) are removed from
/// what it takes of the parent's under either policy; explicit entries
/// ([`Launch::env`](crate::Launch::env)) are then added on top, and win.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Environment {
    /// The parent's whole environment: for a program that is the user's own
    /// tool and may need the user's credentials (an MCP server).
    #[default]
    Inherited,
    /// Nothing of the parent's but [`BASE_ENV`] and the variables named in
    /// `pass`: for a program that must not see the parent's secrets (an ACP
    /// child agent).
    Scrubbed {
        /// Names of further variables passed on from the parent when set there.
        pass: Vec<String>,
    },
}

impl Environment {
    /// The variables a child starts with under this policy, less the
    /// `withheld` names, with `set` on top: `lookup` reads one variable of
    /// the parent, `all` lists every one (only [`Environment::Inherited`]
    /// asks for it).
    pub(crate) fn resolve(
        &self,
        set: &[(String, String)],
        withheld: &[String],
        lookup: impl Fn(&str) -> Option<OsString>,
        all: impl FnOnce() -> Vec<(OsString, OsString)>,
    ) -> BTreeMap<OsString, OsString> {
        let mut env = BTreeMap::new();
        match self {
            Self::Inherited => env.extend(all()),
            Self::Scrubbed { pass } => {
                for name in BASE_ENV.iter().copied().chain(pass.iter().map(String::as_str)) {
                    if let Some(value) = lookup(name) {
                        env.insert(OsString::from(name), value);
                    }
                }
            }
        }
        for name in withheld {
            env.remove(std::ffi::OsStr::new(name));
        }
        env.extend(
            set.iter()
                .map(|(key, value)| (OsString::from(key), OsString::from(value))),
        );
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(name: &str) -> Option<OsString> {
        match name {
            "PATH" => Some("/usr/bin".into()),
            "HOME" => Some("/home/u".into()),
            "AWS_SECRET_ACCESS_KEY" | "OPENAI_API_KEY" => Some("secret".into()),
            "DSH_API_KEY" => Some("k".into()),
            _ => None,
        }
    }

    fn everything() -> Vec<(OsString, OsString)> {
        ["PATH", "HOME", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "DSH_API_KEY"]
            .into_iter()
            .filter_map(|name| Some((OsString::from(name), parent(name)?)))
            .collect()
    }

    fn keys(env: &BTreeMap<OsString, OsString>) -> Vec<String> {
        env.keys().map(|k| k.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn a_scrubbed_environment_keeps_the_base_and_the_passed_names_then_the_set_entries() {
        let policy = Environment::Scrubbed {
            pass: vec!["DSH_API_KEY".into()],
        };
        let set = [("DSH_MODEL".into(), "m".into()), ("PATH".into(), "/only/here".into())];
        let env = policy.resolve(&set, &[], parent, || {
            panic!("a scrubbed child never lists the parent's")
        });
        assert_eq!(keys(&env), ["DSH_API_KEY", "DSH_MODEL", "HOME", "PATH"]);
        assert_eq!(env[&OsString::from("PATH")], "/only/here", "explicit entries win");
    }

    #[test]
    fn an_inherited_environment_keeps_everything_then_the_set_entries() {
        let set = [("HOME".into(), "/elsewhere".into())];
        let env = Environment::Inherited.resolve(&set, &[], parent, everything);
        assert_eq!(
            keys(&env),
            ["AWS_SECRET_ACCESS_KEY", "DSH_API_KEY", "HOME", "OPENAI_API_KEY", "PATH"]
        );
        assert_eq!(env[&OsString::from("HOME")], "/elsewhere", "explicit entries win");
    }

    #[test]
    fn a_withheld_name_is_taken_from_the_parent_under_neither_policy() {
        let withheld = [String::from("DSH_API_KEY")];
        let inherited = Environment::Inherited.resolve(&[], &withheld, parent, everything);
        assert_eq!(
            keys(&inherited),
            ["AWS_SECRET_ACCESS_KEY", "HOME", "OPENAI_API_KEY", "PATH"]
        );
        let passed = Environment::Scrubbed {
            pass: vec!["DSH_API_KEY".into()],
        };
        let scrubbed = passed.resolve(&[], &withheld, parent, || panic!("not listed"));
        assert_eq!(keys(&scrubbed), ["HOME", "PATH"]);
        // An explicit entry is the caller's own value, not the parent's: it stays.
        let set = [("DSH_API_KEY".into(), "given".into())];
        let explicit = passed.resolve(&set, &withheld, parent, || panic!("not listed"));
        assert_eq!(explicit[&OsString::from("DSH_API_KEY")], "given");
    }
}
