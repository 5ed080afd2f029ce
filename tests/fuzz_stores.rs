//! Hostile stores: proptest mutations of the Python toolkit's reference
//! stores in `assets/` (metadata JSON of the root, groups and arrays: numbers,
//! shapes, chunk shapes, codecs, dtypes, fill values; chunk bytes; shard
//! indexes; pointer and field values), each read every way a user reads a
//! store: open, `read_many` of every sample, collated reads, the JSON dump and
//! `inspect`. Every case must end in data or in a typed [`atomzarr::Error`]
//! naming the store: never a panic (checked with `catch_unwind`), an abort, a
//! giant allocation or a hang (a watchdog ends the process if a case runs
//! longer than [`CASE_LIMIT`]).
//!
//! Each reference store is one test (they run in parallel), `CASES_PER_STORE`
//! cases each (more with `FUZZ_CASES=n`; another sequence with `FUZZ_SEED=s`).
//! A case mutates a working copy of the store (`fuzz/work.rs`) with edits
//! drawn from `fuzz/edits.rs`, and restores the files it touched
//! afterwards, so no case pays for a full copy. Hand-made hostile stores,
//! each with the error it must give, are `hostile_stores.rs`.

mod common;
#[path = "fuzz/edits.rs"]
mod edits;
#[path = "fuzz/work.rs"]
mod work;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use atomzarr::{AtomicDataZarrReader, CollatedBatch, Error, Level, Reader, ReaderExt};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::{Value, json};

use edits::*;
use work::*;

/// Cases per reference store in a normal run (3 stores: 5,100 in all).
const CASES_PER_STORE: u32 = 1700;
/// Longest a single case may run before it counts as a hang.
const CASE_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- the reads

/// What a case saw: how far it got (for the summary).
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    opened: bool,
    read_all: bool,
}

/// A failure must be one of the crate's errors and name the store.
fn typed(e: &Error, store: &Path, what: &str) -> Result<(), String> {
    let msg = e.to_string();
    if std::env::var_os("FUZZ_STATS").is_some() {
        // The error's shape without numbers or paths, for a histogram.
        let kind: String = msg
            .replace(&store.display().to_string(), "STORE")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(90)
            .collect();
        *STATS.lock().unwrap().entry(format!("{what}: {kind}")).or_default() += 1;
    }
    if msg.contains(&store.display().to_string()) {
        Ok(())
    } else {
        Err(format!("{what}: error {e:?} ({msg}) does not name the store {}", store.display()))
    }
}

/// Byte-exact equality of two collated batches (floats may be NaN).
fn same_batch(a: &CollatedBatch, b: &CollatedBatch) -> bool {
    a.indices == b.indices
        && a.atoms_ptr == b.atoms_ptr
        && a.edges_ptr == b.edges_ptr
        && a.fields.len() == b.fields.len()
        && a.fields.iter().zip(&b.fields).all(|((na, fa), (nb, fb))| {
            na == nb
                && fa.level == fb.level
                && fa.trailing_shape == fb.trailing_shape
                && fa.data.dtype() == fb.data.dtype()
                && fa.data.as_bytes() == fb.data.as_bytes()
        })
}

/// Reads the store every way; `Err` describes a broken rule.
fn exercise(store: &Path) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let r = match AtomicDataZarrReader::open(store) {
        Ok(r) => r,
        Err(e) => return typed(&e, store, "open").map(|()| out),
    };
    out.opened = true;
    let n = r.len();
    let all: Vec<i64> = (0..n as i64).collect();
    let samples = match r.read_many(&all) {
        Ok(s) => {
            if s.len() != n {
                return Err(format!("read_many returned {} samples for {n}", s.len()));
            }
            // Each sample's rows agree with the pointers the reader reports.
            for (i, s) in s.iter().enumerate() {
                let (atoms, edges) =
                    r.sample_sizes(i).map_err(|e| format!("get_metadata({i}) after a good read: {e}"))?;
                for (name, f) in &s.data.fields {
                    let rows = match f.level {
                        Level::Atom => atoms,
                        Level::Edge => edges,
                        Level::System => 1,
                    };
                    if f.shape.first() != Some(&rows) || f.data.len() != f.shape.iter().product::<usize>() {
                        return Err(format!(
                            "sample {i} field {name}: shape {:?} with {} values, pointers say {rows} rows",
                            f.shape,
                            f.data.len()
                        ));
                    }
                }
            }
            out.read_all = true;
            Some(s)
        }
        Err(e) => {
            typed(&e, store, "read_many")?;
            None
        }
    };
    let batches: Vec<Vec<usize>> = (0..n).collect::<Vec<_>>().chunks(7).map(<[usize]>::to_vec).collect();
    let mut collated = Vec::new();
    match r.load_collated(&batches, &mut collated) {
        Ok(()) => {
            if let Some(samples) = &samples {
                let data: Vec<_> = samples.iter().map(|s| s.data.clone()).collect();
                let mut start = 0;
                for (b, got) in batches.iter().zip(&collated) {
                    let want = CollatedBatch::from_samples(b, &data[start..start + b.len()])
                        .map_err(|e| format!("collating good samples: {e}"))?;
                    if !same_batch(&want, got) {
                        return Err(format!("collated batch {b:?} differs from the collated samples"));
                    }
                    start += b.len();
                }
            }
        }
        Err(e) => typed(&e, store, "load_collated")?,
    }
    if let Err(e) = atomzarr::formats::dump::dump_json(&r, &mut std::io::sink()) {
        typed(&e, store, "dump_json")?;
    }
    if let Err(e) = atomzarr::store::inspect::inspect(store) {
        typed(&e, store, "inspect")?;
    }
    Ok(out)
}

