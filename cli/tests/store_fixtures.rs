//! Reference stores written by the Python toolkit (`assets/*.zarr`) read back
//! exactly as `assets/*.expected.json` says, through the library and the CLI.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;

use atomzarr::store::format;
use atomzarr::testing as arrays;
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Level, Reader, ReaderExt, ReaderOptions, ZarrWriteConfig};
use common::*;
use serde_json::Value;

fn expected(name: &str) -> (String, Value) {
    let text = std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    (text, v)
}

fn check_against_expected(r: &AtomicDataZarrReader, want: &Value, what: &str) {
    let samples = want["samples"].as_array().unwrap();
    assert_eq!(
        want["num_samples"].as_u64().unwrap() as usize,
        samples.len(),
        "{what}: expected.json is self-consistent"
    );
    assert_eq!(r.len(), samples.len(), "{what}: logical sample count");
    let levels: BTreeMap<String, String> =
        r.schema().fields.into_iter().map(|(k, v)| (k, v.as_str().to_string())).collect();
    let want_levels: BTreeMap<String, String> =
        want["fields"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
    assert_eq!(levels, want_levels, "{what}: fields map");
    for (k, s) in read_all(r).iter().enumerate() {
        assert_sample_matches_json(s, &samples[k], &format!("{what}, sample {k}"));
    }
}

#[test]
fn every_fixture_reads_exactly_as_expected() {
    for name in fixture_names() {
        let (_, want) = expected(&name);
        let r = AtomicDataZarrReader::open(assets().join(format!("{name}.zarr"))).unwrap();
        check_against_expected(&r, &want, &name);
    }
}

/// The collated path, wide and narrowed to int32 (as the DataLoader reads
/// for int32 devices), agrees with read_many, twice (the second pass partly
/// from the cache).
fn check_collated(r: &AtomicDataZarrReader, idx: &[i64], what: &str) {
    let batches: Vec<Vec<i64>> = idx.chunks(5).map(<[i64]>::to_vec).collect();
    let (mut wide, mut narrow) = (Vec::new(), Vec::new());
    let opts = atomzarr::data::CollateOptions::default().with_narrow_int64(true);
    for pass in 0..2 {
        r.read_collated_opt(&batches, opts, &mut narrow).unwrap();
        r.read_collated(&batches, &mut wide).unwrap();
        let int64: Vec<&str> = wide[0]
            .fields
            .iter()
            .filter(|(_, f)| f.data.dtype() == atomzarr::DType::Int64)
            .map(|(k, _)| k.as_str())
            .collect();
        assert!(int64.contains(&"atomic_numbers"), "{what}: atomic_numbers is int64");
        for (k, b) in batches.iter().enumerate() {
            let got = r.read_many(b).unwrap();
            let idx: Vec<usize> = got.iter().map(|s| s.metadata.index).collect();
            let data: Vec<_> = got.into_iter().map(|s| s.data).collect();
            let what = format!("{what} pass {pass} batch {k}");
            assert_eq!(wide[k], atomzarr::CollatedBatch::from_samples(&idx, &data).unwrap(), "{what}");
            assert_narrowed_eq(&narrow[k], &wide[k], &int64, &what);
        }
    }
}

#[test]
fn fixtures_read_in_any_order_with_and_without_cache() {
    for name in fixture_names() {
        let (_, want) = expected(&name);
        let samples = want["samples"].as_array().unwrap();
        let n = samples.len() as i64;
        // Batches refuse the appended half (the toolkit's append bug, see
        // below): they are checked on the first-write half here and on a
        // repaired copy in full.
        let dir = tmpdir();
        let repaired = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &repaired);
        let fixed = atomzarr::store::repair::repair(&repaired).unwrap();
        assert!(fixed.num_fixed() > 0 && fixed.unfixed.is_empty(), "{name}: {fixed:?}");
        for cache_bytes in [0, 1 << 12, 64 << 20] {
            let r = AtomicDataZarrReader::open_opt(
                assets().join(format!("{name}.zarr")),
                ReaderOptions::default().with_cache_bytes(cache_bytes),
            )
            .unwrap();
            // Shuffled, with duplicates and negative indices.
            let mut rng = SplitMix(n as u64 * 7 + cache_bytes);
            let idx: Vec<i64> = (0..2 * n)
                .map(|_| {
                    let i = rng.below(n as u64) as i64;
                    if rng.below(3) == 0 { i - n } else { i }
                })
                .collect();
            // Twice: the second pass is served (partly) from the cache.
            for pass in 0..2 {
                let got = r.read_many(&idx).unwrap();
                assert_eq!(got.len(), idx.len());
                for (s, &i) in got.iter().zip(&idx) {
                    let k = i.rem_euclid(n) as usize;
                    assert_eq!(s.metadata.index, k);
                    assert_sample_matches_json(
                        &s.data,
                        &samples[k],
                        &format!("{name} cache {cache_bytes} pass {pass} index {i}"),
                    );
                }
            }
            let half = r.num_physical() / 2; // FIXTURES.md: write of the first half, append of the rest
            let first: Vec<i64> = idx
                .iter()
                .copied()
                .filter(|&i| r.sample_metadata(i.rem_euclid(n) as usize).physical_index < half)
                .collect();
            check_collated(&r, &first, &format!("{name} first half, cache {cache_bytes}"));
            let fixed =
                AtomicDataZarrReader::open_opt(&repaired, ReaderOptions::default().with_cache_bytes(cache_bytes))
                    .unwrap();
            check_collated(&fixed, &idx, &format!("{name} repaired, cache {cache_bytes}"));
            // Single reads and metadata agree with the batch path.
            for k in [0, n / 2, n - 1, -1, -n] {
                let kk = k.rem_euclid(n) as usize;
                let s = r.read(k).unwrap();
                assert_sample_matches_json(&s.data, &samples[kk], &format!("{name} read({k})"));
                assert_eq!(
                    r.sample_sizes(kk).unwrap(),
                    (s.data.num_atoms(), s.data.num_edges()),
                    "{name} sample_sizes({kk})"
                );
            }
        }
    }
}

