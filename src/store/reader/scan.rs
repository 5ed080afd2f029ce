//! What a whole-store check (`store::verify`) reads through a reader: the
//! `meta/` arrays opened afresh (the pointer pages stop at their first
//! fault, a check must see past it), and single chunks of any array
//! decoded and checked (length, checksum) without the cache.

use super::chunk_memory::ChunkBuf;
use super::state::{field_array, open_measured};
use super::{AtomicDataZarrReader, FieldArray, State};
use crate::data::Level;
use crate::error::Result;
use crate::store::format;

impl AtomicDataZarrReader {
    /// The `meta/` arrays the store has, each opened and measured as the
    /// reader opens them, or the error opening it (the masks of atoms and
    /// edges are optional: absent ones are left out).
    pub(crate) fn open_meta_arrays(&self) -> Vec<(&'static str, Result<FieldArray>)> {
        let src = &self.chunks;
        let mut out = Vec::new();
        for (rel, _) in format::META_ARRAYS {
            let optional = rel == format::ATOMS_MASK || rel == format::EDGES_MASK;
            if optional && matches!(src.bytes.size(&format!("{rel}/zarr.json")), Ok(None)) {
                continue;
            }
            out.push((rel, open_measured(src, rel).map(|o| field_array(src, rel, rel, Level::System, o))));
        }
        out
    }

    /// Chunk `chunk` of `f` (an inner chunk for sharded arrays), decoded
    /// and checked as reads check it (its length, its crc32c), not cached.
    pub(crate) fn decode_chunk(&self, f: &FieldArray, chunk: u64) -> Result<ChunkBuf> {
        self.chunks.decode_raw(f, chunk)
    }

    /// The string labels of `st`: name, path, level and rows per chunk.
    pub(crate) fn string_arrays(st: &State) -> Vec<(String, String, Level, u64)> {
        st.strings.iter().map(|s| (s.name.clone(), s.rel.clone(), s.level, s.chunk_rows)).collect()
    }

    /// Chunk `chunk` of string label `index` of `st`, decoded (checksums
    /// checked): the number of strings in it.
    pub(crate) fn decode_string_chunk(&self, st: &State, index: usize, chunk: u64) -> Result<usize> {
        match st.strings.get(index) {
            Some(s) => s.chunk(&self.chunks, chunk).map(|v| v.len()),
            None => Err(crate::Error::Internal(format!("no string label {index}"))),
        }
    }
}
