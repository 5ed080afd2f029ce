//! Concurrent use of one store by several processes (never threads: the
//! writer lock is the operating system's, and only processes test it):
//!
//! - two `atomzarr import`s into one store at once: each completes or fails
//!   with the lock error, and the store then holds whole frames only, every
//!   frame of each completed import in one run, in file order (with
//!   `--wait`, both complete); for an existing store and a new one;
//! - one process appending in small batches while other processes read the
//!   store and check every sample: each read sees some commit, whole, and
//!   a reader opened before the appends keeps its snapshot until it
//!   refreshes;
//! - writers in two processes taking turns through the lock (`--wait` in
//!   the library: `with_lock_timeout`), one of them defragmenting, which
//!   swaps the whole store folder while the other waits for its lock;
//! - the lock error names the holder, a waiting writer gets the lock when
//!   the holder lets go, and a killed holder leaves no lock behind.
//!
//! The content of every frame and sample is a function of its id, so each
//! check compares with that function, not with what another path read.
//! `ATOMZARR_LOCK_FRAMES` sets the frames per import file (default 2,000).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use atomzarr::store::lock::StoreLock;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Error, Reader, ReaderExt, ReaderOptions, ZarrWriteConfig,
};

const ROLE: &str = "ATOMZARR_CONCURRENT_ROLE";
const STORE: &str = "ATOMZARR_CONCURRENT_STORE";
/// Lines children report start with this (libtest prints its own lines).
const TAG: &str = "@@";

fn frames() -> usize {
    std::env::var("ATOMZARR_LOCK_FRAMES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
}

/// A frame's atomic numbers, positions, forces and energy.
type Frame = (Vec<i64>, Vec<[f32; 3]>, Vec<[f32; 3]>, f32);

/// Frame `i` of input file `file` (0 or 1): 2-7 atoms; every value a
/// multiple of 1/8 (exact in float32); the energy names the frame.
fn frame_values(file: usize, i: usize) -> Frame {
    let n = 2 + (i * 7 + file * 3) % 6;
    let z: Vec<i64> = (0..n).map(|k| [1, 6, 7, 8][(i + k + file) % 4]).collect();
    let pos: Vec<[f32; 3]> =
        (0..n).map(|k| [(i % 97) as f32 * 0.125, k as f32 * 1.5, file as f32 * 4.0 + (i % 13) as f32 * 0.25]).collect();
    let forces: Vec<[f32; 3]> = (0..n).map(|k| [k as f32 - 0.5, -((i % 31) as f32) * 0.125, file as f32]).collect();
    (z, pos, forces, (file * 100_000 + i) as f32)
}

/// Extended XYZ of `frames()` frames of input `file`.
fn write_extxyz(path: &Path, file: usize) {
    const SYMBOL: [(i64, &str); 4] = [(1, "H"), (6, "C"), (7, "N"), (8, "O")];
    let mut s = String::new();
    for i in 0..frames() {
        let (z, pos, forces, energy) = frame_values(file, i);
        s.push_str(&format!("{}\nProperties=species:S:1:pos:R:3:forces:R:3 energy={energy} pbc=\"F F F\"\n", z.len()));
        for k in 0..z.len() {
            let sym = SYMBOL.iter().find(|(n, _)| *n == z[k]).map(|(_, s)| *s).unwrap_or("X");
            let (p, f) = (pos[k], forces[k]);
            s.push_str(&format!("{sym} {} {} {} {} {} {}\n", p[0], p[1], p[2], f[0], f[1], f[2]));
        }
    }
    std::fs::write(path, s).unwrap();
}

/// The (file, frame) of a stored sample, checked whole against the frame
/// it names: atoms, positions, forces, energy.
fn frame_of(s: &AtomicData, what: &str) -> (usize, usize) {
    let energy = s.fields["energy"].data.get_f64(0).unwrap();
    let (file, i) = ((energy as usize) / 100_000, (energy as usize) % 100_000);
    let (z, pos, forces, _) = frame_values(file, i);
    let got_z = s.fields["atomic_numbers"].data.to_i64_vec().unwrap();
    let got_pos = s.fields["positions"].data.to_f64_vec();
    let got_f = s.fields["forces"].data.to_f64_vec();
    let flat = |v: &[[f32; 3]]| v.iter().flatten().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    assert_eq!(got_z, z, "{what}: frame {file}/{i}: atomic numbers");
    assert_eq!(got_pos, flat(&pos), "{what}: frame {file}/{i}: positions (mixed frames?)");
    assert_eq!(got_f, flat(&forces), "{what}: frame {file}/{i}: forces (mixed frames?)");
    (file, i)
}

fn cli(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_atomzarr"));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Two imports into `store` at once (`wait`: with `--wait 120`). Returns,
/// per input file, whether its import completed.
fn two_imports(dir: &Path, store: &Path, wait: bool) -> [bool; 2] {
    let inputs = [dir.join("a.extxyz"), dir.join("b.extxyz")];
    let children: Vec<Child> = inputs
        .iter()
        .map(|input| {
            let mut args = vec!["import", input.to_str().unwrap(), store.to_str().unwrap(), "--batch-frames", "200"];
            if wait {
                args.extend(["--wait", "120"]);
            }
            cli(&args).spawn().unwrap()
        })
        .collect();
    let mut done = [false; 2];
    for (k, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            done[k] = true;
        } else {
            assert!(!wait, "import {k} failed although it waits for the lock: {stderr}");
            assert!(
                stderr.contains("writer lock is held by pid") && stderr.contains(store.to_str().unwrap()),
                "import {k} failed with something else than the lock: {stderr}"
            );
        }
    }
    done
}

/// The input files of the completed imports.
fn completed(done: [bool; 2]) -> Vec<usize> {
    (0..2).filter(|&k| done[k]).collect()
}

/// Checks that `store` holds one whole run of frames per import of
/// `want` (input files, in any order), each run every frame of its file in
/// file order, every frame whole.
fn check_runs(store: &Path, want: &[usize], what: &str) {
    let r = AtomicDataZarrReader::open_opt(store, ReaderOptions::default().with_cache_bytes(0)).unwrap();
    let got = common::read_all(&r);
    let n = frames();
    let runs = want.len();
    assert_eq!(got.len(), runs * n, "{what}: {} samples, expected {runs} whole imports of {n}", got.len());
    let ids: Vec<(usize, usize)> =
        got.iter().enumerate().map(|(k, s)| frame_of(s, &format!("{what}, sample {k}"))).collect();
    let mut seen = Vec::new();
    for (j, run) in ids.chunks(n).enumerate() {
        let file = run[0].0;
        let want: Vec<(usize, usize)> = (0..n).map(|i| (file, i)).collect();
        assert_eq!(run, want.as_slice(), "{what}: run {j} is not one whole import of file {file}, in order");
        seen.push(file);
    }
    let mut want = want.to_vec();
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want, "{what}: the runs are the completed imports'");
}