#[test]
fn logical_indices_skip_deleted_samples_of_the_reference_store() {
    // nva_custom_deleted: samples 0, 5, 6, 41, 79 of 80 are soft-deleted.
    let path = assets().join("nva_custom_deleted.zarr");
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(r.num_physical(), 80);
    assert_eq!(r.len(), 75);
    let deleted = [0usize, 5, 6, 41, 79];
    let active: Vec<usize> = (0..80).filter(|p| !deleted.contains(p)).collect();
    for (k, &p) in active.iter().enumerate() {
        assert_eq!(r.sample_metadata(k).physical_index, p);
        assert_eq!(r.read(k as i64).unwrap().metadata.physical_index, p);
    }
    // What the format document says a delete leaves on disk, checked on the
    // reference's own output: masks false and rows zeroed; pointers kept.
    let store = arrays::open_store(&path).unwrap();
    let arr = |rel: &str| arrays::open_array(&atomzarr::Location::from(&path), &store, rel).unwrap();
    let atoms_ptr: Vec<i64> = arr(format::ATOMS_PTR).retrieve_array_subset(&[0..81u64]).unwrap();
    let edges_ptr: Vec<i64> = arr(format::EDGES_PTR).retrieve_array_subset(&[0..81u64]).unwrap();
    let samples_mask: Vec<bool> = arr(format::SAMPLES_MASK).retrieve_array_subset(&[0..80u64]).unwrap();
    let v = atoms_ptr[80] as u64;
    let e = edges_ptr[80] as u64;
    let atoms_mask: Vec<bool> = arr(format::ATOMS_MASK).retrieve_array_subset(&[0..v]).unwrap();
    let edges_mask: Vec<bool> = arr(format::EDGES_MASK).retrieve_array_subset(&[0..e]).unwrap();
    let positions: Vec<f32> = arr("core/positions").retrieve_array_subset(&[0..v, 0..3]).unwrap();
    for p in 0..80 {
        let del = deleted.contains(&p);
        assert_eq!(samples_mask[p], !del, "samples_mask[{p}]");
        let (a0, a1) = (atoms_ptr[p] as usize, atoms_ptr[p + 1] as usize);
        let (e0, e1) = (edges_ptr[p] as usize, edges_ptr[p + 1] as usize);
        assert!(a1 > a0, "sample {p} keeps its atom range after delete");
        assert!(atoms_mask[a0..a1].iter().all(|&m| m != del), "atoms_mask of sample {p}");
        assert!(edges_mask[e0..e1].iter().all(|&m| m != del), "edges_mask of sample {p}");
        if del {
            assert!(positions[a0 * 3..a1 * 3].iter().all(|&x| x == 0.0), "positions of deleted sample {p} are zeroed");
        }
    }
}

