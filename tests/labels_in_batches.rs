//! Labels only some frames have, and string labels, through the
//! DataLoader to a training step: a force (and stress) loss masked on the
//! frames that lack them equals the loss computed by hand over the frames
//! that have them, while the unmasked loss is NaN; string labels arrive
//! with the batch and weight a per-config loss.

mod common;

use atomzarr::formats::import::{ImportOptions, import_files};
use atomzarr::pipeline::loss::masked_mse;
use atomzarr::{AtomicDataZarrReader, DataLoader, Dataset};
use burn::tensor::Device;
use burn::tensor::Tensor;

/// Three frames: forces and stress on the first, neither on the second,
/// forces only on the third; config types on all.
const FRAMES: &str = "\
2
Lattice=\"4 0 0 0 4 0 0 0 4\" energy=-2.0 stress=\"0.1 0 0 0 0.2 0 0 0 0.3\" config_type=bulk Properties=species:S:1:pos:R:3:forces:R:3
H 0 0 0 0.5 -1.0 0.0
H 0 0 1 -0.5 1.0 0.25
1
Lattice=\"4 0 0 0 4 0 0 0 4\" energy=-1.0 config_type=atom
H 0 0 0
3
Lattice=\"4 0 0 0 4 0 0 0 4\" energy=-3.5 config_type=bulk Properties=species:S:1:pos:R:3:forces:R:3
H 0 0 0 2.0 0 0
H 0 0 1 0 0 0
H 0 1 0 0 0 -2.0
";

fn loader(store: &std::path::Path) -> DataLoader<AtomicDataZarrReader> {
    let ds = Dataset::new(AtomicDataZarrReader::open(store).unwrap());
    DataLoader::builder(ds).with_batch_size(3).build(&Device::flex()).unwrap()
}

/// FRAMES imported into a new store in `dir`, and its path.
fn store_of_frames(dir: &std::path::Path) -> std::path::PathBuf {
    let xyz = dir.join("f.extxyz");
    std::fs::write(&xyz, FRAMES).unwrap();
    let store = dir.join("s.zarr");
    import_files(&[&xyz], &store, &ImportOptions::default()).unwrap();
    store
}

#[test]
fn a_force_loss_is_masked_on_frames_without_forces_or_stress() {
    let dir = common::tmpdir();
    let store = store_of_frames(dir.path());
    let loader = loader(&store);
    let batch = loader.iter().next().unwrap().unwrap();
    assert_eq!(batch.num_graphs, 3);

    let forces = batch.forces().unwrap();
    let pred = Tensor::<2>::zeros([batch.num_atoms, 3], &Device::flex());
    // By hand, over the 5 atoms that have forces (15 components).
    let present = [0.5, -1.0, 0.0, -0.5, 1.0, 0.25, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0];
    let want = present.iter().map(|x: &f64| x * x).sum::<f64>() / present.len() as f64;
    let masked = masked_mse(pred.clone(), forces.clone()).into_scalar::<f64>();
    assert!((masked - want).abs() < 1e-6, "masked force loss {masked} vs {want}");
    let plain = (pred - forces).powf_scalar(2.0).mean().into_scalar::<f64>();
    assert!(plain.is_nan(), "without the mask the loss is NaN: {plain}");

    // Stress: only the first frame has one (diagonal 0.1 0.2 0.3).
    let stress = batch.stress().unwrap();
    let zero = Tensor::<3>::zeros([3, 3, 3], &Device::flex());
    let want = (0.01 + 0.04 + 0.09) / 9.0;
    let masked = masked_mse(zero, stress).into_scalar::<f64>();
    assert!((masked - want).abs() < 1e-6, "masked stress loss {masked} vs {want}");
}

#[test]
fn string_labels_reach_the_training_step() {
    let dir = common::tmpdir();
    let store = store_of_frames(dir.path());
    let loader = loader(&store);
    let batch = loader.iter().next().unwrap().unwrap();
    let types = batch.strings("config_type").unwrap();
    assert_eq!(types, ["bulk", "atom", "bulk"]);
    // A per-config weight, as a training step would build it.
    let w: Vec<f32> = types.iter().map(|t| if t == "atom" { 10.0 } else { 1.0 }).collect();
    let weights = Tensor::<1>::from_floats(w.as_slice(), &Device::flex());
    let energy = batch.energy().unwrap().reshape([3]);
    let weighted = (energy * weights).sum().into_scalar::<f64>();
    assert!((weighted - (-2.0 - 10.0 - 3.5)).abs() < 1e-6, "{weighted}");
    // A store held in memory (built a chunk at a time) keeps them too.
    let reader = AtomicDataZarrReader::open(&store).unwrap();
    let mem =
        atomzarr::InMemoryReader::from_reader_opt(&reader, atomzarr::InMemoryOptions::default().with_chunk_size(2))
            .unwrap();
    let b = mem.load_batches(&[vec![1, 0, 2]]).unwrap();
    assert_eq!(b[0].strings["config_type"].values, ["atom", "bulk", "bulk"]);
    assert_eq!(atomzarr::ReaderExt::read(&mem, 1).unwrap().data.string("config_type"), Some("atom"));
    // Shuffled batches keep each graph's label with it.
    let ds = Dataset::new(AtomicDataZarrReader::open(&store).unwrap());
    let shuffled =
        DataLoader::builder(ds).with_batch_size(2).with_shuffle(true).with_seed(3).build(&Device::flex()).unwrap();
    for b in shuffled.iter() {
        let b = b.unwrap();
        let want = ["bulk", "atom", "bulk"];
        for (k, &i) in b.indices.iter().enumerate() {
            assert_eq!(b.strings("config_type").unwrap()[k], want[i], "graph {k} (sample {i})");
        }
    }
}
