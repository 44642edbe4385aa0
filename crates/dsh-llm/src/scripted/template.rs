//! `{{name}}` placeholders in scripted replies.

/// Names a template may use, with what they stand for (for docs and errors).
pub(crate) const NAMES: &[&str] = &[
    "last_user",
    "last_user_short",
    "first_user",
    "last_tool_result",
    "last_tool",
    "system",
    "assistant_turns",
];

/// Values for one request.
#[derive(Debug, Default)]
pub(crate) struct Vars {
    pub(crate) last_user: String,
    pub(crate) first_user: String,
    pub(crate) last_tool_result: String,
    pub(crate) last_tool: String,
    pub(crate) system: String,
    pub(crate) assistant_turns: usize,
}

impl Vars {
    fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "last_user" => self.last_user.clone(),
            "last_user_short" => short(&self.last_user),
            "first_user" => self.first_user.clone(),
            "last_tool_result" => self.last_tool_result.clone(),
            "last_tool" => self.last_tool.clone(),
            "system" => self.system.clone(),
            "assistant_turns" => self.assistant_turns.to_string(),
            _ => return None,
        })
    }
}

/// The first eight words, with `…` when there were more.
fn short(text: &str) -> String {
    const WORDS: usize = 8;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= WORDS {
        words.join(" ")
    } else {
        format!("{}…", words[..WORDS].join(" "))
    }
}

/// A piece of a template.
enum Part<'a> {
    Literal(&'a str),
    Placeholder(&'a str),
}

/// Splits `text` into literal and placeholder parts. An unclosed `{{` is literal.
fn parts(text: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push(Part::Literal(&rest[..start]));
        out.push(Part::Placeholder(rest[start + 2..start + 2 + len].trim()));
        rest = &rest[start + 2 + len + 2..];
    }
    out.push(Part::Literal(rest));
    out
}

/// Fails with a message naming the first unknown placeholder.
pub(crate) fn check(text: &str) -> Result<(), String> {
    for part in parts(text) {
        if let Part::Placeholder(name) = part
            && !NAMES.contains(&name)
        {
            return Err(crate::wording::unknown_template(name, NAMES));
        }
    }
    Ok(())
}

/// Substitutes placeholders (substituted text is not scanned again).
pub(crate) fn render(text: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(text.len());
    for part in parts(text) {
        match part {
            Part::Literal(literal) => out.push_str(literal),
            Part::Placeholder(name) => match vars.get(name) {
                Some(value) => out.push_str(&value),
                None => {
                    out.push_str("{{");
                    out.push_str(name);
                    out.push_str("}}");
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_checks() {
        let vars = Vars {
            last_user: "a {{first_user}} b".into(),
            first_user: "F".into(),
            ..Vars::default()
        };
        assert_eq!(
            render("<{{last_user}}|{{ first_user }}>", &vars),
            "<a {{first_user}} b|F>"
        );
        assert_eq!(render("open {{ never closed", &vars), "open {{ never closed");
        assert!(check("{{last_user}} {{assistant_turns}}").is_ok());
        let err = check("hi {{nope}}").unwrap_err();
        assert!(err.contains("{{nope}}"), "{err}");
    }

    #[test]
    fn short_keeps_eight_words() {
        assert_eq!(short("  one two  "), "one two");
        assert_eq!(short("1 2 3 4 5 6 7 8 9"), "1 2 3 4 5 6 7 8…");
    }
}
