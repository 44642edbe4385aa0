//! Text a child chose, made safe to show: one printable line, cut to a bound.

/// `text` made printable on one line (escape sequences removed, other
/// control characters replaced) and cut to `limit` characters.
pub(crate) fn printable(text: &str, limit: usize) -> String {
    let clean: String = dsh_process::strip_escapes(text)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    if clean.chars().count() > limit {
        let mut cut: String = clean.chars().take(limit).collect();
        cut.push('…');
        cut
    } else {
        clean.to_owned()
    }
}
