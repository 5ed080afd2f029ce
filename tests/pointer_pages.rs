//! The pointer arrays are paged: a reader holds the pages its reads touch
//! (a rank's region), never the whole arrays, and every sample still reads
//! back as written. References are the written samples (their atom and edge
//! counts) and the pages a set of samples covers, computed here from the
//! page size; never the reader's own pointers.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, Reader, ReaderExt,
    ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Bytes a held page may take per entry: the bound the reader keeps to
/// (a structure's two pointers in at most 4 bytes).
const BYTES_PER_ENTRY: usize = 2;
/// Per page, beyond its entries (a page's own fields).
const PAGE_OVERHEAD: usize = 256;

fn held_bound(pages: usize, page_rows: usize) -> u64 {
    // Both arrays.
    (2 * pages * (page_rows * BYTES_PER_ENTRY + PAGE_OVERHEAD)) as u64
}

/// `n` small samples written with pointer pages of `page_rows` entries.
fn write(path: &Path, n: usize, page_rows: u64) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 6, 11).unwrap();
    let meta = ZarrArrayConfig::default().with_chunk_size(page_rows);
    let core = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(512);
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default().with_meta(meta).with_core(core))
        .unwrap()
        .write(&samples)
        .unwrap();
    samples
}

/// The pages (of `page_rows` entries) holding the pointers of `samples`
/// (entries p and p + 1 each) and the last entry `n`.
fn pages_of(samples: impl Iterator<Item = usize>, n: usize, page_rows: usize) -> usize {
    let mut pages = BTreeSet::new();
    for p in samples {
        pages.insert(p / page_rows);
        pages.insert((p + 1) / page_rows);
    }
    pages.insert(n / page_rows);
    pages.len()
}

