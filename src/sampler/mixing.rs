//! Samplers over a [`MultiReader`](crate::MultiReader)'s global index
//! space: [`MultiDatasetSampler`] mixes samples by per-dataset rates,
//! [`MultiDatasetBatchSampler`] fixes how many samples of each dataset every
//! batch holds. Both yield global indices (child offset + local index).
//!
//! Local order: each child is walked pass after pass, each pass a
//! permutation (seeded by `(seed, epoch)`; identity without `shuffle`) or,
//! in a [`DataLoader`](crate::DataLoader) reading a child larger than its
//! share of the cache, a block pool ([`ChildOrder`]). With `replacement`, a
//! child that runs out starts a fresh pass, so samples repeat only after the
//! whole child has been used (oversampling by whole passes, not i.i.d.
//! draws). Without `replacement`, a request that would need a second pass
//! is a configuration error.
//!
//! Ranks: [`MultiDatasetSampler::rank_order`] and
//! [`MultiDatasetBatchSampler::rank_batches`] give each of `world` ranks its
//! own region of every child (what a loader built `with_rank` reads): the
//! epoch's draws of each child are dealt to the ranks, and each rank walks
//! a region of the child sized to its draws, so the ranks' samples of a
//! child are disjoint within a pass and each rank decodes about its share.

use super::rates::{counts_from_weights, normalise_weights};
use crate::error::{Error, Result};
use crate::source::MultiReader;

use std::sync::Arc;

use super::child_order::{MixBatches, MixDraws, MixSpec, dealt};
use super::{BatchSampler, ChildOrder, Sampler, Shard};

/// How [`MultiDatasetBatchSampler`] sizes an epoch when `num_batches` is not
/// given (the reference toolkit's `epoch_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpochPolicy {
    /// With replacement, `ceil(total samples / batch_size)` batches; without,
    /// the same as [`EpochPolicy::MinSize`].
    #[default]
    DatasetSize,
    /// Stop when the first contributing dataset is used up: `min` over
    /// contributing children of `len / count` (rounded up with replacement,
    /// down without).
    MinSize,
    /// Run until the largest contributing dataset is used up (`max` of the
    /// same quotient), oversampling the smaller ones; needs `replacement`
    /// whenever that is more batches than `MinSize` gives.
    MaxSize,
}

/// Per-dataset batch allocation of [`MultiDatasetBatchSampler`]: exact
/// integer counts (summing to `batch_size`) or relative ratios (allocated
/// over `batch_size` by largest remainder). Built from a `Vec<usize>` or a
/// `Vec<f64>`, like the reference's ints-vs-floats rule.
///
/// ```
/// use atomzarr::sampler::SamplesPerDataset;
/// assert_eq!(SamplesPerDataset::from(vec![3usize, 1]), SamplesPerDataset::Counts(vec![3, 1]));
/// assert_eq!(SamplesPerDataset::from(vec![0.75, 0.25]), SamplesPerDataset::Ratios(vec![0.75, 0.25]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum SamplesPerDataset {
    /// Exact samples of each dataset per batch.
    Counts(Vec<usize>),
    /// Relative rates, turned into counts summing to `batch_size`.
    Ratios(Vec<f64>),
}

impl From<Vec<usize>> for SamplesPerDataset {
    fn from(v: Vec<usize>) -> Self {
        SamplesPerDataset::Counts(v)
    }
}

impl From<Vec<f64>> for SamplesPerDataset {
    fn from(v: Vec<f64>) -> Self {
        SamplesPerDataset::Ratios(v)
    }
}

fn offsets_of(lengths: &[usize]) -> Vec<usize> {
    let mut o = Vec::with_capacity(lengths.len() + 1);
    o.push(0);
    for &l in lengths {
        o.push(o[o.len() - 1] + l);
    }
    o
}

// ---------------------------------------------------------------------------

/// The options both mixing builders share, with their defaults.
#[derive(Debug, Clone)]
struct Mixing {
    lengths: Vec<usize>,
    weights: Option<Vec<f64>>,
    temperature: Option<f64>,
    replacement: bool,
    shuffle: bool,
    seed: u64,
    world_size: usize,
    rank: usize,
    drop_last: bool,
}

impl Mixing {
    fn new(lengths: Vec<usize>) -> Mixing {
        Mixing {
            lengths,
            weights: None,
            temperature: None,
            replacement: true,
            shuffle: true,
            seed: 0,
            world_size: 1,
            rank: 0,
            drop_last: false,
        }
    }

