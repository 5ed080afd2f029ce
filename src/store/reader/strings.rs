//! String labels on the read side: the listed `strings/` arrays opened
//! with the state, their rows copied into samples and collated batches.
//!
//! Labels are small next to the numeric fields, so this path stays simple:
//! whole chunks decoded by zarrs (checksums checked), the last few kept per
//! array in a small LRU (a batch's samples share chunks); a refresh drops
//! them with the state.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use zarrs::array::Array;

use super::AtomicDataZarrReader;
use super::plan::BatchRows;
use crate::data::chunks_of;
use crate::data::{Level, StringField};
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
    chunk_rows: u64,
    cache: Mutex<lru::LruCache<u64, Arc<Vec<String>>>>,
}

impl AtomicDataZarrReader {
    /// Opens the listed string labels; each must have a row per sample
    /// (system) or per atom (atom).
    pub(super) fn open_strings(
        &self,
        root: &format::RootAttrs,
        num_samples: u64,
        total_atoms: u64,
    ) -> Result<Vec<StringArray>> {
        let mut out = Vec::new();
        for (name, level) in format::string_fields(&self.location, root)? {
            let rel = format::string_path(&name);
            let array = crate::store::arrays::open_array(&self.location, &self.store, &rel)?;
            let is_string =
                matches!(array.metadata(), zarrs::array::ArrayMetadata::V3(m) if m.data_type.name() == "string");
            if !is_string || array.dimensionality() != 1 {
                return Err(Error::inconsistent(
                    &self.location,
                    &rel,
                    "a string label must be a 1-d Zarr `string` array",
                ));
            }
            let need = if level == Level::Atom { total_atoms } else { num_samples };
            let len = array.shape()[0];
            if len < need {
                return Err(Error::inconsistent(&self.location, &rel, format!("{len} rows, the pointers need {need}")));
            }
            let chunk_rows = array
                .chunk_shape(&[0])
                .ok()
                .and_then(|s| s.first().map(|n| n.get()))
                .ok_or_else(|| Error::format(&self.location, format!("{rel}: cannot determine the chunk shape")))?;
            let cap = NonZeroUsize::new(CACHED_CHUNKS).unwrap_or(NonZeroUsize::MIN);
            out.push(StringArray { name, rel, level, array, chunk_rows, cache: Mutex::new(lru::LruCache::new(cap)) });
        }
        Ok(out)
    }

    fn string_chunk(&self, s: &StringArray, c: u64) -> Result<Arc<Vec<String>>> {
        // A poisoned lock still holds a valid cache.
        let mut cache = s.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.get(&c) {
            return Ok(hit.clone());
        }
        let v: Vec<String> = s.array.retrieve_chunk_opt(&[c], &self.codec_options).map_err(|e| Error::Chunk {
            store: self.location.clone(),
            array: s.rel.clone(),
            chunk: c,
            reason: e.to_string(),
        })?;
        let v = Arc::new(v);
        cache.put(c, v.clone());
        Ok(v)
    }

    /// Appends the string rows of the samples of `samples` (in order) to
    /// `out`, one entry per label; `out` is cleared first.
    pub(super) fn fill_strings(
        &self,
        arrays: &[StringArray],
        samples: BatchRows<'_>,
        out: &mut BTreeMap<String, StringField>,
    ) -> Result<()> {
        out.clear();
        for s in arrays {
            let mut values = Vec::new();
            for k in 0..samples.len() {
                let rows = samples.rows(s.level, k);
                for c in chunks_of(&rows, s.chunk_rows) {
                    let chunk = self.string_chunk(s, c)?;
                    let lo = (rows.start.max(c * s.chunk_rows) - c * s.chunk_rows) as usize;
                    let hi = (rows.end.min((c + 1) * s.chunk_rows) - c * s.chunk_rows) as usize;
                    let part = chunk.get(lo..hi).ok_or_else(|| Error::Chunk {
                        store: self.location.clone(),
                        array: s.rel.clone(),
                        chunk: c,
                        reason: format!("decoded chunk of {} rows, rows {lo}..{hi} wanted", chunk.len()),
                    })?;
                    values.extend(part.iter().cloned());
                }
            }
            out.insert(s.name.clone(), StringField { level: s.level, values });
        }
        Ok(())
    }
}
