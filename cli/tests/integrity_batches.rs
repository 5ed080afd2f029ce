//! Neighbor indices are checked on every batch path, an index
//! outside its own sample is a typed error naming store, sample and value
//! (with the diagnosis of nvalchemi-toolkit's append bug where it fits),
//! `atomzarr repair` rewrites what that bug wrote, `read`/`read_many`/`dump`
//! still return samples as stored, and Burn's traits never end an epoch
//! silently. Expected values come from the samples the tests wrote, from
//! `assets/*.expected.json` and from the raw pointer arrays, never from the
//! code under test.
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::Device;
use serde_json::Value;

use atomzarr::data::CollateOptions;
use atomzarr::sampler::ListSampler;
use atomzarr::source::{Capabilities, SampleIndex, Schema};
use atomzarr::store::format;
use atomzarr::store::repair::{self, RepairReport};
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, DataLoader, Dataset, Error, ErrorPolicy,
    InMemoryReader, MultiReader, Reader, ReaderExt, SampleMetadata, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;

/// Small chunks, so batches span several chunks and the checks meet
/// samples split across chunk boundaries.
fn config() -> ZarrWriteConfig {
    ZarrWriteConfig::default().with_core(ZarrArrayConfig::default().with_chunk_size(8))
}

fn write(path: &Path, samples: &[AtomicData]) {
    AtomicDataZarrWriter::create(path, config()).unwrap().write(samples).unwrap();
}

fn raw_i64(path: &Path, rel: &str) -> Vec<i64> {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let mut subset = vec![0..a.shape()[0]];
    subset.extend(a.shape()[1..].iter().map(|&d| 0..d));
    a.retrieve_array_subset(&subset).unwrap()
}

/// Overwrites stored (store-global) neighbor_list values from row `row` on.
fn set_neighbor_rows(path: &Path, row: u64, values: Vec<i64>) {
    let store = arrays::open_store(path).unwrap();
    let a = arrays::open_array(&atomzarr::Location::from(path), &store, "core/neighbor_list").unwrap();
    let rows = values.len() as u64 / 2;
    a.store_array_subset(&[row..row + rows, 0..2], values).unwrap();
}

/// A 40-sample store whose physical sample 13 has one neighbor index past
/// its atoms (sample-local value `num_atoms + 2`), and with physical sample
/// 2 deleted so that logical (12) and physical (13) indices differ.
struct BadStore {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// The samples as written, by physical index.
    samples: Vec<AtomicData>,
    /// Sample-local value of the bad index.
    value: i64,
    atoms: usize,
}

const BAD_PHYSICAL: usize = 13;
const BAD_LOGICAL: usize = 12;

