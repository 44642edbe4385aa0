//! `cargo xtask modules`: no circle between the modules of one folder.
//!
//! Each crate's modules are read folder by folder: the modules of `src/`
//! (`src/<name>.rs`, `src/<name>/mod.rs`, with every file below
//! `src/<name>/`) are the nodes of one level, and the modules of each
//! sub-folder (`src/<name>/<inner>.rs`, …) are the nodes of another, named by
//! their path (`server::http::front`). A module points at a sibling when its
//! code, or the code of a module inside it, names that sibling or something
//! inside it: `crate::<path>`, `super::<path>`, or an item a module
//! re-exports (`crate::Item` when the crate root has `pub use a::Item`). A
//! module naming its own parent or its own children draws no arrow. Test code
//! (`tests.rs`, files under a `tests/` folder, and everything after a
//! `#[cfg(test)]` line) and comments do not count: a circle is a matter of the
//! code that ships. Sibling modules that point at each other, directly or
//! through others, form a circle, and the check names each one with the names
//! that close it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's module graph: for each module (its path joined with `::`),
/// the sibling modules it points at and, for each of those, the names that
/// point there.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// A module's path from the crate root (`["server", "http", "front"]`); the
/// root itself is the empty path.
type ModulePath = Vec<String>;

/// What a crate's modules re-export: `(module, name)` → the module the name
/// comes from.
type Exports = BTreeMap<(ModulePath, String), ModulePath>;

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
    if !["lib.rs", "main.rs"].iter().any(|name| src.join(name).is_file()) {
        return Ok(None);
    }
    let mut files = Vec::new();
    collect(&src, &mut files)?;
    let mut sources: BTreeMap<ModulePath, Vec<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else { continue };
        let text = std::fs::read_to_string(&file)
            .map_err(|error| format!("modules: cannot read {}: {error}", file.display()))?;
        sources.entry(module).or_default().push(shipped(&text));
    }
    let known = known_modules(&sources);
    let exports = reexports(&sources, &known);
    let mut graph = Graph::new();
    for module in known.iter().filter(|module| !module.is_empty()) {
        graph.entry(module.join("::")).or_default();
    }
    for (module, texts) in &sources {
        for text in texts {
            for (target, name) in references(text, module, &known, &exports) {
                if let Some((from, to)) = arrow(module, &target) {
                    graph
                        .entry(from.join("::"))
                        .or_default()
                        .entry(to.join("::"))
                        .or_default()
                        .insert(name);
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

/// The module a file holds: `src/a.rs` and `src/a/mod.rs` are `a`,
/// `src/a/b.rs` is `a::b`, the crate root is the empty path; `None` for the
/// `bin/` targets and test files.
fn module_of(src: &Path, file: &Path) -> Option<ModulePath> {
    let relative = file.strip_prefix(src).ok()?;
    if relative.file_name().is_some_and(|name| name == "tests.rs") {
        return None;
    }
    let mut parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|first| first == "bin") {
        return None;
    }
    let last = parts.pop()?;
    if parts.is_empty() && (last == "lib.rs" || last == "main.rs") {
        return Some(Vec::new());
    }
    if last != "mod.rs" {
        parts.push(last.strip_suffix(".rs").unwrap_or(&last).to_owned());
    }
    Some(parts)
}

/// Every module of the crate: those with a file, and the folders above them.
fn known_modules(sources: &BTreeMap<ModulePath, Vec<String>>) -> BTreeSet<ModulePath> {
    let mut known = BTreeSet::new();
    for module in sources.keys() {
        for end in 0..=module.len() {
            known.insert(module[..end].to_vec());
        }
    }
    known
}

/// The arrow a reference from `module` to `target` draws: between the two
/// siblings, inside their closest common folder, that hold them; `None` when
/// one holds the other.
fn arrow(module: &[String], target: &[String]) -> Option<(ModulePath, ModulePath)> {
    let common = module.iter().zip(target).take_while(|(a, b)| a == b).count();
    if common >= module.len() || common >= target.len() {
        return None;
    }
    Some((module[..=common].to_vec(), target[..=common].to_vec()))
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

/// The items each module re-exports (`pub use`, `pub(crate) use`), and the
/// module each comes from.
fn reexports(sources: &BTreeMap<ModulePath, Vec<String>>, known: &BTreeSet<ModulePath>) -> Exports {
    let mut exports = Exports::new();
    for (module, texts) in sources {
        for statement in texts.iter().flat_map(|text| text.split(';')) {
            let statement = statement.trim();
            let Some(tree) = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|prefix| statement.strip_prefix(prefix))
            else {
                continue;
            };
            for (path, name) in expand(tree) {
                let Some(path) = absolute(module, &path, known) else {
                    continue;
                };
                let from = deepest_module(&path, known);
                if !from.is_empty() {
                    exports.insert((module.clone(), name), from);
                }
            }
        }
    }
    exports
}

/// `path`, named in `module`, from the crate root: `crate::a` is `a`,
/// `super::a` is `a` beside `module`, `self::a` and a bare `a` are `a` inside
/// it (a bare one only when `module` has such a module); `None` for another
/// crate's path.
fn absolute(module: &[String], path: &[String], known: &BTreeSet<ModulePath>) -> Option<ModulePath> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some([module, &path[1..]].concat()),
        "super" => {
            let supers = path.iter().take_while(|part| *part == "super").count();
            let base = &module[..module.len().saturating_sub(supers)];
            Some([base, &path[supers..]].concat())
        }
        _ => {
            let inside = [module, path].concat();
            known.contains(&inside[..=module.len()]).then_some(inside)
        }
    }
}

/// The longest start of `path` that is a module of the crate.
fn deepest_module(path: &[String], known: &BTreeSet<ModulePath>) -> ModulePath {
    let mut end = path.len();
    while end > 0 && !known.contains(&path[..end]) {
        end -= 1;
    }
    path[..end].to_vec()
}

/// The paths and names a use-tree brings in:
/// `a::{B, c::D as E, self}` → (`a::B`, `B`), (`a::c::D`, `E`), (`a`, `a`).
fn expand(tree: &str) -> Vec<(ModulePath, String)> {
    let tree = tree.trim();
    if let Some(group) = tree.strip_prefix('{').and_then(|tree| tree.strip_suffix('}')) {
        return split_top(group).iter().flat_map(|item| expand(item)).collect();
    }
    if let Some((first, rest)) = tree.split_once("::") {
        let first = first.trim().to_owned();
        return expand(rest)
            .into_iter()
            .map(|(path, name)| {
                if path == ["self"] {
                    (vec![first.clone()], first.clone())
                } else {
                    ([vec![first.clone()], path].concat(), name)
                }
            })
            .collect();
    }
    let (path, name) = match tree.split_once(" as ") {
        Some((path, name)) => (path.trim(), name.trim()),
        None => (tree, tree),
    };
    if path.is_empty() || path == "*" {
        Vec::new()
    } else {
        vec![(vec![path.to_owned()], name.to_owned())]
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

/// The modules `text` (the code of `module`) names with `crate::` or
/// `super::`, each with the name that points there.
fn references(
    text: &str,
    module: &[String],
    known: &BTreeSet<ModulePath>,
    exports: &Exports,
) -> Vec<(ModulePath, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::").into_iter().chain(rest.find("super::")).min() {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = &rest[at + 1..];
            continue;
        }
        let tree = &tail[..use_tree_end(tail)];
        rest = &tail[tree.len().max(1)..];
        for (path, _) in expand(tree.trim_end_matches(':')) {
            let Some(path) = absolute(module, &path, known) else {
                continue;
            };
            if let Some(target) = resolve(&path, known, exports) {
                found.push(target);
            }
        }
    }
    found
}

/// The module a path from the crate root reaches, followed through
/// re-exports, with the name that reaches it (the item, or the module when
/// the path ends there); `None` for the crate root.
fn resolve(path: &[String], known: &BTreeSet<ModulePath>, exports: &Exports) -> Option<(ModulePath, String)> {
    let mut module = ModulePath::new();
    for part in path {
        let inside = [module.as_slice(), std::slice::from_ref(part)].concat();
        if known.contains(&inside) {
            module = inside;
        } else if let Some(from) = exports.get(&(module.clone(), part.clone())) {
            return Some((from.clone(), part.clone()));
        } else {
            return (!module.is_empty()).then(|| (module, part.clone()));
        }
    }
    let name = module.last()?.clone();
    Some((module, name))
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

    fn path(text: &str) -> ModulePath {
        text.split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn sources(modules: &[(&str, &str)]) -> BTreeMap<ModulePath, Vec<String>> {
        modules
            .iter()
            .map(|(module, text)| (path(module), vec![shipped(text)]))
            .collect()
    }

    fn found(list: Vec<(ModulePath, String)>) -> Vec<(String, String)> {
        let mut list: Vec<(String, String)> = list
            .into_iter()
            .map(|(module, name)| (module.join("::"), name))
            .collect();
        list.sort();
        list
    }

    #[test]
    fn paths_groups_supers_and_reexports_resolve_to_modules() {
        let sources = sources(&[
            ("", "pub use c::{Thing, other::Deep as Renamed};\npub use std::fmt;"),
            ("a", ""),
            ("b", ""),
            ("c", ""),
            ("d", ""),
        ]);
        let known = known_modules(&sources);
        let exports = reexports(&sources, &known);
        assert_eq!(exports.get(&(path(""), "Thing".to_owned())), Some(&path("c")));
        assert_eq!(exports.get(&(path(""), "Renamed".to_owned())), Some(&path("c")));
        assert_eq!(exports.get(&(path(""), "fmt".to_owned())), None);
        let text = "use crate::{a::X, b};\nfn f() { crate::Thing::new(); super::b::y(); super::super::c::z(); my_crate::a::q(); }";
        let expected = [("a", "X"), ("b", "b"), ("b", "y"), ("c", "Thing"), ("c", "z")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(m, n)| ((*m).to_owned(), (*n).to_owned()))
            .collect();
        assert_eq!(found(references(text, &path("d"), &known, &exports)), expected);
    }

    #[test]
    fn inside_a_folder_siblings_point_at_each_other_and_parents_draw_no_arrow() {
        let sources = sources(&[
            ("s", "pub(crate) use h::options::Path;"),
            ("s::h", ""),
            ("s::h::front", ""),
            ("s::h::options", ""),
            ("s::h::sessions", ""),
        ]);
        let known = known_modules(&sources);
        let exports = reexports(&sources, &known);
        let text = "use super::sessions::Opening;\nuse crate::s::h::options::MCP_PATH;\nuse crate::s::Path;\nuse super::super::Session;";
        let module = path("s::h::front");
        let targets = references(text, &module, &known, &exports);
        assert_eq!(
            found(targets.clone()),
            [
                ("s".to_owned(), "Session".to_owned()),
                ("s::h::options".to_owned(), "MCP_PATH".to_owned()),
                ("s::h::options".to_owned(), "Path".to_owned()),
                ("s::h::sessions".to_owned(), "Opening".to_owned()),
            ]
        );
        let arrows: Vec<(String, String)> = targets
            .iter()
            .filter_map(|(target, _)| arrow(&module, target))
            .map(|(from, to)| (from.join("::"), to.join("::")))
            .collect();
        assert!(arrows.iter().all(|(from, _)| from == "s::h::front"), "{arrows:?}");
        assert!(arrows.contains(&("s::h::front".to_owned(), "s::h::sessions".to_owned())));
        assert!(arrows.contains(&("s::h::front".to_owned(), "s::h::options".to_owned())));
        // Naming the parent, or a module of another folder, draws the arrow between the folders' own siblings.
        assert_eq!(arrow(&module, &path("s")), None);
        assert_eq!(arrow(&path("s::h::front"), &path("t::x")), Some((path("s"), path("t"))));
    }

    /// A throwaway workspace with one crate, `demo`, removed when dropped.
    struct Planted(PathBuf);

    impl Planted {
        fn new(files: &[(&str, &str)]) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos());
            let root = std::env::temp_dir().join(format!("xtask-modules-{}-{nanos}", std::process::id()));
            let planted = Self(root);
            planted.write("crates/demo/Cargo.toml", "[package]\nname = \"demo\"\n");
            for (file, text) in files {
                planted.write(file, text);
            }
            planted
        }

        fn write(&self, file: &str, text: &str) {
            let path = self.0.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    impl Drop for Planted {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_circle_planted_inside_a_folder_fails_the_check() {
        let planted = Planted::new(&[
            ("crates/demo/src/lib.rs", "mod outer;\npub use outer::a::A;\n"),
            ("crates/demo/src/outer/mod.rs", "pub(crate) mod a;\npub(crate) mod b;\n"),
            ("crates/demo/src/outer/a.rs", "use super::b::B;\npub struct A(B);\n"),
            ("crates/demo/src/outer/b.rs", "pub struct B;\n"),
        ]);
        assert_eq!(
            check(&planted.0),
            Ok("modules: 3 modules in 1 crates, no circle.".to_owned())
        );
        // `b` now names `a` through the crate root's re-export: a circle inside `outer/`.
        planted.write(
            "crates/demo/src/outer/b.rs",
            "pub struct B;\nimpl B { fn a(&self) -> Option<crate::A> { None } }\n",
        );
        assert_eq!(
            check(&planted.0),
            Err("demo: circle [outer::a, outer::b]: outer::a -> outer::b (B); outer::b -> outer::a (A)".to_owned())
        );
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
