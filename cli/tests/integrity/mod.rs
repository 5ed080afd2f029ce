//! What the neighbor-index and repair tests share: a store with one bad
//! sample, the reference stores' facts from their raw arrays, and what the
//! toolkit should have written.
#![allow(dead_code)] // each test file uses a part

use super::*;

/// Small chunks, so batches span several chunks and the checks meet
/// samples split across chunk boundaries.
pub(crate) fn config() -> ZarrWriteConfig {
    ZarrWriteConfig::default().with_core(ZarrArrayConfig::default().with_chunk_size(8))
}

pub(crate) fn write(path: &Path, samples: &[AtomicData]) {
    AtomicDataZarrWriter::create(path, config()).unwrap().write(samples).unwrap();
}

pub(crate) fn raw_i64(path: &Path, rel: &str) -> Vec<i64> {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let mut subset = vec![0..a.shape()[0]];
    subset.extend(a.shape()[1..].iter().map(|&d| 0..d));
    a.retrieve_array_subset(&subset).unwrap()
}

/// Overwrites stored (store-global) neighbor_list values from row `row` on.
pub(crate) fn set_neighbor_rows(path: &Path, row: u64, values: Vec<i64>) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, "core/neighbor_list").unwrap();
    let rows = values.len() as u64 / 2;
    a.store_array_subset(&[row..row + rows, 0..2], values).unwrap();
}

/// A 40-sample store whose physical sample 13 has one neighbor index past
/// its atoms (sample-local value `num_atoms + 2`), and with physical sample
/// 2 deleted so that logical (12) and physical (13) indices differ.
pub(crate) struct BadStore {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
    /// The samples as written, by physical index.
    pub(crate) samples: Vec<AtomicData>,
    /// Sample-local value of the bad index.
    pub(crate) value: i64,
    pub(crate) atoms: usize,
}

pub(crate) const BAD_PHYSICAL: usize = 13;
pub(crate) const BAD_LOGICAL: usize = 12;

pub(crate) fn bad_store() -> BadStore {
    let dir = tmpdir();
    let path = dir.path().join("bad.zarr");
    let samples = atomzarr::data::synth::generate(40, 3, 9, 11).unwrap();
    write(&path, &samples);
    AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap().delete(&[2]).unwrap();
    let (atoms_ptr, edges_ptr) = (raw_i64(&path, format::ATOMS_PTR), raw_i64(&path, format::EDGES_PTR));
    let p = BAD_PHYSICAL;
    assert!(edges_ptr[p + 1] > edges_ptr[p], "sample {p} has edges");
    let atoms = (atoms_ptr[p + 1] - atoms_ptr[p]) as usize;
    let value = atoms as i64 + 2;
    // Edge 0 of the sample: (0, atoms + 2), stored store-global.
    set_neighbor_rows(&path, edges_ptr[p] as u64, vec![atoms_ptr[p], atoms_ptr[p] + value]);
    BadStore { _dir: dir, path, samples, value, atoms }
}

/// Asserts `e` is the typed error for the bad store's bad sample.
pub(crate) fn assert_names_bad_sample(e: &Error, bad: &BadStore, source: &str, what: &str) {
    match e {
        Error::NeighborIndex { source_name, index, physical_index, value, num_atoms, append_shift } => {
            assert_eq!(source_name, source, "{what}: store");
            assert_eq!((*index, *physical_index), (BAD_LOGICAL, BAD_PHYSICAL), "{what}: sample");
            assert_eq!((*value, *num_atoms), (bad.value, bad.atoms), "{what}: value and atom count");
            assert_eq!(*append_shift, None, "{what}: too large an index is not the append bug");
        }
        other => panic!("{what}: expected Error::NeighborIndex, got {other:?}"),
    }
    let msg = e.to_string();
    for part in [
        source.to_string(),
        format!("sample {BAD_LOGICAL} (physical {BAD_PHYSICAL})"),
        format!("index {}", bad.value),
        format!("{} atoms", bad.atoms),
    ] {
        assert!(msg.contains(&part), "{what}: message {msg:?} lacks {part:?}");
    }
    assert!(!msg.contains("append bug"), "{what}: {msg}");
}

pub(crate) fn expected(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).unwrap()).unwrap()
}

/// Facts of a reference store from its raw arrays: atoms_ptr, edges_ptr,
/// the physical index of each logical sample, and the appended batch's
/// first sample (FIXTURES.md: `write` of the first half, `append` of the rest).
pub(crate) struct Layout {
    pub(crate) atoms_ptr: Vec<i64>,
    pub(crate) edges_ptr: Vec<i64>,
    pub(crate) physical: Vec<usize>,
    pub(crate) half: usize,
}

pub(crate) fn layout(path: &Path) -> Layout {
    let root = json(&path.join("zarr.json"));
    let n = root["attributes"]["num_samples"].as_u64().unwrap() as usize;
    let store = arrays::open_store(path).unwrap();
    let mask: Vec<bool> = arrays::open_array(&atomzarr::Location::from(path), &store, format::SAMPLES_MASK)
        .unwrap()
        .retrieve_array_subset(&[0..n as u64])
        .unwrap();
    let ptr = |rel: &str| -> Vec<i64> { raw_i64(path, rel)[..=n].to_vec() };
    Layout {
        atoms_ptr: ptr(format::ATOMS_PTR),
        edges_ptr: ptr(format::EDGES_PTR),
        physical: (0..n).filter(|&p| mask[p]).collect(),
        half: n / 2,
    }
}

/// expected.json's samples with the neighbor lists the toolkit should have
/// written: the appended half's read-back values plus `atoms_ptr[half]`.
pub(crate) fn corrected(want: &Value, l: &Layout) -> Vec<Value> {
    let k = l.atoms_ptr[l.half];
    let mut out = want["samples"].as_array().unwrap().clone();
    for (i, s) in out.iter_mut().enumerate() {
        if l.physical[i] >= l.half {
            for v in s["neighbor_list"]["data"].as_array_mut().unwrap() {
                *v = Value::from(v.as_i64().unwrap() + k);
            }
        }
    }
    out
}
