//! Bad stores give typed errors that name the store and the array, never a
//! panic: missing or foreign paths, damaged metadata, inconsistent arrays,
//! interrupted writes. Corrupt chunks and bad calls are `input_errors.rs`'s.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

#[path = "bad_stores/mod.rs"]
mod bad_stores;
#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use atomzarr::store::format;
use atomzarr::store::format::StoreGroup;
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Error, HostData, Level, Reader, ReaderExt,
    ZarrArrayConfig, ZarrWriteConfig,
};
use bad_stores::*;
use common::*;
use serde_json::{Value, json};

#[test]
fn a_defragment_interrupted_between_its_renames_loses_nothing() {
    let dir = tmpdir();
    let path = good_store(dir.path(), "d.zarr", config(Codec::Zstd { level: 3 }, None));
    let want = read_all(&AtomicDataZarrReader::open(&path).unwrap());
    // The state a crash after the first rename leaves: the original under
    // `.defrag-old`, a finished or partial copy under `.defrag-tmp`.
    let old = format::sibling(&path, ".defrag-old");
    let tmp = format::sibling(&path, ".defrag-tmp");
    std::fs::rename(&path, &old).unwrap();
    std::fs::create_dir_all(tmp.join("core")).unwrap();
    match reader_err(&path) {
        e @ Error::Interrupted { .. } => {
            let msg = e.to_string();
            let Error::Interrupted { store, operation, kept } = e else { unreachable!() };
            assert_eq!(
                (store, operation.as_str(), kept),
                (atomzarr::Location::Local(path.clone()), "defragment", old.clone())
            );
            assert!(msg.contains("interrupted") && msg.contains(old.to_str().unwrap()), "{msg}");
        }
        e => panic!("expected Interrupted, got {e:?}"),
    }
    // Reading did not touch anything; opening a writer puts the original back.
    assert!(old.is_dir() && !path.exists());
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    assert!(path.is_dir() && !old.exists() && !tmp.exists());
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(read_all(&r), want);
    // And the store works as before: a real defragment completes.
    w.delete(&[0]).unwrap();
    w.defragment(None).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(read_all(&r), want[1..].to_vec());
    assert!(!old.exists() && !tmp.exists());
}

#[test]
fn an_interrupted_add_custom_is_finished_or_dropped_by_the_next_writer() {
    let dir = tmpdir();
    let values: Vec<i32> = (1..=N as i32).collect();
    let pending = |path: &Path| path.join(format::PENDING_DIR).join("x");

    // Stopped after listing the field, before moving its array into place.
    let listed = good_store(dir.path(), "listed.zarr", config(Codec::Zstd { level: 3 }, None));
    let mut w = AtomicDataZarrWriter::open(&listed, ZarrWriteConfig::default()).unwrap();
    w.add_custom("x", Level::System, &[N], values.clone()).unwrap();
    assert!(!listed.join(format::PENDING_DIR).exists(), "a finished add_custom leaves nothing pending");
    // The writer "dies" here: its lock goes with it.
    drop(w);
    std::fs::create_dir_all(listed.join(format::PENDING_DIR)).unwrap();
    std::fs::rename(listed.join("custom/x"), pending(&listed)).unwrap();
    // The listing is the commit point: readers already see the field,
    // read from where the interrupted call left it.
    let got = read_all(&AtomicDataZarrReader::open(&listed).unwrap());
    let x: Vec<i32> = got.iter().map(|s| s.fields["x"].data.to_i64_vec().unwrap()[0] as i32).collect();
    assert_eq!(x, values, "the committed field reads from the pending array");
    assert!(pending(&listed).exists(), "reading moved nothing");
    AtomicDataZarrWriter::open(&listed, ZarrWriteConfig::default()).unwrap();
    assert!(!pending(&listed).exists() && listed.join("custom/x/zarr.json").exists());
    let got = read_all(&AtomicDataZarrReader::open(&listed).unwrap());
    let x: Vec<i32> = got.iter().map(|s| s.fields["x"].data.to_i64_vec().unwrap()[0] as i32).collect();
    assert_eq!(x, values, "the finished array was moved into place");
    assert!(!listed.join(format::PENDING_DIR).exists());

    // Stopped before listing: readers never see the pending array, and the
    // next writer drops it, so adding the field again (all zeros, whose
    // chunks are not written) reads the new data, not stale chunks.
    let unlisted = good_store(dir.path(), "unlisted.zarr", config(Codec::Zstd { level: 3 }, None));
    let before = read_all(&AtomicDataZarrReader::open(&unlisted).unwrap());
    let mut w = AtomicDataZarrWriter::open(&unlisted, ZarrWriteConfig::default()).unwrap();
    w.add_custom("x", Level::System, &[N], values.clone()).unwrap();
    drop(w);
    std::fs::create_dir_all(unlisted.join(format::PENDING_DIR)).unwrap();
    std::fs::rename(unlisted.join("custom/x"), pending(&unlisted)).unwrap();
    let mut root = format::read_root(&unlisted).unwrap();
    root.fields.remove("x");
    arrays::write_root(&unlisted, &root).unwrap();
    assert_eq!(read_all(&AtomicDataZarrReader::open(&unlisted).unwrap()), before, "pending data is invisible");
    let mut w = AtomicDataZarrWriter::open(&unlisted, ZarrWriteConfig::default()).unwrap();
    assert!(!unlisted.join(format::PENDING_DIR).exists(), "the unlisted attempt is dropped");
    w.add_custom("x", Level::System, &[N], vec![0i32; N]).unwrap();
    for (k, s) in read_all(&AtomicDataZarrReader::open(&unlisted).unwrap()).iter().enumerate() {
        assert_eq!(s.fields["x"].data, HostData::Int32(vec![0]), "sample {k}");
    }
}

