//! Bad input gives typed errors that name the store and the array, never a
//! panic: missing or foreign paths, damaged metadata, inconsistent arrays,
//! corrupt chunks, out-of-range indices, invalid configurations and calls.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use atomzarr::store::format;
use atomzarr::store::format::StoreGroup;
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Error, HostData, Level, Reader, ReaderExt, Shuffle,
    ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use serde_json::{Value, json};

const N: usize = 12;

fn config(codec: Codec, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(4);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// A good store of N samples (4-row chunks, so every array has several).
fn good_store(dir: &Path, name: &str, config: ZarrWriteConfig) -> PathBuf {
    let path = dir.join(name);
    let extras = Extras { custom: vec![("tag".into(), Level::System, DType::Int32, vec![])], full_core: true };
    // No empty samples: every sample owns atom and edge rows.
    let mut rng = SplitMix(42);
    let data: Vec<_> = (0..N)
        .map(|_| {
            let atoms = 1 + rng.below(6) as usize;
            let edges = 1 + rng.below(8) as usize;
            sample(&mut rng, atoms, edges, &extras)
        })
        .collect();
    let mut w = AtomicDataZarrWriter::create(&path, config).unwrap();
    w.write(&data[..5]).unwrap();
    w.append(&data[5..]).unwrap();
    path
}

fn reader_err(path: &Path) -> Error {
    match AtomicDataZarrReader::open(path) {
        Ok(r) => panic!("{}: opened a bad store ({} samples)", path.display(), r.len()),
        Err(e) => e,
    }
}

/// The error of opening `path`, or else of reading every sample: the
/// pointer pages other than the last are read when a read needs them.
fn open_or_read_err(path: &Path) -> Error {
    let r = match AtomicDataZarrReader::open(path) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let all: Vec<i64> = (0..r.len() as i64).collect();
    match r.read_many(&all) {
        Ok(_) => panic!("{}: read every sample of a bad store", path.display()),
        Err(e) => e,
    }
}

/// The error names the store path and, where given, the array.
fn assert_names(e: &Error, path: &Path, array: Option<&str>) {
    let msg = e.to_string();
    assert!(msg.contains(path.to_str().unwrap()), "error {msg:?} does not name the store {}", path.display());
    if let Some(a) = array {
        assert!(msg.contains(a), "error {msg:?} does not name the array {a}");
    }
}

fn edit_json(file: &Path, f: impl FnOnce(&mut Value)) {
    let mut v = json(file);
    f(&mut v);
    std::fs::write(file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

fn num_rows(path: &Path, rel: &str) -> u64 {
    zarr_json(path, rel)["shape"][0].as_u64().unwrap()
}

/// Sets dimension 0 of an array through zarrs.
fn set_rows(path: &Path, rel: &str, rows: u64) {
    let store = arrays::open_store(path).unwrap();
    let mut a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let mut shape = a.shape().to_vec();
    shape[0] = rows;
    a.set_shape(shape).unwrap();
    a.store_metadata().unwrap();
}

fn set_i64(path: &Path, rel: &str, at: u64, value: i64) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.store_array_subset(&[at..at + 1], vec![value]).unwrap();
}

fn read_i64s(path: &Path, rel: &str) -> Vec<i64> {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.retrieve_array_subset(&[0..a.shape()[0]]).unwrap()
}

/// Every writer entry point on a damaged store fails with a typed error
/// (or, for calls that never look at the damage, succeeds) — none panics.
fn writer_calls_do_not_panic(path: &Path) {
    let r = std::panic::catch_unwind(|| {
        let Ok(mut w) = AtomicDataZarrWriter::open(path, ZarrWriteConfig::default()) else { return };
        let extras = Extras { custom: vec![("tag".into(), Level::System, DType::Int32, vec![])], full_core: true };
        let more = samples(43, 2, 4, 4, &extras);
        let _ = w.append(&more);
        let _ = w.delete(&[0, 1]);
        let _ = w.add_custom("zz", Level::System, &[N], vec![0u8; N]);
        let _ = w.defragment(None);
    });
    assert!(r.is_ok(), "{}: a writer call panicked", path.display());
}

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

/// Replaces the array at `rel` by a new one of `dtype` and `shape` holding `data`.
fn replace_array(path: &Path, rel: &str, dtype: DType, shape: Vec<u64>, data: HostData) {
    std::fs::remove_dir_all(path.join(rel)).unwrap();
    let store = arrays::open_store(path).unwrap();
    let resolved = ZarrWriteConfig::default().resolve(StoreGroup::Meta, "x");
    let a = arrays::create_array(path, &store, rel, dtype, shape.clone(), &resolved, None).unwrap();
    let subset: Vec<std::ops::Range<u64>> = shape.iter().map(|&d| 0..d).collect();
    a.store_array_subset(&subset, zarrs::array::ArrayBytes::new_flen(data.as_bytes().to_vec())).unwrap();
}

/// A chunk file of `rel` (the first one found).
fn a_chunk_file(path: &Path, rel: &str) -> PathBuf {
    let mut stack = vec![path.join(rel).join("c")];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for e in entries {
            if e.is_dir() {
                stack.push(e);
            } else {
                return e;
            }
        }
    }
    panic!("no chunk file under {rel}");
}

#[test]
fn corrupt_chunks_are_chunk_or_zarr_errors_naming_the_array() {
    let dir = tmpdir();
    let codecs = [
        (Codec::Zstd { level: 3 }, None),
        (Codec::Zstd { level: 3 }, Some(8)),
        (Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle }, None),
        (Codec::Gzip { level: 5 }, Some(8)),
        (Codec::None, None),
        (Codec::None, Some(8)),
    ];
    let damage: [(&str, fn(&[u8]) -> Vec<u8>); 4] = [
        ("garbage", |b| b.iter().enumerate().map(|(i, x)| x ^ 0x5au8.wrapping_add(i as u8)).collect()),
        ("truncated", |b| b[..b.len() / 2].to_vec()),
        ("empty", |_| Vec::new()),
        ("longer", |b| [b, &[1u8, 2, 3][..]].concat()),
    ];
    let mut k = 0;
    for (codec, shard) in codecs {
        for (how, f) in damage {
            let what = format!("{codec} shard {shard:?}, {how} chunk");
            // (Garbage of the right length in an uncompressed chunk would be
            // valid data but for the crc32c these stores carry by default.)
            k += 1;
            let path = good_store(dir.path(), &format!("c{k}.zarr"), config(codec, shard));
            let file = a_chunk_file(&path, "core/positions");
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, f(&bytes)).unwrap();
            // Opening reads only meta/; reading positions must fail.
            let r = AtomicDataZarrReader::open(&path).unwrap();
            let all: Vec<i64> = (0..r.len() as i64).collect();
            let e = match r.read_many(&all) {
                Err(e) => e,
                Ok(_) => panic!("{what}: read succeeded"),
            };
            match &e {
                Error::Chunk { array, .. } | Error::Zarr { array, .. } | Error::Checksum { array, .. } => {
                    assert_eq!(array, "core/positions", "{what}")
                }
                e => panic!("{what}: expected Chunk, Zarr or Checksum, got {e:?}"),
            }
            assert_names(&e, &path, Some("core/positions"));
            // The dump fails the same way.
            let (ok, _, stderr) = cli(&["dump", path.to_str().unwrap()]);
            assert!(!ok && stderr.contains("core/positions"), "{what}: {stderr}");
        }
    }
    // A corrupt pointer chunk fails at open (the last) or at the read that
    // needs it, naming the pointer array.
    let path = good_store(dir.path(), "ptr.zarr", config(Codec::Zstd { level: 3 }, None));
    std::fs::write(a_chunk_file(&path, format::ATOMS_PTR), b"\x00\x01garbage").unwrap();
    let e = open_or_read_err(&path);
    assert!(
        matches!(&e, Error::Zarr { array, .. } | Error::Chunk { array, .. } | Error::Checksum { array, .. } if array == format::ATOMS_PTR),
        "{e:?}"
    );
    assert_names(&e, &path, Some(format::ATOMS_PTR));
    writer_calls_do_not_panic(&path);
}

