//! The Zarr reader's batched path against its per-sample path: every window
//! size, order and cache budget gives the same batches as collating
//! `read_many`; inner chunks that are not stored (all-fill, skipped by the
//! writer) read back as zeros; damaged shard indexes are errors, not panics;
//! int64 fields narrowed to int32 keep their values, and an array with a
//! value beyond int32 stays int64.

mod common;

use std::path::Path;

use atomzarr::data::CollateOptions;

use atomzarr::bench::{ReadOrder, read_order};
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, CollatedBatch, Error, Field, Level, ReaderExt,
    ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Structures whose `tag` custom field (one int32 per atom) is all zeros for
/// samples 40..80, so the sharded array's inner chunks over them hold only
/// the fill value and are not stored.
fn samples() -> Vec<AtomicData> {
    atomzarr::data::synth::generate(120, 3, 9, 5)
        .expect("generate")
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let n = s.num_atoms();
            let v = if (40..80).contains(&i) { 0 } else { i as i32 + 1 };
            s.with_field("tag", Field::new(Level::Atom, vec![n], vec![v; n]).expect("field"))
        })
        .collect()
}

fn write(path: &Path, samples: &[AtomicData]) {
    let sharded =
        ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(16).with_shard_size(64);
    let config = ZarrWriteConfig::default().with_core(sharded).with_custom(sharded);
    AtomicDataZarrWriter::create(path, config).expect("create").write(samples).expect("write");
}

fn collate(reader: &AtomicDataZarrReader, batches: &[Vec<i64>]) -> Vec<CollatedBatch> {
    batches
        .iter()
        .map(|b| {
            let got = reader.read_many(b).expect("read_many");
            let idx: Vec<usize> = got.iter().map(|s| s.metadata.index).collect();
            let data: Vec<AtomicData> = got.into_iter().map(|s| s.data).collect();
            CollatedBatch::from_samples(&idx, &data).expect("collate")
        })
        .collect()
}

#[test]
fn collated_windows_equal_per_sample_reads_in_every_order_and_cache_budget() {
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    let data = samples();
    write(&path, &data);
    // Some inner chunks of the custom field really are missing on disk.
    let tag_shard = std::fs::metadata(path.join("custom/tag/c/0")).expect("tag shard").len();
    let atom_shard = std::fs::metadata(path.join("core/atomic_numbers/c/0")).expect("atom shard").len();
    assert!(tag_shard < atom_shard, "tag shard {tag_shard} bytes vs {atom_shard}: zero chunks should be skipped");

    for cache_bytes in [0, 1 << 12, atomzarr::DEFAULT_CACHE_BYTES] {
        let reader = AtomicDataZarrReader::open_opt(&path, ReaderOptions::default().with_cache_bytes(cache_bytes))
            .expect("open");
        for s in reader.read_many(&(0..data.len() as i64).collect::<Vec<_>>()).expect("read all") {
            assert_eq!(s.data, data[s.metadata.index], "sample {} (cache {cache_bytes})", s.metadata.index);
        }
        for order in [ReadOrder::Sequential, ReadOrder::Shuffle, ReadOrder::BlockShuffle] {
            let o = read_order(data.len(), order, 3, 7).expect("order");
            for (window, batch) in [(1, 1), (13, 5), (64, 16), (120, 32)] {
                let (mut out, mut narrowed) = (Vec::new(), Vec::new());
                for w in o.chunks(window) {
                    let batches: Vec<Vec<i64>> =
                        w.chunks(batch).map(|b| b.iter().map(|&i| i as i64).collect()).collect();
                    reader.read_collated(&batches, &mut out).expect("read_collated");
                    let what = format!("{order:?} window {window} cache {cache_bytes}");
                    assert_eq!(out, collate(&reader, &batches), "{what}");
                    reader.read_collated_opt(&batches, narrow(), &mut narrowed).expect("read_collated narrowed");
                    for (n, w) in narrowed.iter().zip(&out) {
                        common::assert_narrowed_eq(n, w, &["atomic_numbers", "neighbor_list"], &what);
                    }
                }
            }
        }
    }
}

fn narrow() -> CollateOptions {
    CollateOptions::default().with_narrow_int64(true)
}

