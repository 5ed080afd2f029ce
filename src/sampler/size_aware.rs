//! [`SizeAwareSampler`]: batches bounded by atoms, edges and graphs instead
//! of a fixed sample count, bin-packed by atom count.

use crate::error::{Error, Result};
use crate::source::{Reader, ReaderExt};

use super::{BatchSampler, ChunkShuffleSampler, Sampler, epoch_rng, pool_blocks};

/// Options of [`SizeAwareSampler`]. At least one of the three limits must be
/// set; unset limits are unbounded.
///
/// ```
/// use atomzarr::sampler::SizeAwareOptions;
/// let o = SizeAwareOptions::default().with_max_atoms(512).with_max_batch_size(32).with_seed(3);
/// assert_eq!((o.max_atoms(), o.max_edges(), o.max_batch_size()), (Some(512), None, Some(32)));
/// assert!(o.shuffle());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeAwareOptions {
    /// Most atoms in one batch.
    pub(crate) max_atoms: Option<usize>,
    /// Most edges in one batch.
    pub(crate) max_edges: Option<usize>,
    /// Most samples (graphs) in one batch.
    pub(crate) max_batch_size: Option<usize>,
    /// Reshuffle samples and batch order every epoch (default on).
    pub(crate) shuffle: bool,
    /// Seed of the shuffle (default 0).
    pub(crate) seed: u64,
    /// Samples packed together (default 2048): the epoch's order is cut into
    /// runs of this many, each run is packed largest-first. Longer runs
    /// pack tighter but mix less randomly; the last batches of a run may be
    /// underfull.
    pub(crate) pack_size: usize,
}

impl Default for SizeAwareOptions {
    fn default() -> Self {
        SizeAwareOptions {
            max_atoms: None,
            max_edges: None,
            max_batch_size: None,
            shuffle: true,
            seed: 0,
            pack_size: 2048,
        }
    }
}

impl SizeAwareOptions {
    /// Sets `max_atoms`.
    pub fn with_max_atoms(mut self, n: usize) -> Self {
        self.max_atoms = Some(n);
        self
    }
    /// Sets `max_edges`.
    pub fn with_max_edges(mut self, n: usize) -> Self {
        self.max_edges = Some(n);
        self
    }
    /// Sets `max_batch_size`.
    pub fn with_max_batch_size(mut self, n: usize) -> Self {
        self.max_batch_size = Some(n);
        self
    }
    /// Sets `shuffle`.
    pub fn with_shuffle(mut self, yes: bool) -> Self {
        self.shuffle = yes;
        self
    }
    /// Sets `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Sets `pack_size`.
    pub fn with_pack_size(mut self, n: usize) -> Self {
        self.pack_size = n;
        self
    }
    /// Most atoms in one batch.
    pub fn max_atoms(&self) -> Option<usize> {
        self.max_atoms
    }
    /// Most edges in one batch.
    pub fn max_edges(&self) -> Option<usize> {
        self.max_edges
    }
    /// Most samples in one batch.
    pub fn max_batch_size(&self) -> Option<usize> {
        self.max_batch_size
    }
    /// Whether samples and batches are reshuffled every epoch.
    pub fn shuffle(&self) -> bool {
        self.shuffle
    }
    /// Seed of the shuffle.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Samples packed together.
    pub fn pack_size(&self) -> usize {
        self.pack_size
    }
}

/// A [`BatchSampler`] whose batches hold as many samples as fit under
/// `max_atoms`, `max_edges` and `max_batch_size`.
///
/// Each epoch the indices are shuffled (seeded by `(seed, epoch)`), cut into
/// runs of `pack_size`, and each run is packed first-fit decreasing by atom
/// count: samples, largest first, go into the first batch of the run they
/// fit, a new batch is opened when none does. Batch order is then shuffled.
/// Every sample is in exactly one batch per epoch.
///
/// **Oversize samples**: a sample that alone exceeds `max_atoms` or
/// `max_edges` is not an error; it gets a batch of its own (the only batches
/// that can exceed a limit). Check [`SizeAwareSampler::oversize`] if that
/// must not happen.
///
/// Sizes come from [`ReaderExt::sample_sizes`](crate::ReaderExt::sample_sizes) (pointer arrays only, no field
/// reads), taken once at construction.
///
/// [`BatchSampler::len`] is the batch count of epoch 0; other epochs may
/// differ by a few batches because packing depends on the shuffle.
/// [`BatchSampler::batches`] is always exact.
///
/// ```
/// use atomzarr::sampler::{BatchSampler, SizeAwareOptions, SizeAwareSampler};
/// let sizes = vec![(3, 6), (5, 2), (2, 2), (9, 1), (20, 4)];
/// let s = SizeAwareSampler::new(sizes.clone(), SizeAwareOptions::default().with_max_atoms(10).with_seed(1)).unwrap();
/// let batches = s.batches(0);
/// for b in &batches {
///     let atoms: usize = b.iter().map(|&i| sizes[i].0).sum();
///     assert!(atoms <= 10 || b == &vec![4]); // sample 4 (20 atoms) rides alone
/// }
/// let mut all: Vec<usize> = batches.concat();
/// all.sort();
/// assert_eq!(all, vec![0, 1, 2, 3, 4]);
/// assert_eq!(s.oversize(), vec![4]);
/// ```
#[derive(Debug, Clone)]
pub struct SizeAwareSampler {
    sizes: Vec<(usize, usize)>,
    options: SizeAwareOptions,
    epoch0_len: usize,
    /// The block pool whose order is packed, when the store is larger than
    /// its cache.
    blocks: Option<ChunkShuffleSampler>,
}