#[test]
fn truncated_metadata_files_are_errors_naming_them() {
    let dir = tmpdir();
    for (i, rel) in ["", "meta", "core", "meta/atoms_ptr", "meta/samples_mask", "core/positions", "custom/tag"]
        .into_iter()
        .enumerate()
    {
        let path = good_store(dir.path(), &format!("t{i}.zarr"), config(Codec::Zstd { level: 0 }, None));
        let file = path.join(rel).join("zarr.json");
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        let e = reader_err(&path);
        assert!(matches!(e, Error::Format { .. } | Error::Zarr { .. }), "{rel}/zarr.json truncated: got {e:?}");
        assert_names(&e, &path, (!rel.is_empty()).then_some(rel));
        writer_calls_do_not_panic(&path);
    }
}

#[test]
fn out_of_range_indices_are_index_errors() {
    let dir = tmpdir();
    let path = good_store(dir.path(), "i.zarr", config(Codec::Zstd { level: 0 }, None));
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    w.delete(&[0, 3]).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    let len = r.len();
    assert!(len < r.num_physical());
    let is_oor = |e: Error, want_index: i64| match e {
        Error::IndexOutOfRange { source_name, index, len: l } => {
            assert_eq!(index, want_index);
            assert_eq!(l, len);
            assert!(source_name.contains(path.to_str().unwrap()), "{source_name}");
        }
        e => panic!("expected IndexOutOfRange, got {e:?}"),
    };
    for i in [len as i64, len as i64 + 1, -(len as i64) - 1, i64::MAX, i64::MIN] {
        is_oor(r.read(i).unwrap_err(), i);
        is_oor(r.read_many(&[0, i, 1]).unwrap_err(), i);
        let mut out = Vec::new();
        is_oor(r.read_collated(&[vec![0], vec![i]], &mut out).unwrap_err(), i);
    }
    for i in [len, len + 1, r.num_physical(), usize::MAX] {
        is_oor(r.sample_sizes(i).unwrap_err(), i as i64);
        is_oor(r.load_many(&[i]).unwrap_err(), i as i64);
    }
    // The boundaries themselves are fine.
    assert_eq!(r.read(-(len as i64)).unwrap().metadata.index, 0);
    assert_eq!(r.read(len as i64 - 1).unwrap().metadata.index, len - 1);
    assert!(r.read_many(&[]).unwrap().is_empty());
}

