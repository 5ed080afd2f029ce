//! Neighbor lists built while loading (`Dataset::with_cutoff`,
//! `DataLoader::builder(..).with_cutoff`) equal the lists a store keeps when
//! they are built at import (`add_neighbors`, what `import --cutoff` runs on
//! the float32 structures): periodic bulk cells, a slab, a molecule and a
//! small triclinic cell under a cutoff larger than the cell; batches wide and
//! narrowed, validated or not, and single samples. Bad cutoffs and cells are
//! typed errors naming the sample.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;

use atomzarr::data::CollateOptions;
use atomzarr::data::neighbors::add_neighbors;
use atomzarr::data::synth::{Generator, Preset};
use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, Error, Field, Level, ZarrWriteConfig};

fn without_edges(mut s: AtomicData) -> AtomicData {
    s.fields.remove("neighbor_list");
    s.fields.remove("shifts");
    s
}

fn random_positions(rng: &mut common::SplitMix, n: usize, box_len: [f32; 3]) -> Vec<[f32; 3]> {
    (0..n).map(|_| std::array::from_fn(|k| (rng.below(1 << 20) as f32 / (1 << 20) as f32) * box_len[k])).collect()
}

/// Bulk cells, a slab, a molecule and a small triclinic cell, without edges.
fn structures() -> Vec<AtomicData> {
    let mut rng = common::SplitMix(5);
    let mut out: Vec<AtomicData> = Generator::with_preset(Preset::Bulk { cutoff: 5.0 }, 32, 80, 1)
        .unwrap()
        .batch(5)
        .unwrap()
        .into_iter()
        .map(without_edges)
        .collect();
    let slab = AtomicData::new(vec![8; 12], random_positions(&mut rng, 12, [6.0, 6.0, 9.0]))
        .unwrap()
        .with_cell([[6.0, 0.0, 0.0], [1.0, 6.0, 0.0], [0.0, 0.0, 0.0]])
        .with_pbc([true, true, false])
        .with_energy(-1.0);
    let molecule = AtomicData::new(vec![6; 20], random_positions(&mut rng, 20, [7.0, 7.0, 7.0]))
        .unwrap()
        .with_cell([[0.0; 3]; 3])
        .with_pbc([false; 3])
        .with_energy(-2.0);
    let triclinic = AtomicData::new(vec![14, 14], vec![[0.1, 0.2, 0.3], [1.4, 1.1, 1.2]])
        .unwrap()
        .with_cell([[3.0, 0.0, 0.0], [1.2, 2.8, 0.0], [0.7, 0.9, 2.6]])
        .with_pbc([true; 3])
        .with_energy(-3.0);
    for s in [slab, molecule, triclinic] {
        let n = s.num_atoms();
        out.push(s.with_forces(vec![[0.0; 3]; n]).unwrap());
    }
    out
}

fn write(path: &Path, samples: &[AtomicData]) -> AtomicDataZarrReader {
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default()).unwrap().write(samples).unwrap();
    AtomicDataZarrReader::open(path).unwrap()
}

#[test]
fn lists_built_while_loading_equal_lists_stored_at_import() {
    let dir = common::tmpdir();
    let bare = structures();
    let plain = write(&dir.path().join("plain.zarr"), &bare);
    for cutoff in [5.0, 3.1] {
        let stored =
            write(&dir.path().join(format!("edges_{cutoff}.zarr")), &add_neighbors(bare.clone(), cutoff).unwrap());
        let built = Dataset::new(AtomicDataZarrReader::open(plain.location().clone()).unwrap());
        let kept = Dataset::new(stored);
        let lists: Vec<Vec<usize>> = vec![vec![7, 0, 3], vec![5, 6], vec![1, 2, 4]];
        for narrow in [false, true] {
            for validate in [false, true] {
                let opts = CollateOptions::default().with_narrow_int64(narrow);
                let a = built
                    .clone()
                    .with_collate_options(opts)
                    .with_skip_validation(!validate)
                    .with_cutoff(cutoff)
                    .unwrap();
                let b = kept.clone().with_collate_options(opts).with_skip_validation(!validate);
                let (got, want) = (a.load_batches(&lists).unwrap(), b.load_batches(&lists).unwrap());
                assert!(want.iter().all(|w| w.num_edges() > 0));
                assert_eq!(got, want, "cutoff {cutoff}, narrowed {narrow}, validated {validate}");
            }
        }
        let a = built.clone().with_cutoff(cutoff).unwrap();
        for i in 0..bare.len() {
            assert_eq!(a.get_sample(i).unwrap(), kept.get_sample(i).unwrap(), "cutoff {cutoff}: sample {i} alone");
        }
    }
}

