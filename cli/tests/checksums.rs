//! Per-chunk checksums: every chunk atomzarr writes ends in a crc32c, and a
//! flipped byte anywhere in a chunk the reader needs (or in a shard index) is
//! a typed [`Error::Checksum`] naming the store, the array and the chunk, on
//! `read_many` and on the collated path alike, whatever the codec and layout.
//!
//! The chunks and byte ranges to damage are found from the files and the
//! shard indexes themselves (parsed here, independently of the reader), and
//! what the reader returns for an undamaged store is compared with the
//! samples written (and with `CollatedBatch::from_samples` of them).
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

#[path = "../../tests/common/mod.rs"]
mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};

use atomzarr::store::format::StoreGroup;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, CollatedBatch, DType, Error, Level, Reader,
    ReaderExt, ReaderOptions, Shuffle, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use serde_json::{Value, json};

const N: usize = 12;

/// N samples, none empty, with custom fields at the atom and system levels.
fn data() -> Vec<AtomicData> {
    let extras = Extras {
        custom: vec![
            ("tag".into(), Level::System, DType::Int32, vec![]),
            ("charge_density".into(), Level::Atom, DType::Float64, vec![1]),
        ],
        full_core: true,
    };
    let mut rng = SplitMix(7);
    (0..N)
        .map(|_| {
            let atoms = 1 + rng.below(6) as usize;
            let edges = 1 + rng.below(8) as usize;
            sample(&mut rng, atoms, edges, &extras)
        })
        .collect()
}

/// `codec` with 4-row chunks (and `shard`-row shards) on every group.
fn config(codec: Codec, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(4);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// Writes `data` in two calls (a write and an append, so tail chunks and
/// metadata are rewritten).
fn write(path: &Path, config: ZarrWriteConfig, data: &[AtomicData]) {
    let mut w = AtomicDataZarrWriter::create(path, config).unwrap();
    w.write(&data[..5]).unwrap();
    w.append(&data[5..]).unwrap();
}

fn open(path: &Path) -> AtomicDataZarrReader {
    AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0)).unwrap()
}

/// Batches of up to 5 logical indices covering every sample.
fn batches() -> Vec<Vec<usize>> {
    (0..N).collect::<Vec<_>>().chunks(5).map(<[usize]>::to_vec).collect()
}

/// The reader returns exactly `data`, one sample at a time and collated.
fn assert_reads_back(path: &Path, data: &[AtomicData], what: &str) {
    let r = open(path);
    let got = read_all(&r);
    assert_eq!(got.len(), data.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(data).enumerate() {
        assert_sample_eq(g, w, &format!("{what}, sample {i}"));
    }
    let mut out = Vec::new();
    open(path).load_collated(&batches(), &mut out).unwrap();
    for (b, idx) in out.iter().zip(batches()) {
        let picked: Vec<AtomicData> = idx.iter().map(|&i| data[i].clone()).collect();
        assert_eq!(b, &CollatedBatch::from_samples(&idx, &picked).unwrap(), "{what}: collated batch {idx:?}");
    }
}

/// One stretch of bytes covered by one checksum: an unsharded chunk file, an
/// inner chunk of a shard, or a shard's index.
#[derive(Debug)]
struct Unit {
    file: PathBuf,
    bytes: Range<usize>,
    /// The chunk (inner chunk) index along dimension 0 the reader reports:
    /// for a shard index, the shard's first inner chunk.
    chunk: u64,
    what: String,
}

/// Every checksummed stretch of array `rel`, found from its files.
fn units(store: &Path, rel: &str) -> Vec<Unit> {
    let meta = zarr_json(store, rel);
    let codecs = meta["codecs"].as_array().unwrap();
    let sharding = (codecs[0]["name"] == "sharding_indexed").then(|| &codecs[0]["configuration"]);
    let mut out = Vec::new();
    let mut stack = vec![store.join(rel).join("c")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // Keys are `c/<i0>/<i1>...`: the first index is the chunk (shard) along dimension 0.
            let tail = p.strip_prefix(store.join(rel).join("c")).unwrap();
            let i0: u64 = tail.components().next().unwrap().as_os_str().to_str().unwrap().parse().unwrap();
            let len = std::fs::metadata(&p).unwrap().len() as usize;
            let Some(conf) = sharding else {
                out.push(Unit { file: p.clone(), bytes: 0..len, chunk: i0, what: format!("{rel} chunk {i0}") });
                continue;
            };
            let outer = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap();
            let per = outer / conf["chunk_shape"][0].as_u64().unwrap();
            assert_eq!(conf["index_location"], "end");
            assert_eq!(conf["index_codecs"][1], json!({"name": "crc32c"}));
            let index_len = per as usize * 16 + 4;
            let raw = std::fs::read(&p).unwrap();
            let index = &raw[len - index_len..];
            for j in 0..per as usize {
                let word = |k: usize| u64::from_le_bytes(index[16 * j + 8 * k..16 * j + 8 * k + 8].try_into().unwrap());
                let (offset, size) = (word(0), word(1));
                if offset == u64::MAX && size == u64::MAX {
                    continue; // not stored (fill value)
                }
                let chunk = i0 * per + j as u64;
                let bytes = offset as usize..(offset + size) as usize;
                out.push(Unit { file: p.clone(), bytes, chunk, what: format!("{rel} shard {i0} inner chunk {chunk}") });
            }
            out.push(Unit {
                file: p.clone(),
                bytes: len - index_len..len,
                chunk: i0 * per,
                what: format!("{rel} shard {i0} index"),
            });
        }
    }
    out.sort_by(|a, b| (&a.file, a.bytes.start).cmp(&(&b.file, b.bytes.start)));
    out
}

