//! Stores written by this crate read back exactly as written: every codec,
//! with and without sharding, custom fields at every level and dtype,
//! deletions, defragment; plus the on-disk layout (zarr.json contents,
//! store-global neighbor lists, zeroed deleted rows) and the CLI dump.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

#[path = "../../tests/common/mod.rs"]
mod common;

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
use serde_json::{Value, json};

const META: [&str; 5] = ["atoms_ptr", "edges_ptr", "samples_mask", "atoms_mask", "edges_mask"];

fn all_codecs() -> Vec<Codec> {
    vec![
        Codec::None,
        Codec::Zstd { level: 3 },
        Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle },
        Codec::BloscZstd { clevel: 3, shuffle: Shuffle::BitShuffle },
        Codec::Gzip { level: 6 },
    ]
}

/// The same settings for every group.
fn uniform(codec: Codec, chunk: u64, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(chunk);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// What the store should hold: every physical sample and which are deleted.
#[derive(Default, Clone)]
struct Model {
    samples: Vec<AtomicData>,
    deleted: BTreeSet<usize>,
}

impl Model {
    fn active(&self) -> Vec<(usize, &AtomicData)> {
        self.samples.iter().enumerate().filter(|(p, _)| !self.deleted.contains(p)).collect()
    }

    /// Adds a custom field to the model and the store (data for every
    /// physical sample, deleted ones included, as `add_custom` requires).
    fn add_custom(
        &mut self,
        w: &mut AtomicDataZarrWriter,
        name: &str,
        level: Level,
        dtype: DType,
        trailing: &[usize],
        rng: &mut SplitMix,
    ) {
        let row: usize = trailing.iter().product();
        let mut all = HostData::with_capacity(dtype, 0);
        for s in &mut self.samples {
            let rows = match level {
                Level::Atom => s.num_atoms(),
                Level::Edge => s.num_edges(),
                Level::System => 1,
            };
            let d = host_data(dtype, rows * row, rng);
            all.extend_from(&d).unwrap();
            let mut shape = vec![rows];
            shape.extend(trailing);
            s.fields.insert(name.to_string(), Field::new(level, shape, d).unwrap());
        }
        let total = match level {
            Level::Atom => self.samples.iter().map(AtomicData::num_atoms).sum(),
            Level::Edge => self.samples.iter().map(AtomicData::num_edges).sum(),
            Level::System => self.samples.len(),
        };
        let mut shape = vec![total];
        shape.extend(trailing);
        w.add_custom(name, level, &shape, all).unwrap();
    }
}

/// Every way of reading the store agrees with the model.
fn check_reader(r: &AtomicDataZarrReader, m: &Model, what: &str) {
    let active = m.active();
    let n = active.len();
    assert_eq!(r.len(), n, "{what}: len");
    assert_eq!(r.num_physical(), m.samples.len(), "{what}: num_physical");
    for (k, s) in read_all(r).iter().enumerate() {
        assert_sample_eq(s, active[k].1, &format!("{what}: sample {k}"));
    }
    if n == 0 {
        assert!(r.read(0).is_err());
        return;
    }
    // Shuffled, with duplicates and negative indices.
    let mut rng = SplitMix(n as u64 ^ 0xABCD);
    let idx: Vec<i64> = (0..2 * n + 3)
        .map(|_| {
            let i = rng.below(n as u64) as i64;
            if rng.below(2) == 0 { i - n as i64 } else { i }
        })
        .collect();
    let got = r.read_many(&idx).unwrap();
    assert_eq!(got.len(), idx.len());
    for (s, &i) in got.iter().zip(&idx) {
        let k = i.rem_euclid(n as i64) as usize;
        assert_eq!(s.metadata.index, k, "{what}: metadata.index of {i}");
        assert_eq!(s.metadata.physical_index, active[k].0, "{what}: metadata.physical_index of {i}");
        assert_sample_eq(&s.data, active[k].1, &format!("{what}: read_many index {i}"));
    }
    for (k, (p, s)) in active.iter().enumerate() {
        assert_eq!(r.sample_sizes(k).unwrap(), (s.num_atoms(), s.num_edges()), "{what}: get_metadata({k})");
        assert_eq!(r.sample_metadata(k).physical_index, *p);
    }
    assert_sample_eq(&r.read(-1).unwrap().data, active[n - 1].1, &format!("{what}: read(-1)"));
    assert_sample_eq(&r.read(-(n as i64)).unwrap().data, active[0].1, &format!("{what}: read(-len)"));
}

fn custom_extras(dtype: DType) -> Extras {
    Extras {
        custom: vec![
            ("spin_density".into(), Level::Atom, DType::Float32, vec![1]),
            ("bond_order".into(), Level::Edge, dtype, vec![]),
            ("tag".into(), Level::System, DType::Int32, vec![]),
            ("descriptor".into(), Level::System, dtype, vec![2, 2]),
        ],
        full_core: true,
    }
}

/// Writes `first` with `write`, then `rest` with `append`.
fn write_store(
    path: &Path,
    config: ZarrWriteConfig,
    first: &[AtomicData],
    rest: &[AtomicData],
) -> AtomicDataZarrWriter {
    let mut w = AtomicDataZarrWriter::create(path, config).unwrap();
    w.write(first).unwrap();
    w.append(rest).unwrap();
    w
}

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
fn check_array_codecs(path: &Path, rel: &str, codec: Codec, chunk: u64, shard: Option<u64>) {
    let meta = zarr_json(path, rel);
    let shape: Vec<u64> = meta["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    let dtype = DType::from_name(meta["data_type"].as_str().unwrap()).unwrap();
    let trailing: Vec<u64> = shape[1..].iter().map(|&d| d.max(1)).collect();
    let outer = meta.pointer("/chunk_grid/configuration/chunk_shape").unwrap().clone();
    assert_eq!(meta["chunk_grid"]["name"], "regular", "{rel}");
    let mut want_outer = vec![shard.unwrap_or(chunk)];
    want_outer.extend(&trailing);
    assert_eq!(outer, json!(want_outer), "{rel}: outer chunk shape");
    let codecs = meta["codecs"].as_array().unwrap();
    let inner_codecs = match shard {
        Some(_) => {
            assert_eq!(codecs.len(), 1, "{rel}: only sharding_indexed at the top: {codecs:?}");
            let sc = &codecs[0];
            assert_eq!(sc["name"], "sharding_indexed", "{rel}");
            let conf = &sc["configuration"];
            let mut want_inner = vec![chunk];
            want_inner.extend(&trailing);
            assert_eq!(conf["chunk_shape"], json!(want_inner), "{rel}: inner chunk shape");
            assert_eq!(
                conf["index_codecs"],
                json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]),
                "{rel}: index codecs"
            );
            assert_eq!(conf["index_location"], "end", "{rel}");
            conf["codecs"].as_array().unwrap().clone()
        }
        None => codecs.clone(),
    };
    // These stores take the default: a crc32c checksum ends each (inner) chain.
    let mut inner_codecs = inner_codecs;
    assert_eq!(inner_codecs.pop(), Some(json!({"name": "crc32c"})), "{rel}: checksum last in {codecs:?}");
    assert_eq!(inner_codecs[0]["name"], "bytes", "{rel}: {inner_codecs:?}");
    if dtype.size() > 1 {
        assert_eq!(inner_codecs[0]["configuration"]["endian"], "little", "{rel}");
    }
    match codec {
        Codec::None => assert_eq!(inner_codecs.len(), 1, "{rel}: {inner_codecs:?}"),
        Codec::Zstd { level } => {
            assert_eq!(inner_codecs.len(), 2, "{rel}");
            assert_eq!(
                inner_codecs[1],
                json!({"name": "zstd", "configuration": {"level": level, "checksum": false}}),
                "{rel}"
            );
        }
        Codec::Gzip { level } => {
            assert_eq!(inner_codecs.len(), 2, "{rel}");
            assert_eq!(inner_codecs[1], json!({"name": "gzip", "configuration": {"level": level}}), "{rel}");
        }
        Codec::BloscLz4 { clevel, shuffle } | Codec::BloscZstd { clevel, shuffle } => {
            assert_eq!(inner_codecs.len(), 2, "{rel}");
            let c = &inner_codecs[1];
            assert_eq!(c["name"], "blosc", "{rel}");
            let cname = if matches!(codec, Codec::BloscLz4 { .. }) { "lz4" } else { "zstd" };
            assert_eq!(c["configuration"]["cname"], cname, "{rel}");
            assert_eq!(c["configuration"]["clevel"], clevel, "{rel}");
            let sh = match shuffle {
                Shuffle::NoShuffle => "noshuffle",
                Shuffle::Shuffle => "shuffle",
                Shuffle::BitShuffle => "bitshuffle",
            };
            assert_eq!(c["configuration"]["shuffle"], sh, "{rel}");
            assert_eq!(c["configuration"]["typesize"], dtype.size(), "{rel}");
        }
    }
}

