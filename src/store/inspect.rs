//! What `atomzarr inspect` reports: sample counts and, per array, level,
//! dtype, shape, codec, chunk and shard, bytes on disk and file count.

use crate::Location;

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
    pub config: crate::ZarrArrayConfig,
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

/// Inspects the store at `path` (a local path or, with feature `remote`, a
/// URL; a plain HTTP server cannot list its objects, so byte and file
/// counts are 0 there).
///
/// # Errors
/// The errors of opening the store (as
/// [`AtomicDataZarrReader::open_opt`](crate::AtomicDataZarrReader::open_opt));
/// [`Error::Zarr`](crate::Error::Zarr) or [`Error::Format`](crate::Error::Format)
/// naming an array that cannot be opened.
pub fn inspect(location: impl Into<Location>) -> Result<StoreReport> {
    let location = &location.into();
    let reader = crate::AtomicDataZarrReader::open_opt(location, crate::ReaderOptions::default().with_cache_bytes(0))?;
    let (src, store) = (reader.byte_source(), reader.storage());
    let root = match location.local() {
        Some(local) => format::read_root(local)?,
        None => format::read_root_from(&*src, location)?,
    };
    let usage = |rel: &str| format::store_usage(location, &*src, rel);
    let mut arrays = Vec::new();
    let fields = root.fields.iter().map(|(n, i)| (format::field_path(i.group, n), Some(i.level)));
    for (rel, level) in format::META_ARRAYS.iter().map(|(r, _)| (r.to_string(), None)).chain(fields) {
        if rel.starts_with(StoreGroup::Meta.name()) && src.size(&format!("{rel}/zarr.json"))?.is_none() {
            continue;
        }
        let a = arrays::open_array(location, &store, &rel)?;
        let (disk_bytes, files) = usage(&rel)?;
        arrays.push(ArrayReport {
            dtype: arrays::array_dtype(location, &rel, &a)?,
            shape: a.shape().to_vec(),
            config: arrays::infer_config(&a),
            path: rel,
            level,
            disk_bytes,
            files,
        });
    }
    let (disk_bytes, files) = usage("")?;
    use crate::Reader;
    Ok(StoreReport { num_samples: root.num_samples, active: reader.len(), arrays, disk_bytes, files })
}
