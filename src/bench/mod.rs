//! The I/O benchmark behind `atomzarr roundtrip` and `atomzarr read`
//! (the reference toolkit's `nvalchemi-io-test`): read orders, the timed read
//! loops, and the report rows.
//!
//! Three read paths are timed:
//! - `batch`: the public [`DataLoader`](crate::DataLoader) over a [`Dataset`](crate::Dataset) with
//!   validation skipped, on the CPU (Flex) device: what a training loop sees.
//! - `raw`: the reader's fused read ([`ReaderExt::plan`](crate::ReaderExt::plan), [`ReaderExt::read_plan`](crate::ReaderExt::read_plan))
//!   in windows of `batch_size * prefetch_factor` samples with what the
//!   DataLoader asks of it on the CPU device (int64 fields narrowed to
//!   int32), no loader, pipelined as the loader is (a background thread
//!   reads the next window, planned before, while this one is
//!   consumed), consumed batches given back to the reader's batch pool
//!   ([`CollatedBatch::recycle`](crate::CollatedBatch::recycle)) as the
//!   loader's tensors give theirs: the reader's own ceiling, so that the
//!   loader's overhead figure means overhead.
//! - `single`: one [`ReaderExt::read`](crate::ReaderExt::read) per sample (a baseline only).
//!
//! Every row also reports the pass's decode amplification (bytes decoded /
//! bytes of the samples read) and the process's peak resident memory; with
//! `decode_floor` ([`ReadOptions::decode_floor`], `--decode-floor`) the store's
//! decode floor (every inner chunk decoded once on all cores, see
//! [`decode_floor`]) and each pass's fraction of it. Orders: `sequential`,
//! `shuffle`, the toolkit's `block-shuffle` and `chunk-shuffle`
//! ([`ChunkShuffleSampler`](crate::sampler::ChunkShuffleSampler) over the
//! store's chunk blocks, `--pool-blocks N`).
//!
//! Every row also says how many samples were delivered, how many distinct
//! ones, whether they came back in the requested order, and how many bytes of
//! field data arrived, so a run proves it read each sample exactly once.
//! With `checksum` ([`ReadOptions::checksum`], the CLI's `--checksum`) it also
//! reports a content checksum of what was delivered, independent of order
//! (see [`sample_hash`]), so a run can prove it read the right bytes too.
//!
//! Two or more stores ([`read_bench_many`]) are read as one mixture: a
//! [`MultiReader`](crate::MultiReader) over them, read through the loader
//! with a [`MultiDatasetSampler`](crate::sampler::MultiDatasetSampler)
//! (per-store rates) or a
//! [`MultiDatasetBatchSampler`](crate::sampler::MultiDatasetBatchSampler)
//! (samples of each store per batch), shuffled or in order
//! ([`MixOptions`]). Each row then also says, per store, how many samples
//! it gave against the sampler's counts, the bytes it decoded, and how
//! spread over the store each batch's draw was ([`ChildReport::mixing`]).
//!
//! ```
//! use atomzarr::bench::{ReadOrder, read_order};
//! let o = read_order(10, ReadOrder::BlockShuffle, 0, 4).unwrap();
//! let mut sorted = o.clone();
//! sorted.sort();
//! assert_eq!(sorted, (0..10).collect::<Vec<_>>());
//! // Blocks [0, 4), [4, 8), [8, 10) move whole and keep their inner order.
//! for start in [0, 4, 8] {
//!     let len = (10 - start).min(4);
//!     let at = o.iter().position(|&x| x == start).unwrap();
//!     assert_eq!(o[at..at + len], (start..start + len).collect::<Vec<_>>()[..]);
//! }
//! ```
//!
//! | module | owns |
//! |---|---|
//! | `options` | [`ReadOrder`], [`ReadPath`], [`ReadOptions`], [`MixOptions`], [`ReadResult`] |
//! | `content` | what a read delivered: [`sample_hash`], [`sample_bytes`] |
//! | `read` | the timed read loops ([`time_reads`]) |
//! | `mix` | several stores read as one mixture through the loader ([`time_mixture`]): per store samples, decoded bytes, mixing ([`MixReport`], [`ChildReport`]) |
//! | `memory` | peak resident memory of a pass ([`peak_rss`]) |
//! | `report` | [`StoreFacts`], [`ReportRow`] (a row of the printed table), [`read_bench`], [`read_bench_many`], [`fmt_bytes`] |
//! | `write` | [`roundtrip`]: generate, write (timed), read back ([`WriteOptions`]) |

mod content;
mod indices;
mod memory;
mod mix;
mod options;
mod read;
mod report;
mod write;

pub use content::{Fnv1a, sample_bytes, sample_hash};
pub use memory::{peak_rss, reset_peak_rss};
pub use mix::{ChildReport, MixReport, time_mixture};
pub use options::{MixOptions, ReadOptions, ReadOrder, ReadPath, ReadResult, chunk_shuffle_order, read_order};
pub use read::time_reads;
pub use report::{ReportRow, StoreFacts, decode_floor, fmt_bytes, read_bench, read_bench_many, store_facts};
pub use write::{DEFAULT_WRITE_BATCH, Phase, WriteOptions, roundtrip};
