//! Hand-made hostile stores: copies of the Python toolkit's reference
//! stores in `assets/` with one claim made absurd (sample counts, chunk and
//! trailing shapes, shard indexes, pointer values, codec headers, field
//! names), each of which must give a typed error naming the store and the
//! array, never a panic, an abort or a giant allocation.

mod common;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use atomzarr::{AtomicDataZarrReader, Error, Reader, ReaderExt};
use serde_json::{Value, json};

/// A writable copy of reference store `name`.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = common::tmpdir();
    let path = dir.path().join(format!("{name}.zarr"));
    common::copy_dir(&common::assets().join(format!("{name}.zarr")), &path);
    (dir, path)
}

fn edit_json(store: &Path, rel: &str, f: impl FnOnce(&mut Value)) {
    let file = store.join(rel).join("zarr.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// The error opening `store` must be, caught unwinding or not.
fn open_error(store: &Path) -> Error {
    let r = std::panic::catch_unwind(|| AtomicDataZarrReader::open(store));
    match r.expect("open panicked") {
        Ok(r) => panic!("{}: a hostile store opened ({} samples)", store.display(), r.len()),
        Err(e) => {
            common::assert_verify_finds(store, &e);
            e
        }
    }
}

/// `Inconsistent` naming the store and `array`, with `needle` in the reason.
fn assert_inconsistent(e: &Error, store: &Path, array: &str, needle: &str) {
    match e {
        Error::Inconsistent { store: s, array: a, reason } => {
            assert_eq!((s.local().unwrap(), a.as_str()), (store, array), "{e}");
            assert!(reason.contains(needle), "{e}: lacks {needle:?}");
        }
        e => panic!("expected Inconsistent for {array}, got {e:?}"),
    }
}

/// Reads every sample of an opened store; the error it must end in.
fn read_error(store: &Path) -> Error {
    let r = AtomicDataZarrReader::open(store).unwrap_or_else(|e| panic!("open: {e}"));
    let all: Vec<i64> = (0..r.len() as i64).collect();
    let got = std::panic::catch_unwind(AssertUnwindSafe(|| r.read_many(&all))).expect("read_many panicked");
    match got {
        Ok(_) => panic!("{}: a hostile store read", store.display()),
        Err(e) => {
            common::assert_verify_finds(store, &e);
            e
        }
    }
}

/// Sets the last element of int64 array `rel` (1-d, bytes + zstd).
fn set_last_i64(store: &Path, rel: &str, value: i64) {
    let meta: Value = serde_json::from_slice(&std::fs::read(store.join(rel).join("zarr.json")).unwrap()).unwrap();
    let last = meta["shape"][0].as_u64().unwrap() - 1;
    let rows = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap();
    let file = store.join(rel).join("c").join((last / rows).to_string());
    let mut raw = zstd::decode_all(&std::fs::read(&file).unwrap()[..]).unwrap();
    let at = (last % rows) as usize * 8;
    raw[at..at + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(&file, zstd::encode_all(&raw[..], 1).unwrap()).unwrap();
}

#[test]
fn num_samples_of_2_pow_60_with_matching_pointer_shapes_is_refused() {
    // Shapes alone can not tell: only the pointer files, which hold 121
    // entries, can. Before, the reader went on to allocate 2^60+1 pointers.
    let (_dir, store) = copy_of("nva_default");
    let n = 1u64 << 60;
    edit_json(&store, "", |v| v["attributes"]["num_samples"] = json!(n));
    edit_json(&store, "meta/atoms_ptr", |v| v["shape"] = json!([n + 1]));
    edit_json(&store, "meta/edges_ptr", |v| v["shape"] = json!([n + 1]));
    edit_json(&store, "meta/samples_mask", |v| v["shape"] = json!([n]));
    let e = open_error(&store);
    assert_inconsistent(&e, &store, "meta/atoms_ptr", &format!("num_samples {n} claims {} rows", n + 1));
    assert!(e.to_string().contains(&store.display().to_string()), "{e}");
}

#[test]
fn chunk_shapes_whose_product_overflows_or_is_absurd_are_refused() {
    for (rel, chunk) in [
        ("core/positions", json!([1u64 << 32, 1u64 << 32])),
        ("core/positions", json!([u64::MAX, 3])),
        ("core/positions", json!([1u64 << 40, 3])),
        ("meta/atoms_ptr", json!([1u64 << 62])),
        ("core/cell", json!([60, 1u64 << 31, 1u64 << 31])),
    ] {
        let (_dir, store) = copy_of("nva_default");
        edit_json(&store, rel, |v| v["chunk_grid"]["configuration"]["chunk_shape"] = chunk.clone());
        let e = open_error(&store);
        assert_inconsistent(&e, &store, rel, "exceeds the 268435456-byte limit");
    }
}

#[test]
fn shard_indexes_beyond_the_file_are_errors() {
    // An index too large for any limit: refused at open.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    edit_json(&store, "core/positions", |v| {
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([1u64 << 40, 3]);
        v["codecs"][0]["configuration"]["chunk_shape"] = json!([1, 3]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/positions", "needs an index over the");

    // An index within the limit but beyond the shard file: the read fails.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    edit_json(&store, "core/positions", |v| {
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([1u64 << 20, 3]);
        v["codecs"][0]["configuration"]["chunk_shape"] = json!([1, 3]);
    });
    match read_error(&store) {
        Error::Chunk { store: s, array, reason, .. } => {
            assert_eq!((s.local().unwrap(), array.as_str()), (store.as_path(), "core/positions"));
            assert!(reason.contains("shorter than its 16777220-byte index"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }

    // An index entry pointing past the file, its crc32c made to match.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    let shard = store.join("core/positions/c/0/0");
    let mut b = std::fs::read(&shard).unwrap();
    let start = b.len() - (4 * 16 + 4); // 4 inner chunks per shard
    b[start..start + 8].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    let sum = crc32c::crc32c(&b[start..start + 64]);
    let end = b.len();
    b[end - 4..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&shard, b).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("outside the shard's data"), "{reason}");
        }
        e => panic!("expected a Chunk error for chunk 0, got {e:?}"),
    }
}

#[test]
fn absurd_trailing_shapes_are_refused() {
    // Overflowing the row size.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1u64 << 62]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "overflows");
    // Rows of 4 TiB: one chunk's rows would not fit any buffer.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1u64 << 40]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "per inner chunk exceed");
    // Rows of 128 KiB (chunks of 80 MiB): 152 MB claimed, files of 1.2 KB.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/atomic_numbers", |v| {
        v["shape"] = json!([1159, 1 << 14]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([614, 1 << 14]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/atomic_numbers", "but its chunk files hold at most");
    // A fill-only field (no chunk file: all zeros) 256 KiB wide per atom.
    let (_dir, store) = copy_of("nva_default");
    assert!(!store.join("core/velocities/c").exists(), "velocities are all fill values in the fixture");
    edit_json(&store, "core/velocities", |v| {
        v["shape"] = json!([1159, 1 << 16]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([614, 1 << 16]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/velocities", "fill values at most 8192 per row");
}

#[test]
fn negative_and_huge_pointer_values_are_refused() {
    let (_dir, store) = copy_of("nva_default");
    set_last_i64(&store, "meta/atoms_ptr", -5);
    assert_inconsistent(&open_error(&store), &store, "meta/atoms_ptr", "pointers decrease");

    // The last pointer at 2^62 atoms, every atom-level array's shape made to
    // match: only the files can tell.
    let (_dir, store) = copy_of("nva_default");
    let huge = 1u64 << 62;
    set_last_i64(&store, "meta/atoms_ptr", huge as i64);
    for rel in [
        "meta/atoms_mask",
        "core/positions",
        "core/forces",
        "core/velocities",
        "core/atomic_numbers",
        "core/atomic_masses",
        "core/atom_categories",
    ] {
        edit_json(&store, rel, |v| v["shape"][0] = json!(huge));
    }
    assert_inconsistent(
        &open_error(&store),
        &store,
        "meta/atoms_ptr",
        &format!("the last pointer ({huge}) claims {huge} rows"),
    );

    // Edge pointers at i64::MAX.
    let (_dir, store) = copy_of("nva_default");
    set_last_i64(&store, "meta/edges_ptr", i64::MAX);
    for rel in ["meta/edges_mask", "core/neighbor_list", "core/shifts"] {
        edit_json(&store, rel, |v| v["shape"][0] = json!(i64::MAX));
    }
    assert_inconsistent(&open_error(&store), &store, "meta/edges_ptr", "claims");
}

/// A zstd frame declaring 2^40 content bytes, holding 16.
fn lying_zstd_frame() -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0]; // magic; 8-byte content size, single segment
    f.extend((1u64 << 40).to_le_bytes());
    f.extend([1 | (1 << 1) | (16 << 3), 0, 0, 0]); // last block, RLE, 16 bytes of 0
    f
}

#[test]
fn a_zstd_header_claiming_a_huge_size_is_an_error_not_an_abort() {
    // Through zarrs' decoder (pointer arrays): before, zarrs allocated the
    // 1 TiB the header claims, and the process aborted.
    // (Pointers are read through the reader's own checksummed decoder,
    // which bounds the output by the chunk's size too.) Open reads the last
    // page of each pointer array, a read the pages of its samples.
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("meta/atoms_ptr/c/1"), lying_zstd_frame()).unwrap();
    match open_error(&store) {
        Error::Zarr { array, .. } | Error::Chunk { array, .. } => assert_eq!(array, "meta/atoms_ptr"),
        e => panic!("expected a Zarr or Chunk error, got {e:?}"),
    }
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("meta/atoms_ptr/c/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Zarr { array, .. } | Error::Chunk { array, .. } => assert_eq!(array, "meta/atoms_ptr"),
        e => panic!("expected a Zarr or Chunk error, got {e:?}"),
    }
    // Through the reader's own decoder (bytes + zstd field chunks).
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("core/positions/c/0/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, .. } => assert_eq!(array, "core/positions"),
        e => panic!("expected a Chunk error, got {e:?}"),
    }
    // Through zarrs for a chain the reader does not decode itself.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["codecs"][0]["configuration"]["endian"] = json!("big"));
    std::fs::write(store.join("core/positions/c/0/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("zstd"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }
}

#[test]
fn a_blosc_header_claiming_a_huge_size_is_an_error() {
    let dir = common::tmpdir();
    let store = common::blosc_store_claiming(dir.path(), u32::MAX); // decoded size: 4 GiB
    match read_error(&store) {
        Error::Chunk { array, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("blosc: header claims 4294967295 bytes"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }
}

#[test]
fn field_names_that_leave_the_store_are_refused() {
    // `../core/positions` under core/ is the store's own positions array, read
    // as another field: harmless here, but any path outside works the same.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "", |v| v["attributes"]["fields"]["core"]["../core/positions"] = json!("atom"));
    match open_error(&store) {
        Error::Format { store: s, reason } => {
            assert_eq!(s, atomzarr::Location::Local(store.clone()));
            assert!(reason.contains("../core/positions") && reason.contains("path separator"), "{reason}");
        }
        e => panic!("expected a Format error, got {e:?}"),
    }
}

#[test]
fn a_row_wider_than_its_chunk_is_refused_before_decoding() {
    // Trailing shape [2^16] but chunks [614, 3]: whole rows per chunk would be
    // 614 x 256 KiB, decoded into one buffer.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1 << 26]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "rows of 268435456 bytes per inner chunk");
}
