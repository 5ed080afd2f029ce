//! `atomzarr import` of every format MLIP data ships in, then `atomzarr
//! dump`, against what each format's own Python tool reads back from the
//! same file, converted to eV, Å, eV/Å and eV/Å³ with `ase.units`
//! (assets/import/formats/NAME.ref.json, written with the fixtures by
//! scripts/import_reference.py): ASE (extxyz, SQLite db), lmdb + zlib +
//! orjson as fairchem writes `.aselmdb`, h5py (SPICE, ANI-1x), numpy (rMD17,
//! sGDML), json + pymatgen's `Structure` (MPtrj). Also: format detection,
//! compressed extxyz, labels only some frames have (NaN, presence flags,
//! empty strings, late labels), `--missing error`, the unit constants
//! against `ase.units`, and export back to extended XYZ.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use atomzarr::Reader;
use atomzarr::formats::import::{ImportOptions, Missing, import_files};
use atomzarr::{AtomicDataZarrReader, Error};
use common::{assert_close, cli_dump as dump, flat_numbers as flat};
use serde_json::Value;

fn asset(name: &str) -> PathBuf {
    common::assets().join("import").join("formats").join(name)
}

fn cli(args: &[&str]) -> (bool, String, String) {
    common::cli(args)
}

/// Whether dumped field `name` of sample `s` says "absent": all NaN
/// (floats), `<name>_present` false (integers, bools), `""` (strings); or
/// is a presence flag itself.
fn absent(s: &Value, name: &str) -> bool {
    let f = &s[name];
    if f["dtype"] == "string" {
        return f["data"].as_array().unwrap().iter().all(|s| s == "");
    }
    if f["dtype"] != "float32" {
        let flag = &s[format!("{name}_present").as_str()];
        return name.ends_with("_present") || flag["data"] == serde_json::json!([false]);
    }
    flat(&f["data"]).iter().all(|x| x.is_nan())
}

