//! The reads a [`Dataset`](super::Dataset) makes: its settings
//! ([`ReadCtx`]), validation and per-sample transforms, neighbor lists at a
//! cutoff, collated transforms, and the [`ErrorPolicy`] for bad samples.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::data::AtomicData;
use crate::data::BatchBuffers;
use crate::data::{CollateOptions, CollatedBatch, collate_lists};
use crate::error::{Error, Result};
use crate::prep::transforms::SharedTransform;
use crate::source::{ReadPlan, Reader, ReaderExt, reread_neighbor_error};

/// What a [`Dataset`](crate::Dataset) (and a [`DataLoader`](crate::DataLoader) over it) does
/// with a sample whose *content* is bad: an out-of-range neighbor index
/// ([`Error::NeighborIndex`]) or a failed validation ([`Error::Validation`]),
/// see [`Error::is_sample_error`]. Any other error (I/O, a corrupt chunk, a
/// transform's own error) fails the read under either policy: it is not
/// about one sample, and skipping it could drop whole chunks unseen.
///
/// Under Burn's traits the policy decides too, and never ends Burn's epoch
/// early:
///
/// | | batch paths ([`Dataset::load_batches`](crate::Dataset::load_batches), the DataLoader) | Burn's `Dataset::get(i)` and `get_many` |
/// |---|---|---|
/// | `Fail` (default) | `Err` with the typed error (the loader's Burn iterator yields it as an `Err` item, Burn's `DatasetError` wrapping it) | `Err` wrapping the typed error |
/// | `Skip` | the sample is dropped from its batch (a batch left empty is not yielded by the DataLoader), logged (`log::warn!`) and counted ([`Dataset::skipped_samples`](crate::Dataset::skipped_samples), [`DataLoader::stats`](crate::DataLoader::stats)) | the next good sample after `i` (wrapping) in its place, logged and counted: Burn's epoch keeps its length, the bad sample's slot holds a duplicate |
///
/// `get(i)` with `i >= len()` is an `Err` wrapping [`Error::IndexOutOfRange`] under both.
/// [`Dataset::get_sample`](crate::Dataset::get_sample) and the Dataset's [`Reader`] sample reads
/// (`read`, `read_many`) return the error under both. Set `Skip` on the
/// Dataset the loader reads: a `Skip` Dataset used as a
/// [`MultiReader`](crate::MultiReader) child or loaded into an
/// [`InMemoryReader`](crate::InMemoryReader) returns fewer samples than
/// asked, which they report as an error.
///
/// ```
/// use atomzarr::ErrorPolicy;
/// assert_eq!(ErrorPolicy::default(), ErrorPolicy::Fail);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// A bad sample is an error (the default).
    #[default]
    Fail,
    /// A bad sample is skipped, logged and counted.
    Skip,
}

/// A per-sample transform, applied after validation.
pub type Transform = Arc<dyn Fn(AtomicData) -> Result<AtomicData> + Send + Sync>;

/// The settings of a [`Dataset`](crate::Dataset) that its reads use. The dataset holds one
/// and every read borrows it; the batch layout comes with each read
/// (`collate`), since the loader asks for its device's.
pub(super) struct ReadCtx<R: Reader> {
    pub(super) reader: Arc<R>,
    pub(super) cutoff: Option<f64>,
    pub(super) skip_validation: bool,
    pub(super) transforms: Vec<Transform>,
    pub(super) collated: Vec<SharedTransform>,
    pub(super) epoch: u64,
    pub(super) policy: ErrorPolicy,
    pub(super) skipped: Arc<AtomicU64>,
    /// Memory of the batches collated here from validated samples (the
    /// reader's own batch path recycles into the reader's).
    pub(super) buffers: Arc<BatchBuffers>,
}

impl<R: Reader> ReadCtx<R> {
    pub(super) fn check(&self, lists: &[Vec<usize>]) -> Result<()> {
        Error::check_indices(|| self.reader.name().to_string(), lists.iter().flatten(), self.reader.len())
    }