/// `e` is the checksum error of chunk `chunk` of `rel` in `path`.
fn assert_checksum_error(e: &Error, path: &Path, rel: &str, chunk: u64, what: &str) {
    match e {
        Error::Checksum { store, array, chunk: c, .. } => {
            assert_eq!(*store, atomzarr::Location::from(path), "{what}");
            assert_eq!(array, rel, "{what}");
            assert_eq!(*c, chunk, "{what}: chunk");
        }
        e => panic!("{what}: expected a checksum error, got {e:?}"),
    }
    let msg = e.to_string();
    for part in [path.to_str().unwrap(), rel, &format!("chunk {chunk}"), "checksum"] {
        assert!(msg.contains(part), "{what}: {msg:?} does not say {part:?}");
    }
}

/// Reading every sample of `path` (open, `read_many`, then `load_collated`
/// with a fresh reader) fails with the checksum error of `rel` chunk `chunk`.
fn assert_reads_fail(path: &Path, rel: &str, chunk: u64, what: &str) {
    let r = match AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0)) {
        Err(e) => {
            // The sample mask and the pointers' last pages are read when
            // the store opens.
            assert!(rel.starts_with("meta/"), "{what}: open failed: {e}");
            assert_verify_finds(path, &e);
            return assert_checksum_error(&e, path, rel, chunk, what);
        }
        Ok(r) => r,
    };
    // Other pointer pages are read when a read needs them.
    assert!(!rel.starts_with("meta/") || rel.ends_with("_ptr"), "{what}: the store opened");
    let all: Vec<i64> = (0..N as i64).collect();
    match r.read_many(&all) {
        Err(e) => {
            assert_verify_finds(path, &e);
            assert_checksum_error(&e, path, rel, chunk, &format!("{what}, read_many"));
        }
        Ok(_) => panic!("{what}: read_many succeeded"),
    }
    let mut out = Vec::new();
    match open(path).load_collated(&batches(), &mut out) {
        Err(e) => assert_checksum_error(&e, path, rel, chunk, &format!("{what}, load_collated")),
        Ok(()) => panic!("{what}: load_collated succeeded"),
    }
}

/// Arrays a full read needs. `meta/atoms_mask` and `meta/edges_mask` are
/// written (and checksummed) but never read: the sample mask says the same.
fn read_arrays(path: &Path) -> Vec<String> {
    let mut rels = vec!["meta/atoms_ptr".to_string(), "meta/edges_ptr".into(), "meta/samples_mask".into()];
    for g in ["core", "custom"] {
        let mut names: Vec<String> = std::fs::read_dir(path.join(g))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().is_dir())
            .map(|e| format!("{g}/{}", e.file_name().to_str().unwrap()))
            .collect();
        names.sort();
        rels.extend(names);
    }
    rels
}