#[test]
fn two_imports_at_once_each_complete_or_fail_locked_and_leave_whole_frames() {
    let dir = common::disk_tmpdir();
    write_extxyz(&dir.path().join("a.extxyz"), 0);
    write_extxyz(&dir.path().join("b.extxyz"), 1);
    let t = Instant::now();
    // Into an existing store (made by importing a first), without waiting.
    let store = dir.path().join("existing.zarr");
    let first = cli(&["import", dir.path().join("a.extxyz").to_str().unwrap(), store.to_str().unwrap()]);
    assert!(out_ok(first), "the first import");
    let mut want = vec![0];
    let done = two_imports(dir.path(), &store, false);
    assert!(done.iter().any(|d| *d), "one of the two imports completes");
    println!("existing store, no wait: completed {done:?}");
    want.extend(completed(done));
    check_runs(&store, &want, "existing store, no wait");
    // With --wait both complete, one after the other.
    let done = two_imports(dir.path(), &store, true);
    assert_eq!(done, [true, true]);
    want.extend(completed(done));
    check_runs(&store, &want, "existing store, --wait");
    // Into a store neither finds: one creates it, the other waits, then appends.
    let fresh = dir.path().join("fresh.zarr");
    let done = two_imports(dir.path(), &fresh, true);
    assert_eq!(done, [true, true]);
    check_runs(&fresh, &completed(done), "new store, --wait");
    // And without waiting: one creates it, the other fails (or, started
    // late, appends after it).
    let fresh2 = dir.path().join("fresh2.zarr");
    let done = two_imports(dir.path(), &fresh2, false);
    assert!(done.iter().any(|d| *d));
    println!("new store, no wait: completed {done:?}");
    check_runs(&fresh2, &completed(done), "new store, no wait");
    println!("two imports of {} frames each, four rounds: {:.1} s", frames(), t.elapsed().as_secs_f64());
}

