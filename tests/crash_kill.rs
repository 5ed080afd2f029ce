//! Real crashes. A child process (this test binary, re-run as
//! `crash_child`) appends to a store on disk, and also deletes samples, adds
//! custom fields and defragments, in a random sequence; the parent kills it
//! with SIGKILL at a random moment, then checks the store against a model
//! built from what the child reported before each call and after each
//! return:
//!
//! - the store opens (a plain reader, no recovery step first);
//! - it holds every sample whose append returned, unless a delete of it
//!   started, and nothing that was never appended or whose delete returned;
//! - every sample equals what was written (the content is a function of the
//!   sample's id, which each sample carries as its energy), through the
//!   per-sample and the collated paths;
//! - every custom field whose add_custom returned is there, with its values;
//! - the next append works.
//!
//! The child holds the store's writer lock while it works: before each kill
//! the parent checks that the lock is held (by the child, where it has
//! named itself yet), and after it that the lock is free at once.
//!
//! `crash_kills_leave_every_store_openable` runs 36 kills (each CI run);
//! `crash_soak` runs `ATOMZARR_CRASH_KILLS` (default 400) and is `--ignored`.
//!
//! `crash_during_large_deletes` kills a child that deletes thousands of
//! samples per call (masks over hundreds of chunk files, rows over most
//! shards) and checks the raw arrays after each kill: every call's masks
//! are all switched off or none (the three masks of each sample agree),
//! calls that returned are off with their rows zeroed, rows are zeroed only
//! in masked samples (the kept ones equal what was written), and the next
//! writer finds nothing left over. Each CI run: 12 kills;
//! `crash_soak_large_deletes` (`--ignored`) runs `ATOMZARR_CRASH_KILLS`
//! (default 100).

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use atomzarr::store::lock::StoreLock;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, CollatedBatch, Error, Level, Reader, ReaderExt,
    ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use zarrs::array::{ArrayBytes, CodecOptions};

const CHILD_ENV: &str = "ATOMZARR_CRASH_CHILD";
/// Lines the child reports start with this (libtest prints its own lines).
const TAG: &str = "@@";

/// Zstd (level 1) arrays of `rows` rows a chunk.
fn zstd(rows: u64) -> ZarrArrayConfig {
    ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(rows)
}

/// Small chunks and shards, so every append rewrites existing chunks and
/// shards of every array (the case that used to tear files).
fn config() -> ZarrWriteConfig {
    let small = zstd(4).with_shard_size(16);
    ZarrWriteConfig::default()
        .with_meta(zstd(8))
        .with_core(small)
        .with_custom(small)
        .with_override("neighbor_list", ZarrArrayConfig::default().with_chunk_size(8).with_shard_size(32))
}

/// The custom fields' values for sample `id`.
fn custom_value(j: usize, id: u64) -> i64 {
    (id as i64) * 1000 + j as i64
}

/// Sample `id`, with custom fields `c0..c{customs}`. Everything is a
/// function of `id`; the energy is `id` itself (exact in f32 below 2^24).
fn sample(id: u64, customs: usize) -> AtomicData {
    let n = 1 + (id % 6) as usize;
    let z: Vec<i64> = (0..n).map(|k| 1 + ((id as usize * 7 + k) % 90) as i64).collect();
    let pos: Vec<[f32; 3]> = (0..n).map(|k| [id as f32 * 0.5, k as f32, (id % 13) as f32 + 0.25]).collect();
    let forces: Vec<[f32; 3]> = (0..n).map(|k| [k as f32 - 1.0, id as f32 * -0.125, 3.0]).collect();
    let pairs: Vec<[i64; 2]> = if n > 1 { (0..n).map(|k| [k as i64, ((k + 1) % n) as i64]).collect() } else { vec![] };
    let mut s = AtomicData::new(z, pos)
        .unwrap()
        .with_forces(forces)
        .unwrap()
        .with_energy(id as f32)
        .with_neighbor_list(pairs, None)
        .unwrap();
    for j in 0..customs {
        s = s.with_custom(&format!("c{j}"), Level::System, vec![1], vec![custom_value(j, id)]).unwrap();
    }
    s
}

fn customs_in(r: &AtomicDataZarrReader) -> usize {
    r.schema().fields.keys().filter(|k| k.starts_with('c') && k[1..].parse::<usize>().is_ok()).count()
}

