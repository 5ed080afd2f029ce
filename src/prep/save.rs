//! Saving splits and statistics in the root attributes
//! ([`crate::prep::saved`]): one atomic, durable rewrite of the root
//! `zarr.json`, the writer's commit path.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::prep::saved::{self, SavedSplit, SavedStats, StatsScope, StoreMark};
use crate::prep::split::Split;
use crate::prep::stats::DatasetStats;
use crate::store::AtomicDataZarrReader;
use crate::store::AtomicDataZarrWriter;
use crate::store::format;

impl AtomicDataZarrWriter {
    /// Saves `split` (computed over `reader`, a reader of this store) as
    /// `name`, replacing a split of that name: its rule, the store's counts
    /// now and what each part held. Refused if the store changed since
    /// `reader` last looked (refresh it and compute again). See
    /// [`Split::from_store`] for reading it back.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `name` is not a valid name; [`Error::Stale`]
    /// when the store changed since `reader` looked; [`Error::Format`] when its
    /// `atomzarr` attribute is not an object; [`Error::Io`] when writing fails.
    pub fn save_split(&mut self, name: &str, split: &Split, reader: &AtomicDataZarrReader) -> Result<()> {
        format::check_field_name(name).map_err(|r| Error::invalid(format!("split name {name}"), r))?;
        let mark = StoreMark::of(reader)?;
        let record = SavedSplit { rule: split.rule().clone(), saved_at: mark, parts: split.summary().to_vec() };
        self.update_ours(&mark, |path, ours| {
            let splits = ours.entry("splits").or_insert_with(|| Value::Object(Default::default()));
            let map = splits
                .as_object_mut()
                .ok_or_else(|| Error::format(path, format!("{}.splits is not an object", saved::ATTR)))?;
            map.insert(name.to_string(), saved::to_value(path, &record)?);
            Ok(())
        })
    }

    /// Saves `stats`, computed over `reader` (a reader of this store), on
    /// the part `split.1` of the split saved as `split.0` (`None`: every
    /// sample), replacing saved statistics. Refused if the store changed
    /// since `reader` last looked. Read back with
    /// [`SavedStats::from_store`](crate::prep::saved::SavedStats::from_store).
    ///
    /// # Errors
    /// [`Error::NotSaved`] when no split is saved as `split.0`;
    /// [`Error::Stale`] when the store changed since `reader` looked; [`Error::Format`] when the saved records cannot be
    /// read or written; [`Error::Io`] when writing fails.
    pub fn save_stats(
        &mut self,
        stats: &DatasetStats,
        split: Option<(&str, &str)>,
        reader: &AtomicDataZarrReader,
    ) -> Result<()> {
        let mark = StoreMark::of(reader)?;
        let scope = match split {
            None => None,
            Some((name, part)) => {
                let rule = saved::saved_splits(reader)?
                    .remove(name)
                    .ok_or_else(|| Error::NotSaved {
                        store: reader.location().clone(),
                        reason: format!("no split saved as {name}"),
                    })?
                    .rule;
                Some(StatsScope { name: name.to_string(), part: part.to_string(), rule })
            }
        };
        let record = SavedStats { stats: stats.clone(), split: scope, saved_at: mark };
        self.update_ours(&mark, |path, ours| {
            ours.insert("stats".into(), saved::to_value(path, &record)?);
            Ok(())
        })
    }

    /// Rewrites the root attributes with `edit` applied to their `atomzarr`
    /// object, if the store is still where `mark` saw it.
    fn update_ours(
        &mut self,
        mark: &StoreMark,
        edit: impl FnOnce(&std::path::Path, &mut serde_json::Map<String, Value>) -> Result<()>,
    ) -> Result<()> {
        self.update_root(|path, root| {
            saved::check_unchanged(path, root, mark)?;
            edit(path, saved::ours_mut(path, &mut root.extra)?)
        })
    }
}
