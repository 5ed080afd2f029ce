//! The mixture read: two or more stores behind one
//! [`MultiReader`], read through the loader with a multi-dataset sampler,
//! with what each store gave per pass: samples, decoded bytes, how many
//! of its samples each batch drew and how spread over the store they were.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::memory::{minor_faults, peak_rss, reset_peak_rss};
use super::options::{ReadOptions, ReadOrder, ReadResult};
use super::read::{Tally, delivered_schema, field_bytes, open_reader, schema_sizes, widened};
use crate::error::Result;
use crate::pipeline::{DataLoader, Dataset};
use crate::progress::Progress;
use crate::sampler::{MultiDatasetBatchSampler, MultiDatasetSampler};
use crate::source::{DecodeCounters, MultiReader, Reader, ReaderExt};
use crate::store::AtomicDataZarrReader;
use crate::{Location, MultiReaderOptions, ReaderOptions};

/// The fields a read delivers: level, dtype and trailing shape by name.
type Schema = std::collections::BTreeMap<String, (crate::data::Level, crate::data::DType, Vec<usize>)>;

/// Windows a store is cut into for [`ChildReport::mixing`]: 0.1% of it each.
const WINDOWS: usize = 1000;

/// What one store of a mixture gave in one pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChildReport {
    /// The store.
    pub store: Location,
    /// Its active samples.
    pub systems: usize,
    /// Samples the pass drew from it (repeats counted).
    pub samples_read: usize,
    /// What the sampler draws from it in an epoch: its
    /// [`counts`](crate::sampler::MultiDatasetSampler::counts), or
    /// `samples_per_dataset * num_batches` for the batch sampler. Only for
    /// one rank reading whole epochs; `None` otherwise.
    pub expected_samples: Option<usize>,
    /// Its samples in every batch of the batch sampler (`None` for the
    /// sample-by-sample mixture).
    pub samples_per_batch: Option<usize>,
    /// Fewest of its samples in one batch of the pass.
    pub per_batch_min: usize,
    /// Most of its samples in one batch of the pass.
    pub per_batch_max: usize,
    /// Bytes its reader decoded during the pass.
    pub decoded_bytes: u64,
    /// How spread over the store each batch's draw from it is: per batch,
    /// the distinct windows of 0.1% of the store (local index * 1000 / its
    /// length) among the batch's samples from it, over those samples;
    /// the mean over the batches that drew from it. 1.0: every sample from
    /// another window (a uniform draw is close to 1); reading in order is
    /// close to 0. `None` when no batch drew from it.
    pub mixing: Option<f64>,
    /// Blocks in the pool the loader draws it through (shuffled, a store
    /// larger than its share of the cache: see
    /// [`DataLoaderBuilder::with_sampler`](crate::DataLoaderBuilder::with_sampler));
    /// `None`: a permutation, or in order.
    pub pool_blocks: Option<usize>,
}

/// What a mixture's pass gave, beyond a single store's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixReport {
    /// `multi-dataset` ([`MultiDatasetSampler`]) or `multi-dataset-batch`
    /// ([`MultiDatasetBatchSampler`]).
    pub sampler: &'static str,
    /// Whether the sampler draws with replacement.
    pub replacement: bool,
    /// Per store, in the order given.
    pub children: Vec<ChildReport>,
    /// Whether every store gave what the sampler promises: its per-epoch
    /// count (one rank, whole epochs) and, for the batch sampler, its count
    /// in every batch; `None` when neither applies (several ranks reading a
    /// sample-by-sample mixture, or a `max_samples` prefix of one).
    pub counts_ok: Option<bool>,
}

impl MixReport {
    /// One line per store whose samples differ from what the sampler
    /// promises (empty when every check passed or none applied).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.children {
            if let Some(e) = c.expected_samples.filter(|&e| e != c.samples_read) {
                out.push(format!("{}: {} samples drawn, the sampler's counts say {e}", c.store, c.samples_read));
            }
            if let Some(k) = c.samples_per_batch.filter(|&k| c.per_batch_min != k || c.per_batch_max != k) {
                out.push(format!(
                    "{}: {}-{} samples in a batch, the batch sampler says {k} in every batch",
                    c.store, c.per_batch_min, c.per_batch_max
                ));
            }
        }
        out
    }
}

/// The mixture's sampler, as built from [`MixOptions`](super::MixOptions).
#[derive(Clone)]
enum MixSampler {
    Samples(MultiDatasetSampler),
    Batches(MultiDatasetBatchSampler),
}