fn id_of(s: &AtomicData) -> u64 {
    s.fields["energy"].data.get_f64(0).unwrap() as u64
}

/// The child's report in a line of its stdout (libtest may print "test
/// crash_child ... " in front of the first one).
fn tagged(line: &str) -> Option<String> {
    line.find(TAG).map(|i| line[i + TAG.len()..].trim().to_string())
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{TAG} {line}");
    let _ = out.flush();
}

/// The child: random operations on the store until killed.
fn child(path: &Path, seed: u64) -> atomzarr::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = AtomicDataZarrWriter::open(path, config())?;
    say("ready".into());
    loop {
        let r = AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0))?;
        let len = r.len();
        let customs = customs_in(&r);
        let last = if len == 0 { None } else { r.read(len as i64 - 1).map(|s| id_of(&s.data)).ok() };
        let next = last.map_or(0, |l| l + 1);
        let deleted = r.num_physical() - len;
        let roll: f64 = rng.random();
        if roll < 0.12 && len > 1 {
            // Never the last sample, so ids are never reused.
            let logical = rng.random_range(0..len - 1);
            let id = id_of(&r.read(logical as i64)?.data);
            let physical = r.sample_metadata(logical).physical_index;
            say(format!("D {id}"));
            w.delete(&[physical])?;
            say(format!("d {id}"));
        } else if roll < 0.16 && customs < 4 {
            let mut ids = vec![0u64; r.num_physical()];
            for (k, s) in r.read_many(&(0..len as i64).collect::<Vec<_>>())?.into_iter().enumerate() {
                ids[r.sample_metadata(k).physical_index] = id_of(&s.data);
            }
            let values: Vec<i64> = ids.iter().map(|&id| custom_value(customs, id)).collect();
            say(format!("C {customs}"));
            w.add_custom(&format!("c{customs}"), Level::System, &[values.len()], values)?;
            say(format!("c {customs}"));
        } else if roll < 0.24 && deleted > 0 {
            say("F".into());
            w.defragment(None)?;
            say("f".into());
        } else {
            let k = rng.random_range(1..=12u64);
            let batch: Vec<AtomicData> = (next..next + k).map(|id| sample(id, customs)).collect();
            say(format!("A {next} {k}"));
            w.append(&batch)?;
            say(format!("a {next} {k}"));
        }
    }
}

/// The child of the first-write test: create, then a first write of 20.
fn child_first(path: &Path) -> atomzarr::Result<()> {
    say("ready".into());
    let mut w = AtomicDataZarrWriter::create(path, config())?;
    say("created".into());
    w.write(&(0..20).map(|id| sample(id, 0)).collect::<Vec<_>>())?;
    say("written".into());
    Ok(())
}

/// Not a test of its own: the child process's body (see the module docs).
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let seed = std::env::var("ATOMZARR_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let first = std::env::var("ATOMZARR_CRASH_FIRST").is_ok();
    let deletes = std::env::var("ATOMZARR_CRASH_DELETES").is_ok();
    let run = if first {
        child_first(Path::new(&path))
    } else if deletes {
        child_deletes(Path::new(&path), seed)
    } else {
        child(Path::new(&path), seed)
    };
    if let Err(e) = run {
        say(format!("error {e}"));
        std::process::exit(3);
    }
}

/// What the children reported, over all runs.
#[derive(Default, Debug)]
struct Model {
    /// Ids whose append was started / returned.
    started: BTreeSet<u64>,
    returned: BTreeSet<u64>,
    /// Ids whose delete was started / returned.
    delete_started: BTreeSet<u64>,
    delete_returned: BTreeSet<u64>,
    /// Custom fields whose add_custom was started / returned.
    customs_started: usize,
    customs_returned: usize,
    defrags_started: usize,
    defrags: usize,
}