/// The reader returns `stored - atoms_ptr[p]` (STORE_FORMAT.md: stored
/// indices are store-global). Checked against the raw array.
///
/// Fixture quirk (documented, reproduced, not "fixed"): each reference store
/// was written as `write(first half)` + `append(second half)`, and the
/// reference append offsets neighbor_list by the atom offset *within the
/// appended batch*, not within the store. So for every appended sample the
/// reference reader (and expected.json, and therefore we) return sample-local
/// indices shifted by `-atoms_ptr[first appended sample]`: negative values.
/// Batch paths refuse those samples with the diagnosis, and `atomzarr
/// repair` rewrites them (cli/tests/integrity_batches.rs).
#[test]
fn reference_neighbor_lists_are_store_global_except_the_appended_half() {
    for name in fixture_names() {
        let path = assets().join(format!("{name}.zarr"));
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let n = r.num_physical();
        let store = arrays::open_store(&path).unwrap();
        let ptr = |rel: &str| -> Vec<i64> {
            arrays::open_array(&atomzarr::Location::from(&path), &store, rel)
                .unwrap()
                .retrieve_array_subset(&[0..n as u64 + 1])
                .unwrap()
        };
        let (atoms_ptr, edges_ptr) = (ptr(format::ATOMS_PTR), ptr(format::EDGES_PTR));
        let raw: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, "core/neighbor_list")
            .unwrap()
            .retrieve_array_subset(&[0..edges_ptr[n] as u64, 0..2])
            .unwrap();
        let half = n / 2; // FIXTURES.md: write of the first half, append of the rest
        let mut checked_nonzero_offset = false;
        for k in 0..r.len() {
            let p = r.sample_metadata(k).physical_index;
            let s = r.read(k as i64).unwrap().data;
            let local = s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
            let (e0, e1) = (edges_ptr[p] as usize, edges_ptr[p + 1] as usize);
            let global: Vec<i64> = local.iter().map(|x| x + atoms_ptr[p]).collect();
            assert_eq!(raw[e0 * 2..e1 * 2], global[..], "{name}: sample {k}: reader returns stored - atoms_ptr");
            let atoms = s.num_atoms() as i64;
            let shift = if p < half { 0 } else { atoms_ptr[half] };
            assert!(
                local.iter().all(|&x| (0..atoms).contains(&(x + shift))),
                "{name}: physical sample {p}: neighbor indices {local:?} (+{shift}) outside 0..{atoms}"
            );
            checked_nonzero_offset |= atoms_ptr[p] > 0 && e1 > e0 && p < half;
        }
        assert!(checked_nonzero_offset, "{name}: no sample exercised a non-zero atom offset");
    }
}

#[test]
fn cli_dump_matches_expected_json_byte_for_byte() {
    for name in fixture_names() {
        let (text, _) = expected(&name);
        let store = assets().join(format!("{name}.zarr"));
        let (ok, stdout, stderr) = cli(&["dump", store.to_str().unwrap()]);
        assert!(ok, "{name}: dump failed: {stderr}");
        assert!(stdout.trim() == text.trim(), "{name}: dump output differs from {name}.expected.json");
        // The library entry point writes the same bytes.
        let r = AtomicDataZarrReader::open(&store).unwrap();
        let mut buf = Vec::new();
        atomzarr::formats::dump::dump_json(&r, &mut buf).unwrap();
        assert!(String::from_utf8(buf).unwrap() == text.trim(), "{name}: dump_json differs");
    }
}

