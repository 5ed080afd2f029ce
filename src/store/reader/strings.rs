//! String labels on the read side: the listed `strings/` arrays opened
//! with the state, their chunks decoded and held (`rows` copies them into
//! samples and collated batches).
//!
//! Labels are small next to the numeric fields, so this path stays simple:
//! whole chunks decoded by zarrs (checksums checked), the last few kept per
//! array in a small LRU (a batch's samples share chunks); a refresh drops
//! them with the state.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use zarrs::array::Array;

use super::ChunkSource;
use crate::data::Level;
use crate::error::{Error, Result};
use crate::store::bytes::ByteStorage as Store;
use crate::store::format;

/// Decoded chunks kept per string array.
const CACHED_CHUNKS: usize = 8;

/// One string label's array, opened.
pub(crate) struct StringArray {
    pub name: String,
    pub rel: String,
    pub level: Level,
    array: Array<Store>,
    pub(super) chunk_rows: u64,
    cache: Mutex<lru::LruCache<u64, Arc<Vec<String>>>>,
}

impl StringArray {
    /// Opens the listed string labels; each must have a row per sample
    /// (system) or per atom (atom).
    pub(super) fn open_all(
        src: &ChunkSource,
        root: &format::RootAttrs,
        num_samples: u64,
        total_atoms: u64,
    ) -> Result<Vec<StringArray>> {
        let mut out = Vec::new();
        for (name, level) in format::string_fields(&src.location, root)? {
            let rel = format::string_path(&name);
            let array = crate::store::arrays::open_array(&src.location, &src.store, &rel)?;
            let is_string =
                matches!(array.metadata(), zarrs::array::ArrayMetadata::V3(m) if m.data_type.name() == "string");
            if !is_string || array.dimensionality() != 1 {
                return Err(Error::inconsistent(
                    &src.location,
                    &rel,
                    "a string label must be a 1-d Zarr `string` array",
                ));
            }
            let need = if level == Level::Atom { total_atoms } else { num_samples };
            let len = array.shape()[0];
            if len < need {
                return Err(Error::inconsistent(&src.location, &rel, format!("{len} rows, the pointers need {need}")));
            }
            let chunk_rows = array
                .chunk_shape(&[0])
                .ok()
                .and_then(|s| s.first().map(|n| n.get()))
                .ok_or_else(|| Error::format(&src.location, format!("{rel}: cannot determine the chunk shape")))?;
            let cap = NonZeroUsize::new(CACHED_CHUNKS).unwrap_or(NonZeroUsize::MIN);
            out.push(StringArray { name, rel, level, array, chunk_rows, cache: Mutex::new(lru::LruCache::new(cap)) });
        }
        Ok(out)
    }

    /// Chunk `c` of the label, decoded (or held).
    pub(super) fn chunk(&self, src: &ChunkSource, c: u64) -> Result<Arc<Vec<String>>> {
        // A poisoned lock still holds a valid cache.
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.get(&c) {
            return Ok(hit.clone());
        }
        let v: Vec<String> = self.array.retrieve_chunk_opt(&[c], &src.codec_options).map_err(|e| Error::Chunk {
            store: src.location.clone(),
            array: self.rel.clone(),
            chunk: c,
            reason: e.to_string(),
        })?;
        let v = Arc::new(v);
        cache.put(c, v.clone());
        Ok(v)
    }
}