/// For each layout: the store reads back exactly; then one byte at a time
/// (first, middle and last byte of every chunk, inner chunk and shard index
/// of every array a read needs) is flipped, and reading must fail with the
/// checksum error of that array and chunk; the byte is restored after.
fn flip_every_chunk(codec: Codec) {
    let dir = tmpdir();
    let data = data();
    for shard in [None, Some(8)] {
        let what = format!("{codec}, shard {shard:?}");
        let path = dir.path().join(format!("s{}.zarr", shard.unwrap_or(0)));
        write(&path, config(codec, shard), &data);
        assert_reads_back(&path, &data, &what);
        let mut flipped = 0;
        for rel in read_arrays(&path) {
            let chain = zarr_json(&path, &rel)["codecs"].clone();
            let inner = if shard.is_some() { chain[0]["configuration"]["codecs"].clone() } else { chain };
            assert_eq!(
                inner.as_array().unwrap().last(),
                Some(&json!({"name": "crc32c"})),
                "{what}: {rel} ends in crc32c"
            );
            let us = units(&path, &rel);
            assert!(!us.is_empty(), "{what}: {rel} has no chunk");
            for u in us {
                let original = std::fs::read(&u.file).unwrap();
                for at in [u.bytes.start, (u.bytes.start + u.bytes.end) / 2, u.bytes.end - 1] {
                    let mut bad = original.clone();
                    bad[at] ^= 0x10;
                    std::fs::write(&u.file, &bad).unwrap();
                    assert_reads_fail(&path, &rel, u.chunk, &format!("{what}: {} byte {at}", u.what));
                    flipped += 1;
                }
                std::fs::write(&u.file, &original).unwrap();
            }
        }
        assert!(flipped > 50, "{what}: only {flipped} flips");
        // Every byte restored: the store reads back exactly again.
        assert_reads_back(&path, &data, &format!("{what}, restored"));
    }
}

#[test]
fn flipped_bytes_are_checksum_errors_zstd() {
    flip_every_chunk(Codec::Zstd { level: 3 });
}

#[test]
fn flipped_bytes_are_checksum_errors_uncompressed() {
    flip_every_chunk(Codec::None);
}

#[test]
fn flipped_bytes_are_checksum_errors_blosc() {
    flip_every_chunk(Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle });
}

#[test]
fn flipped_bytes_are_checksum_errors_gzip() {
    flip_every_chunk(Codec::Gzip { level: 5 });
}

#[test]
fn default_config_store_has_checksums_and_refuses_flips() {
    let dir = tmpdir();
    let data = data();
    let path = dir.path().join("default.zarr");
    write(&path, ZarrWriteConfig::default(), &data);
    assert_reads_back(&path, &data, "default config");
    for rel in read_arrays(&path) {
        for u in units(&path, &rel) {
            let original = std::fs::read(&u.file).unwrap();
            let mut bad = original.clone();
            bad[(u.bytes.start + u.bytes.end) / 2] ^= 0x01;
            std::fs::write(&u.file, &bad).unwrap();
            assert_reads_fail(&path, &rel, u.chunk, &format!("default config: {}", u.what));
            std::fs::write(&u.file, &original).unwrap();
        }
    }
}

/// The motivating bug: without a checksum, flipping a byte of a zstd chunk
/// can decode into different numbers with no error; with one, no flip of any
/// byte of the chunk reads at all.
#[test]
fn without_checksums_flipped_zstd_bytes_read_as_wrong_data_with_them_never() {
    let dir = tmpdir();
    let data = data();
    let one_chunk = |checksum: bool| {
        let c = ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(1024)
            .with_checksum(checksum);
        ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
    };
    let mut outcomes = Vec::new();
    for checksum in [false, true] {
        let path = dir.path().join(format!("c{checksum}.zarr"));
        write(&path, one_chunk(checksum), &data);
        assert_reads_back(&path, &data, &format!("checksum {checksum}"));
        let file = path.join("core/positions/c/0/0");
        let original = std::fs::read(&file).unwrap();
        let (mut wrong, mut refused, mut same) = (0, 0, 0);
        for at in 0..original.len() {
            let mut bad = original.clone();
            bad[at] ^= 0x04;
            std::fs::write(&file, &bad).unwrap();
            let r = open(&path);
            match r.read_many(&(0..N as i64).collect::<Vec<_>>()) {
                Ok(got) => {
                    let got: Vec<AtomicData> = got.into_iter().map(|s| s.data).collect();
                    if got == data { same += 1 } else { wrong += 1 }
                }
                Err(e) => {
                    if checksum {
                        assert_checksum_error(&e, &path, "core/positions", 0, &format!("byte {at}"));
                    }
                    refused += 1;
                }
            }
        }
        std::fs::write(&file, &original).unwrap();
        outcomes.push((checksum, wrong, refused, same, original.len()));
    }
    eprintln!("(checksum, wrong, refused, same, bytes): {outcomes:?}");
    let (_, wrong, _, _, _) = outcomes[0];
    assert!(wrong > 0, "without checksums some flip should read as wrong data silently: {outcomes:?}");
    let (_, wrong, refused, same, len) = outcomes[1];
    assert_eq!((wrong, same, refused), (0, 0, len), "with checksums every flip is refused: {outcomes:?}");
}

