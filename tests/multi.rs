//! MultiReader, InMemoryReader and Dataset-as-Reader (issue: samplers,
//! InMemoryReader and MultiReader).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::tensor::Device;

use atomzarr::data::CollateOptions;
use atomzarr::sampler::{
    BatchSampler, EpochPolicy, MultiDatasetBatchSampler, MultiDatasetSampler, SizeAwareOptions, SizeAwareSampler,
};
use atomzarr::source::{Capabilities, PlannedReader, Schema};
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, CollatedBatch, DataLoader, Dataset, Error,
    InMemoryOptions, InMemoryReader, Level, MultiReader, MultiReaderOptions, ReadPlan, Reader, ReaderExt,
    ZarrArrayConfig, ZarrWriteConfig,
};

fn write_store(path: &Path, n: usize, seed: u64) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 12, seed).unwrap();
    let config = ZarrWriteConfig::default()
        .with_core(ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(16));
    AtomicDataZarrWriter::create(path, config).unwrap().write(&samples).unwrap();
    samples
}

fn host(c: &CollatedBatch) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    c.fields.iter().map(|(n, f)| (n.clone(), (f.shape(), f.data.to_f64_vec()))).collect()
}

/// Counts calls into a reader.
struct Counting<R> {
    inner: R,
    many: AtomicUsize,
    collated: AtomicUsize,
}

impl<R> Counting<R> {
    fn new(inner: R) -> Self {
        Counting { inner, many: AtomicUsize::new(0), collated: AtomicUsize::new(0) }
    }
    fn calls(&self) -> (usize, usize) {
        (self.many.load(Ordering::SeqCst), self.collated.load(Ordering::SeqCst))
    }
}

impl<R: Reader> Reader for Counting<R> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn schema(&self) -> Schema {
        self.inner.schema()
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        self.many.fetch_add(1, Ordering::SeqCst);
        self.inner.load_many(indices)
    }
    /// The inner reader's capabilities, its planning counted.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities { planned: Some(self), ..self.inner.capabilities() }
    }
}

