//! The tool catalog: `docs/tool-catalog.md`, generated from the tools as they
//! really register.
//!
//! - [`manifest`]: one [`ToolPackage`] per tool crate: how to mount it with
//!   its default configuration, what it requires and writes, its note.
//! - [`harvest`]: mounts each entry on a fresh registry and records its tools
//!   (a crate that registers nothing fails, naming the crate).
//! - [`render`]: a pure function from what was harvested to the page.
//! - [`compare`]: the `--check` comparison, reporting the first differing line.
//! - [`check_completeness`]: fails when a `crates/dsh-tool-*` crate is missing
//!   from the manifest.
//!
//! `cargo xtask catalog` writes the page; `cargo xtask catalog --check` fails
//! when it is stale.
//!
//! ```
//! let packages = dsh_tool_catalog::harvest(&dsh_tool_catalog::manifest()).unwrap();
//! let page = dsh_tool_catalog::render(&packages);
//! assert!(page.contains("### `subagent`"));
//! assert_eq!(page, dsh_tool_catalog::render(&packages)); // deterministic
//! ```

#![forbid(unsafe_code)]

mod harvest;
mod manifest;
mod render;

pub use harvest::{CatalogError, HarvestedPackage, check_completeness, harvest};
pub use manifest::{MountError, MountGuard, NOT_TOOL_CRATES, ToolPackage, manifest};
pub use render::{CATALOG_PATH, Freshness, compare, render, slug};

/// Harvests the whole manifest and renders the page.
pub fn generate() -> Result<String, CatalogError> {
    Ok(render(&harvest(&manifest())?))
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
