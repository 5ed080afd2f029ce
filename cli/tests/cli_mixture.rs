//! `atomzarr read` over two stores read as one mixture, run as a binary:
//! each store gives exactly what the sampler promises (per epoch, and per
//! batch for the batch sampler), the samples delivered are the stores' own
//! (content checksum of the generated samples), the mixing figure is the
//! one computed here from the sampler's own batches, and bad mixture
//! options fail with a message. Timings are printed, never asserted.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Output};

use atomzarr::AtomicData;
use atomzarr::sampler::{BatchSampler, EpochPolicy, MultiDatasetBatchSampler, MultiDatasetSampler, Sampler};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_atomzarr")).args(args).output().expect("run the atomzarr binary")
}

/// Runs a `--json` command that must succeed; returns its rows.
fn rows(args: &[&str]) -> Vec<Value> {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert!(!rows.is_empty(), "{args:?}: no rows");
    rows
}

fn u(r: &Value, key: &str) -> u64 {
    r[key].as_u64().unwrap_or_else(|| panic!("{key} missing or not an integer in {r}"))
}

/// The two stores: A, 3,000 samples of 2-4 atoms (seed 42); B, 500 of
/// 10-100 atoms (seed 7); and their samples, A's then B's (the mixture's
/// global indices).
struct Stores {
    _dir: tempfile::TempDir,
    a: String,
    b: String,
    samples: Vec<AtomicData>,
}

const LEN_A: usize = 3000;
const LEN_B: usize = 500;

fn stores() -> Stores {
    let dir = common::tmpdir();
    let make = |sub: &str, n: usize, atoms: (usize, usize), seed: u64| {
        let out = dir.path().join(sub);
        let (n_s, min, max, seed_s) = (n.to_string(), atoms.0.to_string(), atoms.1.to_string(), seed.to_string());
        let o = out.to_str().unwrap_or_default();
        rows(&[
            "roundtrip",
            "--json",
            "-n",
            &n_s,
            "--min-atoms",
            &min,
            "--max-atoms",
            &max,
            "--seed",
            &seed_s,
            "--chunk-size",
            "256",
            "--read-mode",
            "raw",
            "--output-dir",
            o,
        ]);
        let store = out.join(format!("bench_{n}.zarr"));
        assert!(store.join("zarr.json").exists());
        let samples = atomzarr::data::synth::generate(n, atoms.0, atoms.1, seed).expect("generate");
        (store.to_str().unwrap_or_default().to_string(), samples)
    };
    let (a, mut samples) = make("d1", LEN_A, (2, 4), 42);
    let (b, more) = make("d2", LEN_B, (10, 100), 7);
    samples.extend(more);
    Stores { _dir: dir, a, b, samples }
}

/// The order-independent checksum of the samples at `indices` (repeats
/// counted), as `--checksum` prints it.
fn checksum(samples: &[AtomicData], indices: impl Iterator<Item = usize>) -> String {
    let sum = indices.map(|i| atomzarr::bench::sample_hash(&samples[i])).fold(0u64, u64::wrapping_add);
    format!("{sum:016x}")
}

/// The mixing figure of each store over `batches` (global indices), as the
/// report defines it: per batch, distinct windows of 0.1% of the store over
/// the batch's samples from it; the mean over batches that drew from it.
fn mixing(batches: &[Vec<usize>], lens: &[usize]) -> Vec<f64> {
    let mut sum = vec![0.0; lens.len()];
    let mut n = vec![0usize; lens.len()];
    for b in batches {
        for (d, &len) in lens.iter().enumerate() {
            let lo: usize = lens[..d].iter().sum();
            let locals: Vec<usize> = b.iter().filter(|&&g| g >= lo && g < lo + len).map(|&g| g - lo).collect();
            if locals.is_empty() {
                continue;
            }
            let windows: std::collections::BTreeSet<usize> = locals.iter().map(|&l| l * 1000 / len).collect();
            sum[d] += windows.len() as f64 / locals.len() as f64;
            n[d] += 1;
        }
    }
    sum.iter().zip(&n).map(|(s, &k)| s / k as f64).collect()
}

fn children(r: &Value) -> &Vec<Value> {
    r["children"].as_array().unwrap_or_else(|| panic!("no children in {r}"))
}