#[test]
fn cli_inspect_lists_every_array() {
    for name in fixture_names() {
        let path = assets().join(format!("{name}.zarr"));
        let (ok, stdout, stderr) = cli(&["inspect", path.to_str().unwrap()]);
        assert!(ok, "{name}: inspect failed: {stderr}");
        let root = format::read_root(&path).unwrap();
        let mut arrays: Vec<String> =
            [format::ATOMS_PTR, format::EDGES_PTR, format::SAMPLES_MASK, format::ATOMS_MASK, format::EDGES_MASK]
                .iter()
                .map(|s| s.to_string())
                .collect();
        arrays.extend(root.fields.iter().map(|(n, i)| format::field_path(i.group, n)));
        for a in &arrays {
            assert!(stdout.contains(a.as_str()), "{name}: inspect does not mention {a}:\n{stdout}");
        }
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let counts = format!("{} physical, {} active", r.num_physical(), r.len());
        assert!(stdout.contains(&counts), "{name}: inspect does not say '{counts}':\n{stdout}");
        let report = atomzarr::store::inspect::inspect(&path).unwrap();
        assert_eq!(report.arrays.len(), arrays.len());
    }
}

/// An array's codec list, with the `bytes` codec's omitted configuration
/// (zarr-python omits `endian` for one-byte types) spelled out as little endian.
fn normalized_codecs(meta: &Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Array(list) => list.iter_mut().for_each(walk),
            Value::Object(o) => {
                if o.get("name") == Some(&Value::from("bytes")) && !o.contains_key("configuration") {
                    o.insert("configuration".into(), serde_json::json!({"endian": "little"}));
                }
                o.values_mut().for_each(walk);
            }
            _ => {}
        }
    }
    let mut codecs = meta["codecs"].clone();
    walk(&mut codecs);
    codecs
}

#[test]
fn fixture_copies_defragment_and_append() {
    // A reference store is a valid starting point for our writer: defragment
    // (keeping each array's settings) leaves the same logical samples, and an
    // append after it reads back.
    for name in fixture_names() {
        let (text, want) = expected(&name);
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &path);

        let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
        let before: BTreeMap<String, Value> = format::read_root(&path)
            .unwrap()
            .fields
            .iter()
            .map(|(n, i)| {
                let rel = format::field_path(i.group, n);
                (rel.clone(), normalized_codecs(&zarr_json(&path, &rel)))
            })
            .collect();
        w.defragment(None).unwrap();
        let r = AtomicDataZarrReader::open(&path).unwrap();
        assert_eq!(r.len(), r.num_physical(), "{name}: defragment keeps only active samples");
        check_against_expected(&r, &want, &format!("{name} defragmented"));
        let mut buf = Vec::new();
        atomzarr::formats::dump::dump_json(&r, &mut buf).unwrap();
        assert!(String::from_utf8(buf).unwrap() == text.trim(), "{name}: dump after defragment differs");
        for (rel, codecs) in &before {
            assert_eq!(
                &normalized_codecs(&zarr_json(&path, rel)),
                codecs,
                "{name}: defragment(None) kept {rel}'s codecs"
            );
        }
        assert!(!format::sibling(&path, ".defrag-tmp").exists());
        assert!(!format::sibling(&path, ".defrag-old").exists());

        // Append two samples shaped like the store's own (same dtypes and
        // trailing shapes: take two existing ones).
        // (From the first half: the reference's appended half has invalid
        // neighbor lists, which our writer refuses; see the test above.)
        let extra = r.read_many(&[1, 2]).unwrap();
        let extra: Vec<_> = extra.into_iter().map(|s| s.data).collect();
        w.append(&extra).unwrap();
        r.refresh().unwrap();
        assert_eq!(r.len(), want["samples"].as_array().unwrap().len() + 2);
        let got = r.read_many(&[-2, -1]).unwrap();
        assert_sample_eq(&got[0].data, &extra[0], &format!("{name} appended 0"));
        assert_sample_eq(&got[1].data, &extra[1], &format!("{name} appended 1"));
        assert_eq!(got[1].data.field("neighbor_list").map(|f| f.level), Some(Level::Edge));
    }
}