#[test]
fn a_reader_holds_the_pages_of_what_it_read_and_reads_every_sample_right() {
    let dir = common::tmpdir();
    let path = dir.path().join("p.zarr");
    let (n, page_rows) = (20_000usize, 256usize);
    let samples = write(&path, n, page_rows as u64);
    let r = AtomicDataZarrReader::open(&path).unwrap();
    // Open reads the last page of each array.
    let at_open = r.pointer_bytes_held();
    assert!(at_open > 0 && at_open <= held_bound(1, page_rows), "{at_open} bytes at open");

    // Samples 5,000..7,000 in a scattered order: their pages, no others.
    let part: Vec<i64> = (5_000..7_000).rev().step_by(3).chain((5_000..7_000).step_by(3)).collect();
    let got = r.read_many(&part).unwrap();
    for (s, &i) in got.iter().zip(&part) {
        common::assert_sample_eq(&s.data, &samples[i as usize], &format!("sample {i}"));
    }
    let held = r.pointer_bytes_held();
    let bound = held_bound(pages_of(part.iter().map(|&i| i as usize), n, page_rows), page_rows);
    assert!(held <= bound, "{held} bytes held after reading 2,000 samples, bound {bound}");
    let whole = (2 * 8 * (n + 1)) as u64;
    assert!(held * 8 < whole, "{held} bytes held, the whole arrays are {whole}");

    // Every sample's counts, in an order that crosses every page boundary
    // both ways and evicts nothing (the store is small).
    for i in (0..n).rev().chain(0..n) {
        let want = (samples[i].num_atoms(), samples[i].num_edges());
        assert_eq!(r.sample_sizes(i).unwrap(), want, "sample {i}");
    }
    // Batches that straddle pages, against the written samples.
    let batches: Vec<Vec<usize>> = (0..n).step_by(97).map(|s| (s..(s + 300).min(n)).collect()).collect();
    let mut out = Vec::new();
    r.load_collated(&batches, &mut out).unwrap();
    for (b, batch) in batches.iter().zip(&out) {
        let want = atomzarr::CollatedBatch::from_samples(b, &b.iter().map(|&i| samples[i].clone()).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(batch.atoms_ptr, want.atoms_ptr, "batch from {}", b[0]);
        assert_eq!(batch.edges_ptr, want.edges_ptr, "batch from {}", b[0]);
        for (name, f) in &want.fields {
            assert_eq!(batch.fields[name].data, f.data, "batch from {}, field {name}", b[0]);
        }
    }
}

#[test]
fn deleted_samples_read_through_the_pages() {
    let dir = common::tmpdir();
    let path = dir.path().join("d.zarr");
    let (n, page_rows) = (6_000usize, 128usize);
    let samples = write(&path, n, page_rows as u64);
    let gone: Vec<usize> = (0..n).filter(|i| i % 7 == 3 || (1_000..1_300).contains(i)).collect();
    AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap().delete(&gone).unwrap();
    let kept: Vec<usize> = (0..n).filter(|i| !gone.contains(i)).collect();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(r.len(), kept.len());
    for (logical, &p) in kept.iter().enumerate() {
        assert_eq!(r.sample_sizes(logical).unwrap(), (samples[p].num_atoms(), samples[p].num_edges()));
    }
    let all: Vec<i64> = (0..kept.len() as i64).rev().collect();
    for (s, &i) in r.read_many(&all).unwrap().iter().zip(&all) {
        common::assert_sample_eq(&s.data, &samples[kept[i as usize]], &format!("logical {i}"));
    }
    // Blocks start at active samples only, in order, from 0.
    let blocks = atomzarr::source::ChunkedReader::chunk_blocks(&r);
    assert_eq!(blocks.first(), Some(&0));
    assert!(blocks.windows(2).all(|w| w[0] < w[1]) && blocks.last().is_some_and(|&b| b < kept.len()));
}

/// Pointers that decrease across a page boundary (each page in order on
/// its own) are refused by the read that meets them, naming the array;
/// the open succeeds (it reads the last pages only).
#[test]
fn pages_out_of_order_are_refused_when_read() {
    let dir = common::tmpdir();
    let path = dir.path().join("bad.zarr");
    let page_rows = 64u64;
    write(&path, 1_000, page_rows);
    // Page 3 rewritten with the values of page 1: in order within itself,
    // below page 2's.
    let c = |k: u64| path.join(format!("meta/atoms_ptr/c/{k}"));
    std::fs::copy(c(1), c(3)).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    let err = r.read_many(&[200, 210]).and_then(|_| r.read_many(&[130, 140])).unwrap_err().to_string();
    assert!(err.contains("meta/atoms_ptr") && err.contains("decrease"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
}

/// The bound: a 1M-structure store read by rank 3 of 8 under the
/// default shuffle (block pool) holds the pointer pages of its region
/// (with the default pages of 131,072 entries), not the store's 16 MB.
#[test]
fn a_rank_of_eight_holds_the_pointers_of_its_region() {
    let dir = common::disk_tmpdir();
    let path = dir.path().join("m.zarr");
    let n = 1_000_000usize;
    // Data chunks of 8,192 rows: enough blocks for a pool (pointer pages as
    // the library's default).
    let core = ZarrArrayConfig::default().with_chunk_size(8_192);
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(core)).unwrap();
    for part in 0..10 {
        let samples = atomzarr::data::synth::generate(n / 10, 2, 4, part).unwrap();
        if part == 0 { w.write(&samples) } else { w.append(&samples) }.unwrap();
    }
    drop(w);
    let page_rows = 131_072usize;
    let whole = (2 * 8 * (n + 1)) as u64;
    // A cache far below the store's decoded size: the block pool.
    let r =
        Arc::new(AtomicDataZarrReader::open_opt(&path, ReaderOptions::default().with_cache_bytes(4 << 20)).unwrap());
    let at_open = r.pointer_bytes_held();
    assert!(at_open <= held_bound(1, page_rows), "{at_open} bytes at open");
    let (rank, world, batch) = (3, 8, 64);
    let loader = DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(batch)
        .with_shuffle(true)
        .with_seed(5)
        .with_prefetch_factor(4)
        .with_rank(rank, world)
        .build(&Device::flex())
        .unwrap();
    let mut seen = BTreeSet::new();
    for b in loader.iter().take(100) {
        seen.extend(b.unwrap().indices.iter().copied());
    }
    // The region this rank draws from: one of eight equal stretches (its
    // reads ahead stay in it too).
    let q = seen.first().unwrap() * world / n;
    let region = n * q / world..n * (q + 1) / world;
    assert!(
        seen.iter().all(|i| region.contains(i)),
        "drew outside {region:?}: {:?}..={:?} ({} samples)",
        seen.first(),
        seen.last(),
        seen.len()
    );
    let held = r.pointer_bytes_held();
    let bound = held_bound(pages_of(region.clone(), n, page_rows), page_rows);
    assert!(held <= bound, "{held} bytes held, bound {bound} (region {region:?})");
    assert!(held * 4 < whole, "{held} bytes held, the whole arrays are {whole}");
}