impl Model {
    fn take(&mut self, line: &str) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num =
            |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or_else(|| panic!("bad line {line:?}"));
        match w.first().copied() {
            Some("A") => self.started.extend(num(1)..num(1) + num(2)),
            Some("a") => self.returned.extend(num(1)..num(1) + num(2)),
            Some("D") => {
                self.delete_started.insert(num(1));
            }
            Some("d") => {
                self.delete_returned.insert(num(1));
            }
            Some("C") => self.customs_started = self.customs_started.max(num(1) as usize + 1),
            Some("c") => self.customs_returned = self.customs_returned.max(num(1) as usize + 1),
            Some("f") => self.defrags += 1,
            Some("F") => self.defrags_started += 1,
            Some("ready") => {}
            Some("error") => panic!("the child failed: {line}"),
            _ => panic!("unknown child line {line:?}"),
        }
    }

    /// Checks the store against the model; returns the next free id.
    fn check(&self, path: &Path, when: &str) -> u64 {
        let r = AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0))
            .unwrap_or_else(|e| panic!("{when}: the store does not open: {e}"));
        let customs = customs_in(&r);
        assert!(
            (self.customs_returned..=self.customs_started).contains(&customs),
            "{when}: {customs} custom fields, the model says {}..={}",
            self.customs_returned,
            self.customs_started
        );
        let len = r.len();
        let all: Vec<i64> = (0..len as i64).collect();
        let got = r.read_many(&all).unwrap_or_else(|e| panic!("{when}: reading failed: {e}"));
        let ids: Vec<u64> = got.iter().map(|s| id_of(&s.data)).collect();
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "{when}: ids out of order: {ids:?}");
        for (s, &id) in got.iter().zip(&ids) {
            assert_eq!(s.data, sample(id, customs), "{when}: sample {id} differs from what was written");
        }
        let present: BTreeSet<u64> = ids.iter().copied().collect();
        let lost: Vec<u64> =
            self.returned.difference(&present).filter(|id| !self.delete_started.contains(id)).copied().collect();
        assert!(lost.is_empty(), "{when}: committed samples lost: {lost:?}");
        let phantom: Vec<u64> = present.iter().filter(|id| !self.started.contains(id)).copied().collect();
        assert!(phantom.is_empty(), "{when}: samples never appended: {phantom:?}");
        let undeleted: Vec<u64> = present.intersection(&self.delete_returned).copied().collect();
        assert!(undeleted.is_empty(), "{when}: deleted samples back: {undeleted:?}");
        // The collated path agrees with the model too.
        if len > 0 {
            let mut out: Vec<CollatedBatch> = Vec::new();
            r.read_collated(std::slice::from_ref(&all), &mut out)
                .unwrap_or_else(|e| panic!("{when}: collated read failed: {e}"));
            let back = out[0].to_samples().unwrap();
            for (s, &id) in back.iter().zip(&ids) {
                assert_eq!(*s, sample(id, customs), "{when}: collated sample {id} differs");
            }
        }
        ids.last().map_or(0, |l| l + 1).max(self.started.last().map_or(0, |l| l + 1))
    }
}

fn run_child(path: &Path, seed: u64) -> std::process::Child {
    child_command(path).env("ATOMZARR_CRASH_SEED", seed.to_string()).spawn().expect("spawn the child")
}