#[test]
fn fixture_copy_append_without_defragment() {
    // Appending to the reference's own layout (library-chosen chunk shapes,
    // sharding, soft-deleted samples) keeps the old samples intact.
    for name in fixture_names() {
        let (_, want) = expected(&name);
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &path);
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let extra: Vec<_> = r.read_many(&[0, 3, 5]).unwrap().into_iter().map(|s| s.data).collect();
        let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
        w.append(&extra).unwrap();
        r.refresh().unwrap();
        let n = want["samples"].as_array().unwrap().len();
        assert_eq!(r.len(), n + 3);
        let all = read_all(&r);
        for (k, s) in all.iter().take(n).enumerate() {
            assert_sample_matches_json(s, &want["samples"][k], &format!("{name} after append, sample {k}"));
        }
        for (i, s) in extra.iter().enumerate() {
            assert_sample_eq(&all[n + i], s, &format!("{name} appended {i}"));
        }
    }
}

#[test]
fn fixture_copies_take_deletes() {
    // Soft delete on the reference's own layout: the remaining logical
    // samples are the expected ones minus the deleted, in order; the deleted
    // rows read back as zeros through the raw arrays.
    for name in fixture_names() {
        let (_, want) = expected(&name);
        let want = want["samples"].as_array().unwrap();
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &path);
        let r = AtomicDataZarrReader::open(&path).unwrap();
        let logical_to_delete = [0usize, 3, want.len() / 2, want.len() - 1];
        let physical: Vec<usize> = logical_to_delete.iter().map(|&k| r.sample_metadata(k).physical_index).collect();
        let mut w = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
        w.delete(&physical).unwrap();
        r.refresh().unwrap();
        let keep: Vec<&Value> =
            want.iter().enumerate().filter(|(k, _)| !logical_to_delete.contains(k)).map(|(_, v)| v).collect();
        assert_eq!(r.len(), keep.len(), "{name}");
        for (k, s) in read_all(&r).iter().enumerate() {
            assert_sample_matches_json(s, keep[k], &format!("{name} after delete, sample {k}"));
        }
        let store = arrays::open_store(&path).unwrap();
        let n = r.num_physical() as u64;
        let atoms_ptr: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, format::ATOMS_PTR)
            .unwrap()
            .retrieve_array_subset(&[0..n + 1])
            .unwrap();
        let v = atoms_ptr[n as usize] as u64;
        let pos: Vec<f32> = arrays::open_array(&atomzarr::Location::from(&path), &store, "core/positions")
            .unwrap()
            .retrieve_array_subset(&[0..v, 0..3])
            .unwrap();
        let mask: Vec<bool> = arrays::open_array(&atomzarr::Location::from(&path), &store, format::ATOMS_MASK)
            .unwrap()
            .retrieve_array_subset(&[0..v])
            .unwrap();
        for &p in &physical {
            let (a0, a1) = (atoms_ptr[p] as usize, atoms_ptr[p + 1] as usize);
            assert!(pos[a0 * 3..a1 * 3].iter().all(|&x| x == 0.0), "{name}: positions of deleted {p}");
            assert!(mask[a0..a1].iter().all(|&m| !m), "{name}: atoms_mask of deleted {p}");
        }
    }
}

