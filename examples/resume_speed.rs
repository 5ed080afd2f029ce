//! How fast a resumed epoch reads on another number of ranks: rank 0 of
//! `--from` ranks reads `--steps` batches of a shuffled epoch and saves its
//! `LoaderState`; a fresh loader, rank `--rank` of `--to` ranks, loads it and
//! reads the rest of the epoch; a third reads the same rank's unbroken epoch
//! on `--to` ranks from its start. Prints both rates (samples/s), both
//! epochs' decode amplification and the ratio of the rates, and checks that
//! the resumed samples are distinct.
//!
//! With `--only resumed` or `--only unbroken` one of the two is read (run
//! each in fresh processes, alternating, and compare the medians).
//!
//! With one store the loader's default shuffle is read (`with_shuffle`);
//! with several, a weighted mixture (`MultiDatasetSampler`, rates
//! `--weights`, replacement on).
//!
//! ```sh
//! cargo run --release --example resume_speed -- --from 8 --to 3 D1/bench_10000000.zarr D2/bench_1000000.zarr
//! cargo run --release --example resume_speed -- --from 8 --to 3 D2/bench_1000000.zarr
//! ```

use std::sync::Arc;
use std::time::Instant;

use atomzarr::sampler::MultiDatasetSampler;
use atomzarr::{AtomicDataZarrReader, DataLoader, Dataset, LoaderState, MultiReader, Reader};
use burn::tensor::Device;
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Stores (two or more: a mixture).
    stores: Vec<String>,
    /// Ranks of the run that saves the state.
    #[arg(long, default_value_t = 8)]
    from: usize,
    /// Ranks of the run that resumes.
    #[arg(long, default_value_t = 3)]
    to: usize,
    /// The resuming rank.
    #[arg(long, default_value_t = 0)]
    rank: usize,
    /// Batches rank 0 of `--from` reads before saving.
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Per-store rates of a mixture (default equal).
    #[arg(long, value_delimiter = ',')]
    weights: Option<Vec<f64>>,
    /// Read only the resumed epoch (`resumed`) or only the unbroken one
    /// (`unbroken`), each in a fresh process: the epoch read second in a
    /// process starts with the first one's memory already faulted in.
    #[arg(long)]
    only: Option<String>,
}

type Loader = DataLoader<MultiReader>;

fn loader(args: &Args, rank: usize, world: usize) -> atomzarr::Result<Loader> {
    let children = args
        .stores
        .iter()
        .map(|s| Ok(Arc::new(AtomicDataZarrReader::open(s)?) as Arc<dyn Reader>))
        .collect::<atomzarr::Result<Vec<_>>>()?;
    let multi = MultiReader::new(children)?;
    let lens = multi.child_lens();
    let b = DataLoader::builder(Dataset::new(multi).with_skip_validation(true))
        .with_batch_size(64)
        .with_seed(0)
        .with_prefetch_factor(16)
        .with_rank(rank, world);
    let b = if lens.len() == 1 {
        b.with_shuffle(true)
    } else {
        let w = args.weights.clone().unwrap_or_else(|| vec![1.0; lens.len()]);
        b.with_sampler(MultiDatasetSampler::for_lengths(lens).with_weights(w).with_seed(0).build()?)
    };
    b.build(&Device::flex())
}

/// Reads the loader's (next) epoch: samples read, samples/s, distinct,
/// and the epoch's decode amplification.
fn read(l: &Loader) -> atomzarr::Result<(usize, f64, usize, f64)> {
    let t = Instant::now();
    let mut seen = Vec::new();
    let mut it = l.iter_host();
    for b in it.by_ref() {
        let b = b?;
        seen.extend_from_slice(&b.indices);
        b.recycle();
    }
    let rate = seen.len() as f64 / t.elapsed().as_secs_f64();
    let amp = it.decode_counters().and_then(|c| c.amplification()).unwrap_or(f64::NAN);
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    Ok((n, rate, seen.len(), amp))
}

fn main() -> atomzarr::Result<()> {
    let args = Args::parse();
    if args.only.as_deref() == Some("unbroken") {
        let (m, base, distinct, amp) = read(&loader(&args, args.rank, args.to)?)?;
        println!(
            "unbroken epoch on {} ranks, rank {}: {m} samples ({distinct} distinct) at {base:.0} samples/s \
             (decode amplification {amp:.2})",
            args.to, args.rank
        );
        return Ok(());
    }
    let first = loader(&args, 0, args.from)?;
    let mut it = first.iter_host();
    for _ in 0..args.steps {
        it.next().transpose()?;
    }
    drop(it);
    let state: LoaderState = first.state();
    let state = serde_json::to_string(&state).map_err(|e| atomzarr::Error::Config(e.to_string()))?;
    drop(first);

    let resumed = loader(&args, args.rank, args.to)?;
    resumed.load_state(&serde_json::from_str(&state).map_err(|e| atomzarr::Error::Config(e.to_string()))?)?;
    let (n, rate, distinct, amp) = read(&resumed)?;
    drop(resumed);
    if args.only.as_deref() == Some("resumed") {
        println!(
            "resumed {} -> {} ranks, rank {}: {n} samples ({distinct} distinct) at {rate:.0} samples/s \
             (decode amplification {amp:.2})",
            args.from, args.to, args.rank
        );
        return Ok(());
    }
    let unbroken = loader(&args, args.rank, args.to)?;
    let (m, base, _, base_amp) = read(&unbroken)?;
    println!(
        "resumed {} -> {} ranks, rank {}: {n} samples ({distinct} distinct) at {rate:.0} samples/s \
         (decode amplification {amp:.2}); unbroken epoch on {} ranks: {m} at {base:.0} samples/s \
         ({base_amp:.2}); ratio {:.2}",
        args.from,
        args.to,
        args.rank,
        args.to,
        rate / base
    );
    Ok(())
}