fn out_ok(mut c: Command) -> bool {
    let out = c.output().unwrap();
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    out.status.success()
}

/// Sample `id`: 1-5 atoms, values functions of `id`, exact in float32.
fn sample(id: u64) -> AtomicData {
    let n = 1 + (id % 5) as usize;
    let z: Vec<i64> = (0..n).map(|k| 1 + ((id as usize + k) % 9) as i64).collect();
    let pos: Vec<[f32; 3]> = (0..n).map(|k| [id as f32 * 0.25, k as f32, (id % 11) as f32]).collect();
    AtomicData::new(z, pos)
        .unwrap()
        .with_forces((0..n).map(|k| [k as f32, -(id as f32) * 0.5, 1.0]).collect())
        .unwrap()
        .with_energy(id as f32)
}

fn id_of(s: &AtomicData) -> u64 {
    s.fields["energy"].data.get_f64(0).unwrap() as u64
}

/// Every sample of `r` is `sample(id)` for ids `0..len`, through the
/// per-sample and the collated paths; returns `len`.
fn check_prefix(r: &AtomicDataZarrReader, what: &str) -> Result<usize, String> {
    let len = r.len();
    let all: Vec<i64> = (0..len as i64).collect();
    let got = r.read_many(&all).map_err(|e| format!("{what}: read_many: {e}"))?;
    for (k, s) in got.iter().enumerate() {
        if s.data != sample(k as u64) {
            return Err(format!("{what}: sample {k} of {len} is not what was appended (id {})", id_of(&s.data)));
        }
    }
    if len > 0 {
        let mut out = Vec::new();
        r.read_collated(std::slice::from_ref(&(0..len as i64).collect()), &mut out)
            .map_err(|e| format!("{what}: read_collated: {e}"))?;
        let back = out[0].to_samples().map_err(|e| format!("{what}: {e}"))?;
        if back.iter().enumerate().any(|(k, s)| *s != sample(k as u64)) {
            return Err(format!("{what}: a collated sample differs"));
        }
    }
    Ok(len)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{TAG} {line}");
    let _ = out.flush();
}

fn tagged(line: &str) -> Option<String> {
    line.find(TAG).map(|i| line[i + TAG.len()..].trim().to_string())
}

fn child(role: &str, store: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "concurrent_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(STORE, store)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits for a child and returns its tagged lines; panics if it failed.
fn finish(child: Child, what: &str) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().filter_map(tagged).collect();
    assert!(out.status.success(), "{what} failed: {lines:?}");
    lines
}

const APPENDS: u64 = 150;
const BATCH: u64 = 3;

/// Not a test of its own: the body of the child processes.
#[test]
#[ignore = "run by the tests of this file as a child process"]
fn concurrent_child() {
    let (Ok(role), Ok(store)) = (std::env::var(ROLE), std::env::var(STORE)) else { return };
    let store = PathBuf::from(store);
    let result = match role.as_str() {
        "appender" => appender(&store),
        "reader" => reader(&store),
        "holder" => holder(&store),
        "turns-defragment" => turns(&store, 1_000_000, true),
        "turns-append" => turns(&store, 2_000_000, false),
        other => Err(format!("unknown role {other}")),
    };
    if let Err(e) = result {
        say(&format!("error {e}"));
        std::process::exit(3);
    }
}

/// Appends `APPENDS` batches of `BATCH` samples, then leaves a marker.
fn appender(store: &Path) -> Result<(), String> {
    let mut w = AtomicDataZarrWriter::open(store, ZarrWriteConfig::default()).map_err(|e| e.to_string())?;
    let mut next = AtomicDataZarrReader::open(store).map_err(|e| e.to_string())?.len() as u64;
    for _ in 0..APPENDS {
        let batch: Vec<AtomicData> = (next..next + BATCH).map(sample).collect();
        w.append(&batch).map_err(|e| e.to_string())?;
        next += BATCH;
    }
    std::fs::write(store.with_extension("done"), b"").map_err(|e| e.to_string())?;
    say(&format!("appended up to {next}"));
    Ok(())
}