#[test]
fn levels_fall_back_to_the_reference_name_table() {
    // STORE_FORMAT.md: a core field missing from the `fields` attribute takes
    // its level from the reference's fixed name table; a custom one is
    // "system". nva_default has only core fields, all of them in the table
    // (or atom-level), so without the attribute it must read the same.
    let (text, want) = expected("nva_default");
    let dir = tmpdir();
    for (i, remove) in [None, Some("shifts"), Some("positions"), Some("cell")].into_iter().enumerate() {
        let path = dir.path().join(format!("nofields{i}.zarr"));
        copy_dir(&assets().join("nva_default.zarr"), &path);
        let root_file = path.join("zarr.json");
        let mut root = json(&root_file);
        match remove {
            None => {
                root["attributes"].as_object_mut().unwrap().remove("fields");
            }
            Some(name) => {
                root["attributes"]["fields"]["core"].as_object_mut().unwrap().remove(name);
            }
        }
        std::fs::write(&root_file, serde_json::to_vec(&root).unwrap()).unwrap();
        let r = AtomicDataZarrReader::open(&path).unwrap();
        check_against_expected(&r, &want, &format!("nva_default without fields entry {remove:?}"));
        let mut buf = Vec::new();
        atomzarr::formats::dump::dump_json(&r, &mut buf).unwrap();
        assert!(String::from_utf8(buf).unwrap() == text.trim());
    }
    // A custom field missing from the attribute is system-level.
    let path = dir.path().join("custom.zarr");
    copy_dir(&assets().join("nva_custom_deleted.zarr"), &path);
    let root_file = path.join("zarr.json");
    let mut root = json(&root_file);
    root["attributes"]["fields"]["custom"].as_object_mut().unwrap().remove("tag");
    std::fs::write(&root_file, serde_json::to_vec(&root).unwrap()).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(r.schema().fields["tag"], Level::System);
    check_against_expected(&r, &expected("nva_custom_deleted").1, "nva_custom_deleted without tag's level");
}

#[test]
fn defragment_none_keeps_settings_whatever_the_writers_config() {
    // defragment(None) keeps each array's codec, chunk and shard. An array
    // that is not sharded must stay unsharded even when the writer was opened
    // with a sharded default (that config is for arrays created later).
    let dir = tmpdir();
    let path = dir.path().join("k.zarr");
    copy_dir(&assets().join("nva_custom_deleted.zarr"), &path);
    let root = format::read_root(&path).unwrap();
    let rels: Vec<String> =
        [format::ATOMS_PTR, format::EDGES_PTR, format::SAMPLES_MASK, format::ATOMS_MASK, format::EDGES_MASK]
            .iter()
            .map(|s| s.to_string())
            .chain(root.fields.iter().map(|(n, i)| format::field_path(i.group, n)))
            .collect();
    let before: Vec<(Value, Value)> = rels
        .iter()
        .map(|rel| {
            let m = zarr_json(&path, rel);
            (m["chunk_grid"].clone(), normalized_codecs(&m))
        })
        .collect();
    let sharded = atomzarr::ZarrArrayConfig::default()
        .with_codec(atomzarr::Codec::Gzip { level: 1 })
        .with_chunk_size(64)
        .with_shard_size(256);
    let config = ZarrWriteConfig::default().with_meta(sharded).with_core(sharded).with_custom(sharded);
    let mut w = AtomicDataZarrWriter::open(&path, config).unwrap();
    w.defragment(None).unwrap();
    for (rel, (grid, codecs)) in rels.iter().zip(&before) {
        let m = zarr_json(&path, rel);
        assert_eq!(&m["chunk_grid"], grid, "{rel}: chunk grid kept");
        assert_eq!(&normalized_codecs(&m), codecs, "{rel}: codecs kept");
    }
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_against_expected(&r, &expected("nva_custom_deleted").1, "defragmented under a sharded writer config");
    // Arrays created afterwards do follow the writer's config.
    let n = r.num_physical();
    w.add_custom("later", Level::System, &[n], vec![1u16; n]).unwrap();
    let m = zarr_json(&path, "custom/later");
    assert_eq!(m["chunk_grid"]["configuration"]["chunk_shape"], serde_json::json!([256]));
    assert_eq!(m["codecs"][0]["name"], "sharding_indexed");
}