fn bad_store() -> BadStore {
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
fn assert_names_bad_sample(e: &Error, bad: &BadStore, source: &str, what: &str) {
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

/// A reader that serves samples through `read_many` only, so batches take
/// the Reader trait's default collation (`fill_from_samples`).
struct Plain(AtomicDataZarrReader, String);
impl Reader for Plain {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn name(&self) -> &str {
        &self.1
    }
    fn schema(&self) -> Schema {
        self.0.schema()
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        self.0.load_many(indices)
    }
    /// The store's index, under this reader's name; no planning of its own.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities { index: Some(self), ..Capabilities::default() }
    }
}

impl SampleIndex for Plain {
    fn metadata(&self, index: usize) -> SampleMetadata {
        SampleMetadata { source: Arc::from(self.1.as_str()), ..self.0.sample_metadata(index) }
    }
    fn sizes(&self, index: usize) -> atomzarr::Result<(usize, usize)> {
        self.0.sample_sizes(index)
    }
    fn reload(&self) -> atomzarr::Result<()> {
        self.0.refresh()
    }
}

#[test]
fn every_batch_path_refuses_an_out_of_range_index() {
    let bad = bad_store();
    let src = bad.path.display().to_string();
    let n = 39;
    let all: Vec<usize> = (0..n).collect();
    let lists: Vec<Vec<usize>> = all.chunks(5).map(<[usize]>::to_vec).collect();
    let lists_i64: Vec<Vec<i64>> = lists.iter().map(|b| b.iter().map(|&i| i as i64).collect()).collect();
    let open = || AtomicDataZarrReader::open(&bad.path).unwrap();

    // The reader's collated path, wide and narrowed, cold and warm (cached chunks).
    let r = open();
    for opts in [CollateOptions::default(), CollateOptions::default().with_narrow_int64(true)] {
        for pass in 0..2 {
            let e = r.read_collated_opt(&lists_i64, opts, &mut Vec::new()).unwrap_err();
            assert_names_bad_sample(&e, &bad, &src, &format!("read_collated {opts:?} pass {pass}"));
        }
    }
    // Batches without the bad sample are fine, before and after it was met.
    let good: Vec<Vec<usize>> = vec![(0..BAD_LOGICAL).collect(), (BAD_LOGICAL + 1..n).collect()];
    let mut out = Vec::new();
    r.load_collated(&good, &mut out).unwrap();
    assert_eq!(out[0].num_graphs() + out[1].num_graphs(), n - 1);

    // The Dataset: validation on, off, with a transform (the sample path).
    for (what, ds) in [
        ("validated", Dataset::new(open())),
        ("unvalidated", Dataset::new(open()).with_skip_validation(true)),
        ("transformed", Dataset::new(open()).with_skip_validation(true).with_transform(|s| Ok(s.with_energy(1.0)))),
    ] {
        let e = ds.load_batches(&lists).unwrap_err();
        assert_names_bad_sample(&e, &bad, &src, &format!("Dataset {what}"));
        // The background (fused) path.
        let prefetch = atomzarr::Prefetcher::default();
        prefetch.push(&ds, lists.clone());
        assert_names_bad_sample(&prefetch.pop().unwrap_err(), &bad, &src, &format!("Dataset {what} fused"));
        // Reading the one sample through the Dataset when validation is on.
        if what == "validated" {
            assert_names_bad_sample(&ds.get_sample(BAD_LOGICAL).unwrap_err(), &bad, &src, "get_sample");
        }
    }

    // The DataLoader, fused and not, with background uploads: one Err, then the end.
    for (pf, streams) in [(0usize, false), (2, false), (3, true)] {
        let ds = Dataset::new(open()).with_skip_validation(true);
        let loader = DataLoader::builder(ds)
            .with_batch_size(4)
            .with_prefetch_factor(pf)
            .with_use_streams(streams)
            .build(&Device::flex())
            .unwrap();
        let items: Vec<_> = loader.iter().collect();
        let errs: Vec<&Error> = items.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(errs.len(), 1, "pf {pf}: one error");
        assert!(items.last().unwrap().is_err(), "pf {pf}: the error ends the epoch");
        assert_names_bad_sample(errs[0], &bad, &src, &format!("DataLoader pf {pf} streams {streams}"));
    }

    // InMemoryReader: refused while loading (from the store, or from samples read as stored).
    let e = InMemoryReader::from_reader(&open()).unwrap_err();
    assert_names_bad_sample(&e, &bad, &src, "InMemoryReader::from_reader");
    let stored: Vec<AtomicData> =
        open().read_many(&(0..n as i64).collect::<Vec<_>>()).unwrap().into_iter().map(|s| s.data).collect();
    match InMemoryReader::from_samples(&stored, "mem").unwrap_err() {
        Error::NeighborIndex { source_name, index, value, num_atoms, .. } => {
            assert_eq!((source_name.as_str(), index, value, num_atoms), ("mem", BAD_LOGICAL, bad.value, bad.atoms));
        }
        other => panic!("from_samples: {other:?}"),
    }
    // CollatedBatch::from_samples, as Burn's Batcher uses it.
    let e = CollatedBatch::from_samples(&[7, 8], &stored[BAD_LOGICAL - 1..=BAD_LOGICAL]).unwrap_err();
    assert!(matches!(e, Error::NeighborIndex { index: 8, .. }), "{e}");

    // MultiReader: a good child and the bad one; the error names the bad
    // child's store and its own indices, in mixed and single-child batches.
    let dir = tmpdir();
    let good_path = dir.path().join("good.zarr");
    write(&good_path, &atomzarr::data::synth::generate(6, 3, 9, 5).unwrap());
    let multi = Arc::new(
        MultiReader::new(vec![Arc::new(AtomicDataZarrReader::open(&good_path).unwrap()), Arc::new(open())]).unwrap(),
    );
    for lists in [vec![vec![0, 6 + BAD_LOGICAL, 1]], vec![vec![6 + BAD_LOGICAL, 7]]] {
        let e = multi.load_collated(&lists, &mut Vec::new()).unwrap_err();
        assert_names_bad_sample(&e, &bad, &src, &format!("MultiReader {lists:?}"));
        let e = Dataset::from_arc(multi.clone()).load_batches(&lists).unwrap_err();
        assert_names_bad_sample(&e, &bad, &src, &format!("validated Dataset over MultiReader {lists:?}"));
    }

    // A reader without a collated path of its own (the trait's default).
    let plain = Plain(open(), "plain".into());
    match plain.load_collated(&lists, &mut Vec::new()).unwrap_err() {
        Error::NeighborIndex { source_name, index, physical_index, value, .. } => {
            assert_eq!(
                (source_name.as_str(), index, physical_index, value),
                ("plain", BAD_LOGICAL, BAD_PHYSICAL, bad.value)
            );
        }
        other => panic!("default load_collated: {other:?}"),
    }

    // read, read_many and dump return the sample as stored.
    let r = open();
    let s = r.read(BAD_LOGICAL as i64).unwrap();
    let mut want = bad.samples[BAD_PHYSICAL].field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
    want[0] = 0;
    want[1] = bad.value;
    assert_eq!(s.data.field("neighbor_list").unwrap().data.to_i64_vec().unwrap(), want);
    let many = r.read_many(&(0..n as i64).collect::<Vec<_>>()).unwrap();
    let physical: Vec<usize> = (0..40).filter(|&p| p != 2).collect();
    for (k, s) in many.iter().enumerate() {
        if k != BAD_LOGICAL {
            assert_sample_eq(&s.data, &bad.samples[physical[k]], &format!("read_many {k}"));
        }
    }
    let (ok, stdout, stderr) = cli(&["dump", bad.path.to_str().unwrap()]);
    assert!(ok, "dump: {stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let nl: Vec<i64> = doc["samples"][BAD_LOGICAL]["neighbor_list"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(nl, want, "dump keeps the stored value");
}

#[test]
fn cli_batch_and_raw_reads_of_a_bad_store_fail_with_the_message() {
    let bad = bad_store();
    let store = bad.path.to_str().unwrap();
    for mode in ["batch", "raw"] {
        for order in ["sequential", "shuffle"] {
            let (ok, _, stderr) = cli(&["read", store, "--read-mode", mode, "--read-order", order]);
            assert!(!ok, "{mode} {order}: exits non-zero");
            let want = format!("sample {BAD_LOGICAL} (physical {BAD_PHYSICAL}): neighbor_list index {}", bad.value);
            assert!(stderr.contains(&want) && stderr.contains(store), "{mode} {order}: {stderr}");
        }
    }
    // One sample at a time is `read`: as stored, no error.
    let (ok, _, stderr) = cli(&["read", store, "--read-mode", "single"]);
    assert!(ok, "single: {stderr}");
}

#[test]
fn skip_policy_delivers_every_good_sample_once_and_counts_the_bad_one() {
    let bad = bad_store();
    let n = 39;
    for (pf, shuffle, validate) in [(0usize, false, false), (2, true, false), (4, true, true)] {
        let ds = Dataset::new(AtomicDataZarrReader::open(&bad.path).unwrap())
            .with_skip_validation(!validate)
            .with_error_policy(ErrorPolicy::Skip);
        let loader = DataLoader::builder(ds)
            .with_batch_size(3)
            .with_shuffle(shuffle)
            .with_seed(9)
            .with_prefetch_factor(pf)
            .build(&Device::flex())
            .unwrap();
        for epoch in 0..2 {
            let mut seen: Vec<usize> = Vec::new();
            for b in loader.iter() {
                let b = b.unwrap();
                assert!(b.num_graphs > 0, "no empty batch");
                seen.extend(b.indices);
            }
            seen.sort_unstable();
            let want: Vec<usize> = (0..n).filter(|&i| i != BAD_LOGICAL).collect();
            assert_eq!(seen, want, "pf {pf} epoch {epoch}: every good sample exactly once");
            assert_eq!(loader.stats().skipped_samples, epoch as u64 + 1, "pf {pf} epoch {epoch}: the bad one counted");
        }
    }
    // A batch made only of the bad sample is not yielded at all.
    let ds = Dataset::new(AtomicDataZarrReader::open(&bad.path).unwrap())
        .with_skip_validation(true)
        .with_error_policy(ErrorPolicy::Skip);
    let loader = DataLoader::builder(ds)
        .with_batch_size(1)
        .with_sampler(ListSampler::new(vec![0, BAD_LOGICAL, 1]))
        .build(&Device::flex())
        .unwrap();
    let got: Vec<Vec<usize>> = loader.iter().map(|b| b.unwrap().indices).collect();
    assert_eq!(got, vec![vec![0], vec![1]]);
    assert_eq!(loader.stats().skipped_samples, 1);
    // Other errors are not skipped: an index past the dataset is still an error.
    let ds = Dataset::new(AtomicDataZarrReader::open(&bad.path).unwrap()).with_error_policy(ErrorPolicy::Skip);
    assert!(matches!(ds.load_batches(&[vec![0, 99]]), Err(Error::IndexOutOfRange { .. })));
    // Dataset::load_batches keeps one batch per list, the bad sample dropped.
    let b = ds.load_batches(&[vec![BAD_LOGICAL - 1, BAD_LOGICAL, BAD_LOGICAL + 1], vec![BAD_LOGICAL]]).unwrap();
    assert_eq!(b[0].indices, vec![BAD_LOGICAL - 1, BAD_LOGICAL + 1]);
    assert_eq!(b[1].num_graphs(), 0);
    assert_eq!(ds.skipped_samples(), 2);
}

#[test]
fn burn_traits_fail_loudly_or_substitute_never_truncate() {
    use burn::data::dataloader::DataLoader as BurnDataLoader;
    use burn::data::dataset::{Dataset as BurnDataset, DatasetError};
    /// The atomzarr error behind Burn's.
    fn typed(e: &DatasetError) -> Option<&Error> {
        std::error::Error::source(e)?.downcast_ref()
    }
    let bad = bad_store();
    let n = 39;
    for validate in [true, false] {
        // Fail (the default): Dataset::get returns the typed error.
        let ds = Dataset::new(AtomicDataZarrReader::open(&bad.path).unwrap()).with_skip_validation(!validate);
        assert!(BurnDataset::get(&ds, BAD_LOGICAL - 1).is_ok());
        let err = BurnDataset::get(&ds, BAD_LOGICAL).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "sample {BAD_LOGICAL} (physical {BAD_PHYSICAL}): neighbor_list index {}",
                bad.value
            )),
            "{err}"
        );
        assert!(matches!(typed(&err), Some(Error::NeighborIndex { .. })), "{err}");
        let err = BurnDataset::get(&ds, n).unwrap_err();
        assert!(matches!(typed(&err), Some(Error::IndexOutOfRange { .. })), "past the end: {err}");
        // Skip: the next good sample stands in, so the epoch keeps its length.
        let ds = ds.with_error_policy(ErrorPolicy::Skip);
        let sub = BurnDataset::get(&ds, BAD_LOGICAL).unwrap();
        assert_eq!(sub, AtomicDataZarrReader::open(&bad.path).unwrap().read(BAD_LOGICAL as i64 + 1).unwrap().data);
        assert_eq!(ds.skipped_samples(), 1);
        // Burn's own loader over it: every slot filled.
        let burn_loader = burn::data::dataloader::DataLoaderBuilder::<_, atomzarr::AtomicBatch>::new(
            atomzarr::AtomicBatcher::default(),
        )
        .batch_size(4)
        .set_device(Device::flex())
        .build(ds.clone());
        let total: usize = burn_loader.iter().map(|b| b.unwrap().num_graphs).sum();
        assert_eq!(total, n, "Burn's epoch is not truncated");
    }
    // The loader's Burn iterator under Fail yields the error with its message.
    let ds = Dataset::new(AtomicDataZarrReader::open(&bad.path).unwrap()).with_skip_validation(true);
    let loader = DataLoader::builder(ds).with_batch_size(5).build(&Device::flex()).unwrap();
    let err = BurnDataLoader::iter(&loader).find_map(Result::err).expect("an error, not a clean end");
    assert!(err.to_string().contains(&format!("neighbor_list index {}", bad.value)), "{err}");
    assert!(matches!(typed(&err), Some(Error::NeighborIndex { .. })), "{err}");
}

