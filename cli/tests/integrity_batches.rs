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
#[path = "integrity/mod.rs"]
mod integrity;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::Device;
use serde_json::Value;

use atomzarr::data::CollateOptions;
use atomzarr::sampler::ListSampler;
use atomzarr::source::{Capabilities, SampleIndex, Schema};
use atomzarr::store::format;
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, DataLoader, Dataset, Error, ErrorPolicy,
    InMemoryReader, MultiReader, Reader, ReaderExt, SampleMetadata, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use integrity::*;

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
    // `verify` lists it, and only it, and exits 1.
    let (ok, out, _) = cli(&["verify", store]);
    assert!(!ok, "verify exits non-zero");
    let want = format!("sample {BAD_PHYSICAL}: neighbor index {} outside the sample's {} atoms", bad.value, bad.atoms);
    assert!(out.contains(&want) && out.contains(&format!("store {store}, array core/neighbor_list, chunk ")), "{out}");
    assert!(out.contains(": 1 faults"), "{out}");
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
