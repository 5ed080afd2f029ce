//! `atomzarr delete`, `filter`, `defragment` and `verify` through the
//! built binary: deletes against a model of the store; `filter`'s
//! selections against a reference the test computes from the samples it
//! wrote (its own least squares, medians and pairwise comparisons, not the
//! library's); after `filter --apply` and `defragment`, the raw arrays as
//! the toolkit reads them (masks, pointers, zeroed rows) and every read
//! path hold exactly the kept samples.
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "store_model/mod.rs"]
mod store_model;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use atomzarr::store::format;
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Field, HostData, Level, Reader, ReaderExt,
    Shuffle, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use serde_json::{Value, json};
use store_model::*;

const E0: [(i64, f64); 3] = [(1, -3.0), (6, -8.0), (8, -5.0)];
const COMPOSITIONS: [&[i64]; 4] = [&[1, 1, 8], &[6, 8, 8], &[1, 1, 1, 1, 6], &[6, 6, 1, 1, 1, 1, 8]];

/// The curation set: samples of four compositions whose energies follow
/// per-element references with a little noise, a few of them planted
/// outliers (energy per atom +4 eV), some with a huge force on one atom,
/// some exact copies of an earlier sample, some without a stress (NaN).
struct Planted {
    samples: Vec<AtomicData>,
    energy: BTreeSet<usize>,
    force: BTreeSet<usize>,
    duplicate: BTreeSet<usize>,
    no_stress: BTreeSet<usize>,
}