// ---------------------------------------------------------------------------
// nvalchemi-toolkit's append bug.

fn expected(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).unwrap()).unwrap()
}

/// Facts of a reference store from its raw arrays: atoms_ptr, edges_ptr,
/// the physical index of each logical sample, and the appended batch's
/// first sample (FIXTURES.md: `write` of the first half, `append` of the rest).
struct Layout {
    atoms_ptr: Vec<i64>,
    edges_ptr: Vec<i64>,
    physical: Vec<usize>,
    half: usize,
}

fn layout(path: &Path) -> Layout {
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
fn corrected(want: &Value, l: &Layout) -> Vec<Value> {
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

#[test]
fn reference_stores_give_the_toolkit_bug_message_in_batch_paths() {
    for name in fixture_names() {
        let path = assets().join(format!("{name}.zarr"));
        let l = layout(&path);
        let k = l.atoms_ptr[l.half];
        let want = expected(&name);
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let n = r.len();
        let lists: Vec<Vec<usize>> = (0..n).collect::<Vec<_>>().chunks(7).map(<[usize]>::to_vec).collect();
        // Batches are collated in parallel: any appended sample may be the
        // one reported, with its own first out-of-range value.
        let check = |e: Error, what: &str| {
            let msg = e.to_string();
            match e {
                Error::NeighborIndex { index, physical_index, value, num_atoms, append_shift, .. } => {
                    assert_eq!(physical_index, l.physical[index], "{name} {what}");
                    assert!(physical_index >= l.half, "{name} {what}: sample {index} is in the appended half");
                    let s = &want["samples"][index];
                    assert_eq!(num_atoms as i64, s["atomic_numbers"]["shape"][0].as_i64().unwrap(), "{name} {what}");
                    let first = s["neighbor_list"]["data"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_i64().unwrap())
                        .find(|&x| x < 0 || x >= num_atoms as i64);
                    assert_eq!(Some(value), first, "{name} {what}: value");
                    assert_eq!(append_shift, Some(k), "{name} {what}: shift");
                }
                other => panic!("{name} {what}: {other:?}"),
            }
            assert!(
                msg.contains(&format!("looks like nvalchemi-toolkit's append bug (indices shifted by -{k})")),
                "{name} {what}: {msg}"
            );
            assert!(msg.contains(&format!("run `atomzarr repair {}`", path.display())), "{name} {what}: {msg}");
        };
        check(r.load_collated(&lists, &mut Vec::new()).unwrap_err(), "load_collated");
        check(
            Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).load_batches(&lists).unwrap_err(),
            "validated Dataset",
        );
        let loader =
            DataLoader::builder(Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true))
                .with_batch_size(7)
                .build(&Device::flex())
                .unwrap();
        check(loader.iter().find_map(Result::err).unwrap(), "DataLoader");
        // The toolkit's first write batches fine.
        let first: Vec<usize> = (0..n).filter(|&i| l.physical[i] < l.half).collect();
        let mut out = Vec::new();
        r.load_collated(std::slice::from_ref(&first), &mut out).unwrap();
        assert_eq!(out[0].indices, first);
        // And the same reader still reads every sample as the toolkit does.
        for (i, s) in read_all(&r).iter().enumerate() {
            assert_sample_matches_json(
                s,
                &want["samples"][i],
                &format!("{name} read after a refused batch, sample {i}"),
            );
        }
        // The CLI says so too.
        let (ok, _, stderr) = cli(&["read", path.to_str().unwrap(), "--read-mode", "batch"]);
        assert!(!ok && stderr.contains("looks like nvalchemi-toolkit's append bug"), "{name}: {stderr}");
    }
}

