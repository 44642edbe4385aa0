//! The page: a pure function of what was harvested.

use crate::harvest::HarvestedPackage;
use crate::wording;

/// The workspace-relative path of the generated page.
pub const CATALOG_PATH: &str = "docs/tool-catalog.md";

/// Renders `docs/tool-catalog.md`. Same input, same bytes.
pub fn render(packages: &[HarvestedPackage]) -> String {
    let mut lines: Vec<String> = wording::PAGE_HEAD.iter().map(|line| (*line).to_owned()).collect();
    for package in packages {
        let names: Vec<&str> = package.tools.iter().map(|(spec, _)| spec.name.as_str()).collect();
        lines.push(format!(
            "| `{}` | {} | {} | {} | {} | {} |",
            package.package,
            code_list(&names),
            code_list(package.requires),
            code_list(package.writes),
            code_list(package.shipped_aliases),
            table_cell(package.note),
        ));
    }
    lines.push(String::new());
    for package in packages {
        lines.push(wording::anchor(&slug(package.package)));
        lines.push(String::new());
        lines.push(format!("## `{}`", package.package));
        lines.push(String::new());
        for (spec, source) in &package.tools {
            lines.push(format!("### `{}`", spec.name));
            lines.push(String::new());
            if !spec.description.is_empty() {
                lines.push(spec.description.clone());
                lines.push(String::new());
            }
            lines.push("```json".into());
            lines.push(serde_json::to_string_pretty(&spec.parameters).unwrap_or_else(|error| error.to_string()));
            lines.push("```".into());
            lines.push(String::new());
            lines.push(wording::source_line(source));
            lines.push(String::new());
        }
        if !package.note.is_empty() {
            lines.push(package.note.to_owned());
            lines.push(String::new());
        }
    }
    lines.join("\n")
}

fn code_list(items: &[&str]) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn table_cell(text: &str) -> String {
    if text.is_empty() {
        return "-".into();
    }
    text.replace('|', "\\|").replace('\n', "<br>")
}

/// The GitHub heading slug of a name: lowercase, keep letters, digits, `_`,
/// `-` and spaces, spaces become `-`.
pub(crate) fn slug(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Whether a committed page matches the rendered one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Byte for byte the same.
    Current,
    /// Different; the first differing line (1-based) and both versions of it.
    Stale {
        /// The 1-based line number.
        line: usize,
        /// The committed line (`None` past its end).
        committed: Option<String>,
        /// The rendered line (`None` past its end).
        rendered: Option<String>,
    },
}

/// Compares a committed page with a freshly rendered one.
pub fn compare(committed: &str, rendered: &str) -> Freshness {
    if committed == rendered {
        return Freshness::Current;
    }
    let mut old = committed.split('\n');
    let mut new = rendered.split('\n');
    let mut line = 1;
    loop {
        match (old.next(), new.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (a, b) => {
                return Freshness::Stale {
                    line,
                    committed: a.map(str::to_owned),
                    rendered: b.map(str::to_owned),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn anchors_are_github_slugs() {
        assert_eq!(slug("dsh-tool-subagent"), "dsh-tool-subagent");
        assert_eq!(slug("@deepseek-ai/dsh-tool-subagent"), "deepseek-aidsh-tool-subagent");
    }
}
