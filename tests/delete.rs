//! Large soft deletes against a model of the store they must leave, built
//! here from the samples written and the indices deleted, not by the
//! writer's code: every array read back whole through zarrs' own decoder
//! (which checks every chunk's crc32c) must equal, row for row, the
//! original rows for kept samples and zeros for deleted ones; the three
//! masks must be off exactly on the deleted samples' rows; the pointers and
//! every array's metadata must be unchanged; the reader must return the
//! kept samples. Run over the layouts whose chunks are rewritten by
//! different paths: zstd chunks and row shards (encoded by the writer
//! itself), gzip and blosc (through zarrs, unsharded and sharded), no
//! checksum, chunks of fill values kept, and a field whose fill value is
//! NaN (`add_filled`), whose zeroed rows must read 0, not NaN.
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Error, Field, Level, Location, Reader,
    ReaderExt, Shuffle, ZarrArrayConfig, ZarrWriteConfig,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use zarrs::array::{ArrayBytes, CodecOptions};

/// Samples in each store.
const N: usize = 2500;

fn layouts() -> Vec<(&'static str, ZarrWriteConfig)> {
    let zstd = |chunk: u64| ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(chunk);
    let all = |c: ZarrArrayConfig| ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c);
    let blosc = ZarrArrayConfig::default()
        .with_codec(Codec::BloscLz4 { clevel: 3, shuffle: Shuffle::Shuffle })
        .with_chunk_size(16)
        .with_shard_size(64);
    vec![
        ("zstd chunks", all(zstd(64))),
        ("zstd shards", all(zstd(16).with_shard_size(128))),
        ("gzip chunks", all(ZarrArrayConfig::default().with_codec(Codec::Gzip { level: 1 }).with_chunk_size(50))),
        ("blosc shards", all(blosc)),
        ("no checksum, empty chunks kept", all(zstd(40).with_checksum(false).with_write_empty_chunks(true))),
        ("defaults", ZarrWriteConfig::default()),
    ]
}

/// Synthetic samples; every seventh has no edges, every third a custom
/// field `tag` ([2] int32) that every sample needs, so all carry it.
fn samples() -> Vec<AtomicData> {
    let mut out = atomzarr::data::synth::generate(N, 1, 9, 11).unwrap();
    for (i, s) in out.iter_mut().enumerate() {
        if i % 7 == 3 {
            s.fields.insert("neighbor_list".into(), Field::new(Level::Edge, vec![0, 2], Vec::<i64>::new()).unwrap());
            s.fields.insert("shifts".into(), Field::new(Level::Edge, vec![0, 3], Vec::<f32>::new()).unwrap());
        }
        let tag = Field::new(Level::System, vec![1, 2], vec![i as i32 + 1, -(i as i32) - 1]).unwrap();
        s.fields.insert("tag".into(), tag);
    }
    out
}

/// Random indices, a run of consecutive ones (so that some chunks lose
/// every row) and repeats.
fn indices(rng: &mut StdRng, count: usize, run: std::ops::Range<usize>) -> Vec<usize> {
    let mut v: Vec<usize> = (0..count).map(|_| rng.random_range(0..N)).collect();
    v.extend(run);
    let repeats = v[..count / 10].to_vec();
    v.extend(repeats);
    v
}

/// The whole array `rel`, decoded by zarrs (crc32c checked).
fn array_bytes(path: &Path, rel: &str) -> (Vec<u8>, Vec<u64>) {
    let store = atomzarr::testing::open_store(path).unwrap();
    let a = atomzarr::testing::open_array(&Location::Local(path.into()), &store, rel).unwrap();
    let subset: Vec<std::ops::Range<u64>> = a.shape().iter().map(|&d| 0..d).collect();
    let got: ArrayBytes =
        a.retrieve_array_subset_opt(&subset, &CodecOptions::default()).unwrap_or_else(|e| panic!("{rel}: {e}"));
    (got.into_fixed().unwrap().into_owned(), a.shape().to_vec())
}

/// Each sample's rows of `name` as stored: neighbor indices made
/// store-global (plus the sample's atom offset), others as they are.
fn stored_rows(s: &AtomicData, name: &str, atom_offset: i64) -> Vec<u8> {
    let f = &s.fields[name];
    if name != "neighbor_list" {
        return f.data.as_bytes().to_vec();
    }
    let local: Vec<i64> = bytemuck::pod_collect_to_vec(f.data.as_bytes());
    local.iter().flat_map(|&x| (x + atom_offset).to_le_bytes()).collect()
}

/// Where field `name`'s array is: `core/` or `custom/`.
fn field_rel(path: &Path, name: &str) -> String {
    let core = format!("core/{name}");
    if path.join(&core).is_dir() { core } else { format!("custom/{name}") }
}