/// Reads the store over and over until the appender is done: a reader
/// opened first keeps its snapshot, a refreshed one and fresh ones see
/// growing, whole commits.
fn reader(store: &Path) -> Result<(), String> {
    let options = ReaderOptions::default().with_cache_bytes(16 << 20);
    let early = AtomicDataZarrReader::open_opt(store, options).map_err(|e| e.to_string())?;
    let early_len = check_prefix(&early, "reader opened before the appends")?;
    let refreshed = AtomicDataZarrReader::open_opt(store, options).map_err(|e| e.to_string())?;
    let (mut last, mut rounds, mut lens) = (0usize, 0usize, std::collections::BTreeSet::new());
    let done = store.with_extension("done");
    loop {
        let finished = done.exists();
        refreshed.refresh().map_err(|e| format!("refresh: {e}"))?;
        let len = check_prefix(&refreshed, "refreshed reader")?;
        if len < last || len % BATCH as usize != 0 {
            return Err(format!("refreshed reader: {len} samples after {last} (not a commit of {BATCH})"));
        }
        last = len;
        lens.insert(len);
        let fresh = AtomicDataZarrReader::open_opt(store, options).map_err(|e| format!("open: {e}"))?;
        check_prefix(&fresh, "fresh reader")?;
        if check_prefix(&early, "reader opened before the appends")? != early_len {
            return Err("the early reader's length changed without a refresh".into());
        }
        rounds += 1;
        if finished {
            break;
        }
    }
    say(&format!("rounds {rounds} commits_seen {} last {last}", lens.len()));
    Ok(())
}

#[test]
fn readers_in_other_processes_see_whole_commits_while_one_appends() {
    let dir = common::disk_tmpdir();
    let store = dir.path().join("shared.zarr");
    let mut w = AtomicDataZarrWriter::create(&store, ZarrWriteConfig::default()).unwrap();
    w.write(&(0..30).map(sample).collect::<Vec<_>>()).unwrap();
    drop(w);
    let readers: Vec<Child> = (0..2).map(|_| child("reader", &store)).collect();
    let appender = child("appender", &store);
    let said = finish(appender, "the appender");
    assert!(said.iter().any(|l| l.starts_with("appended up to")), "{said:?}");
    for (k, r) in readers.into_iter().enumerate() {
        let said = finish(r, &format!("reader {k}"));
        let line = said.iter().find(|l| l.starts_with("rounds")).unwrap_or_else(|| panic!("reader {k}: {said:?}"));
        println!("reader {k}: {line}");
        let seen: usize = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(seen >= 2, "reader {k} saw only {seen} commits: it never read during the appends");
    }
    let r = AtomicDataZarrReader::open(&store).unwrap();
    assert_eq!(check_prefix(&r, "after").unwrap() as u64, 30 + APPENDS * BATCH);
}

/// Holds a writer of the store until its stdin closes.
fn holder(store: &Path) -> Result<(), String> {
    let w = AtomicDataZarrWriter::open(store, ZarrWriteConfig::default()).map_err(|e| e.to_string())?;
    say("holding");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    drop(w);
    Ok(())
}

fn holder_child(store: &Path) -> (Child, impl Iterator<Item = String>) {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "concurrent_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, "holder")
        .env(STORE, store)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines().map_while(Result::ok).filter_map(|l| tagged(&l));
    assert_eq!(lines.next().as_deref(), Some("holding"), "the holder never took the lock");
    (c, lines)
}

