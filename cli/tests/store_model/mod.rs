//! What the store round-trip tests share: a model of the written samples
//! (the expected state after writes, custom fields and deletes), the checks
//! of a reader and of the arrays on disk against it, and the write configs.
#![allow(dead_code, clippy::single_range_in_vec_init)] // each test file uses a part; zarrs subsets are `&[Range]`

use super::*;

pub(crate) const META: [&str; 5] = ["atoms_ptr", "edges_ptr", "samples_mask", "atoms_mask", "edges_mask"];

pub(crate) fn all_codecs() -> Vec<Codec> {
    vec![
        Codec::None,
        Codec::Zstd { level: 3 },
        Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle },
        Codec::BloscZstd { clevel: 3, shuffle: Shuffle::BitShuffle },
        Codec::Gzip { level: 6 },
    ]
}

/// The same settings for every group.
pub(crate) fn uniform(codec: Codec, chunk: u64, shard: Option<u64>) -> ZarrWriteConfig {
    let mut c = ZarrArrayConfig::default().with_codec(codec).with_chunk_size(chunk);
    if let Some(s) = shard {
        c = c.with_shard_size(s);
    }
    ZarrWriteConfig::default().with_meta(c).with_core(c).with_custom(c)
}

/// What the store should hold: every physical sample and which are deleted.
#[derive(Default, Clone)]
pub(crate) struct Model {
    pub(crate) samples: Vec<AtomicData>,
    pub(crate) deleted: BTreeSet<usize>,
}

impl Model {
    pub(crate) fn active(&self) -> Vec<(usize, &AtomicData)> {
        self.samples.iter().enumerate().filter(|(p, _)| !self.deleted.contains(p)).collect()
    }

    /// Adds a custom field to the model and the store (data for every
    /// physical sample, deleted ones included, as `add_custom` requires).
    pub(crate) fn add_custom(
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
pub(crate) fn check_reader(r: &AtomicDataZarrReader, m: &Model, what: &str) {
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

pub(crate) fn custom_extras(dtype: DType) -> Extras {
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
pub(crate) fn write_store(
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

pub(crate) fn check_array_codecs(path: &Path, rel: &str, codec: Codec, chunk: u64, shard: Option<u64>) {
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
pub(crate) fn check_deleted_on_disk(path: &Path, m: &Model) {
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
