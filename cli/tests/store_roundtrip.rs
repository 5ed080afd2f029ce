//! Stores written by this crate read back exactly as written: every codec,
//! with and without sharding, custom fields at every level and dtype,
//! deletions, defragment. The on-disk layout and the dump are
//! `store_layout.rs`'s.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "store_model/mod.rs"]
mod store_model;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use atomzarr::store::format;
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Field, HostData, Level, Reader, ReaderExt,
    Shuffle, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use proptest::prelude::*;
use serde_json::json;
use store_model::*;

#[test]
fn every_codec_with_and_without_sharding_custom_fields_deletes_defragment() {
    for codec in all_codecs() {
        for shard in [None, Some(6), Some(9)] {
            let what = format!("{codec} shard {shard:?}");
            let dir = tmpdir();
            let path = dir.path().join("s.zarr");
            let data = samples(7, 17, 9, 14, &custom_extras(DType::Float16));
            let config = uniform(codec, 3, shard);
            let mut w = write_store(&path, config.clone(), &data[..10], &data[10..]);
            let mut m = Model { samples: data, ..Default::default() };
            let r = AtomicDataZarrReader::open(&path).unwrap();
            check_reader(&r, &m, &format!("{what}: written"));

            // Every array carries the configured codec and chunking.
            let root = format::read_root(&path).unwrap();
            let mut rels: Vec<String> = META.iter().map(|n| format!("meta/{n}")).collect();
            rels.extend(root.fields.iter().map(|(n, i)| format::field_path(i.group, n)));
            for rel in &rels {
                check_array_codecs(&path, rel, codec, 3, shard);
            }

            // Custom fields added afterwards, at every level.
            let mut rng = SplitMix(99);
            m.add_custom(&mut w, "c_atom", Level::Atom, DType::Int16, &[2], &mut rng);
            m.add_custom(&mut w, "c_edge", Level::Edge, DType::Float64, &[], &mut rng);
            m.add_custom(&mut w, "c_sys", Level::System, DType::UInt8, &[3], &mut rng);
            r.refresh().unwrap();
            check_reader(&r, &m, &format!("{what}: add_custom"));
            check_array_codecs(&path, "custom/c_edge", codec, 3, shard);

            // Appends must now carry the added fields too.
            let mut more = samples(8, 4, 6, 5, &custom_extras(DType::Float16));
            let mut rng = SplitMix(5);
            for s in &mut more {
                let (v, e) = (s.num_atoms(), s.num_edges());
                s.fields.insert(
                    "c_atom".into(),
                    Field::new(Level::Atom, vec![v, 2], host_data(DType::Int16, v * 2, &mut rng)).unwrap(),
                );
                s.fields.insert(
                    "c_edge".into(),
                    Field::new(Level::Edge, vec![e], host_data(DType::Float64, e, &mut rng)).unwrap(),
                );
                s.fields.insert(
                    "c_sys".into(),
                    Field::new(Level::System, vec![1, 3], host_data(DType::UInt8, 3, &mut rng)).unwrap(),
                );
            }
            w.append(&more).unwrap();
            m.samples.extend(more);
            r.refresh().unwrap();
            check_reader(&r, &m, &format!("{what}: appended after add_custom"));

            // Deletes (duplicates and already-deleted ones are fine).
            w.delete(&[0, 4, 4, 11]).unwrap();
            w.delete(&[11, 20]).unwrap();
            m.deleted.extend([0, 4, 11, 20]);
            r.refresh().unwrap();
            check_reader(&r, &m, &format!("{what}: deleted"));
            check_deleted_on_disk(&path, &m);

            // Defragment keeping every array's settings.
            w.defragment(None).unwrap();
            let survivors: Vec<AtomicData> = m.active().into_iter().map(|(_, s)| s.clone()).collect();
            let m2 = Model { samples: survivors, ..Default::default() };
            r.refresh().unwrap();
            check_reader(&r, &m2, &format!("{what}: defragmented"));
            check_deleted_on_disk(&path, &m2);
            for rel in &rels {
                check_array_codecs(&path, rel, codec, 3, shard);
            }
            check_array_codecs(&path, "custom/c_sys", codec, 3, shard);
        }
    }
}

/// The zarr.json of `rel` holds `codec`, chunked `chunk` rows (inner) and
/// `shard` rows (outer) along dimension 0, full extent elsewhere.