/// Imports `file` (with `args`) and checks every frame against `reference`.
fn check(file: &str, reference: &str, args: &[&str]) -> Value {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let input = asset(file);
    let mut a = vec!["import", input.to_str().unwrap(), store.to_str().unwrap()];
    a.extend_from_slice(args);
    let (ok, out, err) = cli(&a);
    assert!(ok, "{file}: import: {err}");
    assert!(out.contains("frames"), "{out}");
    let want = common::json(&asset(reference));
    let want = want.as_array().unwrap();
    let d = dump(&store);
    assert_eq!(d["num_samples"], want.len(), "{file}: frames");
    for (k, (s, w)) in d["samples"].as_array().unwrap().iter().zip(want).enumerate() {
        let what = |f: &str| format!("{file} frame {k} {f}");
        assert_eq!(s["atomic_numbers"]["dtype"], "int64");
        assert_eq!(flat(&s["atomic_numbers"]["data"]), flat(&w["numbers"]), "{}", what("numbers"));
        assert_close(&flat(&s["positions"]["data"]), &flat(&w["positions"]), &what("positions"));
        assert_close(&flat(&s["cell"]["data"]), &flat(&w["cell"]), &what("cell"));
        assert_eq!(flat(&s["pbc"]["data"]), flat(&w["pbc"]), "{}", what("pbc"));
        for (name, v) in w["fields"].as_object().unwrap() {
            common::assert_dumped_field(&s[name.as_str()], v, &what(name));
        }
        for (name, v) in w["strings"].as_object().unwrap() {
            let f = &s[name.as_str()];
            assert_eq!(f["dtype"], "string", "{}", what(name));
            let got: Vec<&str> = f["data"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
            match v {
                Value::String(one) => assert_eq!(got, [one.as_str()], "{}", what(name)),
                Value::Array(many) => {
                    let many: Vec<&str> = many.iter().map(|x| x.as_str().unwrap()).collect();
                    assert_eq!(got, many, "{}", what(name));
                }
                other => panic!("{other}"),
            }
        }
        // Anything else the frame holds is a label other frames have: absent here.
        for (name, f) in s.as_object().unwrap() {
            let known = ["atomic_numbers", "positions", "cell", "pbc"].contains(&name.as_str())
                || w["fields"].get(name).is_some()
                || w["strings"].get(name).is_some();
            assert!(known || absent(s, name), "{}: not in the tool's frame, yet present: {f}", what(name));
        }
    }
    d
}

#[test]
fn extxyz_with_labels_on_some_frames_equals_ase() {
    let d = check("partial.extxyz", "partial.ref.json", &[]);
    // Stress only on frames 0 and 3, magnetic moments on the Ni frames: NaN elsewhere.
    let s = &d["samples"];
    assert!(flat(&s[1]["stress"]["data"]).iter().all(|x| x.is_nan()));
    assert!(!flat(&s[3]["stress"]["data"]).iter().any(|x| x.is_nan()));
    assert!(flat(&s[1]["initial_magmoms"]["data"]).iter().all(|x| x.is_nan()));
    assert_eq!(s[0]["note"]["data"], serde_json::json!([""]));
    assert_eq!(s[2]["note"]["data"], serde_json::json!(["hand picked"]));
}

#[test]
fn compressed_extxyz_equals_plain() {
    for ext in ["gz", "xz", "bz2"] {
        check(&format!("partial.extxyz.{ext}"), "partial.ref.json", &[]);
    }
}

#[test]
fn ase_sqlite_db_equals_ase() {
    check("asedb.db", "asedb.ref.json", &[]);
}

#[test]
fn aselmdb_equals_fairchem_rows() {
    let d = check("fairchem.aselmdb", "fairchem.ref.json", &[]);
    // Id 3 was deleted: ids 1, 2, 4, 5, 6 in that order.
    let ids: Vec<f64> = d["samples"].as_array().unwrap().iter().map(|s| flat(&s["ase_id"]["data"])[0]).collect();
    assert_eq!(ids, [1.0, 2.0, 4.0, 5.0, 6.0]);
}

#[test]
fn spice_hdf5_equals_h5py() {
    check("spice.hdf5", "spice.ref.json", &[]);
}

#[test]
fn ani1x_hdf5_equals_h5py() {
    check("ani1x.h5", "ani1x.ref.json", &[]);
    // Another level of theory: the CCSD(T) energies, NaN where not computed.
    let dir = common::tmpdir();
    let store = dir.path().join("cc.zarr");
    let (ok, _, err) = cli(&[
        "import",
        asset("ani1x.h5").to_str().unwrap(),
        store.to_str().unwrap(),
        "--energy-key",
        "ccsd(t)_cbs.energy",
    ]);
    assert!(ok, "{err}");
    let want = common::json(&asset("ani1x.ref.json"));
    let d = dump(&store);
    for (s, w) in d["samples"].as_array().unwrap().iter().zip(want.as_array().unwrap()) {
        assert_close(&flat(&s["energy"]["data"]), &flat(&w["fields"]["ccsd(t)_cbs.energy"]), "ccsd energy");
        assert!(s.get("ccsd(t)_cbs.energy").is_none(), "the energy key is not also a field of its own");
    }
}

#[test]
fn rmd17_npz_equals_numpy() {
    check("rmd17.npz", "rmd17.ref.json", &[]);
}

#[test]
fn sgdml_npz_equals_numpy() {
    check("sgdml.npz", "sgdml.ref.json", &[]);
}

#[test]
fn mptrj_json_equals_pymatgen() {
    let d = check("mptrj.json", "mptrj.ref.json", &[]);
    let s = &d["samples"][0];
    assert_eq!(s["stress"]["shape"], serde_json::json!([1, 3, 3]));
    assert_eq!(s["energy"]["shape"], serde_json::json!([1, 1]));
}

#[test]
fn unit_constants_equal_ase_units() {
    use atomzarr::formats::units;
    let ase = common::json(&asset("units.ase.json"));
    let ours = [
        ("Bohr", units::bohr()),
        ("Hartree", units::hartree()),
        ("kcal", units::kcal()),
        ("kJ", units::kj()),
        ("mol", units::mol()),
        ("GPa", units::gpa()),
        ("bar", units::bar()),
        ("Rydberg", 0.5 * units::hartree()),
    ];
    for (name, x) in ours {
        let w = ase[name].as_f64().unwrap();
        assert!((x - w).abs() <= w.abs() * 4.0 * f64::EPSILON, "{name}: {x} vs ase.units {w}");
    }
}

#[test]
fn an_unknown_file_asks_for_a_format() {
    let dir = common::tmpdir();
    let bad = dir.path().join("data.bin");
    std::fs::write(&bad, [7u8, 1, 2, 3, 250, 0, 9]).unwrap();
    let (ok, _, err) = cli(&["import", bad.to_str().unwrap(), dir.path().join("s.zarr").to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(&format!("cannot tell the format of {}", bad.display())), "{err}");
    assert!(err.contains("--format") && err.contains("aselmdb") && err.contains("mptrj"), "{err}");
    assert!(!dir.path().join("s.zarr").exists());
    // --format names it instead.
    let xyz = dir.path().join("frames.data");
    std::fs::copy(asset("partial.extxyz"), &xyz).unwrap();
    let store = dir.path().join("t.zarr");
    let (ok, _, err) = cli(&["import", xyz.to_str().unwrap(), store.to_str().unwrap(), "--format", "extxyz"]);
    assert!(ok, "{err}");
}

#[test]
fn missing_error_keeps_the_strict_rule() {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let e = import_files(&[asset("partial.extxyz")], &store, &ImportOptions::default().with_missing(Missing::Error))
        .unwrap_err();
    match &e {
        Error::Parse { line, field, reason, .. } => {
            // Frame 2 (line 7) has no stress and no initial_magmoms.
            assert_eq!(*line, 7, "{e}");
            assert!(["initial_magmoms", "stress"].contains(&field.as_str()), "{e}");
            assert!(reason.contains("one store holds one schema"), "{e}");
        }
        other => panic!("expected a parse error, got {other}"),
    }
    assert!(!store.exists(), "nothing written, store removed");
}

#[test]
fn labels_first_met_later_fill_the_frames_before() {
    let dir = common::tmpdir();
    let a = dir.path().join("a.extxyz");
    let b = dir.path().join("b.extxyz");
    std::fs::write(&a, "1\nenergy=-1.0\nH 0 0 0\n1\nenergy=-2.0\nH 0 0 1\n").unwrap();
    std::fs::write(
        &b,
        "2\nenergy=-3.0 stress=\"1 2 3 4 5 6\" config_type=dimer Properties=species:S:1:pos:R:3:tags:I:1\nH 0 0 0 7\nH 0 0 1 8\n",
    )
    .unwrap();
    let store = dir.path().join("s.zarr");
    // Two imports and one batch per frame: every label arrives after frames were written.
    let opts = ImportOptions::default().with_batch_frames(1);
    import_files(&[&a], &store, &opts).unwrap();
    import_files(&[&b, &a], &store, &opts).unwrap();
    let r = AtomicDataZarrReader::open(&store).unwrap();
    assert_eq!(r.len(), 5);
    let samples = r.load_many(&[0, 1, 2, 3, 4]).unwrap();
    for (i, s) in samples.iter().enumerate() {
        let dimer = i == 2;
        let stress = s.field("stress").unwrap().data.to_f64_vec();
        assert_eq!(stress.iter().all(|x| x.is_nan()), !dimer, "sample {i} stress {stress:?}");
        assert_eq!(s.string("config_type"), Some(if dimer { "dimer" } else { "" }), "sample {i}");
        let tags = s.field("tags").unwrap().data.to_i64_vec().unwrap();
        let present = s.field("tags_present").unwrap().data.to_i64_vec().unwrap();
        if dimer {
            assert_eq!((tags, present), (vec![7, 8], vec![1]));
        } else {
            assert_eq!((tags, present), (vec![0], vec![0]), "sample {i}");
        }
    }
    // Voigt stress of the dimer, as ASE orders it (xx yy zz yz xz xy).
    assert_eq!(samples[2].field("stress").unwrap().data.to_f64_vec(), [1.0, 6.0, 5.0, 6.0, 2.0, 4.0, 5.0, 4.0, 3.0]);
    // The root attributes record the units and each file's.
    let root = common::zarr_json(&store, "");
    assert_eq!(root["attributes"]["units"]["forces"], "eV/Å");
    let imports = root["attributes"]["imports"].as_array().unwrap();
    assert_eq!(imports.len(), 3);
    assert_eq!(imports[1]["format"], "extxyz");
    assert_eq!(imports[1]["factors"]["energy"], 1.0);
    // MPtrj's stress is kBar: the record says so, with its factor (0.1 GPa in eV/Å³).
    let m = dir.path().join("m.zarr");
    import_files(&[asset("mptrj.json")], &m, &ImportOptions::default()).unwrap();
    let rec = &common::zarr_json(&m, "")["attributes"]["imports"][0];
    assert!(rec["source_units"].as_str().unwrap().ends_with("stress=kBar"), "{rec}");
    let gpa = common::json(&asset("units.ase.json"))["GPa"].as_f64().unwrap();
    assert!((rec["factors"]["stress"].as_f64().unwrap() - 0.1 * gpa).abs() < 1e-15, "{rec}");
    assert_eq!(
        "energy=hartree,length=Å".parse::<atomzarr::formats::units::Units>().unwrap().length,
        atomzarr::formats::units::Length::Angstrom
    );
}

#[test]
fn string_labels_are_zarr_v3_string_arrays_outside_the_toolkit_groups() {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    import_files(&[asset("mptrj.json")], &store, &ImportOptions::default()).unwrap();
    let meta = common::zarr_json(&store, "strings/mp_id");
    assert_eq!(meta["data_type"], "string");
    assert_eq!(meta["codecs"][0]["name"], "vlen-utf8");
    assert_eq!(meta["fill_value"], "");
    let root = common::zarr_json(&store, "");
    assert_eq!(root["attributes"]["strings"]["mp_id"], "system");
    assert!(root["attributes"]["fields"]["custom"].get("mp_id").is_none());
    assert!(!store.join("custom").join("mp_id").exists() && !store.join("core").join("mp_id").exists());
}

#[test]
fn export_reads_back_as_the_original_frames() {
    let dir = common::tmpdir();
    let store = dir.path().join("s.zarr");
    let out = dir.path().join("out.extxyz");
    let back = dir.path().join("back.zarr");
    let input = asset("partial.extxyz");
    assert!(cli(&["import", input.to_str().unwrap(), store.to_str().unwrap()]).0);
    let (ok, _, err) = cli(&["export", store.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let comments: Vec<&str> = text.lines().filter(|l| l.contains("Properties=")).collect();
    assert_eq!(comments.len(), 5);
    // Absent labels are left out of their frames.
    assert!(comments[0].contains("stress=") && !comments[1].contains("stress="), "{}", comments[1]);
    assert!(comments[0].contains("initial_magmoms:R:1") && !comments[1].contains("initial_magmoms"));
    assert!(comments[2].contains("note=\"hand picked\"") && !comments[0].contains("note="));
    // Imported again, the frames are the same.
    assert!(cli(&["import", out.to_str().unwrap(), back.to_str().unwrap()]).0);
    let (a, b) = (dump(&store), dump(&back));
    assert_eq!(a["samples"], b["samples"]);
    // The file exists now: export refuses to overwrite it.
    assert!(!cli(&["export", store.to_str().unwrap(), out.to_str().unwrap()]).0);
}

#[test]
fn stats_leave_absent_labels_out() {
    let dir = common::tmpdir();
    let xyz = dir.path().join("a.extxyz");
    // Frame 2 has neither energy nor forces.
    std::fs::write(
        &xyz,
        "1\nenergy=-1.0 Properties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 0.3 0 0\n\
         1\nProperties=species:S:1:pos:R:3\nH 0 0 0\n\
         2\nenergy=-3.0 Properties=species:S:1:pos:R:3:forces:R:3\nH 0 0 0 0 0.4 0\nH 0 0 1 0 0 -1.2\n",
    )
    .unwrap();
    let store = dir.path().join("s.zarr");
    import_files(&[&xyz], &store, &ImportOptions::default()).unwrap();
    let r = AtomicDataZarrReader::open(&store).unwrap();
    let s = atomzarr::prep::stats::dataset_stats(&r, &Default::default()).unwrap();
    // Force RMS over the 9 present components; energy per atom over 2 frames.
    let want_rms = ((0.3f64 * 0.3 + 0.4 * 0.4 + 1.2 * 1.2) / 9.0).sqrt();
    assert!((s.force_rms.unwrap() - want_rms).abs() < 1e-6, "{:?} vs {want_rms}", s.force_rms);
    let epa = s.energy_per_atom.unwrap();
    assert!((epa.mean - (-1.0 + -1.5) / 2.0).abs() < 1e-6, "{epa:?}");
    assert!((s.elements[0].e0.unwrap() + 1.4).abs() < 1e-6, "E0 fitted from the two energies: {:?}", s.elements[0].e0);
    assert_eq!(r.schema().strings.len(), 0);
}