/// Raw arrays: masks false exactly on deleted samples' rows, and every field
/// row of a deleted sample zero; active rows hold the model's data.
fn check_deleted_on_disk(path: &Path, m: &Model) {
    let store = arrays::open_store(path).unwrap();
    let arr = |rel: &str| arrays::open_array(&atomzarr::Location::from(path), &store, rel).unwrap();
    let n = m.samples.len() as u64;
    let atoms_ptr: Vec<i64> = arr(format::ATOMS_PTR).retrieve_array_subset(&[0..n + 1]).unwrap();
    let edges_ptr: Vec<i64> = arr(format::EDGES_PTR).retrieve_array_subset(&[0..n + 1]).unwrap();
    let (v, e) = (atoms_ptr[n as usize] as u64, edges_ptr[n as usize] as u64);
    let samples_mask: Vec<bool> = arr(format::SAMPLES_MASK).retrieve_array_subset(&[0..n]).unwrap();
    let atoms_mask: Vec<bool> = arr(format::ATOMS_MASK).retrieve_array_subset(&[0..v]).unwrap();
    let edges_mask: Vec<bool> = arr(format::EDGES_MASK).retrieve_array_subset(&[0..e]).unwrap();
    let root = format::read_root(path).unwrap();
    let mut raw: BTreeMap<String, (usize, Vec<u8>)> = BTreeMap::new();
    for (name, info) in &root.fields {
        let a = arr(&format::field_path(info.group, name));
        let mut subset = vec![0..a.shape()[0]];
        subset.extend(a.shape()[1..].iter().map(|&d| 0..d));
        let bytes: zarrs::array::ArrayBytes = a.retrieve_array_subset(&subset).unwrap();
        let row: u64 = a.shape()[1..].iter().product();
        let dt = arrays::array_dtype(&atomzarr::Location::from(path), name, &a).unwrap();
        raw.insert(name.clone(), (row as usize * dt.size(), bytes.into_fixed().unwrap().into_owned()));
    }
    let mut offset = 0i64;
    for (p, s) in m.samples.iter().enumerate() {
        let del = m.deleted.contains(&p);
        assert_eq!(samples_mask[p], !del, "samples_mask[{p}]");
        let (a0, a1) = (atoms_ptr[p] as usize, atoms_ptr[p + 1] as usize);
        let (e0, e1) = (edges_ptr[p] as usize, edges_ptr[p + 1] as usize);
        assert_eq!((a1 - a0, e1 - e0), (s.num_atoms(), s.num_edges()), "pointers of sample {p} kept");
        assert!(atoms_mask[a0..a1].iter().all(|&x| x != del), "atoms_mask of sample {p}");
        assert!(edges_mask[e0..e1].iter().all(|&x| x != del), "edges_mask of sample {p}");
        for (name, (row_bytes, bytes)) in &raw {
            let f = &s.fields[name];
            let (r0, r1) = match f.level {
                Level::Atom => (a0, a1),
                Level::Edge => (e0, e1),
                Level::System => (p, p + 1),
            };
            let rows = &bytes[r0 * row_bytes..r1 * row_bytes];
            if del {
                assert!(rows.iter().all(|&b| b == 0), "{name}: rows of deleted sample {p} are not zeroed");
            } else if name == "neighbor_list" {
                let mut d = f.data.clone();
                let local = d.to_i64_vec().unwrap();
                d = HostData::Int64(local.iter().map(|x| x + offset).collect());
                assert!(rows == d.as_bytes(), "{name}: stored rows of sample {p} are not store-global");
            } else {
                assert!(rows == f.data.as_bytes(), "{name}: stored rows of sample {p}");
            }
        }
        offset += s.num_atoms() as i64;
    }
}

