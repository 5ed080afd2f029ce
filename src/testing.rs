//! Store internals for the crate's own integration tests (feature
//! `testing`): raw zarrs access to inspect and damage stores, the root
//! attributes written as-is, and the cleanup of interrupted writes. Not part
//! of the public API; the writer's `fail_after` hook and `Error::Injected`
//! come with the same feature.

use std::path::Path;

pub use crate::store::arrays::{array_dtype, create_array, open_array, open_store};
pub use crate::store::durable::clean_temporaries;

/// Writes the root `zarr.json` with `attrs`, durably (as the writer does).
///
/// # Errors
/// The I/O error of writing or syncing the file.
pub fn write_root(store: &Path, attrs: &crate::store::format::RootAttrs) -> crate::Result<()> {
    crate::store::format::write_root(store, attrs)
}