impl<R: Reader> PlannedReader for Counting<R> {
    fn prepare(&self, plan: &mut ReadPlan) -> atomzarr::Result<()> {
        self.inner.capabilities().planned.map_or(Ok(()), |p| p.prepare(plan))
    }
    fn read_prepared(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> atomzarr::Result<()> {
        self.collated.fetch_add(1, Ordering::SeqCst);
        self.inner.read_plan(plan, out)
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    a_path: std::path::PathBuf,
    a: Vec<AtomicData>,
    b: Vec<AtomicData>,
    mem: Arc<InMemoryReader>,
}

/// Store A (read through a Dataset) and store B (held in memory).
fn fixture(na: usize, nb: usize) -> Fixture {
    let dir = common::tmpdir();
    let a_path = dir.path().join("a.zarr");
    let b_path = dir.path().join("b.zarr");
    let a = write_store(&a_path, na, 1);
    let b = write_store(&b_path, nb, 2);
    let mem = InMemoryReader::from_reader_opt(
        &AtomicDataZarrReader::open(&b_path).unwrap(),
        InMemoryOptions::default().with_chunk_size(7),
    )
    .unwrap();
    Fixture { _dir: dir, a_path, a, b, mem: Arc::new(mem) }
}

#[test]
fn multi_through_the_dataloader_with_fused_prefetch_equals_reading_each_child() {
    let f = fixture(37, 23);
    let child_a = Dataset::new(AtomicDataZarrReader::open(&f.a_path).unwrap());
    let multi = Arc::new(MultiReader::new(vec![Arc::new(child_a.clone()), f.mem.clone()]).unwrap());
    assert_eq!((multi.len(), multi.offsets()), (60, vec![0, 37, 60]));
    let sampler = MultiDatasetBatchSampler::builder(&multi, 5)
        .with_samples_per_dataset(vec![3usize, 2])
        .with_epoch_policy(EpochPolicy::MaxSize)
        .with_seed(4)
        .build()
        .unwrap();
    for (pf, skip, streams) in [(3usize, true, true), (2, false, false), (16, true, false), (0, false, true)] {
        let loader = DataLoader::builder(Dataset::from_arc(multi.clone()).with_skip_validation(skip))
            .with_batch_sampler(sampler.clone())
            .with_prefetch_factor(pf)
            .with_use_streams(streams)
            .build(&Device::flex())
            .unwrap();
        loader.set_epoch(2);
        let planned = sampler.batches(2);
        assert_eq!(planned.len(), 13); // max(ceil(37 / 3), ceil(23 / 2))
        let mut got = Vec::new();
        for batch in loader.iter() {
            let batch = batch.unwrap();
            // Read each child directly and collate in the batch's order.
            let samples: Vec<AtomicData> = batch
                .indices
                .iter()
                .map(|&g| {
                    if g < 37 {
                        child_a.reader().read(g as i64).unwrap().data
                    } else {
                        f.mem.read((g - 37) as i64).unwrap().data
                    }
                })
                .collect();
            let want = CollatedBatch::from_samples(&batch.indices, &samples).unwrap();
            assert_eq!(batch.to_host_f64().unwrap(), host(&want), "pf {pf} skip {skip}");
            assert_eq!(batch.atoms_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap(), want.atoms_ptr);
            // And the children's samples are the ones written.
            for (&g, s) in batch.indices.iter().zip(&samples) {
                assert_eq!(s, if g < 37 { &f.a[g] } else { &f.b[g - 37] });
            }
            got.push(batch.indices.clone());
        }
        assert_eq!(got, planned, "pf {pf}: the sampler's batches, in order");
    }
}

#[test]
fn load_collated_routes_once_per_child_and_restores_request_order() {
    let f = fixture(20, 15);
    let a = Arc::new(Counting::new(
        Dataset::new(AtomicDataZarrReader::open(&f.a_path).unwrap()).with_skip_validation(true),
    ));
    let b = Arc::new(Counting::new(f.mem.clone()));
    let multi = MultiReader::new(vec![a.clone(), b.clone()]).unwrap();
    // Picks alternating between the children, and runs of consecutive
    // samples of one child (copied as one block).
    let batches =
        vec![vec![3, 25, 0, 34, 3], vec![21, 20], vec![], vec![19, 1], vec![30], vec![5, 6, 7, 22, 23, 8, 9, 33]];
    let mut out = Vec::new();
    multi.load_collated(&batches, &mut out).unwrap();
    assert_eq!(a.calls(), (0, 1), "one collated read of child A for all batches");
    assert_eq!(b.calls(), (0, 1), "one collated read of child B for all batches");
    assert_eq!(out.len(), batches.len());
    for (got, want_idx) in out.iter().zip(&batches) {
        assert_eq!(&got.indices, want_idx, "global indices in request order");
        let samples: Vec<AtomicData> =
            want_idx.iter().map(|&g| if g < 20 { f.a[g].clone() } else { f.b[g - 20].clone() }).collect();
        let want = CollatedBatch::from_samples(want_idx, &samples).unwrap();
        assert_eq!(got.atoms_ptr, want.atoms_ptr);
        assert_eq!(got.edges_ptr, want.edges_ptr);
        if !want_idx.is_empty() {
            assert_eq!(host(got), host(&want));
            assert_eq!(got.to_samples().unwrap(), samples);
        }
    }
    // Buffers are reused across calls; results stay right.
    multi.load_collated(&batches[3..], &mut out).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].indices, vec![19, 1]);
    assert_eq!(out[0].to_samples().unwrap(), vec![f.a[19].clone(), f.a[1].clone()]);
    // load_many (read_many): one read per child, request order.
    let got = multi.read_many(&[26, 2, -1, 2]).unwrap();
    assert_eq!(a.calls().0, 1);
    assert_eq!(b.calls().0, 1);
    let data: Vec<AtomicData> = got.iter().map(|s| s.data.clone()).collect();
    assert_eq!(data, vec![f.b[6].clone(), f.a[2].clone(), f.b[14].clone(), f.a[2].clone()]);
    assert_eq!(got[0].metadata.index, 26);
    assert!(got[0].metadata.source.contains("b.zarr"), "{}", got[0].metadata.source);
    assert!(got[1].metadata.source.contains("a.zarr"));
    // Metadata routed to the child.
    for g in [0usize, 19, 20, 34] {
        let want = if g < 20 { a.sample_sizes(g).unwrap() } else { b.sample_sizes(g - 20).unwrap() };
        assert_eq!(multi.sample_sizes(g).unwrap(), want);
    }
    assert_eq!(multi.to_local_index(20).unwrap(), (1, 0));
    assert_eq!(multi.to_global_index(1, 3).unwrap(), 23);
    assert!(matches!(multi.to_global_index(1, 15), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(multi.read(35), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(multi.sample_sizes(35), Err(Error::IndexOutOfRange { .. })));
    // Indices past the end reach load_collated only through read_collated, which checks them.
    assert!(matches!(multi.read_collated(&[vec![0, 40]], &mut out), Err(Error::IndexOutOfRange { .. })));
    assert!(multi.load_collated(&[vec![0, 40]], &mut out).is_err());
}

#[test]
fn empty_children_are_skipped_in_the_index_space() {
    let f = fixture(6, 4);
    let empty = Arc::new(InMemoryReader::from_samples(&[], "empty").unwrap());
    let a: Arc<dyn Reader> = Arc::new(AtomicDataZarrReader::open(&f.a_path).unwrap());
    let multi = MultiReader::new(vec![empty.clone(), a, empty.clone(), f.mem.clone(), empty]).unwrap();
    assert_eq!(multi.child_lens(), vec![0, 6, 0, 4, 0]);
    assert_eq!(multi.to_local_index(0).unwrap(), (1, 0));
    assert_eq!(multi.to_local_index(6).unwrap(), (3, 0));
    assert_eq!(multi.to_local_index(9).unwrap(), (3, 3));
    assert!(multi.to_local_index(10).is_err());
    let got: Vec<AtomicData> = multi.read_many(&[9, 0, 5, 6]).unwrap().into_iter().map(|s| s.data).collect();
    assert_eq!(got, vec![f.b[3].clone(), f.a[0].clone(), f.a[5].clone(), f.b[0].clone()]);
    // A sampler over it never asks the empty children.
    let s = MultiDatasetBatchSampler::builder(&multi, 2)
        .with_samples_per_dataset(vec![0usize, 1, 0, 1, 0])
        .build()
        .unwrap();
    let mut out = Vec::new();
    multi.load_collated(&s.batches(0), &mut out).unwrap();
    assert!(out.iter().all(|b| b.num_graphs() == 2));
}

#[test]
fn output_strict_requires_shared_field_names() {
    let with = atomzarr::data::synth::generate(4, 2, 5, 0).unwrap();
    // Same samples with `forces` swapped for `charges`.
    let without: Vec<AtomicData> = with
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.fields.remove("forces");
            let n = s.num_atoms();
            s.with_charges(vec![0.5; n]).unwrap()
        })
        .collect();
    let a: Arc<dyn Reader> = Arc::new(InMemoryReader::from_samples(&with, "with-forces").unwrap());
    let b: Arc<dyn Reader> = Arc::new(InMemoryReader::from_samples(&without, "with-charges").unwrap());
    let err = MultiReader::new(vec![a.clone(), b.clone()]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidInput { .. }), "{msg}");
    assert!(msg.contains("forces") && msg.contains("charges"), "names the differing fields: {msg}");
    assert!(msg.contains("with-forces") && msg.contains("with-charges"), "names the children: {msg}");
    // Empty children do not count.
    let empty: Arc<dyn Reader> = Arc::new(InMemoryReader::from_samples(&[], "empty").unwrap());
    assert!(MultiReader::new(vec![a.clone(), empty.clone()]).is_ok());
    assert!(MultiReader::new(vec![empty, a.clone(), a.clone()]).is_ok());
    // Non-strict: the union of the fields; each graph's flags say which it has.
    let loose =
        MultiReader::with_options(vec![a.clone(), b], MultiReaderOptions::default().with_output_strict(false)).unwrap();
    assert!(!loose.output_strict());
    let mut out = Vec::new();
    loose.load_collated(&[vec![0, 1], vec![4, 5]], &mut out).unwrap();
    assert!(out.iter().all(|b| b.fields.contains_key("forces") && b.fields.contains_key("charges")));
    loose.load_collated(&[vec![0, 4]], &mut out).unwrap();
    assert_eq!(out[0].fields["forces_present"].data, atomzarr::HostData::Bool(vec![true, false]));
    assert_eq!(out[0].fields["charges_present"].data, atomzarr::HostData::Bool(vec![false, true]));
    // No children at all.
    assert!(matches!(MultiReader::new(vec![]), Err(Error::Config(_))));
    // A Dataset's transforms count: swapping `charges` back for `forces`
    // gives the second child the first one's fields.
    let fixed = Dataset::new(InMemoryReader::from_samples(&without, "fixed").unwrap()).with_transform(|mut s| {
        s.fields.remove("charges");
        let n = s.num_atoms();
        s.with_forces(vec![[0.0; 3]; n])
    });
    assert!(fixed.schema().fields.contains_key("forces") && !fixed.schema().fields.contains_key("charges"));
    let fixed: Arc<dyn Reader> = Arc::new(fixed);
    let multi = MultiReader::new(vec![a, fixed]).unwrap();
    multi.load_collated(&[vec![0, 4]], &mut out).unwrap();
    assert_eq!(out[0].num_graphs(), 2);
}

