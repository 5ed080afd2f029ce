//! `atomzarr import` then `atomzarr dump` equals what ASE reads from the
//! same extended-XYZ files (assets/import/*.extxyz and *.ase.json, made by
//! scripts/ase_reference.py): triclinic bulk with 3x3 stress and custom info
//! keys and per-atom arrays, molecules without a cell, a `T T F` slab, and a
//! hand-written Voigt-6 stress. Also: appending, schema mismatches under
//! `--missing error`, parse errors that name file, line and field, and
//! `atomzarr stats` against numbers computed by numpy and ASE.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use atomzarr::formats::import::{ImportOptions, Missing, import_files};
use atomzarr::prep::stats::{StatsOptions, dataset_stats};
use atomzarr::{AtomicDataZarrReader, Error, Reader, ReaderExt};
use serde_json::Value;

fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_atomzarr")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn asset(name: &str) -> PathBuf {
    common::assets().join("import").join(name)
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        Value::Bool(b) => vec![f64::from(u8::from(*b))],
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numeric: {other}"),
    }
}

/// `got` (dumped, float32 widened) against ASE's f64 value rounded to f32.
fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(*g, f64::from(*w as f32), "{what}[{k}]: {g} vs ASE {w}");
    }
}

fn dump(store: &Path) -> Value {
    let (ok, out, err) = cli(&["dump", store.to_str().unwrap()]);
    assert!(ok, "dump: {err}");
    serde_json::from_str(&out).unwrap()
}

/// Every frame of `name`.extxyz imported and dumped equals `name`.ase.json.
fn check_file(name: &str) {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let input = asset(&format!("{name}.extxyz"));
    let (ok, _, err) = cli(&["import", input.to_str().unwrap(), store.to_str().unwrap()]);
    assert!(ok, "{name}: import: {err}");
    let ase = common::json(&asset(&format!("{name}.ase.json")));
    let ase = ase.as_array().unwrap();
    let d = dump(&store);
    assert_eq!(d["num_samples"], ase.len(), "{name}");
    for (k, (s, a)) in d["samples"].as_array().unwrap().iter().zip(ase).enumerate() {
        let what = |f: &str| format!("{name} frame {k} {f}");
        let n = a["numbers"].as_array().unwrap().len();
        assert_eq!(s["atomic_numbers"]["dtype"], "int64");
        assert_eq!(flat(&s["atomic_numbers"]["data"]), flat(&a["numbers"]), "{}", what("numbers"));
        assert_eq!(s["positions"]["dtype"], "float32");
        assert_eq!(s["positions"]["shape"], serde_json::json!([n, 3]));
        assert_close(&flat(&s["positions"]["data"]), &flat(&a["positions"]), &what("positions"));
        assert_eq!(s["cell"]["shape"], serde_json::json!([1, 3, 3]));
        assert_close(&flat(&s["cell"]["data"]), &flat(&a["cell"]), &what("cell"));
        assert_eq!(s["pbc"]["dtype"], "bool");
        assert_eq!(flat(&s["pbc"]["data"]), flat(&a["pbc"]), "{}", what("pbc"));
        let mut expected_fields = vec!["atomic_numbers", "positions", "cell", "pbc"];
        for key in ["energy", "forces", "stress"] {
            if a.get(key).is_some() {
                assert_eq!(s[key]["dtype"], "float32", "{}", what(key));
                assert_close(&flat(&s[key]["data"]), &flat(&a[key]), &what(key));
                expected_fields.push(key);
            }
        }
        if a.get("energy").is_some() {
            assert_eq!(s["energy"]["shape"], serde_json::json!([1, 1]));
        }
        if a.get("stress").is_some() {
            assert_eq!(s["stress"]["shape"], serde_json::json!([1, 3, 3]));
        }
        // Free-form numeric info keys: system fields [1] or [1, k].
        for (key, v) in a["info"].as_object().unwrap() {
            let f = &s[key.as_str()];
            assert!(f.is_object(), "{}", what(key));
            let w = flat(v);
            let shape = if w.len() == 1 { serde_json::json!([1]) } else { serde_json::json!([1, w.len()]) };
            assert_eq!(f["shape"], shape, "{}", what(key));
            if v.is_i64() || v.as_array().is_some_and(|a| a.iter().all(Value::is_i64)) {
                assert_eq!(f["dtype"], "int64", "{}", what(key));
                assert_eq!(flat(&f["data"]), w, "{}", what(key));
            } else {
                assert_close(&flat(&f["data"]), &w, &what(key));
            }
            expected_fields.push(key);
        }
        // Per-atom arrays: atom fields [n] or [n, k].
        for (key, v) in a["arrays"].as_object().unwrap() {
            let f = &s[key.as_str()];
            assert!(f.is_object(), "{}", what(key));
            let w = flat(v);
            assert_eq!(f["shape"][0], n, "{}", what(key));
            if v.as_array().unwrap().iter().all(Value::is_i64) {
                assert_eq!(f["dtype"], "int64", "{}", what(key));
                assert_eq!(flat(&f["data"]), w, "{}", what(key));
            } else {
                assert_close(&flat(&f["data"]), &w, &what(key));
            }
            expected_fields.push(key);
        }
        // String keys and columns (config_type, label) are string labels.
        for (key, v) in a.get("strings").and_then(Value::as_object).into_iter().flatten() {
            let f = &s[key.as_str()];
            assert_eq!(f["dtype"], "string", "{}", what(key));
            let want: Vec<Value> = match v {
                Value::Array(many) => many.clone(),
                one => vec![one.clone()],
            };
            assert_eq!(f["data"], Value::Array(want), "{}", what(key));
            expected_fields.push(key);
        }
        // Nothing else.
        let mut got: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        got.sort();
        expected_fields.sort();
        assert_eq!(got, expected_fields, "{}", what("field set"));
    }
}