/// The model: what every array must hold after deleting `deleted`.
fn check_against_model(path: &Path, written: &[AtomicData], deleted: &BTreeSet<usize>, what: &str) {
    let mut atoms = vec![0i64];
    let mut edges = vec![0i64];
    for s in written {
        atoms.push(atoms.last().unwrap() + s.num_atoms() as i64);
        edges.push(edges.last().unwrap() + s.num_edges() as i64);
    }
    let ptr = |rel: &str| -> Vec<i64> { bytemuck::pod_collect_to_vec(&array_bytes(path, rel).0) };
    assert_eq!(ptr("meta/atoms_ptr"), atoms, "{what}: atoms_ptr");
    assert_eq!(ptr("meta/edges_ptr"), edges, "{what}: edges_ptr");
    let keep = |p: usize| u8::from(!deleted.contains(&p));
    let samples_mask: Vec<u8> = (0..N).map(keep).collect();
    let rows_mask = |ptr: &[i64]| -> Vec<u8> {
        (0..N).flat_map(|p| std::iter::repeat_n(keep(p), (ptr[p + 1] - ptr[p]) as usize)).collect()
    };
    assert_eq!(array_bytes(path, "meta/samples_mask").0, samples_mask, "{what}: samples_mask");
    assert_eq!(array_bytes(path, "meta/atoms_mask").0, rows_mask(&atoms), "{what}: atoms_mask");
    assert_eq!(array_bytes(path, "meta/edges_mask").0, rows_mask(&edges), "{what}: edges_mask");
    for (name, f) in &written[0].fields {
        let rel = field_rel(path, name);
        let want: Vec<u8> = written
            .iter()
            .enumerate()
            .flat_map(|(p, s)| {
                let rows = stored_rows(s, name, atoms[p]);
                if deleted.contains(&p) { vec![0; rows.len()] } else { rows }
            })
            .collect();
        let (got, shape) = array_bytes(path, &rel);
        assert_eq!(shape[0] as usize * f.data.dtype().size() * f.trailing_shape().iter().product::<usize>(), got.len());
        if got != want {
            let row = f.data.dtype().size() * f.trailing_shape().iter().product::<usize>();
            let first = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0) / row.max(1);
            panic!("{what}: {rel} differs from the model first at row {first}");
        }
    }
    // The NaN-filled field: 0.0 in the deleted samples' rows, NaN elsewhere.
    let (weight, _) = array_bytes(path, &field_rel(path, "weight"));
    let weight: Vec<f32> = bytemuck::pod_collect_to_vec(&weight);
    for (p, w) in weight.iter().enumerate() {
        assert_eq!(w.to_bits() == 0, deleted.contains(&p), "{what}: weight of sample {p} is {w}");
        assert!(deleted.contains(&p) || w.is_nan(), "{what}: weight of kept sample {p} is {w}");
    }
    // And the reader returns exactly the kept samples.
    let r = AtomicDataZarrReader::open(path).unwrap();
    let kept: Vec<&AtomicData> = (0..N).filter(|p| !deleted.contains(p)).map(|p| &written[p]).collect();
    assert_eq!(r.len(), kept.len(), "{what}: len");
    let got = r.read_many(&(0..r.len() as i64).collect::<Vec<_>>()).unwrap();
    for (k, (g, w)) in got.iter().zip(kept).enumerate() {
        let mut g = g.data.clone();
        g.fields.remove("weight");
        assert_eq!(&g, w, "{what}: kept sample {k}");
    }
}

/// Every array's `zarr.json`, which a delete must leave as it is.
fn metadata(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for g in ["meta", "core", "custom"] {
        let Ok(dir) = std::fs::read_dir(path.join(g)) else { continue };
        for e in dir.flatten() {
            if let Ok(bytes) = std::fs::read(e.path().join("zarr.json")) {
                out.push((e.file_name().to_string_lossy().into_owned(), bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn large_deletes_leave_the_model_store_in_every_layout() {
    let dir = common::tmpdir();
    let written = samples();
    for (k, (what, config)) in layouts().into_iter().enumerate() {
        let path = dir.path().join(format!("s{k}.zarr"));
        let mut w = AtomicDataZarrWriter::create(&path, config).unwrap();
        w.write(&written).unwrap();
        w.add_filled("weight", Level::System, DType::Float32, &[], f64::NAN).unwrap();
        let before = metadata(&path);
        let mut rng = StdRng::seed_from_u64(k as u64);
        let mut deleted = BTreeSet::new();
        // Two calls: the second overlaps the first (deleted samples stay as they are).
        for (count, run) in [(900, 300..620), (700, 1000..1100)] {
            let idx = indices(&mut rng, count, run);
            w.delete(&idx).unwrap_or_else(|e| panic!("{what}: delete: {e}"));
            deleted.extend(idx);
            check_against_model(&path, &written, &deleted, &format!("{what}, {} deleted", deleted.len()));
        }
        assert_eq!(metadata(&path), before, "{what}: array metadata changed");
        assert!(!atomzarr::store::format::sibling(&path, ".atomzarr-deleting").exists(), "{what}: copy of meta/ left");
        assert_eq!(atomzarr::testing::clean_temporaries(&path).unwrap(), 0, "{what}: temporaries left");
        // The store takes appends afterwards, and the deleted rows stay zero.
        let extra = written[7].clone();
        let mut extra_with_weight = extra.clone();
        extra_with_weight.fields.insert("weight".into(), Field::new(Level::System, vec![1], vec![0.5f32]).unwrap());
        w.append(&[extra_with_weight]).unwrap_or_else(|e| panic!("{what}: append after delete: {e}"));
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let mut last = r.read(r.len() as i64 - 1).unwrap().data;
        last.fields.remove("weight");
        assert_eq!(last, extra, "{what}: the appended sample");
    }
}

#[test]
fn a_corrupt_chunk_is_refused_naming_it() {
    let dir = common::tmpdir();
    let path = dir.path().join("c.zarr");
    let core = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(64);
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(core)).unwrap();
    w.write(&samples()[..300]).unwrap();
    // Sample 0's energy lies in chunk 0 of core/energy.
    let chunk = path.join("core/energy/c/0/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[5] ^= 0x40;
    std::fs::write(&chunk, &bytes).unwrap();
    match w.delete(&[0, 1, 200]) {
        Err(Error::Checksum { store, array, chunk, .. }) => {
            assert_eq!((store, array.as_str(), chunk), (Location::Local(path.clone()), "core/energy", 0));
        }
        other => panic!("expected a checksum error naming core/energy chunk 0, got {other:?}"),
    }
    // The corrupt bytes were not written back under a fresh checksum.
    assert_eq!(std::fs::read(&chunk).unwrap(), bytes);
}
