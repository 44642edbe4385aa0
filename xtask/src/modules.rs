//! `cargo xtask modules`: no circle between the modules of one crate.
//!
//! Each crate's top-level modules (`src/<name>.rs`, `src/<name>/mod.rs` and
//! every file below `src/<name>/`) are the nodes. A module points at another
//! when its code names it: `crate::<name>`, `super::<name>` from a top-level
//! file, or an item the crate root re-exports from it (`crate::Item`). Test
//! code (`tests.rs`, files under a `tests/` folder, and everything after a
//! `#[cfg(test)]` line) and comments do not count: a circle is a matter of
//! the code that ships. Two modules that point at each other, directly or
//! through others, form a circle, and the check names each one with the
//! names that close it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's module graph: for each module, the modules it points at and,
/// for each of those, the names that point there.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Checks every crate under `root/crates`; the message names every circle.
pub(crate) fn check(root: &Path) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut modules = 0;
    let mut crates = 0;
    for crate_dir in crate_dirs(root)? {
        let Some(graph) = graph(&crate_dir)? else { continue };
        crates += 1;
        modules += graph.len();
        let name = crate_dir
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        for circle in circles(&graph) {
            problems.push(format!("{name}: circle {}", describe(&graph, &circle)));
        }
    }
    if problems.is_empty() {
        Ok(format!("modules: {modules} modules in {crates} crates, no circle."))
    } else {
        Err(problems.join("\n"))
    }
}

fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map_err(|error| format!("modules: cannot list crates/: {error}"))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The module graph of the crate at `dir`, `None` when it has no `src/`.
fn graph(dir: &Path) -> Result<Option<Graph>, String> {
    let src = dir.join("src");
    let root_file = ["lib.rs", "main.rs"]
        .iter()
        .map(|name| src.join(name))
        .find(|path| path.is_file());
    let Some(root_file) = root_file else { return Ok(None) };
    let mut files = Vec::new();
    collect(&src, &mut files)?;
    let mut sources = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else { continue };
        let text = std::fs::read_to_string(&file)
            .map_err(|error| format!("modules: cannot read {}: {error}", file.display()))?;
        let depth = depth_of(&src, &file);
        sources
            .entry(module)
            .or_insert_with(Vec::new)
            .push((depth, shipped(&text)));
    }
    let root_text = std::fs::read_to_string(&root_file)
        .map_err(|error| format!("modules: cannot read {}: {error}", root_file.display()))?;
    let exports = reexports(&shipped(&root_text), &sources);
    let mut graph = Graph::new();
    for (module, texts) in &sources {
        let edges = graph.entry(module.clone()).or_default();
        for (depth, text) in texts {
            for (target, name) in references(text, *depth, &sources, &exports) {
                if target != *module {
                    edges.entry(target).or_default().insert(name);
                }
            }
        }
    }
    Ok(Some(graph))
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|error| format!("modules: cannot list {}: {error}", dir.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|name| name == "tests" || name == "snapshots")
            {
                continue;
            }
            collect(&path, files)?;
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// The top-level module a file belongs to; `None` for the crate root, the
/// `bin/` targets and test files.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    if relative.file_name().is_some_and(|name| name == "tests.rs") {
        return None;
    }
    let mut parts = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned());
    let first = parts.next()?;
    if first == "bin" || first == "lib.rs" || first == "main.rs" {
        return None;
    }
    Some(first.strip_suffix(".rs").unwrap_or(&first).to_owned())
}