/// One batch being packed.
struct Bin {
    id: usize,
    atoms: usize,
    edges: usize,
    items: Vec<usize>,
}

impl SizeAwareSampler {
    /// A sampler over samples `0..sizes.len()` with `(num_atoms, num_edges)`
    /// each.
    ///
    /// # Errors
    /// [`Error::Config`] when no limit is set, or a limit or `pack_size` is 0.
    pub fn new(sizes: Vec<(usize, usize)>, options: SizeAwareOptions) -> Result<Self> {
        let o = &options;
        if o.max_atoms.is_none() && o.max_edges.is_none() && o.max_batch_size.is_none() {
            return Err(Error::Config(
                "SizeAwareSampler needs at least one of max_atoms, max_edges, max_batch_size".into(),
            ));
        }
        for (name, v) in [("max_atoms", o.max_atoms), ("max_edges", o.max_edges), ("max_batch_size", o.max_batch_size)]
        {
            Error::check_at_least_one(&format!("SizeAwareSampler: {name}"), v.unwrap_or(1))?;
        }
        Error::check_at_least_one("SizeAwareSampler: pack_size", o.pack_size)?;
        let mut s = SizeAwareSampler { sizes, options, epoch0_len: 0, blocks: None };
        s.epoch0_len = s.batches(0).len();
        Ok(s)
    }

    /// Packs the order of `pool` (a [`ChunkShuffleSampler`] over the same
    /// samples) instead of a full permutation, and shuffles batches only
    /// within each run of `pack_size` samples, not over the epoch:
    /// every batch then comes from the blocks resident at its point of the
    /// epoch, so a read window decodes the pool's chunks and no others.
    /// [`from_reader`](Self::from_reader) does this itself on a store larger
    /// than its reader's cache. With `shuffle` off the pool is not used.
    ///
    /// ```
    /// use atomzarr::sampler::{BatchSampler, ChunkShuffleSampler, SizeAwareOptions, SizeAwareSampler};
    /// let sizes: Vec<(usize, usize)> = (0..1000).map(|i| (2 + i % 7, 0)).collect();
    /// let o = SizeAwareOptions::default().with_max_atoms(64).with_pack_size(128);
    /// let pool = ChunkShuffleSampler::new(1000, 50, 16).with_pool_blocks(4);
    /// let s = SizeAwareSampler::new(sizes, o).unwrap().with_block_pool(pool).unwrap();
    /// // 4 blocks resident: any batch holds samples of at most a few blocks.
    /// for b in s.batches(0) {
    ///     let mut blocks: Vec<usize> = b.iter().map(|i| i / 50).collect();
    ///     blocks.sort();
    ///     blocks.dedup();
    ///     assert!(blocks.len() <= 8);
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when `pool` draws another number of samples.
    pub fn with_block_pool(mut self, pool: ChunkShuffleSampler) -> Result<Self> {
        if pool.num_samples() != self.sizes.len() {
            return Err(Error::Config(format!(
                "SizeAwareSampler: the block pool draws {} samples, the sampler has {}",
                pool.num_samples(),
                self.sizes.len()
            )));
        }
        self.blocks = Some(pool.with_seed(self.options.seed));
        self.epoch0_len = self.batches(0).len();
        Ok(self)
    }

    /// The block pool whose order is packed, if any.
    pub fn block_pool(&self) -> Option<&ChunkShuffleSampler> {
        self.blocks.as_ref()
    }