#[test]
fn layout_matches_the_store_format() {
    let dir = tmpdir();
    let path = dir.path().join("layout.zarr");
    let extras = Extras {
        custom: vec![
            ("charge_density".into(), Level::Atom, DType::Float32, vec![1]),
            ("bond_order".into(), Level::Edge, DType::Float64, vec![]),
            ("label".into(), Level::System, DType::Int16, vec![]),
        ],
        full_core: true,
    };
    let data = samples(11, 23, 7, 12, &extras);
    let config = ZarrWriteConfig::default()
        .with_meta(
            ZarrArrayConfig::default()
                .with_codec(Codec::BloscLz4 { clevel: 4, shuffle: Shuffle::NoShuffle })
                .with_chunk_size(16),
        )
        .with_core(
            ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(4).with_shard_size(8),
        )
        .with_custom(ZarrArrayConfig::default().with_codec(Codec::Gzip { level: 6 }).with_chunk_size(5))
        .with_override("neighbor_list", ZarrArrayConfig::default().with_chunk_size(2).with_shard_size(6));
    write_store(&path, config, &data[..5], &data[5..]);
    let n = data.len() as u64;
    let v: u64 = data.iter().map(|s| s.num_atoms() as u64).sum();
    let e: u64 = data.iter().map(|s| s.num_edges() as u64).sum();

    let root = zarr_json(&path, ".");
    assert_eq!(root["zarr_format"], 3);
    assert_eq!(root["node_type"], "group");
    assert_eq!(root["attributes"]["num_samples"], n);
    assert_eq!(
        root["attributes"]["fields"],
        json!({
            "core": {"atomic_numbers": "atom", "positions": "atom", "forces": "atom", "neighbor_list": "edge",
                     "shifts": "edge", "energy": "system", "cell": "system", "pbc": "system"},
            "custom": {"charge_density": "atom", "bond_order": "edge", "label": "system"}
        })
    );
    for g in ["meta", "core", "custom"] {
        let gj = zarr_json(&path, g);
        assert_eq!((gj["zarr_format"].clone(), gj["node_type"].clone()), (json!(3), json!("group")), "{g}/");
    }
    let children = |g: &str| -> BTreeSet<String> {
        std::fs::read_dir(path.join(g))
            .unwrap()
            .filter_map(|e| {
                let e = e.unwrap();
                e.file_type().unwrap().is_dir().then(|| e.file_name().to_string_lossy().into_owned())
            })
            .collect()
    };
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(children("."), set(&["meta", "core", "custom"]));
    assert_eq!(children("meta"), set(&META));
    assert_eq!(
        children("core"),
        set(&["atomic_numbers", "positions", "forces", "neighbor_list", "shifts", "energy", "cell", "pbc"])
    );
    assert_eq!(children("custom"), set(&["charge_density", "bond_order", "label"]));

    let check = |rel: &str, shape: Value, dtype: &str, fill: Value| {
        let a = zarr_json(&path, rel);
        assert_eq!(a["zarr_format"], 3, "{rel}");
        assert_eq!(a["node_type"], "array", "{rel}");
        assert_eq!(a["shape"], shape, "{rel}: shape");
        assert_eq!(a["data_type"], dtype, "{rel}: data_type");
        assert_eq!(a["fill_value"], fill, "{rel}: fill_value");
        assert_eq!(
            a["chunk_key_encoding"],
            json!({"name": "default", "configuration": {"separator": "/"}}),
            "{rel}: chunk keys as the reference writes them"
        );
    };
    check("meta/atoms_ptr", json!([n + 1]), "int64", json!(0));
    check("meta/edges_ptr", json!([n + 1]), "int64", json!(0));
    check("meta/samples_mask", json!([n]), "bool", json!(false));
    check("meta/atoms_mask", json!([v]), "bool", json!(false));
    check("meta/edges_mask", json!([e]), "bool", json!(false));
    check("core/atomic_numbers", json!([v]), "int64", json!(0));
    check("core/positions", json!([v, 3]), "float32", json!(0.0));
    check("core/forces", json!([v, 3]), "float32", json!(0.0));
    check("core/neighbor_list", json!([e, 2]), "int64", json!(0));
    check("core/shifts", json!([e, 3]), "float32", json!(0.0));
    check("core/energy", json!([n, 1]), "float32", json!(0.0));
    check("core/cell", json!([n, 3, 3]), "float32", json!(0.0));
    check("core/pbc", json!([n, 3]), "bool", json!(false));
    check("custom/charge_density", json!([v, 1]), "float32", json!(0.0));
    check("custom/bond_order", json!([e]), "float64", json!(0.0));
    check("custom/label", json!([n]), "int16", json!(0));

    let blosc = Codec::BloscLz4 { clevel: 4, shuffle: Shuffle::NoShuffle };
    for m in META {
        check_array_codecs(&path, &format!("meta/{m}"), blosc, 16, None);
    }
    for c in ["atomic_numbers", "positions", "forces", "shifts", "energy", "cell", "pbc"] {
        check_array_codecs(&path, &format!("core/{c}"), Codec::Zstd { level: 3 }, 4, Some(8));
    }
    // The override changes chunk and shard only; the codec comes from core.
    check_array_codecs(&path, "core/neighbor_list", Codec::Zstd { level: 3 }, 2, Some(6));
    for c in ["charge_density", "bond_order", "label"] {
        check_array_codecs(&path, &format!("custom/{c}"), Codec::Gzip { level: 6 }, 5, None);
    }

    // neighbor_list is stored with store-global atom indices.
    let store = arrays::open_store(&path).unwrap();
    let raw: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, "core/neighbor_list")
        .unwrap()
        .retrieve_array_subset(&[0..e, 0..2])
        .unwrap();
    let atoms_ptr: Vec<i64> = arrays::open_array(&atomzarr::Location::from(&path), &store, format::ATOMS_PTR)
        .unwrap()
        .retrieve_array_subset(&[0..n + 1])
        .unwrap();
    let mut want = Vec::new();
    for (i, s) in data.iter().enumerate() {
        want.extend(s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap().iter().map(|x| x + atoms_ptr[i]));
    }
    assert_eq!(raw, want);
    assert!(atoms_ptr.windows(2).all(|w| w[0] <= w[1]) && atoms_ptr[0] == 0);

    // inspect reads the same settings back (defragment(None) relies on it).
    let report = atomzarr::store::inspect::inspect(&path).unwrap();
    assert_eq!((report.num_samples, report.active), (n as usize, n as usize));
    let cfg = |rel: &str| report.arrays.iter().find(|a| a.path == rel).unwrap_or_else(|| panic!("{rel}")).config;
    let want_cfg = |codec, chunk, shard: Option<u64>| {
        let c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(chunk).with_checksum(true);
        match shard {
            Some(rows) => c.with_shard_size(rows),
            None => c,
        }
    };
    assert_eq!(cfg("meta/atoms_ptr"), want_cfg(blosc, 16, None));
    assert_eq!(cfg("core/positions"), want_cfg(Codec::Zstd { level: 3 }, 4, Some(8)));
    assert_eq!(cfg("core/neighbor_list"), want_cfg(Codec::Zstd { level: 3 }, 2, Some(6)));
    assert_eq!(cfg("custom/label"), want_cfg(Codec::Gzip { level: 6 }, 5, None));
    let (ok, stdout, stderr) = cli(&["inspect", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("core/positions") && stdout.contains("zstd(3)") && stdout.contains("blosc-lz4(4)"),
        "{stdout}"
    );
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &Model { samples: data, ..Default::default() }, "layout store");
}