#[test]
fn in_memory_dataset_equals_the_store() {
    let dir = common::tmpdir();
    let path = dir.path().join("m.zarr");
    let samples = write_store(&path, 41, 7);
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    for chunk in [1usize, 7, 1000] {
        let mem = InMemoryReader::from_reader_opt(&reader, InMemoryOptions::default().with_chunk_size(chunk)).unwrap();
        assert_eq!(mem.len(), 41);
        assert_eq!(mem.collated().indices, (0..41).collect::<Vec<_>>());
        let all: Vec<AtomicData> =
            mem.read_many(&(0..41).collect::<Vec<i64>>()).unwrap().into_iter().map(|s| s.data).collect();
        assert_eq!(all, samples, "chunk {chunk}");
        let lists = vec![vec![40, 0, 13, 13], vec![5], vec![]];
        let mut from_store = Vec::new();
        reader.load_collated(&lists, &mut from_store).unwrap();
        assert_eq!(mem.load_batches(&lists).unwrap(), from_store, "rows copied as the store reader collates them");
        for i in [0usize, 17, 40] {
            assert_eq!(mem.sample_sizes(i).unwrap(), reader.sample_sizes(i).unwrap());
        }
        assert_eq!(mem.schema().fields, reader.schema().fields);
        assert!(mem.nbytes() > 0);
    }
    let mem = InMemoryReader::from_reader(&reader).unwrap();
    assert!(matches!(mem.read(41), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(mem.load_batches(&[vec![41]]), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(mem.sample_sizes(41), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(
        InMemoryReader::from_reader_opt(&reader, InMemoryOptions::default().with_chunk_size(0)),
        Err(Error::Config(_))
    ));
    // Same batch API through a Dataset, validated or not.
    let ds = Dataset::new(mem.clone());
    assert_eq!(ds.load_batches(&[vec![3, 2]]).unwrap(), reader_batches(&reader, &[vec![3, 2]]));
    assert_eq!(
        ds.with_skip_validation(true).load_batches(&[vec![3, 2]]).unwrap(),
        reader_batches(&reader, &[vec![3, 2]])
    );
    // From a Dataset: transforms applied on the way in.
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_transform(|s| Ok(s.with_energy(9.0)));
    let mem = InMemoryReader::from_reader(&ds).unwrap();
    assert!(mem.collated().fields["energy"].data.to_f64_vec().iter().all(|&e| e == 9.0));
}

fn reader_batches(r: &AtomicDataZarrReader, lists: &[Vec<usize>]) -> Vec<CollatedBatch> {
    let mut out = Vec::new();
    r.load_collated(lists, &mut out).unwrap();
    out
}

#[test]
fn in_memory_keeps_physical_indices_of_a_store_with_deletes() {
    let dir = common::tmpdir();
    let path = dir.path().join("d.zarr");
    let samples = write_store(&path, 10, 3);
    AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap().delete(&[2, 5]).unwrap();
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    let mem = InMemoryReader::from_reader(&reader).unwrap();
    assert_eq!(mem.len(), 8);
    assert_eq!(mem.read(2).unwrap().data, samples[3]);
    assert_eq!(mem.read(2).unwrap().metadata.physical_index, 3);
    assert_eq!(mem.sample_metadata(7).physical_index, 9);
}

/// A backend whose sample 1 is invalid (a non-finite position: validation
/// refuses it, batches would not).
struct Broken;
impl Reader for Broken {
    fn len(&self) -> usize {
        3
    }
    fn name(&self) -> &str {
        "broken"
    }
    fn schema(&self) -> Schema {
        Schema::new(
            [
                ("atomic_numbers".to_string(), Level::Atom),
                ("positions".into(), Level::Atom),
                ("neighbor_list".into(), Level::Edge),
            ]
            .into(),
        )
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        let one = |i: usize| {
            let x = if i == 1 { f32::NAN } else { 0.0 };
            AtomicData::new(vec![1, 1], vec![[x; 3]; 2])?.with_neighbor_list(vec![[0, 1]], None)
        };
        indices.iter().map(|&i| one(i)).collect()
    }
}

#[test]
fn dataset_is_a_reader_and_validates_as_a_child() {
    // A transform that keeps the field set (field_levels is the reader's).
    let ds = Dataset::new(Broken).with_transform(|s| {
        Ok(s.with_field("atomic_numbers", atomzarr::Field::new(Level::Atom, vec![2], vec![7i64, 7])?))
    });
    // load_many: validated and transformed.
    let ok = Reader::load_many(&ds, &[0, 2]).unwrap();
    assert!(ok.iter().all(|s| s.field("atomic_numbers").unwrap().data.to_f64_vec() == vec![7.0, 7.0]));
    assert!(matches!(Reader::load_many(&ds, &[0, 1]), Err(Error::Validation { index: 1, .. })));
    assert!(matches!(ReaderExt::read(&ds, 1), Err(Error::Validation { index: 1, .. })));
    // load_collated goes through load_batches.
    let mut out = Vec::new();
    ReaderExt::load_collated(&ds, &[vec![2, 0]], &mut out).unwrap();
    assert_eq!(out, ds.load_batches(&[vec![2, 0]]).unwrap());
    assert_eq!(out[0].fields["atomic_numbers"].data.to_f64_vec(), vec![7.0; 4]);
    assert_eq!(ReaderExt::sample_sizes(&ds, 2).unwrap(), (2, 1));
    // As a MultiReader child, validation and transforms run in the child
    // even when the outer Dataset skips validation.
    let mem = InMemoryReader::from_samples(&[Broken.load_sample(0).unwrap()], "mem").unwrap();
    let multi = Arc::new(MultiReader::new(vec![Arc::new(ds), Arc::new(mem)]).unwrap());
    let outer = Dataset::from_arc(multi.clone()).with_skip_validation(true);
    assert!(matches!(outer.load_batches(&[vec![3, 1]]), Err(Error::Validation { index: 1, .. })));
    let b = outer.load_batches(&[vec![3, 2, 0]]).unwrap();
    assert_eq!(b[0].indices, vec![3, 2, 0]);
    assert_eq!(b[0].fields["atomic_numbers"].data.to_f64_vec(), vec![1.0, 1.0, 7.0, 7.0, 7.0, 7.0]);
    assert_eq!(b[0].fields["neighbor_list"].data.to_f64_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    // Nested: a MultiReader of a MultiReader.
    let nested = MultiReader::new(vec![multi.clone(), multi]).unwrap();
    assert_eq!(nested.len(), 8);
    assert_eq!(nested.read(7).unwrap().data, nested.read(3).unwrap().data);
}

#[test]
fn samplers_over_a_multi_dataset_in_the_dataloader() {
    let f = fixture(30, 12);
    let child_a: Arc<dyn Reader> = Arc::new(Dataset::new(AtomicDataZarrReader::open(&f.a_path).unwrap()));
    let multi = Arc::new(MultiReader::new(vec![child_a.clone(), f.mem.clone()]).unwrap());
    // Size-aware batches over the global index space, sizes from both children.
    let o = SizeAwareOptions::default().with_max_atoms(40).with_seed(1);
    let sa = SizeAwareSampler::from_reader(multi.as_ref(), o).unwrap();
    let want: Vec<(usize, usize)> = f.a.iter().chain(&f.b).map(|s| (s.num_atoms(), s.num_edges())).collect();
    assert_eq!(sa.sizes(), want.as_slice());
    let loader = DataLoader::builder(Dataset::from_arc(multi.clone()).with_skip_validation(true))
        .with_batch_sampler(sa.clone())
        .with_prefetch_factor(4)
        .build(&Device::flex())
        .unwrap();
    let mut seen = Vec::new();
    for b in loader.iter() {
        let b = b.unwrap();
        assert!(b.num_atoms <= 40 || b.num_graphs == 1);
        seen.extend(b.indices);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..42).collect::<Vec<_>>());
    // Per-sample mixing, sharded: two ranks' loaders see disjoint halves.
    let mut halves = Vec::new();
    for rank in 0..2 {
        let s = MultiDatasetSampler::builder(&multi)
            .with_balanced_weights()
            .with_num_samples(24)
            .with_replacement(false)
            .with_seed(3)
            .with_rank(rank, 2)
            .build()
            .unwrap();
        let loader = DataLoader::builder(Dataset::from_arc(multi.clone()))
            .with_sampler(s)
            .with_batch_size(5)
            .with_prefetch_factor(2)
            .build(&Device::flex())
            .unwrap();
        let idx: Vec<usize> = loader.iter().flat_map(|b| b.unwrap().indices).collect();
        assert_eq!(idx.len(), 12);
        halves.push(idx);
    }
    let mut all = halves.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 24, "disjoint");
    assert_eq!(all.iter().filter(|&&g| g >= 30).count(), 12, "all of child B, balanced");
}

#[test]
fn refresh_picks_up_appends_in_children() {
    let dir = common::tmpdir();
    let p = dir.path().join("r.zarr");
    let first = write_store(&p, 5, 1);
    let other = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 5, 9).unwrap(), "other").unwrap();
    let multi =
        MultiReader::new(vec![Arc::new(AtomicDataZarrReader::open(&p).unwrap()), Arc::new(other.clone())]).unwrap();
    assert_eq!(multi.offsets(), vec![0, 5, 8]);
    let more = atomzarr::data::synth::generate(4, 2, 12, 5).unwrap();
    AtomicDataZarrWriter::open(&p, ZarrWriteConfig::default()).unwrap().append(&more).unwrap();
    assert_eq!(multi.len(), 8, "offsets are a snapshot until refresh");
    multi.refresh().unwrap();
    assert_eq!(multi.offsets(), vec![0, 9, 12]);
    assert_eq!(multi.read(9).unwrap().data, other.read(0).unwrap().data);
    assert_eq!(multi.read(8).unwrap().data, more[3]);
    assert_eq!(multi.read(4).unwrap().data, first[4]);
}