fn child_command(path: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "crash_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

/// Kills a child that creates a store and writes its first samples, at
/// random moments: afterwards the path holds no store (create had not
/// returned), or a store with no sample, or one with all 20; never a
/// half-made one. Then create/open and write work.
#[test]
fn crash_during_create_and_first_write() {
    let dir = common::disk_tmpdir();
    let mut rng = StdRng::seed_from_u64(99);
    let mut outcomes = BTreeSet::new();
    for kill in 0..12 {
        let path = dir.path().join(format!("first{kill}.zarr"));
        let mut child = child_command(&path).env("ATOMZARR_CRASH_FIRST", "1").spawn().expect("spawn the child");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
        assert!(lines.any(|l| tagged(&l).is_some_and(|t| t == "ready")), "the child never became ready");
        std::thread::sleep(Duration::from_micros(rng.random_range(0..150_000)));
        let _ = child.kill();
        let _ = child.wait();
        let said: Vec<String> = lines.filter_map(|l| tagged(&l)).collect();
        let created = said.iter().any(|l| l == "created");
        let written = said.iter().any(|l| l == "written");
        let when = format!("first-write kill {kill} (created={created}, written={written})");
        let mut w = if path.exists() {
            let r = AtomicDataZarrReader::open(&path).unwrap_or_else(|e| panic!("{when}: does not open: {e}"));
            let got = common::read_all(&r);
            assert!(
                got.is_empty() || got.len() == 20,
                "{when}: {} samples, a first write is all or nothing",
                got.len()
            );
            assert!(!written || got.len() == 20, "{when}: the returned write is missing");
            for (s, id) in got.iter().zip(0..) {
                assert_eq!(*s, sample(id, 0), "{when}");
            }
            outcomes.insert(if got.is_empty() { "empty store" } else { "written store" });
            let mut w =
                AtomicDataZarrWriter::open(&path, config()).unwrap_or_else(|e| panic!("{when}: writer open: {e}"));
            if got.is_empty() {
                w.write(&(0..20).map(|id| sample(id, 0)).collect::<Vec<_>>())
                    .unwrap_or_else(|e| panic!("{when}: write: {e}"));
            }
            w
        } else {
            assert!(!created, "{when}: create returned but the store is missing");
            outcomes.insert("no store");
            let mut w =
                AtomicDataZarrWriter::create(&path, config()).unwrap_or_else(|e| panic!("{when}: create again: {e}"));
            w.write(&(0..20).map(|id| sample(id, 0)).collect::<Vec<_>>()).unwrap();
            w
        };
        w.append(&[sample(20, 0)]).unwrap_or_else(|e| panic!("{when}: the next append: {e}"));
        let got = common::read_all(&AtomicDataZarrReader::open(&path).unwrap());
        assert_eq!(got, (0..21).map(|id| sample(id, 0)).collect::<Vec<_>>(), "{when}");
    }
    println!("first-write kills: outcomes seen {outcomes:?}");
}

fn kill_loop(kills: usize, seed: u64) {
    let dir = common::disk_tmpdir();
    let path = dir.path().join("crash.zarr");
    let mut w = AtomicDataZarrWriter::create(&path, config()).unwrap();
    w.write(&(0..3).map(|id| sample(id, 0)).collect::<Vec<_>>()).unwrap();
    drop(w);
    let mut model = Model::default();
    model.started.extend(0..3);
    model.returned.extend(0..3);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops = 0;
    let mut lock_after_kill = Duration::ZERO;
    for kill in 0..kills {
        let mut child = run_child(&path, seed.wrapping_mul(1_000_003).wrapping_add(kill as u64));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(l) = tagged(&line) {
                    let _ = tx.send(l);
                }
            }
        });
        // Wait until the child has opened the store, then let it work for a
        // random while: long enough to be inside some call, anywhere in it.
        let first = rx.recv_timeout(Duration::from_secs(60)).expect("the child never became ready");
        assert_eq!(first, "ready");
        // Mostly short lives (kills inside the first calls), sometimes long
        // ones (kills inside a long defragment, or after many calls).
        let life = if rng.random_bool(0.8) { rng.random_range(0..150_000) } else { rng.random_range(150_000..900_000) };
        std::thread::sleep(Duration::from_micros(life));
        // The child holds the writer lock (it names itself, or is just
        // writing its line), so it is a writer holding the lock that dies.
        match StoreLock::acquire(&path, Duration::ZERO) {
            Err(Error::Locked { holder: Some(h), .. }) => assert_eq!(h.pid, child.id(), "kill {kill}: the holder"),
            Err(Error::Locked { holder: None, .. }) => {}
            other => panic!("kill {kill}: the child does not hold the lock: {other:?}"),
        }
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        // The kernel released its lock with it: the next writer gets it at once.
        let t = std::time::Instant::now();
        drop(
            StoreLock::acquire(&path, Duration::ZERO)
                .unwrap_or_else(|e| panic!("kill {kill}: lock after the kill: {e}")),
        );
        lock_after_kill = lock_after_kill.max(t.elapsed());
        reader.join().unwrap();
        for line in rx.try_iter() {
            ops += 1;
            model.take(&line);
        }
        assert!(status.code().is_none(), "the child exited by itself ({status}) instead of being killed");
        let when = format!("after kill {kill}");
        let next = model.check(&path, &when);
        // The next append works (through a writer that recovers first).
        let mut w = AtomicDataZarrWriter::open(&path, config()).unwrap_or_else(|e| panic!("{when}: writer open: {e}"));
        let customs = customs_in(&AtomicDataZarrReader::open(&path).unwrap());
        w.append(&[sample(next, customs)]).unwrap_or_else(|e| panic!("{when}: the next append failed: {e}"));
        model.started.insert(next);
        model.returned.insert(next);
        model.check(&path, &format!("{when}, after the next append"));
        if kill % 6 == 5 {
            // Completed defragments too (a child's is mostly killed midway).
            w.defragment(None).unwrap_or_else(|e| panic!("{when}: defragment: {e}"));
            model.defrags += 1;
            model.check(&path, &format!("{when}, after a defragment"));
        }
        assert_eq!(atomzarr::testing::clean_temporaries(&path).unwrap(), 0, "{when}: the writer left temporaries");
    }
    let r = AtomicDataZarrReader::open(&path).unwrap();
    println!(
        "{kills} kills of a writer holding the lock survived (the lock was free at once after each, at most {lock_after_kill:?} to take it): {} child reports (call starts and returns), {} samples committed, {} in the store, {} deletes, {} custom fields, {} defragments ({} started), nothing lost",
        ops,
        model.returned.len(),
        r.len(),
        model.delete_returned.len(),
        model.customs_returned,
        model.defrags,
        model.defrags_started
    );
}