    /// This rank's shard of the epoch.
    fn shard(&self) -> Result<Shard> {
        Ok(Shard::new(self.rank, self.world_size)?.with_drop_last(self.drop_last))
    }
}

/// The setters of [`Mixing`]'s options, written once for both builders
/// (each holds its `Mixing` in a field `mix`).
macro_rules! mixing_setters {
    () => {
        /// Per-dataset rates (default: proportional to dataset length).
        pub fn with_weights(mut self, w: Vec<f64>) -> Self {
            self.mix.weights = Some(w);
            self
        }
        /// Tempers the rates (the weights, by default the dataset lengths
        /// `D_i`): each raised to `1 / t` and normalised again, so
        /// `p_i ∝ (D_i / D)^(1/t)`; `t = 1` keeps them, a large `t` tends to
        /// equal rates (`f64::INFINITY`: equal). Counts stay exact (largest
        /// remainder over the tempered rates). `build` refuses `t <= 0`.
        ///
        /// ```
        /// use atomzarr::sampler::MultiDatasetSampler;
        /// let s = MultiDatasetSampler::for_lengths(vec![9_000, 1_000]).with_temperature(2.0).with_num_samples(400).build().unwrap();
        /// // sqrt(0.9) : sqrt(0.1) = 0.75 : 0.25
        /// assert_eq!(s.counts(), &[300, 100]);
        /// ```
        pub fn with_temperature(mut self, t: f64) -> Self {
            self.mix.temperature = Some(t);
            self
        }
        /// Equal rates for every dataset (sets `weights`).
        pub fn with_balanced_weights(mut self) -> Self {
            self.mix.weights = Some(vec![1.0; self.mix.lengths.len()]);
            self
        }
        /// Allow a dataset to be used more than once per epoch (default on).
        pub fn with_replacement(mut self, yes: bool) -> Self {
            self.mix.replacement = yes;
            self
        }
        /// Shuffle (default on): the interleaving of the datasets, each
        /// dataset's local order, and the order inside a batch.
        pub fn with_shuffle(mut self, yes: bool) -> Self {
            self.mix.shuffle = yes;
            self
        }
        /// Seed (default 0); the epoch comes from the sampler's call.
        pub fn with_seed(mut self, seed: u64) -> Self {
            self.mix.seed = seed;
            self
        }
        /// Rank `rank` of `world_size` data-parallel ranks (default 0 of 1);
        /// `build` refuses `rank >= world_size`.
        pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
            (self.mix.rank, self.mix.world_size) = (rank, world_size);
            self
        }
        /// Drop the tail that does not shard evenly instead of padding it
        /// from the start of the epoch (default off).
        pub fn with_drop_last(mut self, yes: bool) -> Self {
            self.mix.drop_last = yes;
            self
        }
    };
}

/// The getters both mixing samplers share (each holds `lengths`,
/// `offsets`, `shuffle` and `seed` fields).
macro_rules! mixing_getters {
    () => {
        /// Dataset lengths.
        pub fn lengths(&self) -> &[usize] {
            &self.lengths
        }
        /// Whether the samples are shuffled (the interleaving or the order
        /// inside a batch, and each dataset's order).
        pub fn shuffles(&self) -> bool {
            self.shuffle
        }
        /// The seed.
        pub fn seed(&self) -> u64 {
            self.seed
        }
        /// What a rank's draws need of the mixture, each dataset walked as
        /// `children` says.
        fn spec(&self, children: Arc<Vec<ChildOrder>>) -> MixSpec {
            MixSpec { lengths: self.lengths.clone(), offsets: self.offsets.clone(), children, shuffle: self.shuffle }
        }
    };
}

/// Builder of [`MultiDatasetSampler`]; see each method for its default.
#[derive(Debug, Clone)]
pub struct MultiDatasetSamplerBuilder {
    mix: Mixing,
    num_samples: Option<usize>,
}

impl MultiDatasetSamplerBuilder {
    mixing_setters!();