    pub(super) fn sample(&self, index: usize, mut s: AtomicData) -> Result<AtomicData> {
        if self.cutoff.is_some() {
            // Lists built at the cutoff replace the stored edges: they are
            // neither checked nor kept (`with_cutoff` refused other edge fields).
            s.fields.retain(|_, f| f.level != crate::data::Level::Edge);
        }
        if !self.skip_validation
            && let Err(reason) = s.validate()
        {
            // An index outside the sample is the batch paths' typed error
            // (with the append-bug diagnosis), whichever check meets it.
            return Err(match s.neighbor_report() {
                Some(r) => reread_neighbor_error(&*self.reader, index, r),
                None => Error::Validation { source_name: self.reader.name().to_string(), index, reason },
            });
        }
        self.transforms.iter().try_fold(s, |s, t| t(s))
    }

    /// As [`ReadCtx::sample`] for one sample outside a batch (Burn's
    /// `Dataset::get`): the range check a batch would do is done here, since
    /// Burn batches what `get` returns.
    pub(super) fn checked_sample(&self, index: usize) -> Result<AtomicData> {
        self.check(&[vec![index]])?;
        let s = self.sample(index, self.reader.load_sample(index)?)?;
        let s = self.collated_samples(&[index], vec![s])?.pop().ok_or_else(|| Error::Internal("no sample".into()))?;
        match s.neighbor_report() {
            Some(r) => Err(reread_neighbor_error(&*self.reader, index, r)),
            None => Ok(s),
        }
    }

    /// Whether batches come straight from the reader's collated path (no
    /// sample is validated or transformed one by one).
    pub(super) fn collated_path(&self) -> bool {
        self.skip_validation && self.transforms.is_empty()
    }

    /// The plan of `lists` laid out as `collate`: indices checked, then
    /// prepared ([`ReadCtx::prepare`]).
    pub(super) fn plan(&self, lists: Vec<Vec<usize>>, collate: CollateOptions) -> Result<ReadPlan> {
        let mut plan = ReadPlan::checked(self.reader.name(), self.reader.len(), lists, collate)?;
        self.prepare(&mut plan)?;
        Ok(plan)
    }

    /// On the collated path the reader's own preparation (stored edges left
    /// out when lists are built at a cutoff); otherwise nothing: the
    /// samples are read, validated and transformed at the read.
    pub(super) fn prepare(&self, plan: &mut ReadPlan) -> Result<()> {
        if !self.collated_path() {
            return Ok(());
        }
        // Lists built at a cutoff replace the stored edges: not decoded.
        plan.set_options(plan.options().with_skip_edges(self.cutoff.is_some()));
        match self.reader.capabilities().planned {
            Some(p) => p.prepare(plan),
            None => Ok(()),
        }
    }

    pub(super) fn load_batches(&self, lists: &[Vec<usize>], collate: CollateOptions) -> Result<Vec<CollatedBatch>> {
        self.read(self.plan(lists.to_vec(), collate)?)
    }

    /// Reads a plan of [`ReadCtx::plan`], under the error policy.
    pub(super) fn read(&self, plan: ReadPlan) -> Result<Vec<CollatedBatch>> {
        let retry = (self.policy == ErrorPolicy::Skip).then(|| (plan.batches().to_vec(), plan.options()));
        match (self.read_strict(plan), retry) {
            (Err(e), Some((lists, collate))) if e.is_sample_error() => self.load_skipping(&lists, e, collate),
            (r, _) => r,
        }
    }

