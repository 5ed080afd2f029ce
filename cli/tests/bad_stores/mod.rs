//! What the bad-input tests share: a good store to damage, and the edits
//! and checks they make of it.
#![allow(dead_code)] // each test file uses a part

use super::*;

pub(crate) const N: usize = 12;

pub(crate) fn config(codec: Codec, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(4);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// A good store of N samples (4-row chunks, so every array has several).
pub(crate) fn good_store(dir: &Path, name: &str, config: ZarrWriteConfig) -> PathBuf {
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

pub(crate) fn reader_err(path: &Path) -> Error {
    match AtomicDataZarrReader::open(path) {
        Ok(r) => panic!("{}: opened a bad store ({} samples)", path.display(), r.len()),
        Err(e) => {
            assert_verify_finds(path, &e);
            e
        }
    }
}

/// The error of opening `path`, or else of reading every sample: the
/// pointer pages other than the last are read when a read needs them.
pub(crate) fn open_or_read_err(path: &Path) -> Error {
    let r = match AtomicDataZarrReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            assert_verify_finds(path, &e);
            return e;
        }
    };
    let all: Vec<i64> = (0..r.len() as i64).collect();
    match r.read_many(&all) {
        Ok(_) => panic!("{}: read every sample of a bad store", path.display()),
        Err(e) => {
            assert_verify_finds(path, &e);
            e
        }
    }
}

/// The error names the store path and, where given, the array.
pub(crate) fn assert_names(e: &Error, path: &Path, array: Option<&str>) {
    let msg = e.to_string();
    assert!(msg.contains(path.to_str().unwrap()), "error {msg:?} does not name the store {}", path.display());
    if let Some(a) = array {
        assert!(msg.contains(a), "error {msg:?} does not name the array {a}");
    }
}

pub(crate) fn edit_json(file: &Path, f: impl FnOnce(&mut Value)) {
    let mut v = json(file);
    f(&mut v);
    std::fs::write(file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

pub(crate) fn num_rows(path: &Path, rel: &str) -> u64 {
    zarr_json(path, rel)["shape"][0].as_u64().unwrap()
}

/// Sets dimension 0 of an array through zarrs.
pub(crate) fn set_rows(path: &Path, rel: &str, rows: u64) {
    let store = arrays::open_store(path).unwrap();
    let mut a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let mut shape = a.shape().to_vec();
    shape[0] = rows;
    a.set_shape(shape).unwrap();
    a.store_metadata().unwrap();
}

pub(crate) fn set_i64(path: &Path, rel: &str, at: u64, value: i64) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.store_array_subset(&[at..at + 1], vec![value]).unwrap();
}

pub(crate) fn read_i64s(path: &Path, rel: &str) -> Vec<i64> {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.retrieve_array_subset(&[0..a.shape()[0]]).unwrap()
}

/// Every writer entry point on a damaged store fails with a typed error
/// (or, for calls that never look at the damage, succeeds) — none panics.
pub(crate) fn writer_calls_do_not_panic(path: &Path) {
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

/// Replaces the array at `rel` by a new one of `dtype` and `shape` holding `data`.
pub(crate) fn replace_array(path: &Path, rel: &str, dtype: DType, shape: Vec<u64>, data: HostData) {
    std::fs::remove_dir_all(path.join(rel)).unwrap();
    let store = arrays::open_store(path).unwrap();
    let resolved = ZarrWriteConfig::default().resolve(StoreGroup::Meta, "x");
    let a = arrays::create_array(path, &store, rel, dtype, shape.clone(), &resolved, None).unwrap();
    let subset: Vec<std::ops::Range<u64>> = shape.iter().map(|&d| 0..d).collect();
    a.store_array_subset(&subset, zarrs::array::ArrayBytes::new_flen(data.as_bytes().to_vec())).unwrap();
}