    /// Global indices per epoch before sharding (default: total samples).
    pub fn with_num_samples(mut self, n: usize) -> Self {
        self.num_samples = Some(n);
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid rank, weights that do not match the
    /// datasets (count, sign, a positive rate on an empty one), zero
    /// `num_samples`, or more draws than a dataset holds without replacement.
    pub fn build(self) -> Result<MultiDatasetSampler> {
        let Self { mix, num_samples } = self;
        let shard = mix.shard()?;
        let weights =
            normalise_weights(mix.weights.as_deref(), &mix.lengths, mix.temperature, "MultiDatasetSampler weights")?;
        let num_samples = num_samples.unwrap_or_else(|| mix.lengths.iter().sum());
        Error::check_at_least_one("MultiDatasetSampler: num_samples", num_samples)?;
        let counts = counts_from_weights(&weights, num_samples);
        if !mix.replacement
            && let Some(d) = (0..counts.len()).find(|&d| counts[d] > mix.lengths[d])
        {
            return Err(Error::Config(format!(
                "MultiDatasetSampler: replacement=false cannot draw {} samples from dataset {d} of {}",
                counts[d], mix.lengths[d]
            )));
        }
        Ok(MultiDatasetSampler {
            offsets: offsets_of(&mix.lengths),
            lengths: mix.lengths,
            counts,
            shuffle: mix.shuffle,
            seed: mix.seed,
            shard,
        })
    }
}

/// Global indices of a [`MultiReader`], mixing datasets sample by sample
/// at given rates.
///
/// Each epoch draws exactly `counts[d]` samples from dataset `d`
/// (`num_samples` split by the rates, largest remainder), in a shuffled
/// interleaving (`shuffle`) or dataset by dataset, then takes this rank's
/// shard.
///
/// ```
/// use atomzarr::sampler::{MultiDatasetSampler, Sampler};
/// let s = MultiDatasetSampler::for_lengths(vec![10, 100]).with_balanced_weights().with_num_samples(40).with_seed(1).build().unwrap();
/// let idx = s.indices(0);
/// assert_eq!(idx.iter().filter(|&&i| i < 10).count(), 20); // 20 of dataset 0, each used twice
/// assert_eq!(s.counts(), &[20, 20]);
/// assert!(MultiDatasetSampler::for_lengths(vec![10, 100]).with_balanced_weights().with_num_samples(40).with_replacement(false).build().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct MultiDatasetSampler {
    lengths: Vec<usize>,
    offsets: Vec<usize>,
    counts: Vec<usize>,
    shuffle: bool,
    seed: u64,
    shard: Shard,
}

impl MultiDatasetSampler {
    /// A builder over `multi`'s children.
    pub fn builder(multi: &MultiReader) -> MultiDatasetSamplerBuilder {
        Self::for_lengths(multi.child_lens())
    }

    /// A builder over children of these lengths (global index = sum of the
    /// earlier lengths + local index, as [`MultiReader`] lays them out).
    pub fn for_lengths(lengths: Vec<usize>) -> MultiDatasetSamplerBuilder {
        MultiDatasetSamplerBuilder { mix: Mixing::new(lengths), num_samples: None }
    }

    /// Samples of each dataset per epoch (before sharding).
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The whole epoch before sharding (what all ranks agree on): every
    /// child walked in a permutation.
    pub fn global_indices(&self, epoch: u64) -> Vec<usize> {
        self.rank_order(epoch, 0, 1, &[])
    }

    mixing_getters!();

    /// The order rank `rank` of `world` reads in `epoch`, child `d` walked
    /// as `children[d]` says (a permutation where `children` is shorter).
    /// The epoch's draws of each child (its count) are dealt to the ranks
    /// one at a time, in the order of the children's counts laid end to
    /// end, so every rank's order holds `floor` or `ceil` of `num_samples
    /// / world` samples and each child's counts over the ranks sum to its
    /// count; each rank draws from its own region of each child
    /// (contiguous, sized to its draws). With one rank this is
    /// [`global_indices`](Self::global_indices) when every child is a
    /// permutation. (The shard set by `with_rank` plays no part.)
    ///
    /// ```
    /// use atomzarr::sampler::MultiDatasetSampler;
    /// let s = MultiDatasetSampler::for_lengths(vec![100, 300]).with_replacement(false).with_seed(2).build().unwrap();
    /// let ranks: Vec<Vec<usize>> = (0..3).map(|r| s.rank_order(0, r, 3, &[])).collect();
    /// let mut all = ranks.concat();
    /// all.sort();
    /// assert_eq!(all, (0..400).collect::<Vec<_>>()); // disjoint, covering
    /// assert_eq!(s.rank_order(5, 0, 1, &[]), s.global_indices(5));
    /// ```
    pub fn rank_order(&self, epoch: u64, rank: usize, world: usize, children: &[ChildOrder]) -> Vec<usize> {
        self.rank_draws(epoch, rank, world, Arc::new(children.to_vec())).collect()
    }

