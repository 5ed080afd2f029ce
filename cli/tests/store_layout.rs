//! The on-disk layout of stores this crate writes, against the format
//! (zarr.json contents, codecs, store-global neighbor lists, zeroed deleted
//! rows), and the CLI's dump of them.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

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

#[test]
fn layout_matches_the_store_format() {
    let dir = tmpdir();
    let path = dir.path().join("layout.zarr");
    let extras = Extras {
        custom: vec![
            ("charge_density".into(), Level::Atom, DType::Float32, vec![1]),
            ("bond_order".into(), Level::Edge, DType::Float64, vec![]),
            ("label".into(), Level::System, DType::Int16, vec![]),
        ],
        full_core: true,
    };
    let data = samples(11, 23, 7, 12, &extras);
    let config = ZarrWriteConfig::default()
        .with_meta(
            ZarrArrayConfig::default()
                .with_codec(Codec::BloscLz4 { clevel: 4, shuffle: Shuffle::NoShuffle })
                .with_chunk_size(16),
        )
        .with_core(
            ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(4).with_shard_size(8),
        )
        .with_custom(ZarrArrayConfig::default().with_codec(Codec::Gzip { level: 6 }).with_chunk_size(5))
        .with_override("neighbor_list", ZarrArrayConfig::default().with_chunk_size(2).with_shard_size(6));
    write_store(&path, config, &data[..5], &data[5..]);
    let n = data.len() as u64;
    let v: u64 = data.iter().map(|s| s.num_atoms() as u64).sum();
    let e: u64 = data.iter().map(|s| s.num_edges() as u64).sum();

    let root = zarr_json(&path, ".");
    assert_eq!(root["zarr_format"], 3);
    assert_eq!(root["node_type"], "group");
    assert_eq!(root["attributes"]["num_samples"], n);
    assert_eq!(
        root["attributes"]["fields"],
        json!({
            "core": {"atomic_numbers": "atom", "positions": "atom", "forces": "atom", "neighbor_list": "edge",
                     "shifts": "edge", "energy": "system", "cell": "system", "pbc": "system"},
            "custom": {"charge_density": "atom", "bond_order": "edge", "label": "system"}
        })
    );
    for g in ["meta", "core", "custom"] {
        let gj = zarr_json(&path, g);
        assert_eq!((gj["zarr_format"].clone(), gj["node_type"].clone()), (json!(3), json!("group")), "{g}/");
    }
    let children = |g: &str| -> BTreeSet<String> {
        std::fs::read_dir(path.join(g))
            .unwrap()
            .filter_map(|e| {
                let e = e.unwrap();
                e.file_type().unwrap().is_dir().then(|| e.file_name().to_string_lossy().into_owned())
            })
            .collect()
    };
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(children("."), set(&["meta", "core", "custom"]));
    assert_eq!(children("meta"), set(&META));
    assert_eq!(
        children("core"),
        set(&["atomic_numbers", "positions", "forces", "neighbor_list", "shifts", "energy", "cell", "pbc"])
    );
    assert_eq!(children("custom"), set(&["charge_density", "bond_order", "label"]));

    let check = |rel: &str, shape: Value, dtype: &str, fill: Value| {
        let a = zarr_json(&path, rel);
        assert_eq!(a["zarr_format"], 3, "{rel}");
        assert_eq!(a["node_type"], "array", "{rel}");
        assert_eq!(a["shape"], shape, "{rel}: shape");
        assert_eq!(a["data_type"], dtype, "{rel}: data_type");
        assert_eq!(a["fill_value"], fill, "{rel}: fill_value");
        assert_eq!(
            a["chunk_key_encoding"],
            json!({"name": "default", "configuration": {"separator": "/"}}),
            "{rel}: chunk keys as the reference writes them"
        );
    };
    check("meta/atoms_ptr", json!([n + 1]), "int64", json!(0));
    check("meta/edges_ptr", json!([n + 1]), "int64", json!(0));
    check("meta/samples_mask", json!([n]), "bool", json!(false));
    check("meta/atoms_mask", json!([v]), "bool", json!(false));
    check("meta/edges_mask", json!([e]), "bool", json!(false));
    check("core/atomic_numbers", json!([v]), "int64", json!(0));
    check("core/positions", json!([v, 3]), "float32", json!(0.0));
    check("core/forces", json!([v, 3]), "float32", json!(0.0));
    check("core/neighbor_list", json!([e, 2]), "int64", json!(0));
    check("core/shifts", json!([e, 3]), "float32", json!(0.0));
    check("core/energy", json!([n, 1]), "float32", json!(0.0));
    check("core/cell", json!([n, 3, 3]), "float32", json!(0.0));
    check("core/pbc", json!([n, 3]), "bool", json!(false));
    check("custom/charge_density", json!([v, 1]), "float32", json!(0.0));
    check("custom/bond_order", json!([e]), "float64", json!(0.0));
    check("custom/label", json!([n]), "int16", json!(0));

    let blosc = Codec::BloscLz4 { clevel: 4, shuffle: Shuffle::NoShuffle };
    for m in META {
        check_array_codecs(&path, &format!("meta/{m}"), blosc, 16, None);
    }
    for c in ["atomic_numbers", "positions", "forces", "shifts", "energy", "cell", "pbc"] {
        check_array_codecs(&path, &format!("core/{c}"), Codec::Zstd { level: 3 }, 4, Some(8));
    }
    // The override changes chunk and shard only; the codec comes from core.
    check_array_codecs(&path, "core/neighbor_list", Codec::Zstd { level: 3 }, 2, Some(6));
    for c in ["charge_density", "bond_order", "label"] {
        check_array_codecs(&path, &format!("custom/{c}"), Codec::Gzip { level: 6 }, 5, None);
    }

    // neighbor_list is stored with store-global atom indices.
    let store = arrays::open_store(&path).unwrap();
    let raw: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, "core/neighbor_list")
        .unwrap()
        .retrieve_array_subset(&[0..e, 0..2])
        .unwrap();
    let atoms_ptr: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, format::ATOMS_PTR)
        .unwrap()
        .retrieve_array_subset(&[0..n + 1])
        .unwrap();
    let mut want = Vec::new();
    for (i, s) in data.iter().enumerate() {
        want.extend(s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap().iter().map(|x| x + atoms_ptr[i]));
    }
    assert_eq!(raw, want);
    assert!(atoms_ptr.windows(2).all(|w| w[0] <= w[1]) && atoms_ptr[0] == 0);

    // inspect reads the same settings back (defragment(None) relies on it).
    let report = atomzarr::store::inspect::inspect(&path).unwrap();
    assert_eq!((report.num_samples, report.active), (n as usize, n as usize));
    let cfg = |rel: &str| report.arrays.iter().find(|a| a.path == rel).unwrap_or_else(|| panic!("{rel}")).config;
    let want_cfg = |codec, chunk, shard: Option<u64>| {
        let c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(chunk).with_checksum(true);
        match shard {
            Some(rows) => c.with_shard_size(rows),
            None => c,
        }
    };
    assert_eq!(cfg("meta/atoms_ptr"), want_cfg(blosc, 16, None));
    assert_eq!(cfg("core/positions"), want_cfg(Codec::Zstd { level: 3 }, 4, Some(8)));
    assert_eq!(cfg("core/neighbor_list"), want_cfg(Codec::Zstd { level: 3 }, 2, Some(6)));
    assert_eq!(cfg("custom/label"), want_cfg(Codec::Gzip { level: 6 }, 5, None));
    let (ok, stdout, stderr) = cli(&["inspect", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("core/positions") && stdout.contains("zstd(3)") && stdout.contains("blosc-lz4(4)"),
        "{stdout}"
    );
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &Model { samples: data, ..Default::default() }, "layout store");
}