#[test]
fn invalid_write_configs_are_config_errors_and_create_nothing() {
    let dir = tmpdir();
    let base = ZarrArrayConfig::default();
    let bad: Vec<(&str, ZarrWriteConfig)> = vec![
        (
            "shard not a multiple of chunk",
            ZarrWriteConfig::default().with_core(base.with_chunk_size(64).with_shard_size(100)),
        ),
        ("zstd level 99", ZarrWriteConfig::default().with_core(base.with_codec(Codec::Zstd { level: 99 }))),
        ("zstd level -99", ZarrWriteConfig::default().with_meta(base.with_codec(Codec::Zstd { level: -99 }))),
        ("gzip level 10", ZarrWriteConfig::default().with_custom(base.with_codec(Codec::Gzip { level: 10 }))),
        (
            "blosc clevel 10",
            ZarrWriteConfig::default()
                .with_core(base.with_codec(Codec::BloscZstd { clevel: 10, shuffle: Shuffle::Shuffle })),
        ),
        ("chunk 0", ZarrWriteConfig::default().with_core(base.with_chunk_size(0))),
        ("shard 0", ZarrWriteConfig::default().with_core(base.with_chunk_size(4).with_shard_size(0))),
        ("shard without chunk", ZarrWriteConfig::default().with_core(base.with_shard_size(64))),
        (
            "bad override",
            ZarrWriteConfig::default()
                .with_core(base.with_chunk_size(64))
                .with_override("positions", base.with_shard_size(96)),
        ),
        (
            "bad override codec",
            ZarrWriteConfig::default().with_override("energy", base.with_codec(Codec::Zstd { level: 23 })),
        ),
    ];
    let existing = good_store(dir.path(), "existing.zarr", config(Codec::None, None));
    for (i, (what, c)) in bad.into_iter().enumerate() {
        assert!(matches!(c.validate(), Err(Error::Config(_))), "{what}: validate");
        let path = dir.path().join(format!("cfg{i}.zarr"));
        match AtomicDataZarrWriter::create(&path, c.clone()) {
            Err(Error::Config(msg)) => assert!(!msg.is_empty()),
            Err(e) => panic!("{what}: expected Config, got {e:?}"),
            Ok(_) => panic!("{what}: created"),
        }
        assert!(!path.exists(), "{what}: create left {}", path.display());
        assert!(matches!(AtomicDataZarrWriter::open(&existing, c), Err(Error::Config(_))), "{what}: open");
    }
}

