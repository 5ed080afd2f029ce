//! `store::verify` against stores whose faults the test planted itself:
//! clean stores (every codec, sharded or not, with deletes, defragmented)
//! give none; a store with several faults lists each of them (checksums,
//! masks, neighbor indices, rows, pointers), not just the first; the
//! reference stores list exactly the samples whose neighbor indices fall
//! outside their atoms, as the test finds them in the samples it reads.
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use atomzarr::store::format;
use atomzarr::store::verify::{Fault, VerifyOptions, verify};
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Level, Reader, ReaderExt, Shuffle,
    ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;

const N: usize = 24;

fn config(codec: Codec, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(4);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// A store of N samples, each with 1-6 atoms and 1-8 edges.
fn store(dir: &Path, name: &str, config: ZarrWriteConfig) -> (PathBuf, Vec<AtomicData>) {
    let path = dir.join(name);
    let extras = Extras { custom: vec![("tag".into(), Level::System, DType::Int32, vec![])], full_core: true };
    let mut rng = SplitMix(7);
    let data: Vec<AtomicData> = (0..N)
        .map(|_| {
            let atoms = 1 + rng.below(6) as usize;
            let edges = 1 + rng.below(8) as usize;
            sample(&mut rng, atoms, edges, &extras)
        })
        .collect();
    let mut w = AtomicDataZarrWriter::create(&path, config).unwrap();
    w.write(&data[..10]).unwrap();
    w.append(&data[10..]).unwrap();
    (path, data)
}

fn faults(path: &Path) -> Vec<Fault> {
    verify(path, &VerifyOptions::default()).unwrap().faults
}

fn raw_i64(path: &Path, rel: &str) -> Vec<i64> {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.retrieve_array_subset(&[0..a.shape()[0]]).unwrap()
}

/// Writes `values` into rows `at..` of 2-d int64 array `rel` (re-encoded, checksum valid).
fn set_rows_i64(path: &Path, rel: &str, at: u64, values: Vec<i64>, width: u64) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let rows = values.len() as u64 / width;
    a.store_array_subset(&[at..at + rows, 0..width], values).unwrap();
}

fn set_bool(path: &Path, rel: &str, at: u64, value: bool) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.store_array_subset(&[at..at + 1], vec![value]).unwrap();
}

fn set_i64(path: &Path, rel: &str, at: u64, value: i64) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    a.store_array_subset(&[at..at + 1], vec![value]).unwrap();
}

/// Flips the last byte of a chunk file (its stored crc32c).
fn flip(path: &Path, file: &str) {
    let f = path.join(file);
    let mut b = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    let last = b.len() - 1;
    b[last] ^= 0x5a;
    std::fs::write(&f, b).unwrap();
}

/// (array, chunk, sample) of each fault.
fn places(f: &[Fault]) -> BTreeSet<(String, Option<u64>, Option<usize>)> {
    f.iter().map(|f| (f.array.clone().unwrap_or_default(), f.chunk, f.sample)).collect()
}

#[test]
fn clean_stores_give_no_fault() {
    let dir = tmpdir();
    let codecs = [
        (Codec::Zstd { level: 1 }, None),
        (Codec::Zstd { level: 1 }, Some(8)),
        (Codec::None, None),
        (Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle }, Some(8)),
        (Codec::Gzip { level: 6 }, None),
    ];
    for (i, (codec, shard)) in codecs.into_iter().enumerate() {
        let (path, _) = store(dir.path(), &format!("c{i}.zarr"), config(codec, shard));
        let what = format!("{codec:?} shard {shard:?}");
        assert_eq!(faults(&path), vec![], "{what}");
        let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
        w.delete(&[0, 5, 6, 23]).unwrap();
        assert_eq!(faults(&path), vec![], "{what}, after deletes");
        w.defragment(None).unwrap();
        let r = verify(&path, &VerifyOptions::default()).unwrap();
        assert_eq!((r.faults, r.num_samples), (vec![], N - 4), "{what}, defragmented");
    }
    // The default layout, string labels included.
    let path = dir.path().join("default.zarr");
    let samples: Vec<AtomicData> = atomzarr::data::synth::generate(300, 2, 9, 3)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.with_string("config_type", format!("t{}", i % 3)))
        .collect();
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&samples).unwrap();
    let r = verify(&path, &VerifyOptions::default()).unwrap();
    assert_eq!(r.faults, vec![]);
    assert!(r.chunks >= r.arrays as u64, "every array read: {r:?}");
}