#[test]
fn missing_path_is_not_found() {
    let dir = tmpdir();
    let path = dir.path().join("nope.zarr");
    match reader_err(&path) {
        Error::NotFound { store } => assert_eq!(store, atomzarr::Location::Local(path.clone())),
        e => panic!("expected NotFound, got {e:?}"),
    }
    assert!(matches!(AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()), Err(Error::NotFound { .. })));
    assert!(matches!(format::read_root(&path), Err(Error::NotFound { .. })));
    for cmd in ["dump", "inspect"] {
        let (ok, stdout, stderr) = cli(&[cmd, path.to_str().unwrap()]);
        assert!(!ok, "{cmd} on a missing path succeeded: {stdout}");
        assert!(stderr.contains("no such path") && stderr.contains(path.to_str().unwrap()), "{cmd}: {stderr}");
    }
}

#[test]
fn paths_that_are_not_zarr_v3_groups_are_format_errors() {
    let dir = tmpdir();
    let cases: Vec<(&str, Box<dyn Fn(&Path)>)> = vec![
        ("empty directory", Box::new(|p: &Path| std::fs::create_dir(p).unwrap())),
        (
            "directory of other files",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("data.csv"), "a,b\n1,2\n").unwrap();
            }),
        ),
        ("a plain file", Box::new(|p: &Path| std::fs::write(p, "not a store").unwrap())),
        (
            "zarr v2 group (.zgroup)",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
            }),
        ),
        (
            "zarr.json with zarr_format 2",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("zarr.json"), r#"{"zarr_format": 2, "node_type": "group"}"#).unwrap();
            }),
        ),
        (
            "root is an array",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("zarr.json"), r#"{"zarr_format": 3, "node_type": "array"}"#).unwrap();
            }),
        ),
        (
            "zarr.json is not an object",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("zarr.json"), "[1, 2, 3]").unwrap();
            }),
        ),
        (
            "zarr.json is not JSON",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(p.join("zarr.json"), [0xff, 0xfe, 0x00, 0x7b]).unwrap();
            }),
        ),
        (
            "a zarr v3 group without meta/ and core/",
            Box::new(|p: &Path| {
                std::fs::create_dir(p).unwrap();
                std::fs::write(
                    p.join("zarr.json"),
                    r#"{"zarr_format": 3, "node_type": "group", "attributes": {"num_samples": 0}}"#,
                )
                .unwrap();
            }),
        ),
    ];
    for (i, (what, make)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{i}.zarr"));
        make(&path);
        let e = reader_err(&path);
        assert!(matches!(e, Error::Format { .. }), "{what}: expected Format, got {e:?}");
        assert_names(&e, &path, None);
        assert!(
            matches!(AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()), Err(Error::Format { .. })),
            "{what}: writer open"
        );
        let (ok, _, stderr) = cli(&["dump", path.to_str().unwrap()]);
        assert!(!ok && stderr.contains("not an atomzarr store"), "{what}: {stderr}");
    }
}

