//! What `atomzarr inspect` reports: sample counts and, per array, level,
//! dtype, shape, codec, chunk and shard, bytes on disk and file count.

use std::path::Path;

use crate::data::{DType, Level};
use crate::error::Result;
use crate::store::format::StoreGroup;
use crate::store::{arrays, format};

/// One array of a store.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayReport {
    /// Path inside the store (`core/positions`).
    pub path: String,
    /// Level (`None` for meta arrays).
    pub level: Option<Level>,
    /// Element type.
    pub dtype: DType,
    /// Array shape.
    pub shape: Vec<u64>,
    /// Codec, chunk and shard as configured.
    pub config: crate::store::ZarrArrayConfig,
    /// Bytes on disk under the array.
    pub disk_bytes: u64,
    /// Files under the array.
    pub files: u64,
}

/// A whole store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreReport {
    /// Physical samples.
    pub num_samples: usize,
    /// Active samples.
    pub active: usize,
    /// Every array.
    pub arrays: Vec<ArrayReport>,
    /// Bytes on disk in the whole store.
    pub disk_bytes: u64,
    /// Files in the whole store.
    pub files: u64,
}

/// Inspects the store at `path`.
pub fn inspect(path: &Path) -> Result<StoreReport> {
    let reader = crate::AtomicDataZarrReader::open_with(path, crate::ReaderOptions::default().with_cache_bytes(0))?;
    let root = format::read_root(path)?;
    let store = arrays::open_store(path)?;
    let mut arrays = Vec::new();
    let fields = root.fields.iter().map(|(n, i)| (format::field_path(i.group, n), Some(i.level)));
    for (rel, level) in format::META_ARRAYS.iter().map(|(r, _)| (r.to_string(), None)).chain(fields) {
        if !path.join(&rel).join("zarr.json").exists() && rel.starts_with(StoreGroup::Meta.name()) {
            continue;
        }
        let a = arrays::open_array(path, &store, &rel)?;
        let (disk_bytes, files) = format::disk_usage(&path.join(&rel));
        arrays.push(ArrayReport {
            dtype: arrays::array_dtype(path, &rel, &a)?,
            shape: a.shape().to_vec(),
            config: arrays::infer_config(&a),
            path: rel,
            level,
            disk_bytes,
            files,
        });
    }
    let (disk_bytes, files) = format::disk_usage(path);
    use crate::Reader;
    Ok(StoreReport { num_samples: root.num_samples, active: reader.len(), arrays, disk_bytes, files })
}