/// Per-store checks every mixture row passes: the sums, and each store's
/// decoded bytes.
fn check_row(r: &Value, s: &Stores) {
    let cs = children(r);
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["store"], s.a.as_str());
    assert_eq!(cs[1]["store"], s.b.as_str());
    assert_eq!((u(&cs[0], "systems"), u(&cs[1], "systems")), (LEN_A as u64, LEN_B as u64));
    assert_eq!(u(r, "systems"), (LEN_A + LEN_B) as u64);
    assert_eq!(u(&cs[0], "samples_read") + u(&cs[1], "samples_read"), u(r, "samples_read"), "{r}");
    assert_eq!(u(&cs[0], "decoded_bytes") + u(&cs[1], "decoded_bytes"), u(r, "decoded_bytes"), "{r}");
    for c in cs {
        if u(c, "samples_read") > 0 {
            assert!(u(c, "decoded_bytes") > 0, "a store read decodes: {c}");
        }
        let m = c["mixing"].as_f64().unwrap_or_else(|| panic!("mixing missing: {c}"));
        assert!((0.0..=1.0).contains(&m), "{c}");
    }
    assert_eq!(r["order_ok"], true, "the loader delivered its plan: {r}");
    assert!(cs.iter().all(|c| c["pool_blocks"].is_null()), "the stores fit the default cache: {r}");
    eprintln!("{} {}: {:.0} samples/s", r["sampler"], r["read_order"], r["read_samples_per_s"].as_f64().unwrap_or(0.0));
}