    /// As [`SizeAwareSampler::new`], with sizes from `reader.sample_sizes`
    /// for every index (a [`Dataset`](crate::Dataset), a
    /// [`MultiReader`](crate::MultiReader) or any other reader). On a store
    /// larger than its reader's cache (the rule of
    /// [`pool_blocks`](crate::sampler::pool_blocks)) it packs a block pool's
    /// order ([`with_block_pool`](Self::with_block_pool)), as
    /// `with_shuffle(true)` reads one.
    ///
    /// # Errors
    /// The reader's error from [`ReaderExt::sample_sizes`](crate::ReaderExt::sample_sizes); otherwise as
    /// [`SizeAwareSampler::new`].
    pub fn from_reader<R: Reader + ?Sized>(reader: &R, options: SizeAwareOptions) -> Result<Self> {
        let sizes = (0..reader.len()).map(|i| reader.sample_sizes(i)).collect::<Result<Vec<_>>>()?;
        let s = Self::new(sizes, options)?;
        let Some(chunked) = reader.chunked().filter(|_| options.shuffle) else { return Ok(s) };
        let blocks = ChunkShuffleSampler::for_reader(reader, options.max_batch_size.unwrap_or(64))?;
        match pool_blocks(chunked.cache_fit(), blocks.num_blocks()) {
            Some(k) => {
                log::info!(
                    "size-aware batches: packed within a block pool of {k} of {} blocks ({} is larger than its cache)",
                    blocks.num_blocks(),
                    reader.name()
                );
                s.with_block_pool(blocks.with_pool_blocks(k))
            }
            None => Ok(s),
        }
    }

    /// `(num_atoms, num_edges)` per sample.
    pub fn sizes(&self) -> &[(usize, usize)] {
        &self.sizes
    }

    /// The options.
    pub fn options(&self) -> &SizeAwareOptions {
        &self.options
    }

    /// Samples that alone exceed `max_atoms` or `max_edges` (each gets its
    /// own batch).
    pub fn oversize(&self) -> Vec<usize> {
        let (ma, me) = self.limits();
        self.sizes.iter().enumerate().filter(|&(_, &(a, e))| a > ma || e > me).map(|(i, _)| i).collect()
    }

    fn limits(&self) -> (usize, usize) {
        (self.options.max_atoms.unwrap_or(usize::MAX), self.options.max_edges.unwrap_or(usize::MAX))
    }

    /// Packs one run (first-fit decreasing by atoms) and appends its batches
    /// in the order they were opened.
    fn pack_run(&self, run: &mut [usize], out: &mut Vec<Vec<usize>>) {
        let (ma, me) = self.limits();
        let mb = self.options.max_batch_size.unwrap_or(usize::MAX);
        // Stable sort: equal atom counts keep the shuffled order.
        run.sort_by_key(|&i| std::cmp::Reverse(self.sizes[i].0));
        // Smallest atoms/edges still to come, to retire bins nothing can join.
        let mut min_rest = vec![(usize::MAX, usize::MAX); run.len() + 1];
        for k in (0..run.len()).rev() {
            let (a, e) = self.sizes[run[k]];
            min_rest[k] = (min_rest[k + 1].0.min(a), min_rest[k + 1].1.min(e));
        }
        let fits = |b: &Bin, a: usize, e: usize| {
            b.items.len() < mb && b.atoms.saturating_add(a) <= ma && b.edges.saturating_add(e) <= me
        };
        let mut open: Vec<Bin> = Vec::new();
        let mut closed: Vec<Bin> = Vec::new();
        for (k, &i) in run.iter().enumerate() {
            let (a, e) = self.sizes[i];
            match open.iter_mut().find(|b| fits(b, a, e)) {
                Some(b) => {
                    b.atoms += a;
                    b.edges += e;
                    b.items.push(i);
                }
                // An empty bin takes anything, so an oversize sample rides alone.
                None => open.push(Bin { id: open.len() + closed.len(), atoms: a, edges: e, items: vec![i] }),
            }
            let (ra, re) = min_rest[k + 1];
            let mut j = 0;
            while j < open.len() {
                if fits(&open[j], ra, re) {
                    j += 1;
                } else {
                    closed.push(open.swap_remove(j));
                }
            }
        }
        closed.append(&mut open);
        closed.sort_by_key(|b| b.id);
        out.extend(closed.into_iter().map(|b| b.items));
    }
}

impl BatchSampler for SizeAwareSampler {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let mut rng = epoch_rng(self.options.seed, epoch);
        let (mut order, blocks) = match (&self.blocks, self.options.shuffle) {
            (Some(b), true) => (b.indices(epoch), true),
            _ => ((0..self.sizes.len()).collect(), false),
        };
        if self.options.shuffle && !blocks {
            super::shuffle(&mut order, &mut rng);
        }
        let mut out = Vec::new();
        for run in order.chunks_mut(self.options.pack_size) {
            let from = out.len();
            self.pack_run(run, &mut out);
            if blocks {
                // Within the run only: its batches share the
                // resident blocks.
                super::shuffle(&mut out[from..], &mut rng);
            }
        }
        if self.options.shuffle && !blocks {
            super::shuffle(&mut out, &mut rng);
        }
        out
    }

    fn len(&self) -> usize {
        self.epoch0_len
    }
}