#[test]
fn a_cutoff_on_a_store_with_edges_decodes_no_edge_chunk() {
    use atomzarr::source::ChunkedReader;
    use std::sync::Arc;
    let dir = common::tmpdir();
    let bare = structures();
    let plain = Arc::new(write(&dir.path().join("plain.zarr"), &bare));
    let stored = Arc::new(write(&dir.path().join("edges.zarr"), &add_neighbors(bare.clone(), 5.0).unwrap()));
    let lists: Vec<Vec<usize>> = vec![vec![7, 0, 3], vec![5, 6, 1, 2, 4]];
    let read = |r: Arc<AtomicDataZarrReader>, cutoff: Option<f64>| {
        let before = r.decode_counters();
        let mut ds = Dataset::new(Arc::clone(&r)).with_skip_validation(true);
        if let Some(c) = cutoff {
            ds = ds.with_cutoff(c).unwrap();
        }
        let got = ds.load_batches(&lists).unwrap();
        (got, r.decode_counters().since(&before).decoded_bytes)
    };
    let (from_plain, plain_bytes) = read(plain, Some(5.0));
    let (replaced, replaced_bytes) = read(Arc::clone(&stored), Some(5.0));
    // A fresh reader: nothing cached.
    let (kept, kept_bytes) = read(Arc::new(AtomicDataZarrReader::open(stored.location().clone()).unwrap()), None);
    assert_eq!(replaced, from_plain);
    assert_eq!(replaced, kept);
    // The same per-atom and per-system chunks as the store without edges,
    // and no edge chunk.
    assert_eq!(replaced_bytes, plain_bytes);
    assert!(kept_bytes > replaced_bytes, "{kept_bytes} vs {replaced_bytes}");
}

#[test]
fn stored_edges_a_cutoff_replaces_are_not_validated() {
    // The toolkit's appended half stores neighbor lists outside their
    // samples (its append bug): validated reads refuse them, but with a
    // cutoff they are replaced, so every path reads the rebuilt lists.
    let path = common::assets().join("nva_default.zarr");
    let r = AtomicDataZarrReader::open(&path).unwrap();
    let n = atomzarr::Reader::len(&r);
    let all: Vec<Vec<usize>> = vec![(0..n).collect()];
    assert!(Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).load_batches(&all).is_err());
    let fused =
        Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true).with_cutoff(3.0).unwrap();
    let checked = Dataset::new(r).with_cutoff(3.0).unwrap();
    let want = fused.load_batches(&all).unwrap();
    assert!(want[0].num_edges() > 0);
    assert_eq!(checked.load_batches(&all).unwrap(), want);
    assert_eq!(checked.get_sample(n - 1).unwrap(), fused.get_sample(n - 1).unwrap());
}

#[test]
fn the_loader_builds_the_same_batches_as_a_store_with_edges() {
    use atomzarr::{DataLoader, sampler::ListSampler};
    use burn::tensor::Device;
    let dir = common::tmpdir();
    let bare = structures();
    let plain = write(&dir.path().join("plain.zarr"), &bare);
    let stored = write(&dir.path().join("edges.zarr"), &add_neighbors(bare.clone(), 5.0).unwrap());
    let order = vec![3, 1, 7, 0, 6, 2, 5, 4];
    let run = |ds: Dataset<AtomicDataZarrReader>, cutoff: Option<f64>| {
        let mut ds = ds.with_skip_validation(true);
        if let Some(c) = cutoff {
            ds = ds.with_cutoff(c).unwrap();
        }
        let loader = DataLoader::builder(ds)
            .with_batch_size(3)
            .with_sampler(ListSampler::new(order.clone()))
            .with_prefetch_factor(2)
            .build(&Device::flex())
            .unwrap();
        loader
            .iter()
            .map(|batch| {
                let batch = batch.unwrap();
                let data = |name: &str| match &batch.fields[name].data {
                    atomzarr::BatchData::Int(t) => format!("{:?}", t.clone().into_data()),
                    atomzarr::BatchData::Float(t) => format!("{:?}", t.clone().into_data()),
                    atomzarr::BatchData::Bool(t) => format!("{:?}", t.clone().into_data()),
                };
                (batch.indices.clone(), data("neighbor_list"), data("shifts"))
            })
            .collect::<Vec<_>>()
    };
    let got = run(Dataset::new(plain), Some(5.0));
    assert_eq!(got, run(Dataset::new(stored), None));
    assert_eq!(got.len(), 3);
}