#[test]
fn repair_fixes_the_reference_stores_appended_halves() {
    for name in fixture_names() {
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &path);
        let l = layout(&path);
        let k = l.atoms_ptr[l.half];
        let want = expected(&name);
        let fixed_want = corrected(&want, &l);

        // Which samples the repair must touch: appended, active, with edges.
        let appended: Vec<usize> =
            l.physical.iter().copied().filter(|&p| p >= l.half && l.edges_ptr[p + 1] > l.edges_ptr[p]).collect();
        let dry = repair::check(&path).unwrap();
        assert!(!dry.written);
        let report = repair::repair(&path).unwrap();
        assert!(report.written);
        assert_eq!(dry.fixed, report.fixed, "{name}: dry run plans what repair does");
        assert_eq!(report.unfixed, vec![], "{name}");
        assert_eq!(report.fixed.len(), 1, "{name}: one appended batch");
        assert_eq!(report.fixed[0].shift, k, "{name}: shift");
        assert_eq!(report.fixed[0].physical, appended, "{name}: fixed samples");

        // Every sample now reads as the toolkit should have written it...
        let r = AtomicDataZarrReader::open(&path).unwrap();
        for (i, s) in read_all(&r).iter().enumerate() {
            assert_sample_matches_json(s, &fixed_want[i], &format!("{name} repaired, sample {i}"));
        }
        // ...and batches: the collated neighbor list is each sample's
        // corrected list plus its batch atom offset.
        let n = r.len();
        let order: Vec<usize> = (0..n).rev().collect();
        let lists: Vec<Vec<usize>> = order.chunks(9).map(<[usize]>::to_vec).collect();
        for opts in [CollateOptions::default(), CollateOptions::default().with_narrow_int64(true)] {
            let mut out = Vec::new();
            r.load_collated_opt(&lists, opts, &mut out).unwrap();
            for (b, list) in out.iter().zip(&lists) {
                let mut nl = Vec::new();
                let mut base = 0;
                for &i in list {
                    let s = &fixed_want[i];
                    nl.extend(
                        s["neighbor_list"]["data"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap() + base),
                    );
                    base += s["atomic_numbers"]["shape"][0].as_i64().unwrap();
                }
                assert_eq!(b.fields["neighbor_list"].data.to_i64_vec().unwrap(), nl, "{name} {opts:?} batch {list:?}");
            }
        }
        // The DataLoader reads a whole epoch, and the CLI every mode.
        let loader =
            DataLoader::builder(Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true))
                .with_batch_size(8)
                .with_shuffle(true)
                .build(&Device::flex())
                .unwrap();
        assert_eq!(loader.iter().map(|b| b.unwrap().num_graphs).sum::<usize>(), n);
        let (ok, _, stderr) = cli(&["read", path.to_str().unwrap(), "--read-mode", "both", "--read-mode", "raw"]);
        assert!(ok, "{name}: {stderr}");
        // A second repair finds nothing; the CLI agrees (exit 0).
        let again = repair::repair(&path).unwrap();
        assert!(again.fixed.is_empty() && again.unfixed.is_empty() && !again.written, "{name}: {again:?}");
        let (ok, stdout, stderr) = cli(&["repair", path.to_str().unwrap()]);
        assert!(ok && stdout.contains("every neighbor index is in range"), "{name}: {stdout} {stderr}");
    }
}