#[test]
fn crash_kills_leave_every_store_openable() {
    kill_loop(36, 0x5eed);
}

#[test]
#[ignore = "soak: many more kills (ATOMZARR_CRASH_KILLS, default 400)"]
fn crash_soak() {
    let (kills, seed) = soak(400);
    kill_loop(kills, seed);
}

/// The soak's kills and seed: `ATOMZARR_CRASH_KILLS` (default `kills`) and
/// `ATOMZARR_CRASH_SEED` (default 7).
fn soak(kills: usize) -> (usize, u64) {
    let var = |name: &str| std::env::var(name).ok();
    let kills = var("ATOMZARR_CRASH_KILLS").and_then(|s| s.parse().ok()).unwrap_or(kills);
    (kills, var("ATOMZARR_CRASH_SEED").and_then(|s| s.parse().ok()).unwrap_or(7))
}

/// Samples in the store of the large-delete kills.
const DELETE_STORE: u64 = 4000;
/// The longest a large-delete child lives before its kill, in µs.
const LIFE_US: u64 = 2_000_000;

/// The large-delete kills' layout: masks of 64 rows a chunk, so one call's
/// masks span ~490 files; shards of 4 inner chunks. (The
/// tinier chunks of [`config`] make a 2,000-sample delete rewrite ~10,000
/// files, seconds a call.)
fn delete_config() -> ZarrWriteConfig {
    let core = zstd(16).with_shard_size(64);
    ZarrWriteConfig::default().with_meta(zstd(64)).with_core(core).with_custom(core)
}

/// The child of the large-delete kills: calls that each delete 1,000 to
/// 2,000 of the samples left (their physical indices, which are their ids:
/// this store is never appended to or defragmented), until killed.
fn child_deletes(path: &Path, seed: u64) -> atomzarr::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = AtomicDataZarrWriter::open(path, delete_config())?;
    say("ready".into());
    for call in 0.. {
        let r = AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0))?;
        let mut left: Vec<usize> = (0..r.len()).map(|k| r.sample_metadata(k).physical_index).collect();
        if left.len() < 1000 {
            say("exhausted".into());
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        let k = rng.random_range(1000..=2000usize).min(left.len() / 2);
        for i in 0..k {
            let j = rng.random_range(i..left.len());
            left.swap(i, j);
        }
        let ids: Vec<String> = left[..k].iter().map(|p| p.to_string()).collect();
        say(format!("X {call} {}", ids.join(",")));
        let t = std::time::Instant::now();
        w.delete(&left[..k])?;
        say(format!("x {call} {}", t.elapsed().as_millis()));
    }
    Ok(())
}

/// Array `rel` of the store read whole through zarrs (crc32c checked).
fn raw_array(path: &Path, rel: &str) -> Vec<u8> {
    let store = atomzarr::testing::open_store(path).unwrap();
    let a = atomzarr::testing::open_array(&atomzarr::Location::Local(path.into()), &store, rel).unwrap();
    let subset: Vec<std::ops::Range<u64>> = a.shape().iter().map(|&d| 0..d).collect();
    let got: ArrayBytes = a.retrieve_array_subset_opt(&subset, &CodecOptions::default()).unwrap();
    got.into_fixed().unwrap().into_owned()
}

