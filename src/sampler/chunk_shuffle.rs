//! [`ChunkShuffleSampler`]: chunk-aware shuffling for stores far larger
//! than memory.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::source::Reader;

use rand::Rng;

use super::{BatchSampler, Sampler, Shard, epoch_rng, shuffle};

/// Default shuffle-buffer size `K`, in blocks.
pub const DEFAULT_BUFFER_BLOCKS: usize = 16;

/// Two-level (block permutation + shuffle buffer) sampler.
///
/// A plain random permutation makes every read window touch nearly every
/// chunk of the store; once the decoded store outgrows the chunk cache, each
/// window decodes nearly the whole store again. [`ChunkShuffleSampler`]
/// shuffles at two levels instead, as WebDataset's shuffle buffers and
/// MosaicML streaming's block shuffles do:
///
/// 1. the blocks (runs of samples that share a storage chunk, see
///    [`ChunkedReader::chunk_blocks`](crate::source::ChunkedReader::chunk_blocks)) are permuted, seeded per `(seed, epoch)`;
/// 2. the permuted blocks are taken `K` at a time (the shuffle buffer) and
///    their samples are interleaved in random order.
///
/// Each batch of at least `2K` samples then draws from at least `K` distinct
/// blocks (see [`ChunkShuffleSampler::with_buffer_blocks`] for the exact promise),
/// while a read window only needs the chunks of about `K` blocks at a time, so
/// each chunk is decoded about once per epoch. `K` is the one knob that trades
/// randomness for I/O: larger `K` mixes more blocks into each batch and needs
/// a larger decoded working set (`K` blocks' worth of chunks) in the cache.
///
/// Why not a sampler from a crate: none of the Rust shuffle-buffer crates
/// (for example the streaming iterators of `rand`'s ecosystem) is seeded per
/// epoch, shards by rank, or guarantees a per-batch block count.
///
/// ```
/// use atomzarr::sampler::{BatchSampler, ChunkShuffleSampler, Sampler};
/// // 1000 samples in blocks of 10, batches of 32, 8 blocks in the buffer.
/// let s = ChunkShuffleSampler::new(1000, 10, 32).with_buffer_blocks(8).with_seed(3);
/// let batches = s.batches(0);
/// assert_eq!(batches.len(), 32); // 31 full batches and one of 8
/// for b in &batches[..31] {
///     let mut blocks: Vec<usize> = b.iter().map(|i| i / 10).collect();
///     blocks.sort();
///     blocks.dedup();
///     assert!(blocks.len() >= 8);
/// }
/// let mut all = s.indices(0);
/// all.sort();
/// assert_eq!(all, (0..1000).collect::<Vec<_>>());
/// assert_ne!(s.indices(0), s.indices(1)); // reshuffled per epoch
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkShuffleSampler {
    /// Block starts followed by the sample count: `[0, s1, ..., len]`.
    bounds: Arc<[usize]>,
    batch_size: usize,
    buffer_blocks: usize,
    seed: u64,
    shard: Shard,
    drop_last: bool,
}

impl ChunkShuffleSampler {
    /// `len` samples in blocks of `block_size` consecutive samples (a
    /// `block_size` of 0 counts as 1), batches of `batch_size` (0 counts as 1).
    pub fn new(len: usize, block_size: usize, batch_size: usize) -> Self {
        let step = block_size.max(1);
        let mut bounds: Vec<usize> = (0..len).step_by(step).collect();
        bounds.push(len);
        Self::from_bounds(bounds, batch_size)
    }

    /// Blocks starting at `starts` (strictly increasing, the first 0, all
    /// below `len`; an empty list for `len == 0`): block `k` is
    /// `starts[k]..starts[k + 1]`, the last one ends at `len`.
    ///
    /// ```
    /// use atomzarr::sampler::{ChunkShuffleSampler, Sampler};
    /// let s = ChunkShuffleSampler::from_block_starts(vec![0, 3, 4, 9], 12, 4).unwrap();
    /// assert_eq!(s.num_blocks(), 4);
    /// assert_eq!(s.block_of(8), Some(2));
    /// assert!(ChunkShuffleSampler::from_block_starts(vec![0, 4, 4], 6, 4).is_err());
    /// assert!(ChunkShuffleSampler::from_block_starts(vec![1], 6, 4).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when `starts` does not rise strictly from 0 and stay
    /// below `len` (or is not empty for `len == 0`).
    pub fn from_block_starts(starts: Vec<usize>, len: usize, batch_size: usize) -> Result<Self> {
        let ok_start = if len == 0 { starts.is_empty() } else { starts.first() == Some(&0) };
        if !ok_start || starts.windows(2).any(|w| w[0] >= w[1]) || starts.last().is_some_and(|&s| s >= len) {
            return Err(Error::Config(format!(
                "block starts must rise strictly from 0 and stay below the sample count {len}"
            )));
        }
        let mut bounds = starts;
        bounds.push(len);
        Ok(Self::from_bounds(bounds, batch_size))
    }