#[test]
fn an_int64_array_with_values_beyond_int32_is_read_wide_from_then_on() {
    let dir = common::tmpdir();
    let path = dir.path().join("big.zarr");
    // `big` (int64, one per atom) fits int32 for samples 0..60 and holds
    // values near 2^40 from sample 100 on: its early chunks narrow, the late
    // ones cannot.
    let data: Vec<AtomicData> = samples()
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let n = s.num_atoms();
            let v = if i < 100 { i as i64 - 50 } else { (1i64 << 40) + i as i64 };
            s.with_field("big", Field::new(Level::Atom, vec![n], vec![v; n]).expect("field"))
        })
        .collect();
    write(&path, &data);
    for cache_bytes in [0, atomzarr::DEFAULT_CACHE_BYTES] {
        let reader = AtomicDataZarrReader::open_opt(&path, ReaderOptions::default().with_cache_bytes(cache_bytes))
            .expect("open");
        let early: Vec<Vec<i64>> = vec![(0..10).collect(), (50..60).collect()];
        let mixed: Vec<Vec<i64>> = vec![(0..10).collect(), vec![110, 3, 119]];
        let (mut wide, mut out) = (Vec::new(), Vec::new());
        let what = format!("cache {cache_bytes}");

        reader.read_collated(&early, &mut wide).expect("wide");
        reader.read_collated_opt(&early, narrow(), &mut out).expect("early");
        for (n, w) in out.iter().zip(&wide) {
            common::assert_narrowed_eq(n, w, &["atomic_numbers", "neighbor_list", "big"], &format!("{what} early"));
        }
        // The first batch touching a value beyond int32 reads `big` wide,
        // exactly; the other int64 fields stay narrowed.
        reader.read_collated(&mixed, &mut wide).expect("wide");
        reader.read_collated_opt(&mixed, narrow(), &mut out).expect("mixed");
        for (n, w) in out.iter().zip(&wide) {
            common::assert_narrowed_eq(n, w, &["atomic_numbers", "neighbor_list"], &format!("{what} mixed"));
        }
        assert_eq!(out[1].fields["big"].data.to_i64_vec().expect("ints")[0], (1i64 << 40) + 110);
        // From then on the array is read wide, so an epoch's batches agree.
        reader.read_collated(&early, &mut wide).expect("wide");
        reader.read_collated_opt(&early, narrow(), &mut out).expect("early again");
        for (n, w) in out.iter().zip(&wide) {
            common::assert_narrowed_eq(n, w, &["atomic_numbers", "neighbor_list"], &format!("{what} early again"));
        }
    }
    // Readers without a fused path narrow in a host pass, by the same rule
    // (per batch: there is no array to remember).
    let mem = atomzarr::InMemoryReader::from_samples(&data, "mem").expect("in memory");
    let (mut wide, mut out) = (Vec::new(), Vec::new());
    let mixed: Vec<Vec<usize>> = vec![(0..10).collect(), vec![110, 3, 119]];
    mem.load_collated(&mixed, &mut wide).expect("wide");
    mem.load_collated_opt(&mixed, narrow(), &mut out).expect("narrow");
    common::assert_narrowed_eq(&out[0], &wide[0], &["atomic_numbers", "neighbor_list", "big"], "in memory, fits");
    common::assert_narrowed_eq(&out[1], &wide[1], &["atomic_numbers", "neighbor_list"], "in memory, beyond int32");
}

/// Overwrites bytes of `file` starting `from_end` bytes before its end.
fn clobber_tail(file: &Path, from_end: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(file).expect("open shard");
    f.seek(SeekFrom::End(-(from_end as i64))).expect("seek");
    f.write_all(bytes).expect("write");
}

#[test]
fn damaged_shard_indexes_are_errors_not_panics() {
    let dir = common::tmpdir();
    let data = samples();
    // 4 inner chunks per shard: the index is 4 * 16 bytes + a 4-byte crc32c.
    type Damage = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Damage)> = vec![
        ("crc", Box::new(|f: &Path| clobber_tail(f, 2, &[0xAB]))),
        ("entry", Box::new(|f: &Path| clobber_tail(f, 4 + 16 * 4, &u64::MAX.to_le_bytes()[..7]))),
        (
            "truncated",
            Box::new(|f: &Path| {
                let len = std::fs::metadata(f).expect("len").len();
                std::fs::OpenOptions::new().write(true).open(f).expect("open").set_len(len.min(40)).expect("truncate");
            }),
        ),
    ];
    for (name, damage) in cases {
        let path = dir.path().join(format!("{name}.zarr"));
        write(&path, &data);
        damage(&path.join("core/positions/c/0/0"));
        let reader = AtomicDataZarrReader::open_opt(&path, ReaderOptions::default().with_cache_bytes(0)).expect("open");
        let all: Vec<Vec<i64>> = vec![(0..data.len() as i64).collect()];
        match reader.read_collated(&all, &mut Vec::new()) {
            // An index that no longer matches its crc32c is a checksum error.
            Err(Error::Checksum { array, .. }) if name != "truncated" => assert_eq!(array, "core/positions", "{name}"),
            Err(Error::Chunk { array, .. } | Error::Zarr { array, .. }) if name == "truncated" => {
                assert_eq!(array, "core/positions", "{name}")
            }
            other => panic!("{name}: expected a chunk error, got {other:?}"),
        }
    }
}

#[test]
fn cache_counts_each_chunk_decode_once_and_hits_after() {
    let dir = common::tmpdir();
    let path = dir.path().join("c.zarr");
    let data = samples();
    write(&path, &data);
    let reader = AtomicDataZarrReader::open(&path).expect("open");
    let all: Vec<Vec<i64>> = (0..data.len() as i64).collect::<Vec<_>>().chunks(16).map(<[i64]>::to_vec).collect();
    let mut out = Vec::new();
    reader.read_collated(&all, &mut out).expect("first");
    let first = reader.cache_stats();
    assert!(first.misses > 0 && first.bytes > 0);
    reader.read_collated(&all, &mut out).expect("second");
    let second = reader.cache_stats();
    assert_eq!(second.misses, first.misses, "the second pass decodes nothing");
    assert!(second.hits > first.hits);
}
