//! Bad input gives typed errors that name the store and the array, never a
//! panic: corrupt chunks, truncated metadata, out-of-range indices, invalid
//! configurations and calls, field names Zarr cannot hold.
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
    AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Error, HostData, Level, Reader, ReaderExt, Shuffle,
    ZarrArrayConfig, ZarrWriteConfig,
};
use bad_stores::*;
use common::*;
use serde_json::{Value, json};

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