    /// `Skip`: finds the bad samples (batch by batch, then sample by sample
    /// in the batches that fail; the failed read left its chunks in the
    /// cache), logs and counts them, and reads the lists without them.
    pub(super) fn load_skipping(
        &self,
        lists: &[Vec<usize>],
        first: Error,
        collate: CollateOptions,
    ) -> Result<Vec<CollatedBatch>> {
        let mut bad = std::collections::BTreeSet::new();
        for b in lists {
            match self.load_strict(std::slice::from_ref(b), collate) {
                Ok(_) => continue,
                Err(e) if e.is_sample_error() => {}
                Err(e) => return Err(e),
            }
            for &i in b {
                if bad.contains(&i) {
                    continue;
                }
                match self.load_strict(&[vec![i]], collate) {
                    Ok(_) => {}
                    Err(e) if e.is_sample_error() => {
                        log::warn!("atomzarr: skipping sample {i} of {}: {e}", self.reader.name());
                        bad.insert(i);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if bad.is_empty() {
            // The failure did not reproduce sample by sample: report it.
            return Err(first);
        }
        let kept: Vec<Vec<usize>> =
            lists.iter().map(|b| b.iter().copied().filter(|i| !bad.contains(i)).collect()).collect();
        let dropped = lists.iter().map(Vec::len).sum::<usize>() - kept.iter().map(Vec::len).sum::<usize>();
        self.skipped.fetch_add(dropped as u64, Ordering::Relaxed);
        self.load_strict(&kept, collate)
    }

    /// Samples read outside a batch, through the collated transforms: each
    /// collated alone, transformed, split back (nothing to do without them).
    pub(super) fn collated_samples(&self, indices: &[usize], samples: Vec<AtomicData>) -> Result<Vec<AtomicData>> {
        if self.collated.is_empty() && self.cutoff.is_none() {
            return Ok(samples);
        }
        samples
            .into_iter()
            .zip(indices)
            .map(|(s, &i)| {
                let mut b = CollatedBatch::from_samples(&[i], std::slice::from_ref(&s))?;
                // A sample keeps the stored int64 indices.
                self.apply_collated(&mut b, false)?;
                b.sample(0)
            })
            .collect()
    }

    /// Neighbor lists at the cutoff (indices int32 when `int32`), then the
    /// collated transforms.
    pub(super) fn apply_collated(&self, b: &mut CollatedBatch, int32: bool) -> Result<()> {
        self.build_lists(std::slice::from_mut(b), int32)?;
        self.transform(b)
    }

    /// Neighbor lists at the cutoff, if one is set, for every batch.
    pub(super) fn build_lists(&self, batches: &mut [CollatedBatch], int32: bool) -> Result<()> {
        let Some(cutoff) = self.cutoff else { return Ok(()) };
        let name = self.reader.name();
        crate::data::build_edges_all(batches, cutoff, int32, &|index, e| Error::Validation {
            source_name: name.to_string(),
            index,
            reason: format!("neighbor list at cutoff {cutoff} Å: {e}"),
        })
    }

    /// The collated transforms, in order.
    pub(super) fn transform(&self, b: &mut CollatedBatch) -> Result<()> {
        self.collated.iter().try_for_each(|t| t.apply(b, self.epoch))
    }

    pub(super) fn load_strict(&self, lists: &[Vec<usize>], collate: CollateOptions) -> Result<Vec<CollatedBatch>> {
        self.read_strict(self.plan(lists.to_vec(), collate)?)
    }

    pub(super) fn read_strict(&self, plan: ReadPlan) -> Result<Vec<CollatedBatch>> {
        let int32 = plan.options().narrow_int64();
        let mut out = self.read_untransformed(plan)?;
        self.build_lists(&mut out, int32)?;
        // Transforms see the batches one after another, in order.
        out.iter_mut().try_for_each(|b| self.transform(b))?;
        Ok(out)
    }

    pub(super) fn read_untransformed(&self, plan: ReadPlan) -> Result<Vec<CollatedBatch>> {
        let mut out = Vec::with_capacity(plan.batches().len());
        if self.collated_path() {
            self.reader.read_plan(plan, &mut out)?;
            return Ok(out);
        }
        plan.check_length(self.reader.name(), self.reader.len())?;
        let (lists, collate) = plan.into_parts();
        let flat: Vec<usize> = lists.iter().flatten().copied().collect();
        let samples = self.reader.load_many(&flat)?;
        let samples: Vec<AtomicData> =
            samples.into_iter().zip(&flat).map(|(s, &i)| self.sample(i, s)).collect::<Result<_>>()?;
        out.resize_with(lists.len(), || CollatedBatch {
            buffers: crate::data::BufferHome::of(&self.buffers),
            ..CollatedBatch::default()
        });
        // Transforms may rewrite neighbor lists: collating checks them again.
        collate_lists(&mut out, &lists, &samples, collate.narrow_int64(), self.reader.name(), &|i, r| {
            reread_neighbor_error(&*self.reader, i, r)
        })?;
        Ok(out)
    }
}

impl<R: Reader> Clone for ReadCtx<R> {
    fn clone(&self) -> Self {
        ReadCtx {
            reader: self.reader.clone(),
            cutoff: self.cutoff,
            skip_validation: self.skip_validation,
            transforms: self.transforms.clone(),
            collated: self.collated.clone(),
            epoch: self.epoch,
            policy: self.policy,
            skipped: self.skipped.clone(),
            buffers: self.buffers.clone(),
        }
    }
}