#[test]
fn layered_configs_that_resolve_validly_are_accepted() {
    // An override that only sets shard_size is valid where the field lives
    // (core, chunk 64): validation must not demand it also fit groups the
    // field never goes to (meta has no chunk_size here).
    let dir = tmpdir();
    let c = ZarrWriteConfig::default()
        .with_core(ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(4))
        .with_override("positions", ZarrArrayConfig::default().with_shard_size(12))
        .with_override("atoms_ptr", ZarrArrayConfig::default().with_chunk_size(8))
        .with_custom(ZarrArrayConfig::default().with_chunk_size(2))
        .with_override("tag", ZarrArrayConfig::default().with_shard_size(6));
    c.validate().unwrap();
    let path = good_store(dir.path(), "ok.zarr", c);
    let pos = zarr_json(&path, "core/positions");
    assert_eq!(pos["chunk_grid"]["configuration"]["chunk_shape"], json!([12, 3]));
    assert_eq!(pos["codecs"][0]["configuration"]["chunk_shape"], json!([4, 3]));
    assert_eq!(zarr_json(&path, "custom/tag")["chunk_grid"]["configuration"]["chunk_shape"], json!([6]));
    assert_eq!(zarr_json(&path, "meta/atoms_ptr")["chunk_grid"]["configuration"]["chunk_shape"], json!([8]));
    assert_eq!(AtomicDataZarrReader::open(&path).unwrap().len(), N);
}

#[test]
fn bad_add_custom_and_delete_calls_change_nothing() {
    let dir = tmpdir();
    let path = good_store(dir.path(), "a.zarr", config(Codec::Zstd { level: 1 }, Some(8)));
    let atoms = read_i64s(&path, format::ATOMS_PTR)[N] as usize;
    let edges = read_i64s(&path, format::EDGES_PTR)[N] as usize;
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    let before = snapshot(&path);
    let calls: Vec<(&str, Box<dyn Fn(&mut AtomicDataZarrWriter) -> atomzarr::Result<()>>)> = vec![
        ("system rows", Box::new(|w| w.add_custom("x", Level::System, &[N + 1], vec![0f32; N + 1]))),
        ("system rows (short)", Box::new(|w| w.add_custom("x", Level::System, &[N - 1, 2], vec![0f32; (N - 1) * 2]))),
        ("atom rows", Box::new(move |w| w.add_custom("x", Level::Atom, &[atoms - 1], vec![0u8; atoms - 1]))),
        ("edge rows", Box::new(move |w| w.add_custom("x", Level::Edge, &[edges + 1, 3], vec![0i64; (edges + 1) * 3]))),
        ("shape vs data", Box::new(|w| w.add_custom("x", Level::System, &[N], vec![0f32; N + 2]))),
        ("empty shape", Box::new(|w| w.add_custom("x", Level::System, &[], vec![0f32; 1]))),
        ("existing custom name", Box::new(|w| w.add_custom("tag", Level::System, &[N], vec![0i32; N]))),
        ("existing core name", Box::new(|w| w.add_custom("energy", Level::System, &[N], vec![0f32; N]))),
        ("delete out of range", Box::new(|w| w.delete(&[0, N]))),
        ("delete far out of range", Box::new(|w| w.delete(&[usize::MAX]))),
    ];
    for (what, call) in calls {
        match call(&mut w) {
            Err(Error::InvalidInput { context, .. }) if what.starts_with("shape") || what.starts_with("empty") => {
                let _ = context;
            }
            Err(Error::InvalidInput { context, reason }) => {
                assert!(context.contains(path.to_str().unwrap()), "{what}: {context}: {reason}");
            }
            Err(Error::IndexOutOfRange { source_name, len, .. }) if what.starts_with("delete") => {
                assert_eq!(len, N);
                assert!(source_name.contains(path.to_str().unwrap()));
            }
            other => panic!("{what}: got {other:?}"),
        }
        assert_same_snapshot(&before, &snapshot(&path), what);
    }
    assert_eq!(AtomicDataZarrReader::open(&path).unwrap().len(), N);
}