    /// [`rank_order`](Self::rank_order) drawn one sample at a time.
    pub(crate) fn rank_draws(&self, epoch: u64, rank: usize, world: usize, children: Arc<Vec<ChildOrder>>) -> MixDraws {
        let world = world.max(1);
        let rank = rank.min(world - 1);
        // Child d's draws are slots starts[d]..starts[d] + counts[d] of the epoch.
        let starts = offsets_of(&self.counts);
        let counts = self.counts.clone();
        let draws = move |d: usize, r: usize| dealt(starts[d], counts[d], r, world);
        let mine: Vec<usize> = (0..self.counts.len()).map(|d| draws(d, rank)).collect();
        MixDraws::new(self.spec(children), (self.seed, epoch, rank, world), mine, draws)
    }

    /// Samples in rank `rank`'s order of `world` ranks (of
    /// [`rank_order`](Self::rank_order)).
    pub fn rank_len(&self, rank: usize, world: usize) -> usize {
        let starts = offsets_of(&self.counts);
        (0..self.counts.len()).map(|d| dealt(starts[d], self.counts[d], rank, world.max(1))).sum()
    }
}

impl Sampler for MultiDatasetSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        self.shard.apply(self.global_indices(epoch))
    }
    fn len(&self) -> usize {
        self.shard.len_of(self.counts.iter().sum())
    }
}

// ---------------------------------------------------------------------------

/// Builder of [`MultiDatasetBatchSampler`]; see each method for its default.
#[derive(Debug, Clone)]
pub struct MultiDatasetBatchSamplerBuilder {
    mix: Mixing,
    batch_size: usize,
    samples_per_dataset: Option<SamplesPerDataset>,
    num_batches: Option<usize>,
    epoch_policy: EpochPolicy,
}

impl MultiDatasetBatchSamplerBuilder {
    mixing_setters!();

    /// Exact counts per batch (`Vec<usize>`, must sum to `batch_size`) or
    /// ratios (`Vec<f64>`). Exclusive with `weights`.
    pub fn with_samples_per_dataset(mut self, s: impl Into<SamplesPerDataset>) -> Self {
        self.samples_per_dataset = Some(s.into());
        self
    }
    /// Batches per epoch before sharding (default: from `epoch_policy`).
    pub fn with_num_batches(mut self, n: usize) -> Self {
        self.num_batches = Some(n);
        self
    }
    /// How to size the epoch when `num_batches` is not set (default
    /// [`EpochPolicy::DatasetSize`]).
    pub fn with_epoch_policy(mut self, p: EpochPolicy) -> Self {
        self.epoch_policy = p;
        self
    }