#[test]
fn every_fault_of_a_store_is_listed_not_just_the_first() {
    let dir = tmpdir();
    let (path, data) = store(dir.path(), "f.zarr", config(Codec::Zstd { level: 1 }, None));
    let atoms = raw_i64(&path, format::ATOMS_PTR);
    let edges = raw_i64(&path, format::EDGES_PTR);
    // An atom of active sample 3 masked off.
    set_bool(&path, format::ATOMS_MASK, atoms[3] as u64, false);
    // Neighbor indices outside samples 5 and 9 (store-global: atoms_ptr + local).
    for p in [5usize, 9] {
        let n = data[p].num_atoms() as i64;
        set_rows_i64(&path, "core/neighbor_list", edges[p] as u64, vec![atoms[p], atoms[p] + n], 2);
    }
    // Two rows too many in a custom array.
    let store = arrays::open_store(&path).unwrap();
    let mut a = arrays::open_array(&atomzarr::Location::from(&path), &store, "custom/tag").unwrap();
    a.set_shape(vec![N as u64 + 2]).unwrap();
    a.store_metadata().unwrap();
    // Two chunks whose stored checksums no longer match.
    flip(&path, "core/positions/c/1/0");
    flip(&path, "core/energy/c/2/0");
    let got = faults(&path);
    let p = |a: &str, c: Option<u64>, s: Option<usize>| (a.to_string(), c, s);
    let want: BTreeSet<_> = [
        p(format::ATOMS_MASK, Some(atoms[3] as u64 / 4), Some(3)),
        p("core/neighbor_list", Some(edges[5] as u64 / 4), Some(5)),
        p("core/neighbor_list", Some(edges[9] as u64 / 4), Some(9)),
        p("custom/tag", None, None),
        p("core/positions", Some(1), None),
        p("core/energy", Some(2), None),
    ]
    .into();
    assert_eq!(places(&got), want, "{got:#?}");
    let text: Vec<String> = got.iter().map(|f| f.to_string()).collect();
    assert!(text.iter().any(|t| t.contains("checksum")), "{text:#?}");
    assert!(text.iter().all(|t| t.starts_with(&format!("store {}", path.display()))), "{text:#?}");
}

#[test]
fn decreasing_pointers_are_listed_each_with_its_sample() {
    let dir = tmpdir();
    let (path, _) = store(dir.path(), "p.zarr", config(Codec::Zstd { level: 1 }, None));
    let edges = raw_i64(&path, format::EDGES_PTR);
    let atoms = raw_i64(&path, format::ATOMS_PTR);
    // Sample 6's end below its start, and sample 17's in the atom pointers.
    set_i64(&path, format::EDGES_PTR, 7, edges[6] - 1);
    set_i64(&path, format::ATOMS_PTR, 18, atoms[17] - 1);
    // The reader opens it (only the last pages are read at open).
    AtomicDataZarrReader::open(&path).unwrap();
    let got = faults(&path);
    let decreases: BTreeSet<_> =
        got.iter().filter(|f| f.reason.contains("decrease")).map(|f| (f.array.clone().unwrap(), f.sample)).collect();
    assert_eq!(
        decreases,
        [(format::ATOMS_PTR.to_string(), Some(17)), (format::EDGES_PTR.to_string(), Some(6))].into(),
        "{got:#?}"
    );
}

#[test]
fn mask_and_pointer_lengths_against_the_format() {
    let dir = tmpdir();
    let (path, _) = store(dir.path(), "m.zarr", config(Codec::Zstd { level: 1 }, None));
    let store = arrays::open_store(&path).unwrap();
    for (rel, extra) in [(format::ATOMS_MASK, 3u64), (format::SAMPLES_MASK, 1), (format::ATOMS_PTR, 2)] {
        let mut a = arrays::open_array(&atomzarr::Location::from(&path), &store, rel).unwrap();
        let rows = a.shape()[0];
        a.set_shape(vec![rows + extra]).unwrap();
        a.store_metadata().unwrap();
    }
    let got = faults(&path);
    let arrays: BTreeSet<_> = got.iter().map(|f| f.array.clone().unwrap()).collect();
    let want: BTreeSet<String> = [format::ATOMS_MASK, format::SAMPLES_MASK, format::ATOMS_PTR].map(String::from).into();
    assert_eq!(arrays, want, "{got:#?}");
    assert!(got.iter().all(|f| f.reason.contains("shape")), "{got:#?}");
}

#[test]
fn the_reference_stores_list_exactly_their_out_of_range_samples() {
    for name in fixture_names() {
        let path = assets().join(format!("{name}.zarr"));
        let r = AtomicDataZarrReader::open(&path).unwrap();
        // Read as stored: a neighbor index is sample-local there.
        let mut want = BTreeSet::new();
        for k in 0..r.len() {
            let s = r.read(k as i64).unwrap();
            let n = s.data.num_atoms() as i64;
            let nl = s.data.field("neighbor_list").map(|f| f.data.to_i64_vec().unwrap()).unwrap_or_default();
            if nl.iter().any(|&x| x < 0 || x >= n) {
                want.insert(s.metadata.physical_index);
            }
        }
        assert!(!want.is_empty(), "{name}: the reference stores carry the toolkit's append bug");
        let got = faults(&path);
        assert!(got.iter().all(|f| f.array.as_deref() == Some("core/neighbor_list")), "{name}: {got:#?}");
        let samples: BTreeSet<usize> = got.iter().map(|f| f.sample.unwrap()).collect();
        assert_eq!(samples, want, "{name}");
        assert_eq!(got.len(), want.len(), "{name}: one fault per sample");
    }
}

#[test]
fn a_missing_store_is_an_error_and_a_foreign_folder_a_fault() {
    let dir = tmpdir();
    let e = verify(dir.path().join("none.zarr"), &VerifyOptions::default()).unwrap_err();
    assert!(matches!(e, atomzarr::Error::NotFound { .. }), "{e:?}");
    std::fs::create_dir(dir.path().join("plain")).unwrap();
    let r = verify(dir.path().join("plain"), &VerifyOptions::default()).unwrap();
    assert_eq!(r.faults.len(), 1, "{r:?}");
}