#[test]
fn custom_fields_of_every_dtype_at_every_level() {
    let dir = tmpdir();
    let path = dir.path().join("dtypes.zarr");
    let data = samples(21, 6, 4, 5, &Extras::default());
    let config = uniform(Codec::Zstd { level: 1 }, 2, Some(4));
    let mut w = write_store(&path, config, &data[..3], &data[3..]);
    let mut m = Model { samples: data, ..Default::default() };
    let mut rng = SplitMix(3);
    for dtype in DType::ALL {
        for (level, trailing) in [(Level::Atom, vec![]), (Level::Edge, vec![2]), (Level::System, vec![1, 2])] {
            let name = format!("x_{}_{}", dtype.name(), level.as_str());
            m.add_custom(&mut w, &name, level, dtype, &trailing, &mut rng);
        }
    }
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &m, "all dtypes");
    for dtype in DType::ALL {
        let rel = format!("custom/x_{}_atom", dtype.name());
        assert_eq!(zarr_json(&path, &rel)["data_type"], dtype.name());
    }
    // First-write custom fields of every dtype too (they go to custom/).
    for dtype in DType::ALL {
        let p = dir.path().join(format!("first_{}.zarr", dtype.name()));
        let extras = Extras { custom: vec![("c".into(), Level::Atom, dtype, vec![3])], full_core: false };
        let d = samples(dtype.size() as u64, 5, 4, 3, &extras);
        write_store(&p, uniform(Codec::None, 3, None), &d[..2], &d[2..]);
        assert!(p.join("custom/c/zarr.json").exists());
        let r = AtomicDataZarrReader::open(&p).unwrap();
        check_reader(&r, &Model { samples: d, ..Default::default() }, &format!("first write {dtype}"));
    }
}

#[test]
fn int32_neighbor_lists_and_stores_without_edges() {
    let dir = tmpdir();
    // int32 neighbor list: offsets applied in the array's own dtype.
    let p = dir.path().join("nl32.zarr");
    let mut rng = SplitMix(1);
    let data: Vec<AtomicData> = (0..5)
        .map(|i| {
            let n = 3 + i;
            let nl: Vec<i32> = (0..n as i32).flat_map(|a| [a, (a + 1) % n as i32]).collect();
            AtomicData::new(vec![6; n], (0..n).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect())
                .unwrap()
                .with_field("neighbor_list", Field::new(Level::Edge, vec![n, 2], nl).unwrap())
        })
        .collect();
    write_store(&p, uniform(Codec::Zstd { level: 0 }, 4, None), &data[..2], &data[2..]);
    let r = AtomicDataZarrReader::open(&p).unwrap();
    check_reader(&r, &Model { samples: data, ..Default::default() }, "int32 neighbor_list");
    let store = arrays::open_store(&p).unwrap();
    let raw: Vec<i32> = arrays::open_array(&atomzarr::Location::from(&p), &store, "core/neighbor_list")
        .unwrap()
        .retrieve_array_subset(&[3..6u64, 0..2])
        .unwrap();
    assert_eq!(raw, vec![3, 4, 4, 5, 5, 6], "sample 1 stored with offset 3");

    // No edges anywhere: edge arrays stay empty and everything still reads.
    let p = dir.path().join("noedges.zarr");
    let data = samples(2, 6, 4, 0, &Extras::default());
    assert!(data.iter().all(|s| s.num_edges() == 0));
    let mut w = write_store(
        &p,
        uniform(Codec::BloscZstd { clevel: 1, shuffle: Shuffle::Shuffle }, 2, Some(4)),
        &data[..1],
        &data[1..],
    );
    assert_eq!(zarr_json(&p, "core/neighbor_list")["shape"], json!([0, 2]));
    let mut m = Model { samples: data, ..Default::default() };
    let r = AtomicDataZarrReader::open(&p).unwrap();
    check_reader(&r, &m, "no edges");
    w.delete(&[1]).unwrap();
    m.deleted.insert(1);
    r.refresh().unwrap();
    check_reader(&r, &m, "no edges, deleted");
}