    /// Blocks as `reader` lays its samples out in chunks
    /// ([`ChunkedReader::chunk_blocks`](crate::source::ChunkedReader::chunk_blocks)); one sample per block for a reader without
    /// chunks.
    ///
    /// In a [`DataLoader`](crate::DataLoader), as its batch sampler (or as
    /// its `sampler` with the same batch size):
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use burn::backend::Flex;
    /// use atomzarr::sampler::{ChunkShuffleSampler, Shard};
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("c.zarr");
    /// let samples = atomzarr::data::synth::generate(300, 2, 6, 0)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let sampler = ChunkShuffleSampler::for_reader(&reader, 16)?
    ///     .with_buffer_blocks(8)
    ///     .with_seed(1)
    ///     .with_shard(Shard::new(0, 2)?); // rank 0 of 2
    /// let loader = DataLoader::<Flex, _>::builder(Dataset::new(reader))
    ///     .with_batch_sampler(sampler)
    ///     .with_prefetch_factor(4)
    ///     .build(&Default::default())?;
    /// loader.set_epoch(3);
    /// let mut it = loader.iter();
    /// let n: usize = it.by_ref().map(|b| b.map(|b| b.num_graphs)).sum::<atomzarr::Result<usize>>()?;
    /// assert_eq!(n, 150);
    /// let amp = it.decode_counters().and_then(|c| c.amplification()).unwrap();
    /// assert!(amp >= 1.0); // this epoch's bytes decoded per byte read
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the reader's
    /// [`chunk_blocks`](crate::source::ChunkedReader::chunk_blocks) are not valid
    /// block starts (as [`ChunkShuffleSampler::from_block_starts`]).
    pub fn for_reader<R: Reader + ?Sized>(reader: &R, batch_size: usize) -> Result<Self> {
        let len = reader.len();
        match reader.chunked() {
            Some(c) => Self::from_block_starts(c.chunk_blocks(), len, batch_size),
            None => Ok(Self::new(len, 1, batch_size)),
        }
    }

    fn from_bounds(bounds: Vec<usize>, batch_size: usize) -> Self {
        ChunkShuffleSampler {
            bounds: bounds.into(),
            batch_size: batch_size.max(1),
            buffer_blocks: DEFAULT_BUFFER_BLOCKS,
            seed: 0,
            shard: Shard::default(),
            drop_last: false,
        }
    }

    /// Blocks in the shuffle buffer, `K` (default
    /// [`DEFAULT_BUFFER_BLOCKS`]; 0 counts as 1). Every full batch then
    /// holds samples of at least `K` distinct blocks when the batch size is
    /// at least `2K` and this rank's share of the epoch spans at least `3K`
    /// blocks of similar size (the exact condition is in
    /// [`batches`](BatchSampler::batches); the shares' edges may cut a
    /// block in two, each part then counts as a block of its rank). A read
    /// window of `w` samples needs the chunks of about `K` blocks plus those
    /// its `w` samples move through. `K = 1` reads block after block; a `K`
    /// as large as the block count is a full shuffle.
    pub fn with_buffer_blocks(mut self, k: usize) -> Self {
        self.buffer_blocks = k.max(1);
        self
    }