/// `--temperature T`: each store's count is its share of the tempered
/// rates (D_i / D)^(1/T), computed here by the formula.
#[test]
fn temperature_draws_the_tempered_counts() {
    let s = stores();
    let total = 4000usize;
    for t in ["1", "2", "8"] {
        let r = &rows(&["read", &s.a, &s.b, "--json", "--temperature", t, "--num-samples", "4000"])[0];
        check_row(r, &s);
        assert_eq!(r["counts_ok"], true, "{r}");
        let tf: f64 = t.parse().unwrap();
        let d = (LEN_A + LEN_B) as f64;
        let p: Vec<f64> = [LEN_A, LEN_B].iter().map(|&n| (n as f64 / d).powf(1.0 / tf)).collect();
        let a = p[0] / (p[0] + p[1]) * total as f64;
        // Largest remainder over two stores: A's share rounded, B the rest.
        let want_a = if a - a.floor() >= 0.5 { a.ceil() } else { a.floor() } as u64;
        let cs = children(r);
        assert_eq!(u(&cs[0], "expected_samples"), want_a, "T {t}");
        assert_eq!(u(&cs[1], "expected_samples"), total as u64 - want_a, "T {t}");
        assert_eq!(u(&cs[0], "samples_read") + u(&cs[1], "samples_read"), total as u64);
    }
    let out = run(&["read", &s.a, &s.b, "--temperature", "2", "--samples-per-dataset", "8,8"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("temperature"));
}

#[test]
fn weighted_mixture_draws_the_samplers_counts_from_each_store() {
    let s = stores();
    let base = ["read", &s.a, &s.b, "--json", "--checksum", "--weights", "0.25,0.75", "--num-samples", "2000"];
    let tail = ["--read-seed", "3", "--batch-size", "16", "--prefetch-factor", "4"];
    let mut figures = Vec::new();
    for order in ["sequential", "shuffle", "default-shuffle"] {
        let mut args = base.to_vec();
        args.extend(tail);
        args.extend(["--read-order", order]);
        let rs = rows(&args);
        assert_eq!(rs.len(), 1);
        let r = &rs[0];
        check_row(r, &s);
        assert_eq!(r["sampler"], "multi-dataset");
        assert_eq!(r["replacement"], true);
        assert_eq!(r["counts_ok"], true, "{r}");
        let sampler = MultiDatasetSampler::for_lengths(vec![LEN_A, LEN_B])
            .with_weights(vec![0.25, 0.75])
            .with_num_samples(2000)
            .with_shuffle(order != "sequential")
            .with_seed(3)
            .build()
            .expect("sampler");
        // 0.25 and 0.75 of 2,000: B (500 samples) is drawn three times over.
        assert_eq!(sampler.counts(), [500, 1500]);
        let cs = children(r);
        for (d, want) in [500u64, 1500].into_iter().enumerate() {
            assert_eq!(u(&cs[d], "samples_read"), want, "{order}: store {d}");
            assert_eq!(u(&cs[d], "expected_samples"), want, "{order}: store {d}");
            assert_eq!(cs[d]["samples_per_batch"], Value::Null);
        }
        let order_idx = sampler.indices(0);
        assert_eq!(r["content_checksum"], checksum(&s.samples, order_idx.iter().copied()).as_str(), "{order}");
        let batches: Vec<Vec<usize>> = order_idx.chunks(16).map(<[usize]>::to_vec).collect();
        let want = mixing(&batches, &[LEN_A, LEN_B]);
        for (d, w) in want.iter().enumerate() {
            let got = cs[d]["mixing"].as_f64().unwrap_or(-1.0);
            assert!((got - w).abs() < 1e-9, "{order}: store {d}: mixing {got}, computed here {w}");
        }
        figures.push(want[0]);
    }
    // In order, 16 neighbours of A fall in about 6 windows of 3 samples;
    // shuffled, nearly every one in its own.
    assert!(figures[0] < 0.5, "{figures:?}");
    assert!(figures[1] > 0.9 && figures[2] > 0.9, "{figures:?}");
}

#[test]
fn default_weights_follow_the_store_lengths_and_ranks_split_the_epoch() {
    let s = stores();
    let r = &rows(&["read", &s.a, &s.b, "--json", "--read-order", "shuffle", "--batch-size", "32"])[0];
    check_row(r, &s);
    let cs = children(r);
    assert_eq!((u(&cs[0], "samples_read"), u(&cs[1], "samples_read")), (LEN_A as u64, LEN_B as u64));
    assert_eq!(r["counts_ok"], true);
    // Two ranks: the loader's with_rank cuts the epoch; no per-epoch check.
    let mut seen = [0u64; 2];
    for rank in ["0", "1"] {
        let args = [
            "read",
            &s.a,
            &s.b,
            "--json",
            "--read-order",
            "shuffle",
            "--batch-size",
            "32",
            "--weights",
            "1,1",
            "--num-samples",
            "1000",
            "--rank",
            rank,
            "--world-size",
            "2",
        ];
        let r = &rows(&args)[0];
        assert_eq!(r["counts_ok"], Value::Null, "{r}");
        assert_eq!(u(r, "samples_read"), 500, "{r}");
        assert_eq!(r["order_ok"], true, "{r}");
        for (d, c) in children(r).iter().enumerate() {
            assert_eq!(c["expected_samples"], Value::Null);
            seen[d] += u(c, "samples_read");
        }
    }
    assert_eq!(seen, [500, 500], "the ranks together drew the sampler's counts");
}

/// A store larger than its share of a small cache is drawn through a block
/// pool: each pass still holds every sample of it once.
#[test]
fn a_store_larger_than_its_cache_share_is_drawn_through_a_pool() {
    let s = stores();
    let r = &rows(&[
        "read",
        &s.a,
        &s.b,
        "--json",
        "--checksum",
        "--weights",
        "0,1",
        "--num-samples",
        "1000",
        "--read-order",
        "default-shuffle",
        "--cache-bytes",
        "500000",
        "--batch-size",
        "16",
    ])[0];
    assert_eq!(r["counts_ok"], true, "{r}");
    assert_eq!(r["order_ok"], true, "{r}");
    let cs = children(r);
    assert!(u(&cs[1], "pool_blocks") > 0, "B decodes to more than its share: {r}");
    assert_eq!((u(&cs[0], "samples_read"), u(&cs[1], "samples_read")), (0, 1000));
    assert_eq!((cs[0]["mixing"].clone(), u(&cs[0], "per_batch_max")), (Value::Null, 0));
    // Two whole passes over B, whatever their order.
    let b = LEN_A..LEN_A + LEN_B;
    assert_eq!(r["content_checksum"], checksum(&s.samples, b.clone().chain(b)).as_str());
    assert_eq!(u(r, "unique_samples"), LEN_B as u64);
}

#[test]
fn samples_per_dataset_fixes_every_batch() {
    let s = stores();
    // 12 of A and 4 of B in every batch, 20 batches.
    let r = &rows(&[
        "read",
        &s.a,
        &s.b,
        "--json",
        "--checksum",
        "--samples-per-dataset",
        "12,4",
        "--num-batches",
        "20",
        "--read-order",
        "shuffle",
        "--read-seed",
        "5",
        "--prefetch-factor",
        "4",
    ])[0];
    check_row(r, &s);
    assert_eq!(r["sampler"], "multi-dataset-batch");
    assert_eq!(u(r, "batch"), 16, "the batch size is the counts' sum");
    assert_eq!(r["counts_ok"], true, "{r}");
    let sampler = MultiDatasetBatchSampler::for_lengths(vec![LEN_A, LEN_B], 16)
        .with_samples_per_dataset(vec![12usize, 4])
        .with_num_batches(20)
        .with_seed(5)
        .build()
        .expect("sampler");
    let batches = sampler.batches(0);
    assert_eq!(r["content_checksum"], checksum(&s.samples, batches.iter().flatten().copied()).as_str());
    let want = mixing(&batches, &[LEN_A, LEN_B]);
    for (d, (k, c)) in [12u64, 4].iter().zip(children(r)).enumerate() {
        assert_eq!((u(c, "per_batch_min"), u(c, "per_batch_max")), (*k, *k), "store {d}: {c}");
        assert_eq!(u(c, "samples_per_batch"), *k);
        assert_eq!(u(c, "samples_read"), k * 20);
        assert_eq!(u(c, "expected_samples"), k * 20);
        assert!((c["mixing"].as_f64().unwrap_or(-1.0) - want[d]).abs() < 1e-9, "store {d}: {c} vs {}", want[d]);
    }
    // A timed prefix: the whole batches that reach it, each still exact.
    let r = &rows(&["read", &s.a, &s.b, "--json", "--samples-per-dataset", "12,4", "--max-samples", "40"])[0];
    assert_eq!((u(r, "samples_read"), r["order_ok"].clone(), r["counts_ok"].clone()), (48, true.into(), true.into()));
    assert_eq!(children(r)[0]["expected_samples"], Value::Null, "no per-epoch check of a prefix");
    // A batch size that agrees is accepted.
    rows(&["read", &s.a, &s.b, "--json", "--samples-per-dataset", "12,4", "--batch-size", "16", "--num-batches", "2"]);
}

#[test]
fn samples_per_dataset_epoch_policies_and_replacement() {
    let s = stores();
    let read = |extra: &[&str]| {
        let mut args = vec!["read", &s.a, &s.b, "--json", "--samples-per-dataset", "12,4", "--read-order", "shuffle"];
        args.extend_from_slice(extra);
        rows(&args).remove(0)
    };
    let built = |replacement: bool, policy: EpochPolicy| {
        MultiDatasetBatchSampler::for_lengths(vec![LEN_A, LEN_B], 16)
            .with_samples_per_dataset(vec![12usize, 4])
            .with_replacement(replacement)
            .with_epoch_policy(policy)
            .build()
            .expect("sampler")
            .num_batches() as u64
    };
    // max-size: until A is used up, 3000 / 12 = 250 batches (B 2x over);
    // min-size without replacement: until B is, 500 / 4 = 125, no repeat.
    for (extra, replacement, policy, batches) in [
        (vec!["--epoch-policy", "max-size"], true, EpochPolicy::MaxSize, 250u64),
        (vec!["--epoch-policy", "min-size", "--no-replacement"], false, EpochPolicy::MinSize, 125),
        (vec![], true, EpochPolicy::DatasetSize, 219),
    ] {
        assert_eq!(built(replacement, policy), batches);
        let r = read(&extra);
        check_row(&r, &s);
        assert_eq!(r["counts_ok"], true, "{extra:?}: {r}");
        assert_eq!(r["replacement"], replacement);
        assert_eq!(u(&r, "samples_read"), batches * 16, "{extra:?}");
        let cs = children(&r);
        assert_eq!((u(&cs[0], "samples_read"), u(&cs[1], "samples_read")), (batches * 12, batches * 4));
        if !replacement {
            assert_eq!(u(&r, "unique_samples"), u(&r, "samples_read"), "{extra:?}: no sample twice");
        }
    }
    // Ranks take whole batches, each still exact.
    let r = read(&["--num-batches", "9", "--rank", "1", "--world-size", "2"]);
    assert_eq!(u(&r, "samples_read"), 4 * 16, "batches 1, 3, 5, 7");
    assert_eq!(r["counts_ok"], true);
    assert_eq!(children(&r)[0]["expected_samples"], Value::Null);
    assert_eq!((u(&children(&r)[1], "per_batch_min"), u(&children(&r)[1], "per_batch_max")), (4, 4));
}

#[test]
fn the_table_has_a_line_per_store() {
    let s = stores();
    let out = run(&["read", &s.a, &s.b, "--weights", "0.5,0.5", "--read-order", "shuffle"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in
        ["mixture of", "(multi-dataset)", "Per store", "mixing", "expected", "samples/s", "peak RSS", "1st batch"]
    {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    let name = |p: &str| Path::new(p).to_string_lossy().into_owned();
    for store in [name(&s.a), name(&s.b)] {
        let line = text.lines().find(|l| l.contains(&store) && l.contains("ok"));
        assert!(line.is_some(), "no checked line for {store}:\n{text}");
    }
}

#[test]
fn bad_mixture_options_fail_with_a_message() {
    let s = stores();
    let (a, b) = (s.a.as_str(), s.b.as_str());
    // Stores with different fields mix as their union; a field of another
    // element type cannot: here an int64 energy (the same names and levels,
    // so it is met by the first batch that holds both).
    let dir = common::tmpdir();
    let other = dir.path().join("int_energy.zarr");
    let samples: Vec<AtomicData> = atomzarr::data::synth::generate(20, 2, 4, 9)
        .expect("generate")
        .into_iter()
        .map(|s| {
            s.with_field(
                "energy",
                atomzarr::Field::new(atomzarr::Level::System, vec![1, 1], vec![1i64]).expect("field"),
            )
        })
        .collect();
    atomzarr::AtomicDataZarrWriter::create(&other, atomzarr::ZarrWriteConfig::default())
        .and_then(|mut w| w.write(&samples))
        .expect("write the int-energy store");
    let other = other.to_str().unwrap_or_default();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["read", a, "--weights", "1"], "weights is an option of a mixture"),
        (vec!["read", a, "--samples-per-dataset", "64"], "samples_per_dataset is an option of a mixture"),
        (vec!["read", a, "--no-replacement"], "replacement=false is an option of a mixture"),
        (vec!["read", a, b, "--weights", "1,1", "--samples-per-dataset", "8,8"], "are exclusive"),
        (vec!["read", a, b, "--weights", "1,2,3"], "weights has 3 values for 2 stores"),
        (vec!["read", a, b, "--samples-per-dataset", "8"], "samples_per_dataset has 1 values for 2 stores"),
        (
            vec!["read", a, b, "--samples-per-dataset", "8,8", "--batch-size", "32"],
            "batch_size 32 disagrees with samples_per_dataset 8,8",
        ),
        (vec!["read", a, b, "--num-batches", "3"], "num_batches sizes a samples_per_dataset epoch"),
        (vec!["read", a, b, "--epoch-policy", "max-size"], "epoch_policy sizes a samples_per_dataset epoch"),
        (vec!["read", a, b, "--samples-per-dataset", "8,8", "--num-samples", "10"], "num_samples sizes a weighted"),
        (vec!["read", a, b, "--num-samples", "0"], "num_samples must be >= 1"),
        (vec!["read", a, b, "--read-order", "block-shuffle"], "read order block-shuffle reads one store"),
        (vec!["read", a, b, "--read-order", "chunk-shuffle"], "read order chunk-shuffle reads one store"),
        (vec!["read", a, b, "--read-mode", "raw"], "read mode raw reads one store"),
        (vec!["read", a, b, "--decode-floor"], "decode_floor times one store"),
        (vec!["read", a, b, "--weights=-1,2"], "is not a finite non-negative number"),
        (
            vec!["read", a, b, "--weights", "1,1", "--num-samples", "2000", "--no-replacement"],
            "replacement=false cannot draw",
        ),
        (
            vec!["read", a, b, "--samples-per-dataset", "12,4", "--epoch-policy", "max-size", "--no-replacement"],
            "set replacement(true)",
        ),
        (vec!["read", a, other], "different level/dtype/shape [\"energy\"]"),
    ];
    for (args, msg) in cases {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.contains(msg), "{args:?}: stderr {err:?} lacks {msg:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("samples/s"), "{args:?}: no table");
    }
}