#[test]
fn cli_repair_reports_and_fixes_a_copy() {
    let dir = tmpdir();
    let path = dir.path().join("d.zarr");
    copy_dir(&assets().join("nva_custom_deleted.zarr"), &path);
    let l = layout(&path);
    let k = l.atoms_ptr[l.half];
    let p = path.to_str().unwrap();
    let (ok, stdout, stderr) = cli(&["repair", p, "--dry-run", "--json"]);
    assert!(ok, "{stderr}");
    let plan: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(plan["written"], false);
    assert_eq!(plan["fixed"][0]["shift"], k);
    // The dry run changed nothing.
    let (_, dump, _) = cli(&["dump", p]);
    assert_eq!(serde_json::from_str::<Value>(&dump).unwrap(), expected("nva_custom_deleted"));
    let (ok, stdout, stderr) = cli(&["repair", p]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&format!("indices shifted by -{k}")), "{stdout}");
    let (_, dump, _) = cli(&["dump", p]);
    let got: Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(got["samples"].as_array().unwrap(), &corrected(&expected("nva_custom_deleted"), &l));
}

/// Writes `batches` as the toolkit does: a correct first write, then each
/// further batch appended with the bug (its stored indices offset within the
/// batch, not the store). Returns the samples in physical order.
fn toolkit_like_store(path: &Path, batches: &[Vec<AtomicData>]) -> Vec<AtomicData> {
    let mut all = Vec::new();
    for (j, b) in batches.iter().enumerate() {
        // A writer per batch: the rows are rewritten below, behind the
        // writer's back, which only a store no writer holds may see.
        if j == 0 {
            AtomicDataZarrWriter::create(path, config()).unwrap().write(b)
        } else {
            AtomicDataZarrWriter::open(path, config()).unwrap().append(b)
        }
        .unwrap();
        let (atoms_ptr, edges_ptr) = (raw_i64(path, format::ATOMS_PTR), raw_i64(path, format::EDGES_PTR));
        if j > 0 {
            let q0 = all.len();
            for (i, s) in b.iter().enumerate() {
                let p = q0 + i;
                let local = s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
                let buggy: Vec<i64> = local.iter().map(|x| x + atoms_ptr[p] - atoms_ptr[q0]).collect();
                if !buggy.is_empty() {
                    set_neighbor_rows(path, edges_ptr[p] as u64, buggy);
                }
            }
        }
        all.extend(b.iter().cloned());
    }
    all
}