#[test]
fn field_names_that_are_not_zarr_node_names_are_refused() {
    // A field name becomes a directory under core/ or custom/: it must be a
    // valid Zarr node name, or it would escape its group or clobber metadata.
    let bad = ["", ".", "..", "a/b", "../core/positions", "/abs", "__reserved", "back\\slash"];
    let dir = tmpdir();
    let path = good_store(dir.path(), "names.zarr", config(Codec::Zstd { level: 0 }, None));
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    let before = snapshot(&path);
    for name in bad {
        match w.add_custom(name, Level::System, &[N], vec![1u8; N]) {
            Err(Error::InvalidInput { reason, .. }) => assert!(reason.contains("name"), "{name:?}: {reason}"),
            other => panic!("add_custom({name:?}): expected InvalidInput, got {other:?}"),
        }
        assert_same_snapshot(&before, &snapshot(&path), name);
    }
    assert_eq!(AtomicDataZarrReader::open(&path).unwrap().len(), N);
    // The same names in a first write.
    for (i, name) in bad.into_iter().enumerate() {
        let p = dir.path().join(format!("fw{i}.zarr"));
        let mut w = AtomicDataZarrWriter::create(&p, ZarrWriteConfig::default()).unwrap();
        let before = snapshot(&p);
        let s = atomzarr::AtomicData::new(vec![1], vec![[0.0; 3]])
            .unwrap()
            .with_field(name, atomzarr::Field::new(Level::System, vec![1], vec![1u8]).unwrap());
        assert!(matches!(w.write(&[s]), Err(Error::InvalidInput { .. })), "first write with field {name:?}");
        assert_same_snapshot(&before, &snapshot(&p), name);
        assert!(!dir.path().join("core").exists() && !dir.path().join("positions").exists());
    }
}

#[test]
fn garbage_neighbor_list_values_read_without_overflow() {
    // Uncompressed chunks of the right length are read as data, whatever the
    // bytes: extreme stored indices must come out (wrapped) as values, not
    // as an overflow panic while subtracting the atom offset.
    let dir = tmpdir();
    let path = good_store(dir.path(), "nl.zarr", config(Codec::None, None));
    let store = arrays::open_store(&path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(&path), &store, "core/neighbor_list").unwrap();
    let e = a.shape()[0];
    let extreme: Vec<i64> = (0..e * 2).map(|i| if i % 2 == 0 { i64::MIN } else { i64::MAX }).collect();
    a.store_array_subset(&[0..e, 0..2], extreme).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    let got = read_all(&r);
    assert_eq!(got.len(), N);
    let off = read_i64s(&path, format::ATOMS_PTR)[N - 1];
    let last = got[N - 1].field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
    assert!(!last.is_empty());
    for pair in last.chunks(2) {
        assert_eq!(pair, [i64::MIN.wrapping_sub(off), i64::MAX - off]);
    }
    // Such a sample is invalid data for a writer.
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    assert!(matches!(w.append(&got[N - 1..]), Err(Error::InvalidInput { .. })));
}