#[test]
fn triclinic_bulk_with_custom_keys_equals_ase() {
    check_file("bulk_triclinic");
}

#[test]
fn molecules_equal_ase() {
    check_file("molecule");
}

#[test]
fn slab_equals_ase() {
    check_file("slab");
}

#[test]
fn voigt_stress_equals_ase() {
    check_file("voigt_stress");
}

#[test]
fn appends_when_the_schema_matches_and_refuses_otherwise() {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let bulk = asset("bulk_triclinic.extxyz");
    let opts = ImportOptions::default().with_batch_frames(2).with_missing(Missing::Error);
    let r = import_files(&[&bulk], &store, &opts).unwrap();
    assert_eq!((r.frames, r.appended), (3, false));
    let r = import_files(&[&bulk, &bulk], &store, &opts).unwrap();
    assert_eq!((r.frames, r.appended), (6, true));
    let reader = AtomicDataZarrReader::open(&store).unwrap();
    assert_eq!(reader.len(), 9);
    assert_eq!(reader.read(7).unwrap().data, reader.read(1).unwrap().data);
    // Molecules have none of the bulk's custom fields: refused, nothing written.
    let e = import_files(&[asset("molecule.extxyz")], &store, &opts).unwrap_err();
    assert!(e.to_string().contains("do not match the existing store"), "{e}");
    reader.refresh().unwrap();
    assert_eq!(reader.len(), 9);
    // Two files with different fields in one import: the frame is named.
    let other = dir.path().join("o.zarr");
    let e = import_files(&[asset("bulk_triclinic.extxyz"), asset("molecule.extxyz")], &other, &opts).unwrap_err();
    match &e {
        Error::Parse { file, line, .. } => {
            assert!(file.ends_with("molecule.extxyz"), "{e}");
            assert_eq!(*line, 1, "{e}");
        }
        other => panic!("expected a parse error, got {other}"),
    }
    // Frames were written before the failing one: the store keeps them.
    assert_eq!(AtomicDataZarrReader::open(&other).unwrap().len(), 3);
    // Molecules and slabs have the same fields (cell and pbc always, zero and
    // F F F without a Lattice): one store takes both.
    let mixed = dir.path().join("m.zarr");
    let r = import_files(&[asset("molecule.extxyz"), asset("slab.extxyz")], &mixed, &opts).unwrap();
    assert_eq!(r.frames, 5);
    // A store this import created and never wrote to is removed again.
    let fresh = dir.path().join("fresh.zarr");
    let bad = dir.path().join("bad.extxyz");
    std::fs::write(&bad, "1\n\nH 0 0 zero\n").unwrap();
    assert!(import_files(&[&bad], &fresh, &opts).is_err());
    assert!(!fresh.exists());
}