#[test]
fn dump_of_our_store_equals_what_it_reads() {
    let dir = tmpdir();
    let path = dir.path().join("dump.zarr");
    let extras = Extras {
        custom: vec![
            ("u64s".into(), Level::Atom, DType::UInt64, vec![]),
            ("halfs".into(), Level::Edge, DType::Float16, vec![2]),
            ("bf".into(), Level::System, DType::BFloat16, vec![]),
            ("flags".into(), Level::System, DType::Bool, vec![2]),
            ("f64s".into(), Level::Atom, DType::Float64, vec![]),
        ],
        full_core: true,
    };
    let data = samples(3, 9, 5, 6, &extras);
    let mut w = write_store(&path, ZarrWriteConfig::default(), &data[..4], &data[4..]);
    w.delete(&[2, 8]).unwrap();
    let m = Model { samples: data, deleted: [2, 8].into() };
    let r = AtomicDataZarrReader::open(&path).unwrap();
    check_reader(&r, &m, "dump store");

    let (ok, stdout, stderr) = cli(&["dump", path.to_str().unwrap()]);
    assert!(ok, "dump failed: {stderr}");
    let mut lib = Vec::new();
    atomzarr::formats::dump::dump_json(&r, &mut lib).unwrap();
    assert!(stdout.trim().as_bytes() == lib.as_slice(), "CLI and library dumps differ");
    let v: Value = serde_json::from_str(&stdout).expect("dump is valid JSON");
    assert_eq!(v["num_samples"], 7);
    let fields: BTreeMap<String, String> =
        v["fields"].as_object().unwrap().iter().map(|(k, l)| (k.clone(), l.as_str().unwrap().to_string())).collect();
    let want: BTreeMap<String, String> =
        r.schema().fields.into_iter().map(|(k, l)| (k, l.as_str().to_string())).collect();
    assert_eq!(fields, want);
    let dumped = v["samples"].as_array().unwrap();
    assert_eq!(dumped.len(), 7);
    for (k, (_, s)) in m.active().iter().enumerate() {
        assert_sample_matches_json(s, &dumped[k], &format!("dump sample {k}"));
    }
}

#[test]
fn dump_escapes_field_names_as_python_json_does() {
    // Python's json.dumps (ensure_ascii) escapes quotes, control and
    // non-ASCII characters; an unescaped name would make the dump invalid.
    // (Backslashes are escaped too, see py_json_str's doc test, but are not
    // valid in field names.)
    let dir = tmpdir();
    let path = dir.path().join("names.zarr");
    let name = "q\"uo\tte é 𝛼";
    let s = AtomicData::new(vec![1], vec![[0.0; 3]])
        .unwrap()
        .with_custom(name, Level::System, vec![1], vec![7i32])
        .unwrap();
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&[s]).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert!(r.schema().fields.contains_key(name));
    let mut out = Vec::new();
    atomzarr::formats::dump::dump_json(&r, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let v: Value = serde_json::from_str(&text).expect("dump is valid JSON");
    assert_eq!(v["samples"][0][name]["data"], json!([7]));
    assert!(text.contains(r#""q\"uo\tte \u00e9 \ud835\udefc": "system""#), "{text}");
    assert!(text.is_ascii());
}

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