/// A chunk whose zstd frame carries zstd's own checksum (what the toolkit
/// writes with `ZstdCodec(checksum=True)`) and no longer matches it is a
/// checksum error too.
#[test]
fn zstd_frame_checksum_mismatch_is_a_checksum_error() {
    let dir = tmpdir();
    let data = data();
    let path = dir.path().join("zstd_frame.zarr");
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(1024).with_checksum(false);
    write(&path, ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c), &data);
    // Re-encode positions' chunk with a frame checksum, as the metadata now says.
    let file = path.join("core/positions/c/0/0");
    let decoded = zstd::decode_all(&std::fs::read(&file).unwrap()[..]).unwrap();
    let mut enc = zstd::bulk::Compressor::new(3).unwrap();
    enc.include_checksum(true).unwrap();
    let framed = enc.compress(&decoded).unwrap();
    std::fs::write(&file, &framed).unwrap();
    let zj = path.join("core/positions/zarr.json");
    let mut meta = json(&zj);
    meta["codecs"][1]["configuration"]["checksum"] = Value::Bool(true);
    std::fs::write(&zj, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    assert_reads_back(&path, &data, "zstd frame checksum");
    // The last 4 bytes are the frame checksum; flip a byte of the content before it.
    let mut refused = 0;
    for at in framed.len() / 2..framed.len() {
        let mut bad = framed.clone();
        bad[at] ^= 0x01;
        std::fs::write(&file, &bad).unwrap();
        match open(&path).read_many(&(0..N as i64).collect::<Vec<_>>()) {
            Err(e @ Error::Checksum { .. }) => {
                assert_checksum_error(&e, &path, "core/positions", 0, &format!("byte {at}"));
                refused += 1;
            }
            Err(_) => {} // a frame zstd cannot parse at all
            Ok(got) => {
                let got: Vec<AtomicData> = got.into_iter().map(|s| s.data).collect();
                assert!(got == data, "byte {at}: a flip read as different data despite the frame checksum");
            }
        }
    }
    assert!(refused > 0, "no flip gave a zstd checksum error");
}