// ---------------------------------------------------------------- the harness

/// Error kinds seen (with `FUZZ_STATS`).
static STATS: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
/// The message and place of the last panic (any thread), for the report.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
/// Start and description of the case each test is running, for the watchdog.
static RUNNING: Mutex<BTreeMap<String, (Instant, String)>> = Mutex::new(BTreeMap::new());

fn install_hooks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            *LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(info.to_string());
            prev(info);
        }));
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for (test, (start, case)) in running.iter() {
                    if start.elapsed() > CASE_LIMIT {
                        eprintln!("{test}: a case ran longer than {CASE_LIMIT:?} (a hang): {case}");
                        std::process::exit(101);
                    }
                }
            }
        });
    });
}

fn fuzz(name: &str, seed: u64) {
    install_hooks();
    let work = Work::new(name);
    // The pristine store reads cleanly (else every case below proves nothing).
    let clean = exercise(&work.path).unwrap();
    assert!(clean.opened && clean.read_all, "{name}: the reference store itself failed");

    let cases = std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES_PER_STORE);
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse::<u64>().ok()).map_or(seed, |s| s ^ seed);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let t0 = Instant::now();
    let counts = Mutex::new((0u32, 0u32, 0u32));
    let result = runner.run(&edits(), |edits| {
        let mut touched = Vec::new();
        let desc = format!("{name}: {edits:?}");
        if std::env::var_os("FUZZ_LOG").is_some() {
            eprintln!("case {desc}");
        }
        RUNNING.lock().unwrap().insert(name.to_string(), (Instant::now(), desc.clone()));
        for e in &edits {
            work.apply(e, &mut touched);
        }
        *LAST_PANIC.lock().unwrap() = None;
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| exercise(&work.path)));
        RUNNING.lock().unwrap().remove(name);
        work.restore(&touched);
        let verdict = match r {
            Ok(Ok(o)) => {
                let mut c = counts.lock().unwrap();
                c.0 += 1;
                c.1 += u32::from(o.opened);
                c.2 += u32::from(o.read_all);
                Ok(())
            }
            Ok(Err(broken)) => Err(broken),
            Err(_) => Err(format!("panicked: {}", LAST_PANIC.lock().unwrap().take().unwrap_or_default())),
        };
        verdict.map_err(|why| TestCaseError::fail(format!("{desc}\n  -> {why}")))
    });
    let (total, opened, read_all) = *counts.lock().unwrap();
    eprintln!(
        "{name}: {total} passing case runs (incl. shrinking) in {:.1}s; {opened} opened, {read_all} read every sample",
        t0.elapsed().as_secs_f64()
    );
    if std::env::var_os("FUZZ_STATS").is_some() {
        let mut by_count: Vec<(u32, String)> = STATS.lock().unwrap().iter().map(|(k, v)| (*v, k.clone())).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        for (count, kind) in by_count {
            eprintln!("{count:6}  {kind}");
        }
    }
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    // The mutations must reach past open, or the reads are not fuzzed.
    assert!(opened > total / 10 && read_all > 0, "{name}: too few mutated stores opened ({opened} of {total})");
}

#[test]
fn hostile_nva_default() {
    fuzz("nva_default", 0x5eed_0001);
}

#[test]
fn hostile_nva_sharded_zstd() {
    fuzz("nva_sharded_zstd", 0x5eed_0002);
}

#[test]
fn hostile_nva_custom_deleted() {
    fuzz("nva_custom_deleted", 0x5eed_0003);
}
