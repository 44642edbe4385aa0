//! The tree as one self-contained page: the tree and a timeline of every
//! agent on one time axis (waiting and running as bars, model calls as
//! ticks, cuts and failures marked, details on hover or click). No network:
//! the page carries its data, style and script inline and opens from disk.

use dsh_tree::Tree;

/// The page, with `__TREE_JSON__` where the tree's JSON goes.
const TEMPLATE: &str = include_str!("page.html");

/// The page of `tree`.
pub(crate) fn page(tree: &Tree) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(tree)?;
    // Inside a <script> element nothing may read as a closing tag or a
    // comment: `<` only occurs inside JSON strings, where `\u003c` is the
    // same character.
    let json = json.replace('<', "\\u003c");
    Ok(TEMPLATE.replacen("__TREE_JSON__", &json, 1))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_tree::{Node, Place, Tree};

    #[test]
    fn the_data_cannot_close_its_script_element() {
        let mut root = Node::new("root", 0, Place::Live);
        root.label = Some("</script><script>alert(1)</script><!--".into());
        let page = super::page(&Tree::new(root)).unwrap();
        assert_eq!(page.matches("</script>").count(), 2, "the page's own two");
        assert!(!page.contains("__TREE_JSON__"));
        assert!(page.contains(r"\u003c/script>\u003cscript>alert(1)\u003c/script>\u003c!--"));
    }
}
