#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod harvest;
mod manifest;
mod render;
mod wording;

pub use harvest::{CatalogError, HarvestedPackage, check_completeness, harvest};
pub use manifest::{MountError, MountGuard, ToolPackage, manifest};
pub use render::{CATALOG_PATH, Freshness, compare, render};

/// Harvests the whole manifest and renders the page.
pub fn generate() -> Result<String, CatalogError> {
    Ok(render(&harvest(&manifest())?))
}