/// How deep a file's module sits: `src/a.rs` and `src/a/mod.rs` are 1,
/// `src/a/b.rs` is 2.
fn depth_of(src: &Path, file: &Path) -> usize {
    let Ok(relative) = file.strip_prefix(src) else { return 1 };
    let parts = relative.components().count();
    if relative.file_name().is_some_and(|name| name == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The code that ships: comments dropped, and nothing from the first
/// `#[cfg(test)]` line on.
fn shipped(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let line = line.find(" //").map_or(line, |at| &line[..at]);
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The items the crate root re-exports, and the module each comes from.
fn reexports(root: &str, sources: &BTreeMap<String, Vec<(usize, String)>>) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    for statement in root.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let path = path.trim().trim_start_matches("crate::").trim_start_matches("self::");
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        if !sources.contains_key(module) {
            continue;
        }
        for name in leaf_names(rest) {
            exports.insert(name, module.to_owned());
        }
    }
    exports
}

/// The names a use-tree brings in: `A`, `{A, B as C, d::E}` → `A`, `C`, `E`.
fn leaf_names(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(group) = tree.strip_prefix('{').and_then(|tree| tree.strip_suffix('}')) {
        return split_top(group).iter().flat_map(|item| leaf_names(item)).collect();
    }
    if let Some((_, rest)) = tree.split_once("::") {
        return leaf_names(rest);
    }
    let name = tree.rsplit(" as ").next().unwrap_or(tree).trim();
    if name.is_empty() || name == "*" || name == "self" {
        Vec::new()
    } else {
        vec![name.to_owned()]
    }
}

/// Splits a use group at its top-level commas.
fn split_top(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (at, character) in group.char_indices() {
        match character {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect()
}

/// The modules `text` (a file `depth` deep) names, each with the name that
/// points there.
fn references(
    text: &str,
    depth: usize,
    sources: &BTreeMap<String, Vec<(usize, String)>>,
    exports: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::").into_iter().chain(rest.find("super::")).min() {
        let before = rest[..at].chars().next_back();
        let mut tail = &rest[at..];
        rest = &rest[at + 1..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        // Resolve to the crate root: `crate::`, or as many `super::` as the file is deep.
        if let Some(after) = tail.strip_prefix("crate::") {
            tail = after;
        } else {
            let mut supers = 0;
            while let Some(after) = tail.strip_prefix("super::") {
                supers += 1;
                tail = after;
            }
            if supers < depth {
                continue;
            }
            rest = tail;
        }
        let tree_end = use_tree_end(tail);
        for path in root_paths(&tail[..tree_end]) {
            let (first, second) = match path.split_once("::") {
                Some((first, second)) => (first, second.split("::").next().unwrap_or(second)),
                None => (path.as_str(), ""),
            };
            if sources.contains_key(first) {
                let name = if second.is_empty() { first } else { second };
                found.push((first.to_owned(), name.trim().to_owned()));
            } else if let Some(module) = exports.get(first) {
                found.push((module.clone(), first.to_owned()));
            }
        }
    }
    found
}

/// Where the path or use-tree at the start of `text` ends.
fn use_tree_end(text: &str) -> usize {
    let mut depth = 0;
    for (at, character) in text.char_indices() {
        match character {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            c if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') => return at,
            _ => {}
        }
    }
    text.len()
}

/// The paths from the crate root a path or use-tree names:
/// `a::{B, c::D}` → `a::B`, `a::c`; `{a, b::C}` → `a`, `b::C`.
fn root_paths(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(group) = tree.strip_prefix('{').and_then(|tree| tree.strip_suffix('}')) {
        return split_top(group).iter().flat_map(|item| root_paths(item)).collect();
    }
    match tree.split_once("::") {
        Some((first, rest)) if rest.starts_with('{') => {
            let inner = rest.trim_start_matches('{').trim_end_matches('}');
            split_top(inner)
                .iter()
                .map(|item| format!("{first}::{}", item.split("::").next().unwrap_or(item)))
                .collect()
        }
        _ if tree.is_empty() => Vec::new(),
        _ => vec![tree.to_owned()],
    }
}

/// The circles of `graph`: its strongly connected components of two or
/// more modules (Tarjan's algorithm), each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let targets: Vec<&'a str> = state
            .graph
            .get(node)
            .map(|edges| edges.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for target in targets {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

/// A circle's arrows inside it, each with the names behind it.
fn describe(graph: &Graph, circle: &[String]) -> String {
    let members: BTreeSet<&str> = circle.iter().map(String::as_str).collect();
    let mut arrows = Vec::new();
    for from in circle {
        for (to, names) in graph.get(from).into_iter().flatten() {
            if members.contains(to.as_str()) {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                arrows.push(format!("{from} -> {to} ({})", names.join(", ")));
            }
        }
    }
    format!("[{}]: {}", circle.join(", "), arrows.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(names: &[&str]) -> BTreeMap<String, Vec<(usize, String)>> {
        names.iter().map(|name| ((*name).to_owned(), Vec::new())).collect()
    }

    #[test]
    fn paths_groups_supers_and_reexports_resolve_to_modules() {
        let sources = sources(&["a", "b", "c"]);
        let exports = reexports(
            "pub use c::{Thing, other::Deep as Renamed};\npub use std::fmt;",
            &sources,
        );
        assert_eq!(exports.get("Thing").map(String::as_str), Some("c"));
        assert_eq!(exports.get("Renamed").map(String::as_str), Some("c"));
        let text = "use crate::{a::X, b};\nfn f() { crate::Thing::new(); super::b::y(); super::super::c::z(); my_crate::a::q(); }";
        let mut found = references(text, 1, &sources, &exports);
        found.sort();
        let found: Vec<(&str, &str)> = found.iter().map(|(m, n)| (m.as_str(), n.as_str())).collect();
        assert_eq!(found, [("a", "X"), ("b", "b"), ("b", "y"), ("c", "Thing"), ("c", "z")]);
        // Two levels deep, one `super::` stays inside the file's own module.
        assert!(references("super::b::y();", 2, &sources, &exports).is_empty());
    }

    #[test]
    fn comments_and_test_code_do_not_count() {
        let text = "// crate::a\nfn f() {} // crate::b\n#[cfg(test)]\nmod tests { use crate::c; }\n";
        assert_eq!(shipped(text), "fn f() {}\n");
    }

    #[test]
    fn a_circle_is_named_with_the_names_that_close_it() {
        let mut graph = Graph::new();
        let edge = |graph: &mut Graph, from: &str, to: &str, name: &str| {
            graph
                .entry(from.into())
                .or_default()
                .entry(to.into())
                .or_default()
                .insert(name.into());
        };
        edge(&mut graph, "a", "b", "B");
        edge(&mut graph, "b", "a", "A");
        edge(&mut graph, "b", "c", "C");
        graph.entry("c".into()).or_default();
        let found = circles(&graph);
        assert_eq!(found, [vec!["a".to_owned(), "b".to_owned()]]);
        assert_eq!(describe(&graph, &found[0]), "[a, b]: a -> b (B); b -> a (A)");
    }
}