    /// Seed of both shuffle levels (default 0); the epoch reseeds them.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This rank's share (default: the whole epoch). Every rank must use the
    /// same blocks and seed: all then permute the blocks alike, and rank `r`
    /// takes the `r`-th contiguous stretch of that permuted order (so a rank
    /// reads whole blocks, not every `R`-th sample of each). As with
    /// [`Shard::apply`], shares are disjoint and cover the epoch, all of one
    /// length, the tail padded with samples from the start (or dropped).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Drop the last short batch (default off).
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.drop_last = yes;
        self
    }

    /// Samples per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// `K`, the blocks in the shuffle buffer.
    pub fn buffer_blocks(&self) -> usize {
        self.buffer_blocks
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Whether the last short batch is dropped.
    pub fn drops_last(&self) -> bool {
        self.drop_last
    }

    /// Samples of the whole epoch (all ranks, before padding).
    pub fn num_samples(&self) -> usize {
        self.bounds.last().copied().unwrap_or(0)
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The block holding sample `i`, if `i` is in range.
    pub fn block_of(&self, i: usize) -> Option<usize> {
        (i < self.num_samples()).then(|| self.bounds.partition_point(|&s| s <= i) - 1)
    }

    /// This rank's runs of the permuted block order: `(start, end)` sample
    /// ranges, each inside one block.
    fn rank_runs(&self, epoch: u64) -> Vec<(usize, usize)> {
        let n = self.num_samples();
        let mut order: Vec<usize> = (0..self.num_blocks()).collect();
        shuffle(&mut order, &mut epoch_rng(self.seed, epoch));
        let per_rank = self.shard.len_of(n);
        let (lo, hi) = (self.shard.rank() * per_rank, (self.shard.rank() + 1) * per_rank);
        // Walk the permuted order (cycled for padding) and keep the part of
        // each block inside [lo, hi).
        let mut runs = Vec::new();
        let mut pos = 0usize;
        if n == 0 {
            return runs;
        }
        'outer: loop {
            for &b in &order {
                let (s, e) = (self.bounds[b], self.bounds[b + 1]);
                let (a, z) = (pos.max(lo), (pos + e - s).min(hi));
                if a < z {
                    runs.push((s + a - pos, s + z - pos));
                }
                pos += e - s;
                if pos >= hi {
                    break 'outer;
                }
            }
        }
        runs
    }
}