    fn counts(&self) -> Result<Vec<usize>> {
        let n = self.mix.lengths.len();
        let counts = match (&self.mix.weights, &self.samples_per_dataset) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "MultiDatasetBatchSampler: weights and samples_per_dataset are mutually exclusive".into(),
                ));
            }
            (_, Some(SamplesPerDataset::Counts(_))) if self.mix.temperature.is_some() => {
                return Err(Error::Config(
                    "MultiDatasetBatchSampler: a temperature tempers rates, not exact samples_per_dataset counts"
                        .into(),
                ));
            }
            (_, Some(SamplesPerDataset::Counts(c))) => {
                if c.len() != n {
                    return Err(Error::Config(format!(
                        "MultiDatasetBatchSampler: samples_per_dataset has {} counts for {n} datasets",
                        c.len()
                    )));
                }
                c.clone()
            }
            (_, Some(SamplesPerDataset::Ratios(r))) => counts_from_weights(
                &normalise_weights(
                    Some(r),
                    &self.mix.lengths,
                    self.mix.temperature,
                    "MultiDatasetBatchSampler samples_per_dataset ratios",
                )?,
                self.batch_size,
            ),
            (w, None) => counts_from_weights(
                &normalise_weights(
                    w.as_deref(),
                    &self.mix.lengths,
                    self.mix.temperature,
                    "MultiDatasetBatchSampler weights",
                )?,
                self.batch_size,
            ),
        };
        let sum: usize = counts.iter().sum();
        if sum != self.batch_size {
            return Err(Error::Config(format!(
                "MultiDatasetBatchSampler: samples_per_dataset {counts:?} sum to {sum}, batch_size is {}",
                self.batch_size
            )));
        }
        if let Some(d) = (0..n).find(|&d| counts[d] > 0 && self.mix.lengths[d] == 0) {
            return Err(Error::Config(format!(
                "MultiDatasetBatchSampler: dataset {d} contributes {} per batch but has no samples",
                counts[d]
            )));
        }
        Ok(counts)
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid rank, zero `batch_size`, both weights
    /// and `samples_per_dataset`, counts or rates that do not fit the datasets
    /// or the batch size, or an epoch of no batch or (without replacement)
    /// more batches than the datasets hold.
    pub fn build(self) -> Result<MultiDatasetBatchSampler> {
        let shard = self.mix.shard()?;
        Error::check_at_least_one("MultiDatasetBatchSampler: batch_size", self.batch_size)?;
        let counts = self.counts()?;
        let quotients: Vec<usize> = counts
            .iter()
            .zip(&self.mix.lengths)
            .filter(|(c, _)| **c > 0)
            .map(|(&c, &l)| if self.mix.replacement { l.div_ceil(c) } else { l / c })
            .collect();
        // counts sum to batch_size >= 1, so some dataset contributes.
        let min_b = quotients.iter().copied().min().unwrap_or(0);
        let max_b = quotients.iter().copied().max().unwrap_or(0);
        let num_batches = match (self.num_batches, self.epoch_policy) {
            (Some(n), _) => n,
            (None, EpochPolicy::DatasetSize) if self.mix.replacement => {
                self.mix.lengths.iter().sum::<usize>().div_ceil(self.batch_size)
            }
            (None, EpochPolicy::DatasetSize | EpochPolicy::MinSize) => min_b,
            (None, EpochPolicy::MaxSize) => {
                if !self.mix.replacement && max_b > min_b {
                    return Err(Error::Config(format!(
                        "MultiDatasetBatchSampler: epoch_policy MaxSize needs {max_b} batches, which oversamples \
                         smaller datasets (they support {min_b}); set replacement(true)"
                    )));
                }
                max_b
            }
        };
        if !self.mix.replacement && num_batches > min_b {
            return Err(Error::Config(format!(
                "MultiDatasetBatchSampler: replacement=false supports at most {min_b} complete batches \
                 for counts {counts:?}, {num_batches} requested"
            )));
        }
        if num_batches == 0 {
            return Err(Error::Config("MultiDatasetBatchSampler: an epoch would have no batch".into()));
        }
        Ok(MultiDatasetBatchSampler {
            offsets: offsets_of(&self.mix.lengths),
            lengths: self.mix.lengths,
            counts,
            num_batches,
            shuffle: self.mix.shuffle,
            seed: self.mix.seed,
            shard,
        })
    }
}

/// Batches of global [`MultiReader`] indices, each holding exactly
/// `samples_per_dataset[d]` samples of dataset `d`.
///
/// The epoch (`num_batches` batches, all ranks alike) is sharded by whole
/// batches: rank `r` of `R` gets batches `r, r + R, ...`.
///
/// ```
/// use atomzarr::sampler::{BatchSampler, EpochPolicy, MultiDatasetBatchSampler};
/// let s = MultiDatasetBatchSampler::for_lengths(vec![10, 40], 5)
///     .with_samples_per_dataset(vec![1, 4])
///     .with_epoch_policy(EpochPolicy::MaxSize)
///     .with_seed(3)
///     .build()
///     .unwrap();
/// assert_eq!(s.len(), 10); // max(10 / 1, 40 / 4)
/// for b in s.batches(0) {
///     assert_eq!(b.iter().filter(|&&i| i < 10).count(), 1);
/// }
/// // Counts must sum to the batch size.
/// assert!(MultiDatasetBatchSampler::for_lengths(vec![10, 40], 5).with_samples_per_dataset(vec![1, 3]).build().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct MultiDatasetBatchSampler {
    lengths: Vec<usize>,
    offsets: Vec<usize>,
    counts: Vec<usize>,
    num_batches: usize,
    shuffle: bool,
    seed: u64,
    shard: Shard,
}