#[test]
fn repair_fixes_consecutive_buggy_appends_each_with_its_own_shift() {
    let dir = tmpdir();
    let path = dir.path().join("t.zarr");
    let synth = |n, seed| atomzarr::data::synth::generate(n, 4, 12, seed).unwrap();
    let all = toolkit_like_store(&path, &[synth(5, 1), synth(4, 2), synth(6, 3)]);
    let atoms_ptr = raw_i64(&path, format::ATOMS_PTR);
    let report = repair::repair(&path).unwrap();
    assert_eq!(report.unfixed, vec![]);
    let runs: Vec<(Vec<usize>, i64)> = report.fixed.iter().map(|r| (r.physical.clone(), r.shift)).collect();
    assert_eq!(runs, vec![((5..9).collect(), atoms_ptr[5]), ((9..15).collect(), atoms_ptr[9])]);
    // The store now holds exactly what was meant.
    let r = AtomicDataZarrReader::open(&path).unwrap();
    for (i, s) in read_all(&r).iter().enumerate() {
        assert_sample_eq(s, &all[i], &format!("sample {i}"));
    }
    let mut out = Vec::new();
    r.load_collated(&[(0..15).collect()], &mut out).unwrap();
    assert_eq!(out[0], CollatedBatch::from_samples(&(0..15).collect::<Vec<_>>(), &all).unwrap());
}