/// What the large-delete kills saw, over all stores.
#[derive(Default, Debug)]
struct DeleteOutcomes {
    /// Kills inside a call, by what its masks showed: none or all switched off.
    inside_none: usize,
    inside_all: usize,
    /// Of those with all masks off: some row of the call still holding data.
    rows_partly_zeroed: usize,
    calls_returned: usize,
    /// Their time, summed.
    call_ms: u64,
}

/// Checks the store against the calls the child reported: `done` returned,
/// `open` (the call a kill interrupted, if any) started only.
fn check_deletes(path: &Path, done: &BTreeSet<usize>, open: &[usize], out: &mut DeleteOutcomes, when: &str) {
    let n = DELETE_STORE as usize;
    let atoms: Vec<i64> = bytemuck::pod_collect_to_vec(&raw_array(path, "meta/atoms_ptr"));
    let edges: Vec<i64> = bytemuck::pod_collect_to_vec(&raw_array(path, "meta/edges_ptr"));
    let (sm, am, em) =
        (raw_array(path, "meta/samples_mask"), raw_array(path, "meta/atoms_mask"), raw_array(path, "meta/edges_mask"));
    // The three masks agree on every sample.
    for p in 0..n {
        let rows = |m: &[u8], ptr: &[i64]| m[ptr[p] as usize..ptr[p + 1] as usize].to_vec();
        assert!(
            rows(&am, &atoms).iter().all(|&b| b == sm[p]),
            "{when}: atoms_mask of sample {p} differs from samples_mask"
        );
        assert!(
            rows(&em, &edges).iter().all(|&b| b == sm[p]),
            "{when}: edges_mask of sample {p} differs from samples_mask"
        );
    }
    let off: BTreeSet<usize> = (0..n).filter(|&p| sm[p] == 0).collect();
    let open_off = open.iter().filter(|p| off.contains(p)).count();
    assert!(
        open_off == 0 || open_off == open.len(),
        "{when}: {open_off} of the {} masks of the interrupted call are off",
        open.len()
    );
    let want_off: BTreeSet<usize> =
        done.iter().copied().chain(if open_off > 0 { open.to_vec() } else { vec![] }).collect();
    assert_eq!(off, want_off, "{when}: the masked samples are not those of the calls made");
    // Rows: the kept samples as written; masked ones zeroed, all of them
    // once their call returned, each row zero or as written while the call
    // that masked them was interrupted.
    let written: Vec<AtomicData> = (0..DELETE_STORE).map(|id| sample(id, 0)).collect();
    // Whether some row of the interrupted call still holds its data.
    let mut left_data = false;
    for (name, f) in &written[0].fields {
        let raw = raw_array(path, &format!("core/{name}"));
        let row = f.data.dtype().size() * f.trailing_shape().iter().product::<usize>();
        let ptr = match f.level {
            Level::Atom => atoms.clone(),
            Level::Edge => edges.clone(),
            Level::System => (0..=n as i64).collect(),
        };
        for (p, s) in written.iter().enumerate() {
            let mut want = s.fields[name].data.as_bytes().to_vec();
            if name == "neighbor_list" {
                let local: Vec<i64> = bytemuck::pod_collect_to_vec(&want);
                want = local.iter().flat_map(|x| (x + atoms[p]).to_le_bytes()).collect();
            }
            let got = &raw[ptr[p] as usize * row..ptr[p + 1] as usize * row];
            if !off.contains(&p) {
                assert_eq!(got, &want[..], "{when}: {name} rows of kept sample {p} changed");
            } else if open_off > 0 && open.contains(&p) {
                for (g, w) in got.chunks(row.max(1)).zip(want.chunks(row.max(1))) {
                    let zero = g.iter().all(|&b| b == 0);
                    assert!(g == w || zero, "{when}: a {name} row of sample {p} is neither zero nor as written");
                    left_data |= !zero;
                }
            } else {
                assert!(got.iter().all(|&b| b == 0), "{when}: {name} rows of deleted sample {p} are not zero");
            }
        }
    }
    if !open.is_empty() {
        if open_off == 0 {
            out.inside_none += 1;
        } else {
            out.inside_all += 1;
            out.rows_partly_zeroed += usize::from(left_data);
        }
    }
    // And the reader agrees.
    let r = AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0))
        .unwrap_or_else(|e| panic!("{when}: the store does not open: {e}"));
    assert_eq!(r.len(), n - off.len(), "{when}: reader length");
    let got = r.read_many(&(0..r.len() as i64).collect::<Vec<_>>()).unwrap();
    for (k, s) in got.iter().enumerate() {
        assert_eq!(s.data, written[r.sample_metadata(k).physical_index], "{when}: kept sample {k}");
    }
}