#[test]
fn defragment_with_a_new_config_and_of_an_all_deleted_store() {
    let dir = tmpdir();
    let path = dir.path().join("d.zarr");
    let data = samples(31, 12, 6, 8, &custom_extras(DType::Int8));
    let mut w = write_store(&path, uniform(Codec::None, 5, None), &data[..6], &data[6..]);
    w.delete(&[1, 2, 3, 10]).unwrap();
    let m = Model { samples: data.clone(), deleted: [1, 2, 3, 10].into() };
    let new = uniform(Codec::Gzip { level: 2 }, 2, Some(6));
    w.defragment(Some(new)).unwrap();
    let survivors: Vec<AtomicData> = m.active().into_iter().map(|(_, s)| s.clone()).collect();
    let m2 = Model { samples: survivors, ..Default::default() };
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &m2, "defragmented with a new config");
    check_deleted_on_disk(&path, &m2);
    let root = format::read_root(&path).unwrap();
    for (name, info) in &root.fields {
        check_array_codecs(&path, &format::field_path(info.group, name), Codec::Gzip { level: 2 }, 2, Some(6));
    }
    for mname in META {
        check_array_codecs(&path, &format!("meta/{mname}"), Codec::Gzip { level: 2 }, 2, Some(6));
    }
    // The new configuration is the writer's from now on.
    let mut rng = SplitMix(4);
    let mut m3 = m2.clone();
    m3.add_custom(&mut w, "after", Level::Atom, DType::Float32, &[], &mut rng);
    check_array_codecs(&path, "custom/after", Codec::Gzip { level: 2 }, 2, Some(6));
    r.refresh().unwrap();
    check_reader(&r, &m3, "add_custom after defragment");

    // Delete everything, defragment: an empty store that keeps its schema.
    let all: Vec<usize> = (0..m3.samples.len()).collect();
    w.delete(&all).unwrap();
    r.refresh().unwrap();
    assert_eq!(r.len(), 0);
    w.defragment(None).unwrap();
    r.refresh().unwrap();
    assert_eq!((r.len(), r.num_physical()), (0, 0));
    assert_eq!(r.schema().fields, AtomicDataZarrReader::open(&path).unwrap().schema().fields);
    assert!(r.schema().fields.contains_key("after") && r.schema().fields.contains_key("descriptor"));
    // The carried-over schema still binds appends.
    let bad = samples(1, 1, 3, 2, &custom_extras(DType::Int8));
    assert!(matches!(w.append(&bad), Err(atomzarr::Error::InvalidInput { .. })), "'after' is missing");
    let mut good = bad.clone();
    let v = good[0].num_atoms();
    good[0].fields.insert("after".into(), Field::new(Level::Atom, vec![v], vec![1.5f32; v]).unwrap());
    w.append(&good).unwrap();
    r.refresh().unwrap();
    check_reader(&r, &Model { samples: good, ..Default::default() }, "append after empty defragment");
}

