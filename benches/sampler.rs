//! What an epoch's order costs to compute before the first batch: a full
//! permutation and the block pool over 10,000,000 samples in blocks of
//! 29,127 (the 10M-structure store's layout, docs/PERFORMANCE.md), one rank
//! and eight.
//!
//! `cargo bench --bench sampler`

use std::hint::black_box;

use atomzarr::sampler::{ChunkShuffleSampler, MIN_POOL_BLOCKS, RandomSampler, Sampler};
use criterion::{Criterion, criterion_group, criterion_main};

const LEN: usize = 10_000_000;
const BLOCK: usize = 29_127;

fn orders(c: &mut Criterion) {
    let mut g = c.benchmark_group("epoch_order_10M");
    g.sample_size(10);
    let random = RandomSampler::new(LEN, 1);
    g.bench_function("full_permutation", |b| b.iter(|| black_box(random.indices(black_box(3)))));
    let pool = ChunkShuffleSampler::new(LEN, BLOCK, 64).with_pool_blocks(MIN_POOL_BLOCKS).with_seed(1);
    g.bench_function("block_pool", |b| b.iter(|| black_box(pool.global_order(black_box(3), 1))));
    g.bench_function("block_pool_rank_of_8", |b| b.iter(|| black_box(pool.rank_order(black_box(3), 5, 8))));
    g.finish();
}

criterion_group!(benches, orders);
criterion_main!(benches);
