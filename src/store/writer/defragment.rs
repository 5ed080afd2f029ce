//! `defragment`: the store rewritten without its deleted samples, beside
//! the original, then swapped in by an exchange or two renames.

use std::collections::BTreeMap;

use super::{AtomicDataZarrWriter, sync_parent};
use crate::data::AtomicData;
use crate::error::{Error, Result};
use crate::source::Reader;
use crate::store::ZarrWriteConfig;
use crate::store::arrays;
use crate::store::format::{self, FieldInfo, RootAttrs, StoreGroup};
use crate::store::reader::{AtomicDataZarrReader, ReaderOptions};

impl AtomicDataZarrWriter {
    /// Rewrites the store without its deleted samples (every mask reset).
    /// `config` replaces the write configuration; `None` keeps each array's
    /// current codec, chunk and shard. The new store is written beside the old
    /// one and swapped in by renames, so an interruption loses nothing (see
    /// [`AtomicDataZarrWriter::open`] for the one state that needs a step back).
    ///
    /// # Errors
    /// [`Error::Config`] when `config` does not validate; the errors of reading
    /// the store (as [`AtomicDataZarrReader::open`]); [`Error::Zarr`] or
    /// [`Error::Io`] naming the path when writing or swapping the stores fails.
    pub fn defragment(&mut self, config: Option<ZarrWriteConfig>) -> Result<()> {
        // Every array is replaced.
        self.tails.clear();
        let root = format::read_root(&self.path)?;
        let replaces_config = config.is_some();
        let config = match config {
            Some(c) => c,
            None => self.current_config(&root)?,
        };
        let reader = AtomicDataZarrReader::open_opt(&self.path, ReaderOptions::default().with_cache_bytes(0))?;
        let tmp = format::sibling(&self.path, format::DEFRAG_TMP);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        let mut out = AtomicDataZarrWriter::create(&tmp, config.clone())?;
        let groups: BTreeMap<String, StoreGroup> = root.fields.iter().map(|(k, v)| (k.clone(), v.group)).collect();
        let len = reader.len();
        let bar = self.bar(len as u64, "defragment");
        const STEP: usize = 4096;
        for start in (0..len).step_by(STEP) {
            let idx: Vec<usize> = (start..(start + STEP).min(len)).collect();
            let samples = reader.load_many(&idx)?;
            out.append_grouped(&samples, &groups)?;
            bar.inc(idx.len() as u64);
        }
        bar.finish_and_clear();
        // Keep the root's other attributes.
        let mut new_root = format::read_root(&tmp)?;
        new_root.extra = root.extra.clone();
        if len < root.num_samples {
            // Rows renumbered: records keyed by physical index are out of date.
            crate::store::format::note_renumbered(&mut new_root.extra);
        }
        if len == 0 {
            // No samples: carry the schema over anyway so appends still check it.
            for (name, info) in &root.fields {
                let rel = format::field_path(info.group, name);
                let a = self.open_array(&rel)?;
                let dtype = arrays::array_dtype(&self.location(), &rel, &a)?;
                let mut shape = a.shape().to_vec();
                shape[0] = 0;
                arrays::create_array(&tmp, &out.store, &rel, dtype, shape, &config.resolve(info.group, name), None)?;
                new_root.fields.insert(name.clone(), info.clone());
            }
        }
        format::write_root(&tmp, &new_root)?;
        // Swap in the new store. Where the filesystem can exchange two
        // directories atomically, the store path is never missing and the
        // old store ends up at `tmp`; elsewhere two renames leave a moment
        // with only `<store>.defrag-old`, which readers report and
        // `open` undoes. Both stores' locks are held throughout (this
        // writer's and the copy's writer's), so whichever folder a second
        // writer finds at the store path, its lock is taken; this writer
        // keeps the new one's.
        let old = if crate::store::durable::exchange(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))? {
            tmp
        } else {
            let old = format::sibling(&self.path, format::DEFRAG_OLD);
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
            }
            std::fs::rename(&self.path, &old).map_err(|e| Error::io(&self.path, e))?;
            std::fs::rename(&tmp, &self.path).map_err(|e| Error::io(&tmp, e))?;
            sync_parent(&self.path)?;
            old
        };
        std::mem::swap(&mut self.lock, &mut out.lock);
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        drop(out);
        self.store = arrays::open_store(&self.path)?;
        if replaces_config {
            // "config replaces the write configuration": arrays created from
            // now on (add_custom) follow it too.
            self.config = config;
        }
        Ok(())
    }

    /// As `append`, placing fields in the given groups on a first write.
    fn append_grouped(&mut self, samples: &[AtomicData], groups: &BTreeMap<String, StoreGroup>) -> Result<()> {
        let root = format::read_root(&self.path)?;
        if root.fields.is_empty() && !samples.is_empty() {
            // Pre-create the arrays in their original groups, then append.
            let mut attrs = root.clone();
            for (name, f) in &samples[0].fields {
                let group = groups.get(name).copied().unwrap_or_else(|| format::group_for_new_field(name));
                let rel = format::field_path(group, name);
                let mut shape = vec![0u64];
                shape.extend(f.trailing_shape().iter().map(|&d| d as u64));
                arrays::create_array(
                    &self.path,
                    &self.store,
                    &rel,
                    f.dtype(),
                    shape,
                    &self.config.resolve(group, name),
                    None,
                )?;
                attrs.fields.insert(name.clone(), FieldInfo { group, level: f.level });
            }
            format::write_root(&self.path, &attrs)?;
        }
        self.append_checked(samples, false)
    }

    /// The configuration that reproduces every array's current settings.
    fn current_config(&self, root: &RootAttrs) -> Result<ZarrWriteConfig> {
        // Not layered over `self.config`: an inferred "no shard_size" means
        // unsharded, and must not inherit the writer's group default.
        let mut c = ZarrWriteConfig::default();
        for (rel, _) in format::META_ARRAYS {
            let a = self.open_array(rel)?;
            c.field_overrides.insert(format::meta_name(rel).to_string(), arrays::infer_config(&a));
        }
        for (name, info) in &root.fields {
            let a = self.open_array(&format::field_path(info.group, name))?;
            c.field_overrides.insert(name.clone(), arrays::infer_config(&a));
        }
        Ok(c)
    }
}