impl BatchSampler for ChunkShuffleSampler {
    /// The shuffle buffer as `K` lanes: this rank's runs (blocks, in permuted
    /// order, each one's samples shuffled) are dealt to the lanes, each run to
    /// the shortest lane so far, so lane lengths differ by at most one block.
    /// Every lane's samples are then spread evenly over the epoch (sample `k`
    /// of a lane of length `L` sits at `(k + phase) / L`, the phase drawn per
    /// lane) and the epoch is cut into batches in that order. At any point of
    /// the epoch each lane is inside one run, so a window reads about `K`
    /// blocks; and a stretch that misses a lane is shorter than that lane's
    /// spacing, so a batch of `n > (K - 1) * ceil(L_max / L_min)` samples
    /// holds every lane, i.e. `K` distinct blocks.
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let runs = self.rank_runs(epoch);
        // A rank-specific stream for the second level: ranks hold different
        // blocks and need not mix them alike.
        let rank_seed = self.seed ^ (self.shard.rank() as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
        let mut rng = epoch_rng(rank_seed, epoch);
        let k = self.buffer_blocks.min(runs.len()).max(1);
        let mut lanes: Vec<Vec<usize>> = vec![Vec::new(); k];
        // (length, lane) of every lane, shortest first.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(usize, usize)>> =
            (0..k).map(|l| std::cmp::Reverse((0, l))).collect();
        for &(s, e) in &runs {
            let Some(std::cmp::Reverse((len, l))) = heap.pop() else { break };
            let start = lanes[l].len();
            lanes[l].extend(s..e);
            shuffle(&mut lanes[l][start..], &mut rng);
            heap.push(std::cmp::Reverse((len + e - s, l)));
        }
        let total: usize = lanes.iter().map(Vec::len).sum();
        let mut keyed: Vec<(f64, usize)> = Vec::with_capacity(total);
        for lane in &lanes {
            let phase = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let len = lane.len() as f64;
            keyed.extend(lane.iter().enumerate().map(|(j, &i)| ((j as f64 + phase) / len, i)));
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<Vec<usize>> = keyed
            .chunks(self.batch_size)
            .map(|c| {
                let mut b: Vec<usize> = c.iter().map(|&(_, i)| i).collect();
                // Lanes come round in a fixed pattern; the order inside a
                // batch need not show it.
                shuffle(&mut b, &mut rng);
                b
            })
            .collect();
        if self.drop_last && out.last().is_some_and(|b| b.len() < self.batch_size) {
            out.pop();
        }
        out
    }

    fn len(&self) -> usize {
        let m = self.shard.len_of(self.num_samples());
        if self.drop_last { m / self.batch_size } else { m.div_ceil(self.batch_size) }
    }
}

impl Sampler for ChunkShuffleSampler {
    /// The batches of the epoch, concatenated: batching them again by the
    /// same batch size gives the same batches.
    fn indices(&self, epoch: u64) -> Vec<usize> {
        BatchSampler::batches(self, epoch).concat()
    }
    fn len(&self) -> usize {
        let m = self.shard.len_of(self.num_samples());
        if self.drop_last { m / self.batch_size * self.batch_size } else { m }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct blocks of a batch, counted from the block starts alone.
    fn blocks_in(b: &[usize], starts: &[usize]) -> usize {
        let mut ids: Vec<usize> = b.iter().map(|&i| starts.partition_point(|&s| s <= i)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    #[test]
    fn every_batch_mixes_k_blocks_and_covers_the_epoch() {
        // Irregular blocks, as chunk boundaries make them.
        let mut starts = vec![0];
        let mut x = 0;
        for k in 0..300 {
            x += 5 + (k * 7919) % 23;
            starts.push(x);
        }
        let len = x + 3;
        for (k, bs) in [(8, 64), (16, 64), (4, 8), (32, 64), (1, 16), (16, 32)] {
            let s = ChunkShuffleSampler::from_block_starts(starts.clone(), len, bs).unwrap().with_buffer_blocks(k);
            for epoch in 0..3 {
                let batches = BatchSampler::batches(&s, epoch);
                assert_eq!(batches.len(), BatchSampler::len(&s));
                for (j, b) in batches.iter().enumerate() {
                    assert!(b.len() == bs || j == batches.len() - 1);
                    if b.len() == bs {
                        assert!(blocks_in(b, &starts) >= k, "K={k} batch {j}: {} blocks", blocks_in(b, &starts));
                    }
                }
                let mut all = batches.concat();
                all.sort_unstable();
                assert_eq!(all, (0..len).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn window_touches_few_blocks() {
        // 9 600 samples in 96 blocks of 100, K = 8 lanes of 1 200 samples:
        // a window of 4 batches of 64 (2% of the epoch, 26 samples of each
        // lane) crosses at most one block edge per lane.
        let s = ChunkShuffleSampler::new(9_600, 100, 64).with_buffer_blocks(8).with_seed(5);
        let starts: Vec<usize> = (0..96).map(|b| b * 100).collect();
        for w in BatchSampler::batches(&s, 0).chunks(4) {
            assert!(blocks_in(&w.concat(), &starts) <= 16);
        }
        // A plain shuffle's window touches nearly every block.
        let plain = crate::sampler::RandomSampler::new(9_600, 5).indices(0);
        assert!(blocks_in(&plain[..256], &starts) > 80);
    }

    #[test]
    fn shards_are_disjoint_equal_and_cover() {
        for (n, r, drop) in [(1000, 3, false), (1000, 3, true), (10, 4, false), (7, 8, false)] {
            let base = ChunkShuffleSampler::new(n, 13, 16).with_seed(9).with_buffer_blocks(4);
            let per: Vec<Vec<usize>> = (0..r)
                .map(|k| Sampler::indices(&base.clone().with_shard(Shard::new(k, r).unwrap().with_drop_last(drop)), 2))
                .collect();
            let want = Shard::new(0, r).unwrap().with_drop_last(drop).len_of(n);
            assert!(per.iter().all(|p| p.len() == want));
            let mut all = per.concat();
            all.sort_unstable();
            if drop {
                let total = all.len();
                all.dedup();
                assert_eq!(all.len(), total); // disjoint
            } else {
                all.dedup();
                assert_eq!(all, (0..n).collect::<Vec<_>>()); // covering
            }
        }
    }

    #[test]
    fn epochs_and_seeds_reshuffle_deterministically() {
        let s = ChunkShuffleSampler::new(500, 10, 32).with_seed(1);
        assert_eq!(Sampler::indices(&s, 4), Sampler::indices(&s.clone(), 4));
        assert_ne!(Sampler::indices(&s, 4), Sampler::indices(&s, 5));
        assert_ne!(Sampler::indices(&s, 4), Sampler::indices(&s.clone().with_seed(2), 4));
        let drop = s.clone().with_drop_last(true);
        assert_eq!(Sampler::len(&drop), 480);
        assert_eq!(BatchSampler::batches(&drop, 0).len(), 15);
    }
}