#[test]
fn repair_lists_what_it_cannot_fix_and_leaves_it() {
    // An index past the atoms is not the append bug.
    let bad = bad_store();
    let report: RepairReport = repair::repair(&bad.path).unwrap();
    assert!(report.fixed.is_empty() && !report.written);
    assert_eq!(report.unfixed.len(), 1);
    let u = &report.unfixed[0];
    assert_eq!((u.index, u.physical_index, u.value, u.num_atoms), (BAD_LOGICAL, BAD_PHYSICAL, bad.value, bad.atoms));
    assert!(u.reason.contains("not the toolkit's append bug"), "{}", u.reason);
    let (ok, stdout, stderr) = cli(&["repair", bad.path.to_str().unwrap()]);
    assert!(!ok, "unfixed samples: exit status 1");
    assert!(
        stdout.contains(&format!("not fixed: sample {BAD_LOGICAL} (physical {BAD_PHYSICAL}): index {}", bad.value)),
        "{stdout}"
    );
    assert!(stderr.contains("could not be fixed"), "{stderr}");
    assert_eq!(
        AtomicDataZarrReader::open(&bad.path)
            .unwrap()
            .read(BAD_LOGICAL as i64)
            .unwrap()
            .data
            .field("neighbor_list")
            .unwrap()
            .data
            .to_i64_vec()
            .unwrap()[1],
        bad.value
    );

    // Ambiguous: one appended sample whose only edge fits two atom offsets.
    // Samples of 3, 2, 4 and 5 atoms; the last is appended with the bug and
    // its single edge (3, 3) reads back as (-2, -2): a shift of 3 or 5 both
    // bring it into [0, 5).
    let dir = tmpdir();
    let path = dir.path().join("amb.zarr");
    let mk = |n: usize, nl: Vec<[i64; 2]>| {
        AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap().with_neighbor_list(nl, None).unwrap()
    };
    toolkit_like_store(
        &path,
        &[vec![mk(3, vec![[0, 1]]), mk(2, vec![[1, 0]]), mk(4, vec![[2, 3]])], vec![mk(5, vec![[3, 3]])]],
    );
    // The toolkit bug with K = atoms_ptr[3] = 9 would read back -6; make the
    // stored value the ambiguous one instead (read-back -2).
    set_neighbor_rows(&path, 3, vec![9 - 2, 9 - 2]);
    let report = repair::repair(&path).unwrap();
    assert!(report.fixed.is_empty());
    assert_eq!(report.unfixed.len(), 1);
    assert!(
        report.unfixed[0].reason.contains("ambiguous") && report.unfixed[0].reason.contains("[3, 5]"),
        "{:?}",
        report.unfixed
    );
}