/// A plan belongs to the reader that made it, as it was then: another
/// reader (of the same store, the same kind or another length), or the same
/// reader after a refresh, refuses it with a typed error, and a plan made
/// again reads.
#[test]
fn a_plan_of_another_reader_or_from_before_a_refresh_is_refused() {
    let f = fixture(12, 6);
    let lists = vec![vec![3, 1], vec![0]];
    let opts = CollateOptions::default();
    let is_mismatch = |r: atomzarr::Result<()>| matches!(r, Err(Error::PlanMismatch { .. }));
    let zarr = AtomicDataZarrReader::open(&f.a_path).unwrap();
    let twin = AtomicDataZarrReader::open(&f.a_path).unwrap();
    assert!(is_mismatch(twin.read_plan(zarr.plan(lists.clone(), opts).unwrap(), &mut Vec::new())));
    assert!(is_mismatch(zarr.read_plan(f.mem.plan(lists.clone(), opts).unwrap(), &mut Vec::new())));
    let small = InMemoryReader::from_samples(&f.b[..2], "small").unwrap();
    assert!(is_mismatch(f.mem.read_plan(small.plan(vec![vec![1]], opts).unwrap(), &mut Vec::new())));
    // Before and after a refresh.
    let stale = zarr.plan(lists.clone(), opts).unwrap();
    zarr.refresh().unwrap();
    assert!(is_mismatch(zarr.read_plan(stale, &mut Vec::new())));
    let mut out = Vec::new();
    zarr.read_plan(zarr.plan(lists.clone(), opts).unwrap(), &mut out).unwrap();
    assert_eq!(out[0].to_samples().unwrap(), vec![f.a[3].clone(), f.a[1].clone()]);
    // A mixture's plans, and a Dataset's over it.
    let multi = MultiReader::new(vec![Arc::new(zarr), f.mem.clone()]).unwrap();
    let other = MultiReader::new(vec![f.mem.clone(), Arc::new(twin)]).unwrap();
    assert!(is_mismatch(other.read_plan(multi.plan(lists.clone(), opts).unwrap(), &mut Vec::new())));
    let multi = Arc::new(multi);
    let ds = Dataset::from_arc(multi.clone()).with_skip_validation(true);
    let planned = ds.plan(vec![vec![13, 2]]).unwrap();
    multi.refresh().unwrap();
    assert!(matches!(ds.read_planned(planned), Err(Error::PlanMismatch { .. })));
    assert_eq!(ds.read_planned(ds.plan(vec![vec![13, 2]]).unwrap()).unwrap()[0].indices, [13, 2]);
}

/// Indices are checked when a plan is made, by every reader and wrapper.
#[test]
fn indices_are_checked_when_the_plan_is_made() {
    let f = fixture(5, 4);
    let zarr = Arc::new(AtomicDataZarrReader::open(&f.a_path).unwrap());
    let multi = MultiReader::new(vec![zarr.clone(), f.mem.clone()]).unwrap();
    let ds = Dataset::from_arc(zarr.clone());
    let oor = |r: atomzarr::Result<atomzarr::ReadPlan>| matches!(r, Err(Error::IndexOutOfRange { index: 9, .. }));
    let opts = CollateOptions::default();
    assert!(oor(zarr.plan(vec![vec![0], vec![9]], opts)));
    assert!(oor(f.mem.plan(vec![vec![9]], opts)));
    assert!(oor(multi.plan(vec![vec![8, 9]], opts)));
    assert!(oor(ds.plan(vec![vec![9]])));
    assert!(oor(ReaderExt::plan(&ds, vec![vec![9]], opts)));
}