fn planted(n: usize) -> Planted {
    let mut rng = SplitMix(91);
    let mut p = Planted {
        samples: vec![],
        energy: BTreeSet::new(),
        force: BTreeSet::new(),
        duplicate: BTreeSet::new(),
        no_stress: BTreeSet::new(),
    };
    for i in 0..n {
        if i > 10 && i % 17 == 0 {
            let of = rng.below(i as u64) as usize;
            let copy = p.samples[of].clone();
            p.samples.push(copy);
            p.duplicate.insert(i);
            // A copy of an outlier, of a huge force or of a missing stress
            // is one too.
            for set in [&mut p.energy, &mut p.force, &mut p.no_stress] {
                if set.contains(&of) {
                    set.insert(i);
                }
            }
            continue;
        }
        let z = COMPOSITIONS[i % 4].to_vec();
        let atoms = z.len();
        let pos: Vec<[f32; 3]> = (0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect();
        let mut forces: Vec<[f32; 3]> = (0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect();
        if i % 23 == 5 {
            forces[atoms - 1] = [40.0, -30.0, 5.0];
            p.force.insert(i);
        }
        let mut e: f64 = z.iter().map(|z| E0.iter().find(|(w, _)| w == z).unwrap().1).sum();
        e += atoms as f64 * (rng.below(2000) as f64 - 1000.0) * 1e-5;
        if i % 29 == 7 {
            e += 4.0 * atoms as f64;
            p.energy.insert(i);
        }
        let stress = if i % 13 == 3 {
            p.no_stress.insert(i);
            [[f32::NAN; 3]; 3]
        } else {
            [[rng.f32(), 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        };
        let cell = [[8.0, 0.0, 0.0], [0.0, 8.0, 0.0], [0.0, 0.0, 8.0]];
        let pairs: Vec<[i64; 2]> = (0..atoms).map(|a| [a as i64, ((a + 1) % atoms) as i64]).collect();
        let s = AtomicData::new(z, pos)
            .unwrap()
            .with_forces(forces)
            .unwrap()
            .with_energy(e as f32)
            .with_cell(cell)
            .with_pbc([true; 3])
            .with_stress(stress)
            .with_neighbor_list(pairs, None)
            .unwrap();
        p.samples.push(s);
    }
    p
}

fn config() -> ZarrWriteConfig {
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(16);
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

fn f64s(s: &AtomicData, name: &str) -> Vec<f64> {
    s.field(name).unwrap().data.to_f64_vec()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Members of `idx` whose modified z-score `0.6745 (x - med) / MAD` of `x` exceeds `bound`.
fn robust(x: &BTreeMap<usize, f64>, idx: &[usize], bound: f64) -> BTreeSet<usize> {
    let m = median(idx.iter().map(|i| x[i]).collect());
    let mad = median(idx.iter().map(|i| (x[i] - m).abs()).collect());
    if mad == 0.0 {
        return BTreeSet::new();
    }
    idx.iter().copied().filter(|i| (0.6745 * (x[i] - m) / mad).abs() > bound).collect()
}

/// Least squares `a x = b` through the normal equations, by Gauss-Jordan.
fn lstsq(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let k = a[0].len();
    let mut m: Vec<Vec<f64>> = (0..k)
        .map(|r| {
            let mut row: Vec<f64> = (0..k).map(|c| a.iter().map(|x| x[r] * x[c]).sum()).collect();
            row.push(a.iter().zip(b).map(|(x, y)| x[r] * y).sum());
            row
        })
        .collect();
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| m[i][c].abs().total_cmp(&m[j][c].abs())).unwrap();
        m.swap(c, p);
        let pivot = m[c][c];
        m[c].iter_mut().for_each(|v| *v /= pivot);
        for r in 0..k {
            if r != c {
                let f = m[r][c];
                let row_c = m[c].clone();
                m[r].iter_mut().zip(row_c).for_each(|(v, w)| *v -= f * w);
            }
        }
    }
    m.iter().map(|row| row[k]).collect()
}

/// The selections, computed from the samples themselves.
fn reference(
    samples: &[AtomicData],
    max_force: f64,
    z: f64,
    by_composition: bool,
) -> BTreeMap<&'static str, BTreeSet<usize>> {
    let mut out = BTreeMap::new();
    let force = (0..samples.len())
        .filter(|&i| {
            f64s(&samples[i], "forces").chunks(3).any(|f| (f[0] * f[0] + f[1] * f[1] + f[2] * f[2]).sqrt() > max_force)
        })
        .collect();
    out.insert("force", force);
    let zs = |s: &AtomicData| s.field("atomic_numbers").unwrap().data.to_i64_vec().unwrap();
    let epa: BTreeMap<usize, f64> =
        samples.iter().enumerate().map(|(i, s)| (i, f64s(s, "energy")[0] / s.num_atoms() as f64)).collect();
    let energy = if by_composition {
        let mut groups: BTreeMap<Vec<i64>, Vec<usize>> = BTreeMap::new();
        for (i, s) in samples.iter().enumerate() {
            let mut k = zs(s);
            k.sort();
            groups.entry(k).or_default().push(i);
        }
        groups.values().flat_map(|g| robust(&epa, g, z)).collect()
    } else {
        let elements = [1i64, 6, 8];
        let a: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| elements.iter().map(|e| zs(s).iter().filter(|z| *z == e).count() as f64).collect())
            .collect();
        let b: Vec<f64> = samples.iter().map(|s| f64s(s, "energy")[0]).collect();
        let e0 = lstsq(&a, &b);
        let resid: BTreeMap<usize, f64> = (0..samples.len())
            .map(|i| {
                (i, (b[i] - a[i].iter().zip(&e0).map(|(n, e)| n * e).sum::<f64>()) / samples[i].num_atoms() as f64)
            })
            .collect();
        robust(&resid, &(0..samples.len()).collect::<Vec<_>>(), z)
    };
    out.insert("energy", energy);
    let same = |x: &AtomicData, y: &AtomicData| {
        ["atomic_numbers", "positions", "cell"]
            .iter()
            .all(|f| x.field(f).unwrap().data.as_bytes() == y.field(f).unwrap().data.as_bytes())
    };
    let dup = (0..samples.len()).filter(|&i| (0..i).any(|k| same(&samples[k], &samples[i]))).collect();
    out.insert("duplicate", dup);
    let missing = (0..samples.len()).filter(|&i| f64s(&samples[i], "stress").iter().all(|x| x.is_nan())).collect();
    out.insert("missing stress", missing);
    out
}

fn indices(v: &Value) -> BTreeSet<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

fn filter_json(store: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "filter",
        store.to_str().unwrap(),
        "--max-force",
        "30",
        "--energy-z",
        "5",
        "--duplicates",
        "--missing",
        "stress",
        "--json",
    ];
    args.extend(extra);
    let (ok, out, err) = cli(&args);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn the_commands_have_help() {
    for c in ["delete", "filter", "defragment", "verify"] {
        let (ok, out, err) = cli(&[c, "--help"]);
        assert!(ok && out.contains("Usage: atomzarr"), "{c}: {err}");
    }
}

#[test]
fn filter_selects_what_the_reference_selects() {
    let dir = tmpdir();
    let p = planted(400);
    let path = dir.path().join("f.zarr");
    write_store(&path, config(), &p.samples[..150], &p.samples[150..]);
    for (basis, by_comp) in [("e0", false), ("composition", true)] {
        let out = dir.path().join(format!("{basis}.txt"));
        let got = filter_json(&path, &["--energy-basis", basis, "--out", out.to_str().unwrap()]);
        let want = reference(&p.samples, 30.0, 5.0, by_comp);
        assert_eq!(indices(&got["force"]), want["force"], "{basis}: force");
        assert_eq!(indices(&got["energy"]), want["energy"], "{basis}: energy");
        assert_eq!(indices(&got["duplicate"]), want["duplicate"], "{basis}: duplicates");
        assert_eq!(indices(&got["missing"]["stress"]), want["missing stress"], "{basis}: missing stress");
        // The reference finds what was planted.
        assert_eq!((&want["force"], &want["energy"]), (&p.force, &p.energy), "{basis}: the reference");
        assert_eq!((&want["duplicate"], &want["missing stress"]), (&p.duplicate, &p.no_stress));
        let union: BTreeSet<usize> = want.values().flatten().copied().collect();
        assert_eq!(indices(&got["selected"]), union, "{basis}: selected");
        let file: BTreeSet<usize> =
            std::fs::read_to_string(&out).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(file, union, "{basis}: the indices file");
    }
    // Without --apply nothing changed.
    assert_eq!(AtomicDataZarrReader::open(&path).unwrap().len(), p.samples.len());
}

#[test]
fn filter_apply_then_defragment_keep_exactly_the_other_samples() {
    let dir = tmpdir();
    let p = planted(300);
    let path = dir.path().join("a.zarr");
    drop(write_store(&path, config(), &p.samples[..100], &p.samples[100..]));
    let selected = indices(&filter_json(&path, &["--apply"])["selected"]);
    assert!(!selected.is_empty());
    let mut model = Model { samples: p.samples.clone(), deleted: selected.clone() };
    // What the toolkit's reader reads: masks off and rows zeroed exactly
    // on the deleted samples, pointers kept, the rest as written.
    check_deleted_on_disk(&path, &model);
    check_reader(&AtomicDataZarrReader::open(&path).unwrap(), &model, "after filter --apply");
    let (ok, out, err) = cli(&["verify", path.to_str().unwrap()]);
    assert!(ok && out.contains(": 0 faults"), "{out}{err}");
    // A second run finds nothing more of what it deleted.
    assert!(indices(&filter_json(&path, &[])["selected"]).is_empty());

    let (ok, _, err) = cli(&["defragment", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    model = Model { samples: model.active().into_iter().map(|(_, s)| s.clone()).collect(), deleted: BTreeSet::new() };
    check_deleted_on_disk(&path, &model);
    check_reader(&AtomicDataZarrReader::open(&path).unwrap(), &model, "after defragment");
    let (ok, out, err) = cli(&["verify", path.to_str().unwrap()]);
    assert!(ok && out.contains(": 0 faults"), "{out}{err}");
}

#[test]
fn delete_takes_a_file_or_a_range_and_dry_run_changes_nothing() {
    let dir = tmpdir();
    let data = samples(5, 40, 5, 6, &Extras::default());
    let path = dir.path().join("d.zarr");
    drop(write_store(&path, config(), &data[..20], &data[20..]));
    let store = path.to_str().unwrap();
    let before = snapshot(&path);
    let (ok, out, err) = cli(&["delete", store, "--range", "3..7", "--dry-run"]);
    assert!(ok && out.contains("would delete 4 of 40"), "{out}{err}");
    assert_same_snapshot(&before, &snapshot(&path), "delete --dry-run");
    let (ok, _, err) = cli(&["delete", store, "--range", "3..=6"]);
    assert!(ok, "{err}");
    let mut model = Model { samples: data.clone(), deleted: (3..=6).collect() };
    check_reader(&AtomicDataZarrReader::open(&path).unwrap(), &model, "after --range");
    // Logical indices of the store as it is now: 3 is physical 7.
    let file = dir.path().join("idx.txt");
    std::fs::write(&file, "# bad frames\n3\n\n10\n35 # last\n").unwrap();
    let (ok, _, err) = cli(&["delete", store, "--indices", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let active: Vec<usize> = model.active().into_iter().map(|(p, _)| p).collect();
    model.deleted.extend([active[3], active[10], active[35]]);
    check_reader(&AtomicDataZarrReader::open(&path).unwrap(), &model, "after --indices");
    check_deleted_on_disk(&path, &model);
    // An index past the end deletes nothing.
    let before = snapshot(&path);
    let (ok, _, err) = cli(&["delete", store, "--range", "30..40"]);
    assert!(!ok && err.contains("out of range"), "{err}");
    assert_same_snapshot(&before, &snapshot(&path), "a refused delete");
}

/// Kills `args` (a writing command) at random moments on fresh copies of
/// `template`; `check` sees each store after the kill.
fn kill_runs(template: &Path, args: &[&str], kills: usize, seed: u64, check: impl Fn(&Path, &str)) {
    let dir = disk_tmpdir();
    // How long an uninterrupted run takes.
    let path = dir.path().join("timed.zarr");
    copy_dir(template, &path);
    let t = std::time::Instant::now();
    let (ok, _, err) = cli(&[&[args[0], path.to_str().unwrap()], &args[1..]].concat());
    assert!(ok, "{err}");
    let full = t.elapsed();
    check(&path, "uninterrupted");
    let mut rng = SplitMix(seed);
    for k in 0..kills {
        let path = dir.path().join(format!("k{k}.zarr"));
        copy_dir(template, &path);
        let mut child = std::process::Command::new(cli_binary())
            .args([&[args[0], path.to_str().unwrap()], &args[1..]].concat())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let at = full.mul_f64(rng.below(1000) as f64 / 1000.0);
        std::thread::sleep(at);
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        check(&path, &format!("{} killed after {at:?} of {full:?}", args[0]));
    }
}

/// Bitwise equality of two sample lists (NaN labels equal themselves).
fn same(a: &[AtomicData], b: &[AtomicData]) -> bool {
    let bytes = |s: &AtomicData| -> Vec<(String, Vec<u8>)> {
        s.fields.iter().map(|(k, f)| (k.clone(), f.data.as_bytes().to_vec())).collect()
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bytes(x) == bytes(y))
}

/// Every logical sample of the store at `path`.
fn logical(path: &Path) -> Vec<AtomicData> {
    read_all(&AtomicDataZarrReader::open(path).unwrap())
}

#[test]
fn sigkill_during_filter_apply_or_defragment_leaves_the_last_commit() {
    let dir = disk_tmpdir();
    let p = planted(1500);
    let template = dir.path().join("t.zarr");
    drop(write_store(&template, config(), &p.samples[..500], &p.samples[500..]));
    let selected: BTreeSet<usize> = p.force.iter().chain(&p.duplicate).copied().collect();
    let kept: Vec<AtomicData> =
        p.samples.iter().enumerate().filter(|(i, _)| !selected.contains(i)).map(|(_, s)| s.clone()).collect();
    let clean = |path: &Path, what: &str| {
        let r = atomzarr::store::verify::verify(path, &Default::default()).unwrap();
        assert_eq!(r.faults, vec![], "{what}: verify");
    };
    kill_runs(&template, &["filter", "--max-force", "30", "--duplicates", "--apply"], 6, 3, |path, what| {
        // The plain reader sees one commit: before the delete or after it.
        let got = logical(path);
        assert!(same(&got, &p.samples) || same(&got, &kept), "{what}: {} samples, neither commit", got.len());
        drop(AtomicDataZarrWriter::open(path, ZarrWriteConfig::default()).unwrap());
        assert!(same(&logical(path), &got), "{what}: the next writer changed what is read");
        clean(path, what);
    });
    // Defragment a store with deletes: the samples read never change.
    let mut w = AtomicDataZarrWriter::open(&template, ZarrWriteConfig::default()).unwrap();
    w.delete(&selected.iter().copied().collect::<Vec<_>>()).unwrap();
    drop(w);
    kill_runs(&template, &["defragment"], 6, 4, |path, what| {
        // Killed between its two renames, the store says so until the next
        // writer finishes the swap.
        match AtomicDataZarrReader::open(path) {
            Ok(r) => assert!(same(&read_all(&r), &kept), "{what}"),
            Err(atomzarr::Error::Interrupted { .. }) => {}
            Err(e) => panic!("{what}: {e}"),
        }
        drop(AtomicDataZarrWriter::open(path, ZarrWriteConfig::default()).unwrap());
        assert!(same(&logical(path), &kept), "{what}: after the next writer");
        clean(path, what);
        assert_eq!(atomzarr::testing::clean_temporaries(path).unwrap(), 0, "{what}: temporaries left");
    });
}