impl MultiDatasetBatchSampler {
    /// A builder over `multi`'s children with batches of `batch_size`.
    pub fn builder(multi: &MultiReader, batch_size: usize) -> MultiDatasetBatchSamplerBuilder {
        Self::for_lengths(multi.child_lens(), batch_size)
    }

    /// A builder with equal per-dataset rates (the reference's `balanced`).
    pub fn balanced(multi: &MultiReader, batch_size: usize) -> MultiDatasetBatchSamplerBuilder {
        Self::builder(multi, batch_size).with_balanced_weights()
    }

    /// A builder over children of these lengths (global index = sum of the
    /// earlier lengths + local index, as [`MultiReader`] lays them out).
    pub fn for_lengths(lengths: Vec<usize>, batch_size: usize) -> MultiDatasetBatchSamplerBuilder {
        MultiDatasetBatchSamplerBuilder {
            mix: Mixing::new(lengths),
            batch_size,
            samples_per_dataset: None,
            num_batches: None,
            epoch_policy: EpochPolicy::DatasetSize,
        }
    }

    /// Samples of each dataset in every batch.
    pub fn samples_per_dataset(&self) -> &[usize] {
        &self.counts
    }

    /// Batches per epoch before sharding.
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The whole epoch before sharding (what all ranks agree on): every
    /// child walked in a permutation.
    pub fn global_batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.rank_batches(epoch, 0, 1, &[])
    }

    mixing_getters!();

    /// Batches of rank `rank` of `world` in `epoch`, child `d` walked as
    /// `children[d]` says (a permutation where `children` is shorter): the
    /// epoch's batches are dealt to the ranks one at a time (rank `r`
    /// gets as many as batches `r, r + world, ...`), each holding exactly
    /// `samples_per_dataset[d]` samples of child `d`, drawn from the rank's
    /// own region of the child (contiguous, sized to its draws). With one
    /// rank this is [`global_batches`](Self::global_batches) when every
    /// child is a permutation. (The shard set by `with_rank` plays no part.)
    ///
    /// ```
    /// use atomzarr::sampler::MultiDatasetBatchSampler;
    /// let s = MultiDatasetBatchSampler::for_lengths(vec![40, 80], 6)
    ///     .with_samples_per_dataset(vec![2usize, 4]).with_replacement(false).build().unwrap();
    /// let ranks: Vec<Vec<Vec<usize>>> = (0..2).map(|r| s.rank_batches(1, r, 2, &[])).collect();
    /// assert_eq!(ranks.iter().map(Vec::len).sum::<usize>(), s.num_batches());
    /// assert!(ranks.iter().flatten().all(|b| b.iter().filter(|&&i| i < 40).count() == 2));
    /// let mut all: Vec<usize> = ranks.concat().concat();
    /// all.sort();
    /// all.dedup();
    /// assert_eq!(all.len(), 120); // disjoint
    /// ```
    pub fn rank_batches(&self, epoch: u64, rank: usize, world: usize, children: &[ChildOrder]) -> Vec<Vec<usize>> {
        self.rank_batch_draws(epoch, rank, world, Arc::new(children.to_vec())).collect()
    }

    /// [`rank_batches`](Self::rank_batches) drawn one batch at a time.
    pub(crate) fn rank_batch_draws(
        &self,
        epoch: u64,
        rank: usize,
        world: usize,
        children: Arc<Vec<ChildOrder>>,
    ) -> MixBatches {
        let world = world.max(1);
        let rank = rank.min(world - 1);
        let (nb, counts) = (self.num_batches, self.counts.clone());
        let draws = move |d: usize, r: usize| dealt(0, nb, r, world) * counts[d];
        MixBatches::new(
            self.spec(children),
            (self.seed, epoch, rank, world),
            (self.counts.clone(), self.rank_len(rank, world)),
            draws,
        )
    }

    /// Batches of rank `rank` of `world` (of [`rank_batches`](Self::rank_batches)).
    pub fn rank_len(&self, rank: usize, world: usize) -> usize {
        dealt(0, self.num_batches, rank, world.max(1))
    }
}

impl BatchSampler for MultiDatasetBatchSampler {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.shard.apply(self.global_batches(epoch))
    }
    fn len(&self) -> usize {
        self.shard.len_of(self.num_batches)
    }
}