#[test]
fn damaged_root_attributes_are_format_errors() {
    let dir = tmpdir();
    let edits: Vec<(&str, Value)> = vec![
        ("num_samples missing", Value::Null),
        ("num_samples not a number", json!("twelve")),
        ("num_samples negative", json!(-1)),
        ("num_samples fractional", json!(1.5)),
        ("num_samples beyond any pointer", json!(u64::MAX)),
    ];
    for (i, (what, v)) in edits.into_iter().enumerate() {
        let path = good_store(dir.path(), &format!("r{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        edit_json(&path.join("zarr.json"), |root| {
            let a = root["attributes"].as_object_mut().unwrap();
            if v.is_null() {
                a.remove("num_samples");
            } else {
                a.insert("num_samples".into(), v.clone());
            }
        });
        let e = reader_err(&path);
        assert!(matches!(e, Error::Format { .. } | Error::Inconsistent { .. }), "{what}: got {e:?}");
        assert_names(&e, &path, None);
        writer_calls_do_not_panic(&path);
    }
    let path = good_store(dir.path(), "level.zarr", config(Codec::Zstd { level: 0 }, None));
    edit_json(&path.join("zarr.json"), |root| root["attributes"]["fields"]["core"]["positions"] = json!("molecule"));
    let e = reader_err(&path);
    assert!(matches!(e, Error::Format { .. }), "bad level: got {e:?}");
    assert!(e.to_string().contains("positions"), "{e}");
}