fn codec_strategy() -> impl Strategy<Value = Codec> {
    prop_oneof![
        Just(Codec::None),
        (-3i32..6).prop_map(|level| Codec::Zstd { level }),
        (0u8..10).prop_map(|clevel| Codec::BloscLz4 { clevel, shuffle: Shuffle::Shuffle }),
        (0u8..10).prop_map(|clevel| Codec::BloscZstd { clevel, shuffle: Shuffle::NoShuffle }),
        (0u32..10).prop_map(|level| Codec::Gzip { level }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_stores_round_trip(
        seed in any::<u64>(),
        count in 0usize..9,
        max_atoms in 0usize..7,
        max_edges in 0usize..10,
        chunk in 1u64..6,
        shard_mult in 0u64..4,
        codec in codec_strategy(),
        dtype_ix in 0usize..13,
        level_ix in 0usize..3,
        trailing_ix in 0usize..3,
        split in 0usize..9,
        delete_bits in any::<u16>(),
        defrag in any::<bool>(),
    ) {
        let dtype = DType::ALL[dtype_ix];
        let level = [Level::Atom, Level::Edge, Level::System][level_ix];
        let trailing = [vec![], vec![3], vec![2, 1]][trailing_ix].clone();
        let extras = Extras { custom: vec![("x".into(), level, dtype, trailing)], full_core: seed % 2 == 0 };
        let data = samples(seed, count, max_atoms, max_edges, &extras);
        let shard = (shard_mult > 0).then_some(chunk * shard_mult);
        let dir = tmpdir();
        let path = dir.path().join("p.zarr");
        let split = split.min(count);
        let mut w = write_store(&path, uniform(codec, chunk, shard), &data[..split], &data[split..]);
        let mut m = Model { samples: data, ..Default::default() };
        let r = AtomicDataZarrReader::open(&path).unwrap();
        check_reader(&r, &m, "written");
        let del: Vec<usize> = (0..count).filter(|i| delete_bits & (1 << i) != 0).collect();
        w.delete(&del).unwrap();
        m.deleted.extend(del);
        r.refresh().unwrap();
        check_reader(&r, &m, "deleted");
        if count > 0 {
            check_deleted_on_disk(&path, &m);
        }
        if defrag {
            w.defragment(None).unwrap();
            let survivors: Vec<AtomicData> = m.active().into_iter().map(|(_, s)| s.clone()).collect();
            let m2 = Model { samples: survivors, ..Default::default() };
            r.refresh().unwrap();
            check_reader(&r, &m2, "defragmented");
        }
    }
}

#[test]
fn sharded_stores_with_unstored_inner_chunks_read_fill_values() {
    // Zarr writers skip all-fill (zero) inner chunks inside a shard; their
    // index entry is (2^64-1, 2^64-1). A zero-valued field and a deleted
    // (zeroed) run of samples both produce such chunks next to stored ones.
    for codec in [Codec::Zstd { level: 3 }, Codec::None, Codec::Gzip { level: 1 }] {
        let dir = tmpdir();
        let path = dir.path().join("holes.zarr");
        let mut rng = SplitMix(77);
        let mut data: Vec<AtomicData> = (0..16).map(|_| sample(&mut rng, 4, 3, &Extras::default())).collect();
        for (i, s) in data.iter_mut().enumerate() {
            // Zero for samples 0..6: shard 0 (samples 0..4) is all zero
            // (not stored), shard 1 holds two unstored inner chunks.
            let v = if i < 6 { 0.0f32 } else { i as f32 };
            s.fields.insert("mostly_zero".into(), Field::new(Level::Atom, vec![4], vec![v; 4]).unwrap());
        }
        let mut w = write_store(&path, uniform(codec, 4, Some(16)), &data[..5], &data[5..]);
        let inner_files = |rel: &str| std::fs::read_dir(path.join(rel).join("c")).map(|d| d.count()).unwrap_or(0);
        assert!(inner_files("custom/mostly_zero") > 0, "{codec}: some shards are stored");
        let mut m = Model { samples: data, ..Default::default() };
        let r = AtomicDataZarrReader::open(&path).unwrap();
        check_reader(&r, &m, &format!("{codec}: zero chunks"));
        // Delete samples 9 and 10: two whole inner chunks of shard 2 zeroed.
        w.delete(&[9, 10]).unwrap();
        m.deleted.extend([9, 10]);
        r.refresh().unwrap();
        check_reader(&r, &m, &format!("{codec}: zeroed by delete"));
        check_deleted_on_disk(&path, &m);
        r.clear_cache();
        check_reader(&r, &m, &format!("{codec}: cold cache"));
    }
}

#[test]
fn fields_with_a_zero_width_trailing_dimension_round_trip() {
    // [n, 0] arrays hold no bytes; Zarr chunk shapes must still be >= 1.
    for shard in [None, Some(4)] {
        let dir = tmpdir();
        let path = dir.path().join("zw.zarr");
        let mut rng = SplitMix(8);
        let data: Vec<AtomicData> = (0..5)
            .map(|i| {
                sample(&mut rng, 1 + i % 3, i % 2, &Extras::default())
                    .with_custom("empty_feat", Level::Atom, vec![1 + i % 3, 0], Vec::<f32>::new())
                    .unwrap()
                    .with_custom("empty_sys", Level::System, vec![1, 2, 0], Vec::<i64>::new())
                    .unwrap()
            })
            .collect();
        let mut w = write_store(&path, uniform(Codec::Zstd { level: 1 }, 2, shard), &data[..2], &data[2..]);
        let mut m = Model { samples: data, ..Default::default() };
        let r = AtomicDataZarrReader::open(&path).unwrap();
        check_reader(&r, &m, &format!("zero width, shard {shard:?}"));
        assert_eq!(zarr_json(&path, "custom/empty_feat")["shape"][1], 0);
        w.delete(&[1]).unwrap();
        m.deleted.insert(1);
        r.refresh().unwrap();
        check_reader(&r, &m, &format!("zero width, deleted, shard {shard:?}"));
    }
}

#[test]
fn an_empty_store_reads_dumps_and_inspects() {
    let dir = tmpdir();
    let path = dir.path().join("empty.zarr");
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap();
    w.write(&[]).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!((r.len(), r.num_physical()), (0, 0));
    assert!(r.schema().fields.is_empty());
    assert!(matches!(r.read(0), Err(atomzarr::Error::IndexOutOfRange { index: 0, len: 0, .. })));
    let (ok, stdout, stderr) = cli(&["dump", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), r#"{"num_samples": 0, "fields": {}, "samples": []}"#);
    let (ok, stdout, stderr) = cli(&["inspect", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("meta/atoms_ptr"), "{stdout}");
    assert_eq!(zarr_json(&path, "meta/atoms_ptr")["shape"], json!([1]));
    // Defragmenting an empty store is a no-op that keeps it usable.
    w.defragment(None).unwrap();
    let data = samples(1, 3, 3, 3, &Extras::default());
    w.write(&data).unwrap();
    r.refresh().unwrap();
    check_reader(&r, &Model { samples: data, ..Default::default() }, "written after an empty defragment");
}

#[test]
fn defragment_through_a_path_with_a_trailing_slash() {
    // "store.zarr/" names the same directory; the temporary and old copies
    // must still go beside it, not inside it.
    let dir = tmpdir();
    let path = dir.path().join("slash.zarr");
    let data = samples(9, 5, 3, 3, &Extras::default());
    write_store(&path, uniform(Codec::Zstd { level: 1 }, 2, None), &data, &[]);
    let with_slash = std::path::PathBuf::from(format!("{}/", path.display()));
    let mut w = AtomicDataZarrWriter::open(&with_slash, ZarrWriteConfig::default()).unwrap();
    w.delete(&[2]).unwrap();
    w.defragment(None).unwrap();
    let names: BTreeSet<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, BTreeSet::from(["slash.zarr".to_string()]));
    let inside: BTreeSet<String> =
        std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let lock = atomzarr::store::lock::LOCK_FILE;
    assert_eq!(inside, ["core", "custom", "meta", "zarr.json", lock].iter().map(|s| s.to_string()).collect());
    let mut m = Model { samples: data, ..Default::default() };
    m.samples.remove(2);
    check_reader(&AtomicDataZarrReader::open(&path).unwrap(), &m, "defragmented via a trailing slash");
}

/// `write_empty_chunks`: off (the default, as the toolkit writes) an array
/// whose chunks hold only the fill value has no chunk files; on, every chunk
/// is stored. Both read back as written.
#[test]
fn write_empty_chunks_decides_whether_all_fill_chunks_are_stored() {
    let dir = tmpdir();
    let data: Vec<AtomicData> = (0..12)
        .map(|i| {
            AtomicData::new(vec![1 + i as i64; 3], vec![[i as f32, 1.0, 2.0]; 3])
                .unwrap()
                .with_velocities(vec![[0.0; 3]; 3])
                .unwrap()
                .with_energy(i as f32)
        })
        .collect();
    for (keep, sharded) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut c = ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 1 })
            .with_chunk_size(4)
            .with_write_empty_chunks(keep);
        if sharded {
            c = c.with_shard_size(8);
        }
        let path = dir.path().join(format!("empty-{keep}-{sharded}.zarr"));
        let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(c)).unwrap();
        w.write(&data).unwrap();
        let (_, files) = format::disk_usage(&path.join("core/velocities/c"));
        let (_, energy_files) = format::disk_usage(&path.join("core/energy/c"));
        assert!(energy_files > 0, "{keep} {sharded}: data chunks are stored");
        if keep {
            assert!(files > 0, "sharded={sharded}: write_empty_chunks(true) stores all-zero chunks");
        } else {
            assert_eq!(files, 0, "sharded={sharded}: write_empty_chunks(false) stores no all-zero chunk");
        }
        assert_eq!(read_all(&AtomicDataZarrReader::open(&path).unwrap()), data, "{keep} {sharded}");
    }
}