impl MixSampler {
    /// The sampler `opts` asks for over children of these lengths (no
    /// rank: the loader takes the ranks).
    fn new(lens: Vec<usize>, opts: &ReadOptions) -> Result<MixSampler> {
        let m = &opts.mix;
        let shuffle = opts.order != ReadOrder::Sequential;
        Ok(match &m.samples_per_dataset {
            Some(counts) => {
                let mut b = MultiDatasetBatchSampler::for_lengths(lens, opts.batch_size)
                    .with_samples_per_dataset(counts.clone())
                    .with_replacement(m.replacement)
                    .with_shuffle(shuffle)
                    .with_seed(opts.seed);
                if let Some(p) = m.epoch_policy {
                    b = b.with_epoch_policy(p);
                }
                if let Some(n) = m.num_batches {
                    b = b.with_num_batches(n);
                }
                MixSampler::Batches(b.build()?)
            }
            None => {
                let mut b = MultiDatasetSampler::for_lengths(lens)
                    .with_replacement(m.replacement)
                    .with_shuffle(shuffle)
                    .with_seed(opts.seed);
                if let Some(w) = &m.weights {
                    b = b.with_weights(w.clone());
                }
                if let Some(t) = m.temperature {
                    b = b.with_temperature(t);
                }
                if let Some(n) = m.num_samples {
                    b = b.with_num_samples(n);
                }
                MixSampler::Samples(b.build()?)
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            MixSampler::Samples(_) => "multi-dataset",
            MixSampler::Batches(_) => "multi-dataset-batch",
        }
    }

    /// Per child: samples per epoch (one rank), and samples per batch.
    fn promises(&self) -> (Vec<usize>, Option<&[usize]>) {
        match self {
            MixSampler::Samples(s) => (s.counts().to_vec(), None),
            MixSampler::Batches(s) => {
                (s.samples_per_dataset().iter().map(|c| c * s.num_batches()).collect(), Some(s.samples_per_dataset()))
            }
        }
    }
}

/// Per child of a mixture, what the delivered batches drew from it.
struct MixTally {
    offsets: Vec<usize>,
    lens: Vec<usize>,
    /// Batches delivered.
    batches: usize,
    counts: Vec<usize>,
    /// This batch's samples of each child, and the windows they fell in.
    in_batch: Vec<usize>,
    windows: Vec<[u64; WINDOWS.div_ceil(64)]>,
    mixing_sum: Vec<f64>,
    mixing_batches: Vec<usize>,
    per_batch_min: Vec<usize>,
    per_batch_max: Vec<usize>,
}

impl MixTally {
    fn new(offsets: Vec<usize>) -> MixTally {
        let lens: Vec<usize> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let n = lens.len();
        MixTally {
            offsets,
            lens,
            batches: 0,
            counts: vec![0; n],
            in_batch: vec![0; n],
            windows: vec![[0; WINDOWS.div_ceil(64)]; n],
            mixing_sum: vec![0.0; n],
            mixing_batches: vec![0; n],
            per_batch_min: vec![usize::MAX; n],
            per_batch_max: vec![0; n],
        }
    }

    /// Adds one delivered batch (global indices); nothing is allocated.
    fn batch(&mut self, indices: &[usize]) {
        self.batches += 1;
        for &g in indices {
            // The last child starting at or before `g` (empty children share
            // their offset with the next one).
            let d = self.offsets.partition_point(|&o| o <= g).saturating_sub(1).min(self.lens.len() - 1);
            let len = self.lens[d].max(1);
            let w = ((g - self.offsets[d]) * WINDOWS / len).min(WINDOWS - 1);
            self.windows[d][w / 64] |= 1 << (w % 64);
            self.in_batch[d] += 1;
        }
        for d in 0..self.lens.len() {
            let k = std::mem::take(&mut self.in_batch[d]);
            self.per_batch_min[d] = self.per_batch_min[d].min(k);
            self.per_batch_max[d] = self.per_batch_max[d].max(k);
            if k > 0 {
                let distinct: u32 = self.windows[d].iter().map(|x| x.count_ones()).sum();
                self.mixing_sum[d] += f64::from(distinct) / k as f64;
                self.mixing_batches[d] += 1;
                self.windows[d] = [0; WINDOWS.div_ceil(64)];
            }
            self.counts[d] += k;
        }
    }
}

/// The children of a mixture, opened, and the mixture over them.
struct Opened {
    readers: Vec<Arc<AtomicDataZarrReader>>,
    multi: Arc<MultiReader>,
}

/// Opens every store with `opts`' reader settings and puts them behind one
/// [`MultiReader`] whose children share `opts.cache_bytes` (each child's
/// own budget is replaced by its share), its fields the union of theirs.
fn open_all(stores: &[Location], opts: &ReadOptions) -> Result<Opened> {
    let readers = stores
        .iter()
        .map(|s| {
            open_reader(s, ReaderOptions::default().with_cache_bytes(opts.cache_bytes), &opts.remote).map(Arc::new)
        })
        .collect::<Result<Vec<_>>>()?;
    let children: Vec<Arc<dyn Reader>> = readers.iter().map(|r| r.clone() as Arc<dyn Reader>).collect();
    // Stores with different labels mix as their union (absent values and
    // `<name>_present` flags); stores with the same fields pay nothing for it.
    let options = MultiReaderOptions::default().with_cache_bytes(opts.cache_bytes).with_output_strict(false);
    Ok(Opened { readers, multi: Arc::new(MultiReader::with_options(children, options)?) })
}

/// Each child's decode counters, through the mixture's children.
fn child_decodes(multi: &MultiReader) -> Vec<DecodeCounters> {
    multi.children().iter().map(|c| c.chunked().map(|ch| ch.decode_counters()).unwrap_or_default()).collect()
}

/// Reads the mixture of `stores` through the loader once per epoch; one
/// result per epoch, with the mixture's own report. The loader is built as
/// a training loop builds it: `Dataset::new(multi)` with validation
/// skipped, the sampler (`with_sampler` with `batch_size`, or
/// `with_batch_sampler`), `with_seed`, `with_prefetch_factor`, ranks through
/// `with_rank`; every pass reads its epoch 0 with [`DataLoader::iter_host`]
/// and is checked against the loader's own plan of it
/// ([`DataLoader::planned_batches`], kept as a hash: the check holds no
/// copy of the order). The first pass's time includes opening the stores
/// and building the loader; its peak resident memory starts from what is
/// resident once they are (the plan made for the check freed again).
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) for invalid `opts` (as [`ReadOptions::validate_for`])
/// or a sampler that cannot be built; the errors of opening the stores,
/// of [`MultiReader::with_options`] (stores whose fields cannot be
/// mixed: a field of another element type), of
/// building the loader and of reading.
pub fn time_mixture(stores: &[Location], opts: &ReadOptions) -> Result<Vec<(ReadResult, MixReport)>> {
    opts.validate_for(stores.len())?;
    reset_peak_rss();
    let mut faults = minor_faults();
    let t0 = Instant::now();
    let Opened { readers, multi } = open_all(stores, opts)?;
    let sampler = MixSampler::new(multi.child_lens(), opts)?;
    let loader = mixture_loader(&multi, &sampler, opts)?;
    let open_time = t0.elapsed();
    // Untimed: what the loader must deliver, to check it.
    let before_plan = minor_faults();
    let plan = planned_order(&loader, opts.max_samples);
    let plan_faults = before_plan.zip(minor_faults()).map_or(0, |(a, b)| b.saturating_sub(a));
    // The pass's peak from here: the stores open, the loader built, the
    // plan checked against (the benchmark's, not the loader's) freed.
    reset_peak_rss();
    let pools = loader.state().child_pool_blocks().map(<[Option<usize>]>::to_vec).unwrap_or_default();
    let (epoch_counts, batch_counts) = sampler.promises();
    let expected = (opts.world_size == 1 && plan.whole).then_some(epoch_counts);
    // Delivered bytes are counted in the first store's dtypes (a strict
    // MultiReader's stores share their fields).
    let schema = delivered_schema(&readers[0], opts);
    let io_of = || readers.iter().map(|r| r.io_stats()).fold((0, 0), |(q, b), s| (q + s.requests, b + s.bytes));
    let cache_of = || readers.iter().map(|r| r.cache_stats()).fold((0, 0), |(h, m), s| (h + s.hits, m + s.misses));
    let mut io = io_of();
    let mut out = Vec::with_capacity(opts.epochs);
    for epoch in 0..opts.epochs {
        let pb = super::read::start_epoch(opts, epoch, plan.len as u64, "mixture", &mut faults);
        let cache_before = cache_of();
        let decode_before = child_decodes(&multi);
        let t = Instant::now();
        let (tally, mix, order_ok) = read_pass(&loader, &multi, &plan, opts, &schema, &pb)?;
        let (read_time, first_batch_time) = super::read::epoch_times(t, tally.first, epoch, open_time);
        pb.finish_and_clear();
        let decodes: Vec<DecodeCounters> =
            child_decodes(&multi).iter().zip(&decode_before).map(|(a, b)| a.since(b)).collect();
        let (hits, misses) = cache_of();
        let io_now = io_of();
        let result = ReadResult {
            read_time,
            samples_read: tally.read,
            unique_samples: tally.unique,
            order_ok,
            read_bytes: tally.bytes,
            cache_hits: hits - cache_before.0,
            cache_misses: misses - cache_before.1,
            content_checksum: tally.checksum,
            decode: decodes.iter().copied().sum(),
            peak_rss: peak_rss(),
            minor_faults: faults
                .zip(minor_faults())
                .map(|(a, b)| b.saturating_sub(a).saturating_sub(if epoch == 0 { plan_faults } else { 0 })),
            requests: io_now.0 - io.0,
            fetched_bytes: io_now.1 - io.1,
            first_batch_time,
            pool_blocks: None,
        };
        io = io_now;
        let promised = Promised { epoch: expected.as_deref(), batch: batch_counts, pools: &pools };
        let report = mix_report(stores, &sampler, opts, &mix, &decodes, promised);
        out.push((result, report));
    }
    Ok(out)
}

/// One pass: the loader's epoch 0 through [`DataLoader::iter_host`] (up to
/// `plan.len` samples), tallied; with whether it delivered the plan.
fn read_pass(
    loader: &DataLoader<MultiReader>,
    multi: &MultiReader,
    plan: &Plan,
    opts: &ReadOptions,
    schema: &Schema,
    pb: &Progress,
) -> Result<(Tally, MixTally, bool)> {
    let sizes = schema_sizes(schema);
    let mut tally = Tally::new(multi.len(), opts.checksum);
    let mut mix = MixTally::new(multi.offsets());
    loader.set_epoch(0);
    let (mut k, mut order_hash) = (0, ORDER_SEED);
    for batch in loader.iter_host() {
        let b = batch?;
        for &i in &b.indices {
            tally.sample(i, i);
            order_hash = order_step(order_hash, i);
            k += 1;
        }
        mix.batch(&b.indices);
        tally.bytes += b.fields.iter().map(|(name, f)| field_bytes(&sizes, name, f.data.len())).sum::<u64>();
        if opts.checksum {
            tally.hash(&widened(&b, schema)?.to_samples()?);
        }
        pb.inc(b.num_graphs() as u64);
        // A timed prefix (`max_samples`) of the loader's epoch.
        if k >= plan.len {
            break;
        }
    }
    let order_ok = tally.read == plan.len && order_hash == plan.hash;
    Ok((tally, mix, order_ok))
}

/// What the loader plans to deliver, kept small: a pass is checked
/// against it without holding the order (8 bytes a sample) beside the
/// loader's own.
struct Plan {
    /// Samples (with `max_samples`, of the whole batches that reach it).
    len: usize,
    /// [`order_step`] over them, in order.
    hash: u64,
    /// Whether that is the whole epoch.
    whole: bool,
}

const ORDER_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One index into an order-sensitive hash (FNV-1a's step over the index).
#[inline]
fn order_step(h: u64, i: usize) -> u64 {
    (h ^ i as u64).wrapping_mul(0x100_0000_01b3)
}

/// The plan of `loader`'s next epoch ([`DataLoader::planned_batches`]).
fn planned_order(loader: &DataLoader<MultiReader>, max_samples: Option<usize>) -> Plan {
    let planned = loader.planned_batches();
    let total: usize = planned.iter().map(Vec::len).sum();
    let mut plan = Plan { len: 0, hash: ORDER_SEED, whole: false };
    for b in &planned {
        if max_samples.is_some_and(|m| plan.len >= m) {
            break;
        }
        plan.len += b.len();
        plan.hash = b.iter().fold(plan.hash, |h, &i| order_step(h, i));
    }
    plan.whole = plan.len == total;
    plan
}

/// The loader a training loop builds over the mixture: validation skipped,
/// the sampler (with the batch size) or the batch sampler, the seed, the
/// prefetch factor, the ranks through the loader's `with_rank`.
fn mixture_loader(
    multi: &Arc<MultiReader>,
    sampler: &MixSampler,
    opts: &ReadOptions,
) -> Result<DataLoader<MultiReader>> {
    let mut ds = Dataset::from_arc(multi.clone()).with_skip_validation(true);
    if let Some(c) = opts.cutoff {
        ds = ds.with_cutoff(c)?;
    }
    let builder = DataLoader::builder(ds)
        .with_seed(opts.seed)
        .with_prefetch_factor(opts.prefetch())
        .with_pin_memory(opts.pin_memory)
        .with_rank(opts.rank, opts.world_size);
    let builder = match sampler {
        MixSampler::Samples(s) => builder.with_batch_size(opts.batch_size).with_sampler(s.clone()),
        MixSampler::Batches(s) => builder.with_batch_sampler(s.clone()),
    };
    builder.build(&burn::tensor::Device::flex())
}

/// What the sampler promises per store, and how the loader draws each.
struct Promised<'a> {
    /// Samples per epoch (one rank, whole epochs).
    epoch: Option<&'a [usize]>,
    /// Samples in every batch (the batch sampler).
    batch: Option<&'a [usize]>,
    /// Each store's block pool (`None`: a permutation or in order).
    pools: &'a [Option<usize>],
}

/// The mixture's report of one pass.
fn mix_report(
    stores: &[Location],
    sampler: &MixSampler,
    opts: &ReadOptions,
    mix: &MixTally,
    decodes: &[DecodeCounters],
    promised: Promised<'_>,
) -> MixReport {
    let Promised { epoch: expected, batch: per_batch, pools } = promised;
    let children: Vec<ChildReport> = (0..mix.lens.len())
        .map(|d| ChildReport {
            store: stores[d].clone(),
            systems: mix.lens[d],
            samples_read: mix.counts[d],
            expected_samples: expected.and_then(|e| e.get(d).copied()),
            samples_per_batch: per_batch.and_then(|c| c.get(d).copied()),
            per_batch_min: if mix.batches == 0 { 0 } else { mix.per_batch_min[d] },
            per_batch_max: mix.per_batch_max[d],
            decoded_bytes: decodes.get(d).map_or(0, |c| c.decoded_bytes),
            mixing: (mix.mixing_batches[d] > 0).then(|| mix.mixing_sum[d] / mix.mixing_batches[d] as f64),
            pool_blocks: pools.get(d).copied().flatten(),
        })
        .collect();
    let checked = expected.is_some() || per_batch.is_some();
    let mut report =
        MixReport { sampler: sampler.name(), replacement: opts.mix.replacement, children, counts_ok: None };
    if checked {
        report.counts_ok = Some(report.failures().is_empty());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixing_counts_distinct_windows_per_batch_and_store() {
        // Stores of 2,000 (windows of 2 samples) and 500 (one sample each).
        let mut t = MixTally::new(vec![0, 2000, 2500]);
        t.batch(&[0, 1, 2, 3, 2000, 2100]);
        t.batch(&[1999]);
        assert_eq!(t.batches, 2);
        assert_eq!(t.counts, [5, 2]);
        assert_eq!((t.per_batch_min.as_slice(), t.per_batch_max.as_slice()), ([1, 0].as_slice(), [4, 2].as_slice()));
        // Store 0: 2 windows for 4 samples, then 1 for 1; store 1: 2 for 2.
        assert_eq!(t.mixing_batches, [2, 1]);
        assert!((t.mixing_sum[0] / 2.0 - 0.75).abs() < 1e-12);
        assert!((t.mixing_sum[1] - 1.0).abs() < 1e-12);
        // An empty store between two others takes no sample.
        let mut t = MixTally::new(vec![0, 10, 10, 20]);
        t.batch(&[9, 10, 19]);
        assert_eq!(t.counts, [1, 0, 2]);
    }

    #[test]
    fn the_order_hash_sees_order_and_content() {
        let h = |v: &[usize]| v.iter().fold(ORDER_SEED, |h, &i| order_step(h, i));
        assert_ne!(h(&[1, 2, 3]), h(&[2, 1, 3]));
        assert_ne!(h(&[1, 2, 3]), h(&[1, 2, 4]));
        assert_ne!(h(&[1, 2]), h(&[1, 2, 0]));
    }

    #[test]
    fn failures_name_the_store_and_both_counts() {
        let child = |samples_read, expected, per_batch, (lo, hi)| ChildReport {
            store: Location::parse("a.zarr"),
            systems: 10,
            samples_read,
            expected_samples: expected,
            samples_per_batch: per_batch,
            per_batch_min: lo,
            per_batch_max: hi,
            decoded_bytes: 0,
            mixing: None,
            pool_blocks: None,
        };
        let report = |c| MixReport { sampler: "multi-dataset", replacement: true, children: vec![c], counts_ok: None };
        assert!(report(child(5, Some(5), None, (0, 5))).failures().is_empty());
        assert!(report(child(5, None, None, (0, 5))).failures().is_empty());
        let f = report(child(6, Some(5), None, (0, 5))).failures();
        assert_eq!(f, ["a.zarr: 6 samples drawn, the sampler's counts say 5"]);
        let f = report(child(8, Some(8), Some(4), (3, 5))).failures();
        assert_eq!(f, ["a.zarr: 3-5 samples in a batch, the batch sampler says 4 in every batch"]);
    }
}