fn fresh_delete_store(path: &Path) {
    if path.exists() {
        std::fs::remove_dir_all(path).unwrap();
    }
    let mut w = AtomicDataZarrWriter::create(path, delete_config()).unwrap();
    w.write(&(0..DELETE_STORE).map(|id| sample(id, 0)).collect::<Vec<_>>()).unwrap();
}

fn delete_kill_loop(kills: usize, seed: u64) {
    let dir = common::disk_tmpdir();
    let path = dir.path().join("deletes.zarr");
    fresh_delete_store(&path);
    let mut done: BTreeSet<usize> = BTreeSet::new();
    let mut out = DeleteOutcomes::default();
    let mut rng = StdRng::seed_from_u64(seed);
    for kill in 0..kills {
        let mut child = child_command(&path)
            .env("ATOMZARR_CRASH_DELETES", "1")
            .env("ATOMZARR_CRASH_SEED", (seed * 1000 + kill as u64).to_string())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(l) = tagged(&line) {
                    let _ = tx.send(l);
                }
            }
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(60)).expect("the child never became ready"), "ready");
        std::thread::sleep(Duration::from_micros(rng.random_range(0..LIFE_US)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        assert!(status.code().is_none(), "the child exited by itself ({status})");
        let mut open: Vec<usize> = Vec::new();
        for line in rx.try_iter() {
            let w: Vec<&str> = line.splitn(3, ' ').collect();
            match w[0] {
                "X" => open = w[2].split(',').map(|x| x.parse().unwrap()).collect(),
                "x" => {
                    done.extend(open.drain(..));
                    out.calls_returned += 1;
                    out.call_ms += w[2].parse::<u64>().unwrap_or(0);
                }
                "error" => panic!("the child failed: {line}"),
                _ => {}
            }
        }
        let when = format!("after delete kill {kill}");
        check_deletes(&path, &done, &open, &mut out, &when);
        // The next writer clears what the kill left and deletes again.
        let mut w =
            AtomicDataZarrWriter::open(&path, delete_config()).unwrap_or_else(|e| panic!("{when}: writer open: {e}"));
        assert!(!atomzarr::store::format::sibling(&path, ".atomzarr-deleting").exists(), "{when}: copy of meta/ left");
        assert_eq!(atomzarr::testing::clean_temporaries(&path).unwrap(), 0, "{when}: temporaries left");
        let sm = raw_array(&path, "meta/samples_mask");
        done.extend(open.iter().filter(|&&p| sm[p] == 0));
        // Finish a call whose masks landed (its rows are zeroed again whole).
        let finish: Vec<usize> = open.iter().copied().filter(|&p| sm[p] == 0).collect();
        if !finish.is_empty() {
            w.delete(&finish).unwrap_or_else(|e| panic!("{when}: delete again: {e}"));
            check_deletes(&path, &done, &[], &mut DeleteOutcomes::default(), &format!("{when}, deleted again"));
        }
        drop(w);
        if (DELETE_STORE as usize) - done.len() < 2000 {
            fresh_delete_store(&path);
            done.clear();
        }
    }
    println!(
        "{kills} kills during large deletes: {} inside a call with no mask switched off, {} with all (rows partly zeroed in {}), {} calls returned ({} ms each on average)",
        out.inside_none,
        out.inside_all,
        out.rows_partly_zeroed,
        out.calls_returned,
        out.call_ms / out.calls_returned.max(1) as u64
    );
    assert!(out.inside_none + out.inside_all > 0, "no kill landed inside a delete");
}

#[test]
fn crash_during_large_deletes() {
    delete_kill_loop(12, 0xde1e7e);
}

#[test]
#[ignore = "soak: many more large-delete kills (ATOMZARR_CRASH_KILLS, default 100)"]
fn crash_soak_large_deletes() {
    let (kills, seed) = soak(100);
    delete_kill_loop(kills, seed);
}
