//! The reader keeps decoded chunks of bulk stores in compact forms
//! (sample-local int16 receivers and sender runs, or int16 pairs where the
//! senders do not run; dictionaries of repeated rows):
//! what comes back, one sample at a time and in collated batches, wide and
//! narrowed, cold and from the cache, equals the structures that were
//! written, including where a chunk's values do not fit a compact form.

mod common;

use std::path::Path;

use atomzarr::data::CollateOptions;
use atomzarr::data::synth::{Generator, Preset};
use atomzarr::source::ChunkedReader;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, Field, Level, ReaderExt, ZarrArrayConfig,
    ZarrWriteConfig,
};

/// Edge chunks of 8192 rows: a chunk holds a few bulk cells, so dictionaries
/// and sample-local indices both span several samples.
fn write(path: &Path, samples: &[AtomicData]) {
    let chunks = ZarrArrayConfig::default().with_chunk_size(8192);
    let config = ZarrWriteConfig::default().with_core(chunks).with_custom(chunks);
    AtomicDataZarrWriter::create(path, config).expect("create").write(samples).expect("write");
}

/// Every sample read alone, then collated in shuffled batches (wide and
/// narrowed), equals `expected`; twice, so the second pass reads cached chunks.
fn assert_reads_back(reader: &AtomicDataZarrReader, expected: &[AtomicData], what: &str) {
    for pass in ["cold", "cached"] {
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(&reader.read(i as i64).expect("read").data, e, "{what} {pass}: sample {i}");
        }
        let mut order: Vec<usize> = (0..expected.len()).rev().collect();
        order.rotate_left(expected.len() / 3);
        let batches: Vec<Vec<i64>> = order.chunks(5).map(|b| b.iter().map(|&i| i as i64).collect()).collect();
        for narrow in [false, true] {
            let mut out = Vec::new();
            let opts = CollateOptions::default().with_narrow_int64(narrow);
            reader.read_collated_opt(&batches, opts, &mut out).expect("read_collated");
            for (b, got) in batches.iter().zip(&out) {
                let idx: Vec<usize> = b.iter().map(|&i| i as usize).collect();
                let want: Vec<AtomicData> = idx.iter().map(|&i| expected[i].clone()).collect();
                let want = CollatedBatch::from_samples(&idx, &want).expect("collate");
                if narrow {
                    common::assert_narrowed_eq(got, &want, &["atomic_numbers", "neighbor_list"], what);
                } else {
                    assert_eq!(got, &want, "{what} {pass}: batch {b:?}");
                }
            }
        }
    }
}

#[test]
fn bulk_cells_read_back_exactly_from_a_cache_a_fraction_of_their_decoded_size() {
    let dir = common::tmpdir();
    let path = dir.path().join("bulk.zarr");
    let cells = Generator::with_preset(Preset::Bulk { cutoff: 5.0 }, 32, 140, 3).unwrap().batch(24).unwrap();
    write(&path, &cells);
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    assert_reads_back(&reader, &cells, "bulk");
    // Forms engaged: the cache holds every chunk of the store (the budget is
    // far larger), in well under half their decoded bytes.
    let decoded = reader.decode_counters().decoded_bytes;
    let held = reader.cache_stats().bytes;
    assert!(held * 3 < decoded, "cache holds {held} bytes of {decoded} decoded");
}

#[test]
fn chunks_whose_values_do_not_fit_a_compact_form_read_back_too() {
    let dir = common::tmpdir();
    let path = dir.path().join("mixed.zarr");
    let mut rng = common::SplitMix(11);
    let mut samples = Vec::new();
    // A structure of 40,000 atoms whose edges reach atom 39,999: its
    // sample-local indices do not fit int16.
    let n = 40_000;
    let big = AtomicData::new(vec![6; n], (0..n).map(|i| [i as f32, 0.0, 0.0]).collect())
        .unwrap()
        .with_neighbor_list((0..3000).map(|k| [k, n as i64 - 1 - k]).collect(), None)
        .unwrap();
    samples.push(big);
    // Edge rows with more distinct values than any dictionary holds
    // (random), with 300-2000 distinct rows per chunk (two-byte codes), and
    // with a handful (one-byte codes).
    for s in 0..12usize {
        let atoms = 50;
        let edges = 2500;
        let pairs: Vec<[i64; 2]> = (0..edges).map(|_| [rng.below(atoms) as i64, rng.below(atoms) as i64]).collect();
        let noisy: Vec<f32> = (0..edges).map(|_| rng.f32()).collect();
        let several: Vec<i32> = (0..edges).map(|e| ((e * 7 + s * 1000) % 400) as i32).collect();
        let few: Vec<i16> = (0..edges).map(|e| (e % 3) as i16 - 1).collect();
        let d = AtomicData::new(vec![29; atoms as usize], vec![[0.5; 3]; atoms as usize])
            .unwrap()
            .with_neighbor_list(pairs, None)
            .unwrap()
            .with_field("noisy", Field::new(Level::Edge, vec![edges], noisy).unwrap())
            .with_field("several", Field::new(Level::Edge, vec![edges], several).unwrap())
            .with_field("few", Field::new(Level::Edge, vec![edges, 1], few).unwrap());
        samples.push(d);
    }
    // Give the big structure the same fields so the store has one schema.
    let e0 = samples[0].num_edges();
    samples[0] = samples[0]
        .clone()
        .with_field("noisy", Field::new(Level::Edge, vec![e0], vec![0.25f32; e0]).unwrap())
        .with_field("several", Field::new(Level::Edge, vec![e0], vec![7i32; e0]).unwrap())
        .with_field("few", Field::new(Level::Edge, vec![e0, 1], vec![1i16; e0]).unwrap());
    write(&path, &samples);
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    assert_reads_back(&reader, &samples, "mixed");
}
