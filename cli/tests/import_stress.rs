//! Stress in both of ASE's shapes, from every format that carries one:
//! `atomzarr import` then `atomzarr dump` of `stress_voigt.*` (ASE's
//! 6-vector, `xx yy zz yz xz xy`) and `stress_3x3.*` (a 3x3 matrix) as
//! extended XYZ, ASE's SQLite database and fairchem's `.aselmdb`, against
//! what ASE reads back from the same file (`FILE.ref.json` beside it in
//! assets/import/formats/, written with the fixtures by the `stress` job of
//! scripts/import_reference.py, whose docstring says what ASE writes in each
//! file). Each frame's stress must be the float32 `[1, 3, 3]` matrix ASE's
//! Voigt rule gives (`[[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]`, eV/Å³);
//! numbers, positions, cell, pbc, energy, forces and the row id are checked
//! too. The third frame of the `.db` and `.aselmdb` 3x3 files has a
//! non-symmetric stress (ASE keeps it as written there), so a transposed
//! matrix fails. Only the command line is used.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::{assert_close, cli_dump as dump, flat_numbers as flat};
use serde_json::Value;

fn asset(name: &str) -> PathBuf {
    common::assets().join("import").join("formats").join(name)
}

/// Imports fixture `file` into a new store and returns its dump.
fn import(file: &str) -> Value {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let input = asset(file);
    let (ok, _, err) = common::cli(&["import", input.to_str().unwrap(), store.to_str().unwrap()]);
    assert!(ok, "{file}: import: {err}");
    dump(&store)
}

/// Imports `file` and checks every frame against `FILE.ref.json`; returns the dump.
fn check(file: &str) -> Value {
    let d = import(file);
    let want = common::json(&asset(&format!("{file}.ref.json")));
    let want = want.as_array().unwrap();
    assert_eq!(want.len(), 3, "{file}: the reference has the three cells");
    assert_eq!(d["num_samples"], want.len(), "{file}: frames");
    let samples = d["samples"].as_array().unwrap();
    assert_eq!(samples.len(), want.len(), "{file}: samples dumped");
    for (k, (s, w)) in samples.iter().zip(want).enumerate() {
        let what = |f: &str| format!("{file} frame {k} {f}");
        assert_eq!(flat(&s["atomic_numbers"]["data"]), flat(&w["numbers"]), "{}", what("numbers"));
        assert_close(&flat(&s["positions"]["data"]), &flat(&w["positions"]), &what("positions"));
        assert_close(&flat(&s["cell"]["data"]), &flat(&w["cell"]), &what("cell"));
        assert_eq!(flat(&s["pbc"]["data"]), flat(&w["pbc"]), "{}", what("pbc"));
        let stress = &s["stress"];
        assert!(stress.is_object(), "{}: not in the dump", what("stress"));
        assert_eq!(stress["dtype"], "float32", "{}", what("stress"));
        assert_eq!(stress["shape"], serde_json::json!([1, 3, 3]), "{}", what("stress"));
        let fields = w["fields"].as_object().unwrap();
        for name in ["energy", "forces", "stress"] {
            assert!(fields.contains_key(name), "{}: not in the reference", what(name));
        }
        for (name, v) in fields {
            common::assert_dumped_field(&s[name.as_str()], v, &what(name));
        }
    }
    d
}

/// Frame `k`'s dumped stress (9 values, row-major).
fn stress_of(d: &Value, k: usize) -> Vec<f64> {
    flat(&d["samples"][k]["stress"]["data"])
}

#[test]
fn extxyz_voigt_stress_equals_ase() {
    check("stress_voigt.extxyz");
}

#[test]
fn extxyz_3x3_stress_equals_ase() {
    check("stress_3x3.extxyz");
}

#[test]
fn ase_db_voigt_stress_equals_ase() {
    check("stress_voigt.db");
}

#[test]
fn ase_db_3x3_stress_equals_ase() {
    let d = check("stress_3x3.db");
    let s = stress_of(&d, 2);
    assert_ne!(s[1], s[3], "frame 2's stress is not symmetric in the file");
}

#[test]
fn aselmdb_voigt_stress_equals_fairchem_rows() {
    check("stress_voigt.aselmdb");
}

#[test]
fn aselmdb_3x3_stress_equals_fairchem_rows() {
    // The rows' stress is orjson's nested list [[..], [..], [..]].
    let d = check("stress_3x3.aselmdb");
    let s = stress_of(&d, 2);
    assert_ne!(s[1], s[3], "frame 2's stress is not symmetric in the file");
}

#[test]
fn both_shapes_import_to_one_matrix() {
    // The same cells in every file; the stress differs only in the third
    // frame of the non-symmetric .db and .aselmdb 3x3 files.
    let voigt = import("stress_voigt.extxyz");
    let others =
        ["stress_3x3.extxyz", "stress_voigt.db", "stress_3x3.db", "stress_voigt.aselmdb", "stress_3x3.aselmdb"];
    for file in others {
        let d = import(file);
        let frames = if file.starts_with("stress_3x3.") && !file.ends_with(".extxyz") { 2 } else { 3 };
        for k in 0..frames {
            assert_eq!(stress_of(&d, k), stress_of(&voigt, k), "{file} frame {k} vs stress_voigt.extxyz");
            let s = stress_of(&d, k);
            assert_eq!((s[1], s[2], s[5]), (s[3], s[6], s[7]), "{file} frame {k}: a Voigt stress is symmetric");
        }
    }
}

/// MPtrj gives stress as pymatgen's 3x3 rows (kBar, VASP's sign); a file
/// with Voigt 6 components instead imports to the same matrix. The test
/// writes the fixture's first frame twice, its stress made symmetric (so
/// that a Voigt form exists), once as rows and once as `xx yy zz yz xz xy`,
/// and checks both against `-0.1 GPa × value` in eV/Å³ (ase.units: 1 GPa =
/// 1/160.21766208 eV/Å³).
#[test]
fn mptrj_voigt_and_3x3_stress_import_to_one_matrix() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(asset("mptrj.json")).unwrap()).unwrap();
    let (mp, frames) = doc.as_object().unwrap().iter().next().unwrap();
    let (id, frame) = frames.as_object().unwrap().iter().next().unwrap();
    let s = flat(&frame["stress"]);
    let sym: Vec<f64> = (0..9).map(|k| 0.5 * (s[k] + s[(k % 3) * 3 + k / 3])).collect();
    let rows: Vec<Vec<f64>> = sym.chunks(3).map(<[f64]>::to_vec).collect();
    let voigt = vec![sym[0], sym[4], sym[8], sym[5], sym[2], sym[1]];
    let dir = common::tmpdir();
    let mut got = Vec::new();
    for (name, stress) in [("rows", serde_json::json!(rows)), ("voigt", serde_json::json!(voigt))] {
        let mut f = frame.clone();
        f["stress"] = stress;
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::json!({ mp.as_str(): { id.as_str(): f } }).to_string()).unwrap();
        let store = dir.path().join(format!("{name}.zarr"));
        let (ok, _, err) = common::cli(&["import", file.to_str().unwrap(), store.to_str().unwrap()]);
        assert!(ok, "import {name}: {err}");
        got.push(stress_of(&dump(&store), 0));
    }
    let gpa = 1.0 / 160.217_662_08;
    let want: Vec<f64> = sym.iter().map(|&x| -0.1 * gpa * x).collect();
    assert_close(&got[0], &want, "mptrj stress from rows");
    assert_close(&got[1], &want, "mptrj stress from Voigt 6");
}
