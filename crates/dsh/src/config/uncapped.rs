//! The newcomer's trap: a spawn or fork tool with no `max_depth` whose
//! children still see a delegation tool lets every child delegate again,
//! with nothing but the tree's `max_children` to stop it. The file is
//! valid (absent means no cap, as the reference has it), so dsh loads it,
//! and `dsh run` and `dsh config check` say so once.

use dsh_subagent_api::ToolFilter;

use super::{Config, Provider};

impl Config {
    /// The in-process delegation tools of the file whose children may
    /// delegate again without a depth cap, in file order: no `max_depth`,
    /// and a `tool_filter` that leaves them a delegation tool of the file.
    /// An ACP tool is not named: its child is another agent, with a
    /// configuration and a depth policy of its own.
    pub(crate) fn uncapped_tools(&self) -> Vec<&str> {
        let delegation: Vec<&str> = self
            .subagents
            .iter()
            .map(|subagent| subagent.tool.tool_name.as_str())
            .collect();
        self.subagents
            .iter()
            .filter(|subagent| matches!(subagent.provider, Provider::Spawn | Provider::Fork))
            .filter(|subagent| subagent.tool.max_depth.is_none())
            .filter(|subagent| {
                let filter = subagent.tool.tool_filter.as_ref();
                delegation.iter().any(|name| sees(filter, name))
            })
            .map(|subagent| subagent.tool.tool_name.as_str())
            .collect()
    }
}

/// Whether a child under `filter` sees the tool `name`.
fn sees(filter: Option<&ToolFilter>, name: &str) -> bool {
    let Some(filter) = filter else { return true };
    let allowed = filter
        .allow
        .as_ref()
        .is_none_or(|allow| allow.iter().any(|tool| tool == name));
    let denied = filter
        .deny
        .as_ref()
        .is_some_and(|deny| deny.iter().any(|tool| tool == name));
    allowed && !denied
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    fn uncapped(text: &str) -> Vec<String> {
        let config = super::super::parse(Path::new("dsh.toml"), text, Path::new(".")).unwrap();
        config.uncapped_tools().into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn only_a_tool_whose_children_may_delegate_again_without_a_cap_is_named() {
        let spawn = "[[subagents]]\nprovider = \"spawn\"\n";
        assert_eq!(uncapped(spawn), ["subagent"]);
        assert!(uncapped(&format!("{spawn}max_depth = 2\n")).is_empty());
        assert!(uncapped(&format!("{spawn}tool_filter = {{ deny = [\"subagent\"] }}\n")).is_empty());
        assert!(uncapped(&format!("{spawn}tool_filter = {{ allow = [\"task_output\"] }}\n")).is_empty());
        assert_eq!(
            uncapped(&format!("{spawn}tool_filter = {{ allow = [\"subagent\"] }}\n")),
            ["subagent"]
        );
        let two = "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { deny = [\"subagent\"] }\n\n\
                   [[subagents]]\ntool_name = \"subagent_fork\"\nprovider = \"fork\"\nmax_depth = 1\n";
        assert_eq!(uncapped(two), ["subagent"], "its children still see subagent_fork");
        let acp = "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\n";
        assert!(uncapped(acp).is_empty());
        assert!(uncapped("").is_empty());
    }

    #[test]
    fn the_warning_says_what_happens_and_what_to_write() {
        insta::assert_snapshot!(
            "uncapped_warning",
            [
                crate::wording::uncapped_delegation(&["subagent"]),
                crate::wording::uncapped_delegation(&["subagent", "subagent_fork"]),
            ]
            .join("\n")
        );
    }
}