#[test]
fn bad_cutoffs_and_cells_are_typed_errors_naming_the_sample() {
    let dir = common::tmpdir();
    let mut bare = structures();
    let ds = || Dataset::new(AtomicDataZarrReader::open(dir.path().join("s.zarr")).unwrap());
    // Sample 2: periodic along x with a zero first cell vector.
    bare[2] = bare[2].clone().with_cell([[0.0; 3], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]]);
    write(&dir.path().join("s.zarr"), &bare);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(ds().with_cutoff(bad), Err(Error::Config(_))), "cutoff {bad}");
    }
    let e = ds().with_cutoff(5.0).unwrap().load_batches(&[vec![0, 1], vec![2, 3]]).unwrap_err();
    assert!(matches!(&e, Error::Validation { index: 2, reason, .. } if reason.contains("cutoff 5")), "{e}");
    let skipping = ds().with_cutoff(5.0).unwrap().with_error_policy(atomzarr::ErrorPolicy::Skip);
    let got = skipping.load_batches(&[vec![0, 1], vec![2, 3]]).unwrap();
    assert_eq!((got[0].indices.clone(), got[1].indices.clone()), (vec![0, 1], vec![3]));
    // A cutoff far past a dense cell's scale: refused before its edges are made.
    let e = ds().with_cutoff(60.0).unwrap().load_batches(&[vec![0]]).unwrap_err();
    assert!(matches!(&e, Error::Validation { index: 0, reason, .. } if reason.contains("neighbors per atom")), "{e}");
    // An edge field that could not follow new edges.
    let n = bare[0].num_atoms();
    let labeled: Vec<AtomicData> = add_neighbors(vec![bare[0].clone()], 3.0)
        .unwrap()
        .into_iter()
        .map(|s| {
            let e = s.num_edges();
            s.with_field("bond_order", Field::new(Level::Edge, vec![e], vec![1.0f32; e]).unwrap())
        })
        .collect();
    assert!(n > 0);
    let r = write(&dir.path().join("labeled.zarr"), &labeled);
    assert!(matches!(Dataset::new(r).with_cutoff(3.0), Err(Error::InvalidInput { .. })));
}

#[test]
fn read_and_dump_with_a_cutoff_deliver_what_a_store_with_edges_holds() {
    let dir = common::tmpdir();
    let bare = structures();
    let plain = dir.path().join("plain.zarr");
    let stored = dir.path().join("edges.zarr");
    write(&plain, &bare);
    write(&stored, &add_neighbors(bare, 5.0).unwrap());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_atomzarr")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let (plain, stored) = (plain.to_str().unwrap(), stored.to_str().unwrap());
    assert_eq!(run(&["dump", plain, "--cutoff", "5"]), run(&["dump", stored]));
    for mode in ["batch", "raw", "single"] {
        let checksum = |store: &str, cutoff: &[&str]| {
            let mut args = vec!["read", store, "--json", "--checksum", "--read-order", "shuffle", "--read-mode", mode];
            args.extend_from_slice(cutoff);
            let row: serde_json::Value = serde_json::from_str(run(&args).lines().next().unwrap()).unwrap();
            row["content_checksum"].as_str().unwrap().to_string()
        };
        assert_eq!(checksum(plain, &["--cutoff", "5"]), checksum(stored, &[]), "{mode}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_atomzarr"))
        .args(["read", plain, "--cutoff", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("cutoff"));
}