#[test]
fn dump_of_our_store_equals_what_it_reads() {
    let dir = tmpdir();
    let path = dir.path().join("dump.zarr");
    let extras = Extras {
        custom: vec![
            ("u64s".into(), Level::Atom, DType::UInt64, vec![]),
            ("halfs".into(), Level::Edge, DType::Float16, vec![2]),
            ("bf".into(), Level::System, DType::BFloat16, vec![]),
            ("flags".into(), Level::System, DType::Bool, vec![2]),
            ("f64s".into(), Level::Atom, DType::Float64, vec![]),
        ],
        full_core: true,
    };
    let data = samples(3, 9, 5, 6, &extras);
    let mut w = write_store(&path, ZarrWriteConfig::default(), &data[..4], &data[4..]);
    w.delete(&[2, 8]).unwrap();
    let m = Model { samples: data, deleted: [2, 8].into() };
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &m, "dump store");

    let (ok, stdout, stderr) = cli(&["dump", path.to_str().unwrap()]);
    assert!(ok, "dump failed: {stderr}");
    let mut lib = Vec::new();
    atomzarr::formats::dump::dump_json(&r, &mut lib).unwrap();
    assert!(stdout.trim().as_bytes() == lib.as_slice(), "CLI and library dumps differ");
    let v: Value = serde_json::from_str(&stdout).expect("dump is valid JSON");
    assert_eq!(v["num_samples"], 7);
    let fields: BTreeMap<String, String> =
        v["fields"].as_object().unwrap().iter().map(|(k, l)| (k.clone(), l.as_str().unwrap().to_string())).collect();
    let want: BTreeMap<String, String> =
        r.schema().fields.into_iter().map(|(k, l)| (k, l.as_str().to_string())).collect();
    assert_eq!(fields, want);
    let dumped = v["samples"].as_array().unwrap();
    assert_eq!(dumped.len(), 7);
    for (k, (_, s)) in m.active().iter().enumerate() {
        assert_sample_matches_json(s, &dumped[k], &format!("dump sample {k}"));
    }
}

#[test]
fn dump_escapes_field_names_as_python_json_does() {
    // Python's json.dumps (ensure_ascii) escapes quotes, control and
    // non-ASCII characters; an unescaped name would make the dump invalid.
    // (Backslashes are escaped too, see py_json_str's doc test, but are not
    // valid in field names.)
    let dir = tmpdir();
    let path = dir.path().join("names.zarr");
    let name = "q\"uo\tte é 𝛼";
    let s = AtomicData::new(vec![1], vec![[0.0; 3]])
        .unwrap()
        .with_custom(name, Level::System, vec![1], vec![7i32])
        .unwrap();
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&[s]).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert!(r.schema().fields.contains_key(name));
    let mut out = Vec::new();
    atomzarr::formats::dump::dump_json(&r, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let v: Value = serde_json::from_str(&text).expect("dump is valid JSON");
    assert_eq!(v["samples"][0][name]["data"], json!([7]));
    assert!(text.contains(r#""q\"uo\tte \u00e9 \ud835\udefc": "system""#), "{text}");
    assert!(text.is_ascii());
}
