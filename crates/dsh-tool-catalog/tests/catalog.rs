//! The generated catalog: current, deterministic, valid, complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use dsh_tool_catalog::{
    CATALOG_PATH, CatalogError, Freshness, MountError, MountGuard, ToolPackage, check_completeness, compare, generate,
    harvest, manifest, render,
};
use dsh_tools::ToolRegistry;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_rendered_page_is_pinned() {
    insta::assert_snapshot!("tool_catalog", generate().unwrap());
}

#[test]
fn the_committed_page_is_current() {
    let committed = std::fs::read_to_string(workspace_root().join(CATALOG_PATH)).unwrap();
    assert_eq!(
        compare(&committed, &generate().unwrap()),
        Freshness::Current,
        "run `cargo xtask catalog` and commit {CATALOG_PATH}"
    );
}

#[test]
fn a_tampered_copy_is_reported_stale_at_its_first_differing_line() {
    let page = generate().unwrap();
    let tampered = page.replacen("### `subagent`", "### `subagents`", 1);
    let line = page.lines().position(|l| l == "### `subagent`").unwrap() + 1;
    assert_eq!(
        compare(&tampered, &page),
        Freshness::Stale {
            line,
            committed: Some("### `subagents`".into()),
            rendered: Some("### `subagent`".into()),
        }
    );
    let truncated = page.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(matches!(compare(&truncated, &page), Freshness::Stale { line: 4, .. }));
    assert!(matches!(compare("", &page), Freshness::Stale { line: 1, .. }));
}

#[test]
fn generation_is_byte_identical_run_after_run() {
    let first = generate().unwrap();
    for _ in 0..3 {
        assert_eq!(generate().unwrap(), first);
    }
}

#[test]
fn every_parameters_schema_is_a_valid_object_rooted_json_schema() {
    let packages = harvest(&manifest()).unwrap();
    let mut checked = 0;
    for package in &packages {
        for (spec, _) in &package.tools {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            jsonschema::meta::validate(&spec.parameters)
                .unwrap_or_else(|error| panic!("{}: not a valid JSON Schema: {error}", spec.name));
            jsonschema::validator_for(&spec.parameters)
                .unwrap_or_else(|error| panic!("{}: schema does not compile: {error}", spec.name));
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn every_source_link_points_at_a_file() {
    for package in harvest(&manifest()).unwrap() {
        for (spec, source) in package.tools {
            assert!(
                workspace_root().join(source).is_file(),
                "{}: {source} is missing",
                spec.name
            );
        }
    }
}

#[test]
fn completeness_names_each_unlisted_tool_crate_and_where_to_add_it() {
    let dirs: Vec<String> = [
        "dsh-tool-subagent",
        "dsh-tool-frobnicate",
        "dsh-tool-catalog",
        "dsh-subagent",
        "dsh-tool-zap",
    ]
    .map(String::from)
    .to_vec();
    let error = check_completeness(&dirs, &manifest()).unwrap_err();
    assert_eq!(
        error,
        CatalogError::Incomplete {
            missing: vec!["dsh-tool-frobnicate".into(), "dsh-tool-zap".into()]
        }
    );
    insta::assert_snapshot!("incomplete", error.to_string());
}

#[test]
fn the_real_workspace_is_complete() {
    let dirs: Vec<String> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    check_completeness(&dirs, &manifest()).unwrap();
}

fn mount_nothing(_: &ToolRegistry) -> Result<MountGuard, MountError> {
    Ok(Box::new(()))
}

fn mount_subagent_without_source(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    (manifest()[0].mount)(tools)
}

fn entry(package: &'static str, mount: fn(&ToolRegistry) -> Result<MountGuard, MountError>) -> ToolPackage {
    ToolPackage {
        package,
        sources: &[],
        requires: &[],
        writes: &[],
        shipped_aliases: &[],
        note: "",
        mount,
    }
}

#[test]
fn a_crate_that_registers_nothing_fails_generation_naming_it() {
    let error = harvest(&[entry("dsh-tool-silent", mount_nothing)]).unwrap_err();
    assert_eq!(
        error,
        CatalogError::NothingRegistered {
            package: "dsh-tool-silent"
        }
    );
    assert!(
        error
            .to_string()
            .contains("dsh-tool-silent booted without registering a single tool")
    );
}

#[test]
fn a_tool_without_a_source_mapping_fails_generation() {
    let error = harvest(&[entry("dsh-tool-subagent", mount_subagent_without_source)]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool-catalog: dsh-tool-subagent has no source mapping for harvested tool subagent"
    );
}

#[test]
fn anchors_are_github_slugs_and_table_cells_escape_pipes() {
    // `slug` itself is checked beside it, in the renderer's unit tests.
    let mut packages = harvest(&manifest()).unwrap();
    packages[0].note = "a | b\nc";
    let page = render(&packages);
    assert!(page.contains("| a \\| b<br>c |"));
    assert!(page.contains("<a id=\"dsh-tool-subagent\"></a>\n\n## `dsh-tool-subagent`"));
}