#[test]
fn the_lock_names_its_holder_hands_over_to_a_waiter_and_dies_with_it() {
    let dir = common::disk_tmpdir();
    let store = dir.path().join("locked.zarr");
    AtomicDataZarrWriter::create(&store, ZarrWriteConfig::default()).unwrap().write(&[sample(0)]).unwrap();

    // Held by another process: refused at once, naming it.
    let (mut c, _lines) = holder_child(&store);
    let t = Instant::now();
    match AtomicDataZarrWriter::open(&store, ZarrWriteConfig::default()) {
        Err(Error::Locked { store: s, holder: Some(h), waited }) => {
            assert_eq!(s, atomzarr::Location::Local(store.clone()));
            assert_eq!(h.pid, c.id());
            assert!(!h.host.is_empty());
            assert!(h.since <= std::time::SystemTime::now());
            assert_eq!(waited, Duration::ZERO);
        }
        other => panic!("expected Locked, got {:?}", other.map(|w| w.path().to_path_buf())),
    }
    let refused = t.elapsed();
    let msg = AtomicDataZarrWriter::open(&store, ZarrWriteConfig::default()).err().unwrap().to_string();
    assert!(msg.contains(&format!("pid {}", c.id())) && msg.contains(store.to_str().unwrap()), "{msg}");
    println!("refused in {refused:?}: {msg}");

    // A waiting writer gets it when the holder lets go.
    let waiter = {
        let store = store.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let w = AtomicDataZarrWriter::open(
                &store,
                ZarrWriteConfig::default().with_lock_timeout(Duration::from_secs(60)),
            );
            (w.map(drop), t.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    drop(c.stdin.take()); // the holder drops its writer and exits
    let (got, waited) = waiter.join().unwrap();
    got.unwrap();
    assert!(waited >= Duration::from_millis(250), "the waiter got the lock before the holder let go ({waited:?})");
    c.wait().unwrap();

    // A killed holder leaves no lock: the next writer gets it at once.
    let (mut c, _lines) = holder_child(&store);
    assert!(matches!(StoreLock::acquire(&store, Duration::ZERO), Err(Error::Locked { .. })));
    c.kill().unwrap();
    c.wait().unwrap();
    let t = Instant::now();
    let mut w = AtomicDataZarrWriter::open(&store, ZarrWriteConfig::default()).unwrap();
    println!("lock taken {:?} after the holder was killed", t.elapsed());
    w.append(&[sample(1)]).unwrap();
    assert_eq!(check_prefix(&AtomicDataZarrReader::open(&store).unwrap(), "after the kill").unwrap(), 2);
}

const TURNS: u64 = 12;

/// Takes turns with another process: opens a writer (waiting for the lock),
/// appends one sample with an id from its own range, and (`defragment`)
/// deletes that sample's predecessor from its range and defragments.
fn turns(store: &Path, base: u64, defragment: bool) -> Result<(), String> {
    let wait = ZarrWriteConfig::default().with_lock_timeout(Duration::from_secs(120));
    for t in 0..TURNS {
        let mut w = AtomicDataZarrWriter::open(store, wait.clone()).map_err(|e| format!("turn {t}: {e}"))?;
        let id = base + t;
        w.append(&[sample_with_id(id)]).map_err(|e| format!("turn {t}: append: {e}"))?;
        say(&format!("a {id}"));
        if defragment && t > 0 {
            let r = AtomicDataZarrReader::open(store).map_err(|e| e.to_string())?;
            let ids: Vec<u64> =
                common::read_all(&r).iter().map(|s| s.fields["energy"].data.get_f64(0).unwrap() as u64).collect();
            let k = ids.iter().position(|&x| x == id - 1).ok_or(format!("turn {t}: {} missing", id - 1))?;
            w.delete(&[r.sample_metadata(k).physical_index]).map_err(|e| format!("turn {t}: delete: {e}"))?;
            say(&format!("d {}", id - 1));
            w.defragment(None).map_err(|e| format!("turn {t}: defragment: {e}"))?;
        }
    }
    Ok(())
}

/// A sample whose energy is `id` (below 2^24, exact in float32).
fn sample_with_id(id: u64) -> AtomicData {
    sample(id % 1000).with_energy(id as f32)
}

#[test]
fn writers_in_two_processes_take_turns_through_the_lock_across_defragments() {
    let dir = common::disk_tmpdir();
    let store = dir.path().join("turns.zarr");
    AtomicDataZarrWriter::create(&store, ZarrWriteConfig::default()).unwrap().write(&[sample_with_id(7)]).unwrap();
    let a = child("turns-defragment", &store);
    let b = child("turns-append", &store);
    let (said_a, said_b) = (finish(a, "the defragmenting writer"), finish(b, "the appending writer"));
    let mut want: std::collections::BTreeSet<u64> = [7].into();
    for line in said_a.iter().chain(&said_b) {
        let mut w = line.split_whitespace();
        match (w.next(), w.next().and_then(|x| x.parse::<u64>().ok())) {
            (Some("a"), Some(id)) => assert!(want.insert(id), "{id} appended twice"),
            (Some("d"), Some(id)) => assert!(want.remove(&id), "{id} deleted but not there"),
            _ => panic!("unknown line {line:?}"),
        }
    }
    let r = AtomicDataZarrReader::open(&store).unwrap();
    let got = common::read_all(&r);
    let ids: std::collections::BTreeSet<u64> = got.iter().map(id_of).collect();
    assert_eq!(ids, want, "every sample appended and not deleted, once");
    assert_eq!(got.len(), want.len());
    for s in &got {
        assert_eq!(*s, sample_with_id(id_of(s)), "sample {}", id_of(s));
    }
}