#[test]
fn parse_errors_name_file_line_and_field() {
    let dir = common::tmpdir();
    let cases: &[(&str, usize, &str)] = &[
        ("2\nenergy=1\nH 0 0 0\nH 0 0 x\n", 4, "pos"),
        ("2\nenergy=1\nH 0 0 0\n", 4, "atoms"),
        ("two\n\n", 1, "atom count"),
        ("1\nLattice=\"1 0 0 0 1 0\"\nH 0 0 0\n", 2, "Lattice"),
        ("1\nstress=\"1 2 3 4\"\nH 0 0 0\n", 2, "stress"),
        ("1\nProperties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 1 2\n", 3, "forces"),
        ("1\n\nQq 0 0 0\n", 3, "species"),
        ("1\n\nH 0 0 0 9\n", 3, "atoms"),
        ("1\nProperties=species:S:1:pos:Q:3\nH 0 0 0\n", 2, "Properties"),
        ("1\nname=\"open\nH 0 0 0\n", 2, "comment line"),
        ("1\n\nH 0 0 0\n1\nenergy=2\nH 0 0 0\n", 4, "energy"),
    ];
    for (k, &(text, line, field)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{k}.extxyz"));
        std::fs::write(&file, text).unwrap();
        let store = dir.path().join(format!("s{k}.zarr"));
        match import_files(&[&file], &store, &ImportOptions::default().with_missing(Missing::Error)) {
            Err(Error::Parse { file: f, line: l, field: fd, reason }) => {
                assert_eq!((f.as_path(), l, fd.as_str()), (file.as_path(), line, field), "case {k}: {reason}");
            }
            other => panic!("case {k}: expected a parse error, got {other:?}"),
        }
    }
    // And the CLI prints it as file:line: field: reason.
    let file = dir.path().join("bad0.extxyz");
    let (ok, _, err) = cli(&["import", file.to_str().unwrap(), dir.path().join("c.zarr").to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(&format!("{}:4: pos:", file.display())), "{err}");
}

fn approx(got: f64, want: f64, tol: f64, what: &str) {
    assert!((got - want).abs() <= tol * want.abs().max(1.0), "{what}: {got} vs {want}");
}

#[test]
fn stats_equal_numpy_and_ase() {
    let want = common::json(&asset("stats.ase.json"));
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let cutoff = want["cutoff"].as_f64().unwrap();
    let (ok, _, err) = cli(&[
        "import",
        asset("stats.extxyz").to_str().unwrap(),
        store.to_str().unwrap(),
        "--cutoff",
        &cutoff.to_string(),
        "--batch-frames",
        "5",
    ]);
    assert!(ok, "{err}");
    let reader = AtomicDataZarrReader::open(&store).unwrap();
    // Small chunks: the parallel reduction merges many partial sums.
    let s = dataset_stats(&reader, &StatsOptions::default().with_chunk_size(3)).unwrap();
    assert_eq!(s.num_samples as u64, want["num_samples"].as_u64().unwrap());
    assert_eq!(s.num_atoms, want["num_atoms"].as_u64().unwrap());
    assert_eq!(s.num_edges, want["num_edges"].as_u64(), "edges at the cutoff, as ASE counts them");
    for (got, key) in [(s.atoms_per_sample, "atoms_per_sample"), (s.edges_per_sample, "edges_per_sample")] {
        let g = got.unwrap();
        let w = &want[key];
        assert_eq!((g.min, g.max), (w[0].as_u64().unwrap(), w[2].as_u64().unwrap()), "{key}");
        approx(g.mean, w[1].as_f64().unwrap(), 1e-12, key);
    }
    let zs: Vec<i64> = s.elements.iter().map(|e| e.z).collect();
    assert_eq!(zs, want["elements"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>());
    for (k, e) in s.elements.iter().enumerate() {
        assert_eq!(e.count, want["element_counts"][k].as_u64().unwrap());
        approx(e.e0.unwrap(), want["e0s"][k].as_f64().unwrap(), 1e-7, "e0");
    }
    let epa = s.energy_per_atom.unwrap();
    approx(epa.mean, want["energy_per_atom_mean"].as_f64().unwrap(), 1e-9, "energy per atom mean");
    approx(epa.std, want["energy_per_atom_std"].as_f64().unwrap(), 1e-7, "energy per atom std");
    approx(s.force_rms.unwrap(), want["force_rms"].as_f64().unwrap(), 1e-9, "force rms");
    approx(s.avg_num_neighbors.unwrap(), want["avg_neighbors"].as_f64().unwrap(), 1e-12, "avg neighbors");

    // The CLI's JSON is the same report.
    let (ok, out, err) = cli(&["stats", store.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["num_edges"], want["num_edges"]);
    approx(j["elements"][0]["e0"].as_f64().unwrap(), want["e0s"][0].as_f64().unwrap(), 1e-7, "cli e0");
    let (ok, out, _) = cli(&["stats", store.to_str().unwrap()]);
    assert!(ok && out.contains("average number of neighbors"), "{out}");
}

/// The loader transform builds edges on the fly for a store without them:
/// its samples equal the ones `import --cutoff` stored, and their edge count
/// is ASE's (stats.ase.json).
#[test]
fn on_the_fly_edges_equal_imported_edges() {
    use atomzarr::Dataset;
    use atomzarr::data::neighbors::neighbor_transform;
    let want = common::json(&asset("stats.ase.json"));
    let cutoff = want["cutoff"].as_f64().unwrap();
    let dir = common::tmpdir();
    let (plain, with_edges) = (dir.path().join("plain.zarr"), dir.path().join("edges.zarr"));
    let input = asset("stats.extxyz");
    import_files(&[&input], &plain, &ImportOptions::default()).unwrap();
    import_files(&[&input], &with_edges, &ImportOptions::default().with_cutoff(cutoff).unwrap()).unwrap();
    let stored = AtomicDataZarrReader::open(&with_edges).unwrap();
    let ds = Dataset::new(AtomicDataZarrReader::open(&plain).unwrap()).with_transform(neighbor_transform(cutoff));
    let mut edges = 0;
    for i in 0..ds.len() {
        let s = ds.get_sample(i).unwrap();
        assert_eq!(s, stored.read(i as i64).unwrap().data, "sample {i}");
        edges += s.num_edges() as u64;
    }
    assert_eq!(edges, want["num_edges"].as_u64().unwrap());
    // The batch path (what the DataLoader reads) carries the built edges,
    // batch-local, equal to the stored store's batches.
    let all: Vec<usize> = (0..ds.len()).collect();
    let built = ds.load_batches(std::slice::from_ref(&all)).unwrap();
    let from_store = Dataset::new(AtomicDataZarrReader::open(&with_edges).unwrap()).load_batches(&[all]).unwrap();
    assert_eq!(built[0].num_edges() as u64, want["num_edges"].as_u64().unwrap());
    assert_eq!(built[0].fields["neighbor_list"], from_store[0].fields["neighbor_list"]);
    assert_eq!(built[0].fields["shifts"], from_store[0].fields["shifts"]);
    assert_eq!(built[0].edges_ptr, from_store[0].edges_ptr);
    // Another cutoff on a store that has edges: replaced, not appended to.
    let ds = Dataset::new(stored).with_transform(neighbor_transform(0.5));
    assert_eq!(ds.get_sample(0).unwrap().num_edges(), 0);
}