/// The knob layers like the other settings, is what `infer_config` and
/// `inspect` report, survives `defragment(None)`, and a checksum-free store
/// reads back the same.
#[test]
fn checksum_knob_layers_and_survives_defragment() {
    let dir = tmpdir();
    let data = data();
    let path = dir.path().join("knob.zarr");
    let config = ZarrWriteConfig::default()
        .with_core(ZarrArrayConfig::default().with_chunk_size(4).with_shard_size(8).with_checksum(false))
        .with_override("energy", ZarrArrayConfig::default().with_checksum(true))
        .with_custom(ZarrArrayConfig::default().with_codec(Codec::None).with_checksum(false));
    assert!(!config.resolve(StoreGroup::Core, "positions").checksum);
    assert!(config.resolve(StoreGroup::Core, "energy").checksum);
    assert!(config.resolve(StoreGroup::Meta, "atoms_ptr").checksum);
    write(&path, config, &data);
    let want = |rel: &str| rel.starts_with("meta/") || rel == "core/energy";
    let check = |what: &str| {
        let report = atomzarr::store::inspect::inspect(&path).unwrap();
        assert!(report.arrays.len() > 10, "{what}");
        for a in &report.arrays {
            assert_eq!(a.config.checksum(), Some(want(&a.path)), "{what}: {} as inspect reports it", a.path);
            let meta = zarr_json(&path, &a.path);
            let codecs = meta["codecs"].as_array().unwrap();
            let inner = match codecs[0]["name"].as_str() {
                Some("sharding_indexed") => codecs[0]["configuration"]["codecs"].as_array().unwrap(),
                _ => codecs,
            };
            assert_eq!(
                inner.last() == Some(&json!({"name": "crc32c"})),
                want(&a.path),
                "{what}: {} chain {inner:?}",
                a.path
            );
            // zarr-python 3.1 refuses a codec given as a bare string.
            assert!(codecs.iter().all(Value::is_object), "{what}: {} codecs {codecs:?}", a.path);
        }
        assert_reads_back(&path, &data, what);
    };
    check("written");
    let (ok, stdout, stderr) = cli(&["inspect", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let line =
        |rel: &str| stdout.lines().find(|l| l.contains(rel)).unwrap_or_else(|| panic!("{rel} in {stdout}")).to_string();
    assert!(line("core/energy").contains("crc32c") && line("core/positions").contains("none"), "{stdout}");
    let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    w.defragment(None).unwrap();
    check("defragmented with the store's own settings");
}

/// An append that rewrites a corrupt tail chunk fails instead of
/// re-encoding the corrupt bytes under a fresh, matching checksum; the
/// corruption stays detectable. (The writer reads the tail from the store:
/// it was opened after the rows were written.)
#[test]
fn append_does_not_launder_a_corrupt_tail_chunk() {
    let dir = tmpdir();
    let data = data();
    for shard in [None, Some(8)] {
        let what = format!("shard {shard:?}");
        let path = dir.path().join(format!("a{}.zarr", shard.unwrap_or(0)));
        let config = config(Codec::Zstd { level: 3 }, shard);
        AtomicDataZarrWriter::create(&path, config.clone()).unwrap().write(&data[..7]).unwrap();
        let mut w = AtomicDataZarrWriter::open(&path, config).unwrap();
        // The last (inner) chunk of positions, which the append extends.
        let rows = zarr_json(&path, "core/positions")["shape"][0].as_u64().unwrap();
        assert!(!rows.is_multiple_of(4), "{what}: the tail chunk must be partial for the append to rewrite it");
        let tail = (rows - 1) / 4;
        let unit =
            units(&path, "core/positions").into_iter().find(|u| u.chunk == tail && !u.what.contains("index")).unwrap();
        let mut bytes = std::fs::read(&unit.file).unwrap();
        bytes[(unit.bytes.start + unit.bytes.end) / 2] ^= 0x08;
        std::fs::write(&unit.file, &bytes).unwrap();
        let e = w.append(&data[7..]).expect_err("append over a corrupt tail chunk");
        let msg = e.to_string();
        assert!(msg.contains("core/positions") && msg.contains("checksum"), "{what}: {msg}");
        eprintln!("{what}: append over a corrupt tail chunk: {msg}");
        drop(w);
        // The store still holds the first 7 samples, and the damage is still found.
        let r = open(&path);
        assert_eq!(r.len(), 7, "{what}");
        let e = r.read_many(&(0..7).collect::<Vec<_>>()).expect_err("read of the corrupt chunk");
        assert_checksum_error(&e, &path, "core/positions", tail, &what);
    }
}

/// The writer that wrote a tail chunk keeps its rows and rewrites the chunk
/// from them on the next append: a corruption of the file since is replaced
/// by the committed rows (it is never decoded, nor written back).
#[test]
fn a_kept_tail_rewrites_a_chunk_corrupted_since_from_the_committed_rows() {
    let dir = tmpdir();
    let data = data();
    let path = dir.path().join("kept.zarr");
    let mut w = AtomicDataZarrWriter::create(&path, config(Codec::Zstd { level: 3 }, None)).unwrap();
    w.write(&data[..7]).unwrap();
    let rows = zarr_json(&path, "core/positions")["shape"][0].as_u64().unwrap();
    let tail = (rows - 1) / 4;
    let unit = units(&path, "core/positions").into_iter().find(|u| u.chunk == tail).unwrap();
    let mut bytes = std::fs::read(&unit.file).unwrap();
    bytes[(unit.bytes.start + unit.bytes.end) / 2] ^= 0x08;
    std::fs::write(&unit.file, &bytes).unwrap();
    let e = open(&path).read_many(&(0..7).collect::<Vec<_>>()).expect_err("read of the corrupt chunk");
    assert_checksum_error(&e, &path, "core/positions", tail, "corrupted before the append");
    w.append(&data[7..]).unwrap();
    assert_reads_back(&path, &data, "the tail chunk rewritten from the kept rows");
}