#[test]
fn missing_groups_and_arrays_are_format_errors_naming_them() {
    let dir = tmpdir();
    for (i, rel, expect) in [
        (0, "meta", "meta/"),
        (1, "core", "core/"),
        (2, "meta/atoms_ptr", "meta/atoms_ptr"),
        (3, "meta/edges_ptr", "meta/edges_ptr"),
        (4, "meta/samples_mask", "meta/samples_mask"),
        (5, "core/forces", "core/forces"),
        (6, "custom/tag", "custom/tag"),
    ] {
        let path = good_store(dir.path(), &format!("m{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        std::fs::remove_dir_all(path.join(rel)).unwrap();
        let e = reader_err(&path);
        assert!(matches!(e, Error::Format { .. }), "{rel} removed: got {e:?}");
        assert_names(&e, &path, Some(expect));
        writer_calls_do_not_panic(&path);
    }
    // A group whose zarr.json says it is an array.
    let path = good_store(dir.path(), "g.zarr", config(Codec::Zstd { level: 0 }, None));
    edit_json(&path.join("core/zarr.json"), |v| v["node_type"] = json!("array"));
    let e = reader_err(&path);
    assert!(matches!(e, Error::Format { .. }), "{e:?}");
    assert_names(&e, &path, Some("core/"));
}

#[test]
fn short_arrays_are_inconsistent_errors_naming_the_array() {
    let dir = tmpdir();
    let cases: Vec<(&str, i64)> = vec![
        ("meta/atoms_ptr", -1),
        ("meta/edges_ptr", -1),
        ("meta/samples_mask", -1),
        ("meta/atoms_mask", -1),
        ("core/positions", -1),
        ("core/neighbor_list", -1),
        ("core/energy", -1),
        ("custom/tag", -3),
    ];
    for (i, (rel, delta)) in cases.into_iter().enumerate() {
        let path = good_store(dir.path(), &format!("s{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        let rows = num_rows(&path, rel);
        set_rows(&path, rel, (rows as i64 + delta) as u64);
        let e = reader_err(&path);
        match &e {
            Error::Inconsistent { array, .. } => assert_eq!(array, rel),
            e => panic!("{rel} shortened: expected Inconsistent, got {e:?}"),
        }
        assert_names(&e, &path, Some(rel));
        writer_calls_do_not_panic(&path);
    }
    // num_samples larger than the pointers allow.
    let path = good_store(dir.path(), "n.zarr", config(Codec::Zstd { level: 0 }, None));
    edit_json(&path.join("zarr.json"), |v| v["attributes"]["num_samples"] = json!(N + 5));
    let e = reader_err(&path);
    assert!(matches!(&e, Error::Inconsistent { array, .. } if array == format::ATOMS_PTR), "{e:?}");
    writer_calls_do_not_panic(&path);
}

#[test]
fn bad_pointers_are_inconsistent_errors() {
    let dir = tmpdir();
    for (i, rel) in [format::ATOMS_PTR, format::EDGES_PTR].into_iter().enumerate() {
        // Decreasing in the middle.
        let path = good_store(dir.path(), &format!("d{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        let p = read_i64s(&path, rel);
        let k = (1..p.len()).find(|&k| p[k] > 0).unwrap();
        set_i64(&path, rel, k as u64 + 1, p[k] - 1);
        let e = open_or_read_err(&path);
        assert!(matches!(&e, Error::Inconsistent { array, .. } if array == rel), "{rel} decreasing: {e:?}");
        assert_names(&e, &path, Some(rel));
        assert!(e.to_string().contains("decrease"), "{e}");
        writer_calls_do_not_panic(&path);

        // The last pointer negative (an append would start there).
        let path = good_store(dir.path(), &format!("l{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        set_i64(&path, rel, N as u64, -5);
        assert!(matches!(reader_err(&path), Error::Inconsistent { .. }));
        writer_calls_do_not_panic(&path);

        // First pointer not 0.
        let path = good_store(dir.path(), &format!("f{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        set_i64(&path, rel, 0, 1);
        let e = open_or_read_err(&path);
        assert!(matches!(&e, Error::Inconsistent { array, .. } if array == rel), "{rel} first != 0: {e:?}");
        writer_calls_do_not_panic(&path);
    }
    // Pointers of a float dtype.
    let path = good_store(dir.path(), "float.zarr", config(Codec::None, None));
    edit_json(&path.join("meta/atoms_ptr/zarr.json"), |v| {
        v["data_type"] = json!("float64");
        v["fill_value"] = json!(0.0);
    });
    let e = reader_err(&path);
    assert!(matches!(&e, Error::Inconsistent { array, .. } if array == format::ATOMS_PTR), "{e:?}");
    writer_calls_do_not_panic(&path);
}

#[test]
fn odd_array_shapes_and_dtypes_are_errors_not_panics() {
    let dir = tmpdir();
    // samples_mask of a wider dtype or with two dimensions: its bytes are not one flag per sample.
    // (Valid arrays holding valid, all-true data: only their dtype/shape is off.)
    for (name, dtype, shape, data) in [
        ("mask_int64.zarr", DType::Int64, vec![N as u64], HostData::Int64(vec![1; N])),
        ("mask_2d.zarr", DType::Bool, vec![N as u64, 2], HostData::Bool(vec![true; 2 * N])),
    ] {
        let path = good_store(dir.path(), name, config(Codec::None, None));
        replace_array(&path, format::SAMPLES_MASK, dtype, shape, data);
        let e = reader_err(&path);
        assert!(matches!(&e, Error::Inconsistent { array, .. } if array == format::SAMPLES_MASK), "{name}: {e:?}");
        assert_names(&e, &path, Some(format::SAMPLES_MASK));
        writer_calls_do_not_panic(&path);
    }

    // A zero-dimensional field array.
    let path = good_store(dir.path(), "scalar.zarr", config(Codec::None, None));
    edit_json(&path.join("custom/tag/zarr.json"), |v| {
        v["shape"] = json!([]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([]);
    });
    let e = reader_err(&path);
    assert!(
        matches!(&e, Error::Inconsistent { array, .. } | Error::Zarr { array, .. } if array == "custom/tag"),
        "{e:?}"
    );
    writer_calls_do_not_panic(&path);

    // An unsupported data type.
    let path = good_store(dir.path(), "complex.zarr", config(Codec::None, None));
    edit_json(&path.join("custom/tag/zarr.json"), |v| {
        v["data_type"] = json!("complex64");
        v["fill_value"] = json!([0.0, 0.0]);
    });
    let e = reader_err(&path);
    assert!(
        matches!(&e, Error::Inconsistent { array, .. } | Error::Zarr { array, .. } if array == "custom/tag"),
        "{e:?}"
    );
    writer_calls_do_not_panic(&path);
}
