//! Hostile stores: proptest mutations of the Python toolkit's reference
//! stores in `assets/` (metadata JSON of the root, groups and arrays: numbers,
//! shapes, chunk shapes, codecs, dtypes, fill values; chunk bytes; shard
//! indexes; pointer and field values), each read every way a user reads a
//! store: open, `read_many` of every sample, collated reads, the JSON dump and
//! `inspect`. Every case must end in data or in a typed [`atomzarr::Error`]
//! naming the store: never a panic (checked with `catch_unwind`), an abort, a
//! giant allocation or a hang (a watchdog ends the process if a case runs
//! longer than [`CASE_LIMIT`]).
//!
//! Each reference store is one test (they run in parallel), `CASES_PER_STORE`
//! cases each (more with `FUZZ_CASES=n`; another sequence with `FUZZ_SEED=s`).
//! A case mutates a working copy of the store and restores the files it
//! touched afterwards, so no case pays for a full copy.

mod common;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use atomzarr::{AtomicDataZarrReader, CollatedBatch, Error, Level, Reader, ReaderExt};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// Cases per reference store in a normal run (3 stores: 5,100 in all).
const CASES_PER_STORE: u32 = 1700;
/// Longest a single case may run before it counts as a hang.
const CASE_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- values

/// Numbers that break size arithmetic: zero, powers of two around the integer
/// widths, the extremes, negatives and fractions.
fn num() -> impl Strategy<Value = Value> {
    let lits: Vec<Value> = vec![
        json!(0),
        json!(1),
        json!(2),
        json!(3),
        json!(7),
        json!(8),
        json!(64),
        json!(255),
        json!(4096),
        json!(65536),
        json!(i32::MAX),
        json!(1u64 << 31),
        json!(u32::MAX),
        json!(1u64 << 32),
        json!(1u64 << 40),
        json!(1u64 << 53),
        json!(1u64 << 60),
        json!(1u64 << 62),
        json!(i64::MAX),
        json!(1u64 << 63),
        json!(u64::MAX - 1),
        json!(u64::MAX),
        json!(-1),
        json!(-2),
        json!(i32::MIN),
        json!(i64::MIN),
        json!(0.5),
        json!(1.5),
        json!(-0.0),
        json!(1e300),
        json!(1.8446744073709552e19),
    ];
    prop::sample::select(lits)
}

/// A number relative to the original one (or a literal).
#[derive(Debug, Clone)]
enum Num {
    Lit(Value),
    Plus(i64),
    Times(u64),
    Half,
}

fn rel_num() -> impl Strategy<Value = Num> {
    prop_oneof![
        3 => num().prop_map(Num::Lit),
        1 => prop::sample::select(vec![-2i64, -1, 1, 2, 1000]).prop_map(Num::Plus),
        1 => prop::sample::select(vec![2u64, 3, 1 << 20, 1 << 40]).prop_map(Num::Times),
        1 => Just(Num::Half),
    ]
}

impl Num {
    fn apply(&self, old: &Value) -> Value {
        let o = old.as_u64();
        match self {
            Num::Lit(v) => v.clone(),
            Num::Plus(d) => match o {
                Some(o) => json!(o as i128 + *d as i128),
                None => json!(d),
            },
            Num::Times(k) => json!(o.unwrap_or(1).saturating_mul(*k)),
            Num::Half => json!(o.unwrap_or(0) / 2),
        }
    }

    /// As an i64 for binary values (pointers, field elements).
    fn as_i64(&self, old: i64) -> i64 {
        match self {
            Num::Lit(v) => v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).unwrap_or(old.wrapping_add(7)),
            Num::Plus(d) => old.wrapping_add(*d),
            Num::Times(k) => old.wrapping_mul(*k as i64),
            Num::Half => old / 2,
        }
    }
}

/// JSON values that are the wrong kind almost anywhere.
fn pool() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(""),
        json!("x"),
        json!("int64"),
        json!([]),
        json!([0]),
        json!([1, 1, 1, 1]),
        json!([u64::MAX]),
        json!({}),
        json!({"name": "zstd"}),
        json!({"name": "bytes", "configuration": {"endian": "big"}}),
        json!(-1),
        json!(u64::MAX),
        json!([[1]]),
        json!("NaN"),
    ]
}

const DTYPES: &[&str] = &[
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "string",
    "r8",
    "r24",
    "r0",
    "rx",
    "int4",
    "bytes",
    "",
];

/// Codec chains: plausible, implausible and malformed.
fn chains() -> Vec<Value> {
    let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let be = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let zstd = json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}});
    let zstd_ck = json!({"name": "zstd", "configuration": {"level": 3, "checksum": true}});
    let gzip = json!({"name": "gzip", "configuration": {"level": 5}});
    let blosc = json!({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}});
    let crc = json!({"name": "crc32c"});
    let transpose = json!({"name": "transpose", "configuration": {"order": [0]}});
    let shard = |inner: Value, codecs: Value, index: Value, loc: &str| {
        json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": inner, "codecs": codecs, "index_codecs": index, "index_location": loc}})
    };
    vec![
        json!([le.clone()]),
        json!([le.clone(), gzip.clone()]),
        json!([le.clone(), blosc.clone()]),
        json!([be.clone(), zstd.clone()]),
        json!([le.clone(), zstd_ck.clone()]),
        json!([le.clone(), crc.clone()]),
        json!([le.clone(), zstd.clone(), zstd.clone()]),
        json!([transpose.clone(), le.clone(), zstd.clone()]),
        json!([zstd.clone()]),
        json!([zstd.clone(), le.clone()]),
        json!([]),
        json!([{"name": "no_such_codec"}]),
        json!([le.clone(), {"name": "zstd", "configuration": {"level": "high"}}]),
        shard(json!([1]), json!([le.clone(), zstd.clone()]), json!([le.clone(), crc.clone()]), "end"),
        shard(json!([7]), json!([le.clone(), zstd.clone()]), json!([le.clone()]), "start"),
        shard(json!([1u64 << 40]), json!([le.clone()]), json!([le.clone(), crc.clone()]), "end"),
        shard(json!([0]), json!([le.clone()]), json!([le.clone()]), "end"),
        shard(json!([2]), json!([le.clone(), gzip.clone()]), json!([le.clone(), crc.clone()]), "end"),
        shard(json!([2]), json!([le.clone()]), json!([be.clone()]), "middle"),
    ]
}

// ---------------------------------------------------------------- edits

#[derive(Debug, Clone)]
enum Dims {
    Shape,
    Chunk,
    /// The sharding codec's inner chunk shape.
    Inner,
}

impl Dims {
    fn pointer(&self) -> &'static str {
        match self {
            Dims::Shape => "/shape",
            Dims::Chunk => "/chunk_grid/configuration/chunk_shape",
            Dims::Inner => "/codecs/0/configuration/chunk_shape",
        }
    }
}

#[derive(Debug, Clone)]
enum Bytes {
    Flip {
        at: Index,
        bit: u8,
    },
    /// A byte of the first 18 (a zstd frame header: content size, window).
    Header {
        at: u8,
        value: u8,
    },
    Set {
        at: Index,
        value: u8,
    },
    Truncate {
        at: Index,
    },
    Extend {
        bytes: Vec<u8>,
    },
    Empty,
    Zero,
    Random {
        bytes: Vec<u8>,
    },
}

#[derive(Debug, Clone)]
enum Edit {
    /// A number anywhere in a zarr.json.
    Number {
        file: Index,
        leaf: Index,
        value: Num,
    },
    /// Any node of a zarr.json replaced by a wrong-kind value.
    Replace {
        file: Index,
        node: Index,
        with: Index,
    },
    /// Any key of a zarr.json removed.
    Remove {
        file: Index,
        node: Index,
    },
    /// One dimension of an array's shape, chunk shape or inner chunk shape.
    Dim {
        file: Index,
        dims: Dims,
        dim: Index,
        value: Num,
    },
    /// A dimension added to or removed from one of those.
    Rank {
        file: Index,
        dims: Dims,
        add: bool,
    },
    DataType {
        file: Index,
        name: Index,
    },
    FillValue {
        file: Index,
        with: Index,
    },
    Codecs {
        file: Index,
        chain: Index,
    },
    /// The root's `num_samples`; with `pointers`, the pointer and mask array
    /// shapes are set to match it (so only their chunk files can tell).
    NumSamples {
        value: Num,
        pointers: bool,
    },
    /// The root's `fields` map: a level changed, a field added or removed.
    Fields {
        field: Index,
        change: u8,
    },
    /// A chunk or shard file's bytes.
    Chunk {
        file: Index,
        how: Bytes,
    },
    /// An entry of a shard index, its crc32c recomputed or not.
    ShardIndex {
        file: Index,
        entry: Index,
        offset: Num,
        size: Num,
        fix_crc: bool,
    },
    /// One element of an (unsharded, zstd) chunk, re-encoded validly.
    Value {
        file: Index,
        elem: Index,
        value: Num,
    },
    /// One pointer of `meta/atoms_ptr` or `meta/edges_ptr` (`at: None`: the last).
    Pointer {
        edges: bool,
        at: Option<Index>,
        value: Num,
    },
}

fn bytes_edit() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Bytes::Flip { at, bit }),
        2 => (0u8..18, any::<u8>()).prop_map(|(at, value)| Bytes::Header { at, value }),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(at, value)| Bytes::Set { at, value }),
        2 => any::<Index>().prop_map(|at| Bytes::Truncate { at }),
        1 => prop::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Bytes::Extend { bytes }),
        1 => Just(Bytes::Empty),
        1 => Just(Bytes::Zero),
        1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(|bytes| Bytes::Random { bytes }),
    ]
}

fn dims() -> impl Strategy<Value = Dims> {
    prop_oneof![2 => Just(Dims::Shape), 2 => Just(Dims::Chunk), 1 => Just(Dims::Inner)]
}

fn one_edit() -> impl Strategy<Value = Edit> {
    let i = any::<Index>;
    prop_oneof![
        4 => (i(), i(), rel_num()).prop_map(|(file, leaf, value)| Edit::Number { file, leaf, value }),
        2 => (i(), i(), i()).prop_map(|(file, node, with)| Edit::Replace { file, node, with }),
        1 => (i(), i()).prop_map(|(file, node)| Edit::Remove { file, node }),
        4 => (i(), dims(), i(), rel_num()).prop_map(|(file, dims, dim, value)| Edit::Dim { file, dims, dim, value }),
        1 => (i(), dims(), any::<bool>()).prop_map(|(file, dims, add)| Edit::Rank { file, dims, add }),
        1 => (i(), i()).prop_map(|(file, name)| Edit::DataType { file, name }),
        1 => (i(), i()).prop_map(|(file, with)| Edit::FillValue { file, with }),
        2 => (i(), i()).prop_map(|(file, chain)| Edit::Codecs { file, chain }),
        2 => (rel_num(), any::<bool>()).prop_map(|(value, pointers)| Edit::NumSamples { value, pointers }),
        1 => (i(), 0u8..5).prop_map(|(field, change)| Edit::Fields { field, change }),
        4 => (i(), bytes_edit()).prop_map(|(file, how)| Edit::Chunk { file, how }),
        3 => (i(), i(), rel_num(), rel_num(), any::<bool>())
            .prop_map(|(file, entry, offset, size, fix_crc)| Edit::ShardIndex { file, entry, offset, size, fix_crc }),
        3 => (i(), i(), rel_num()).prop_map(|(file, elem, value)| Edit::Value { file, elem, value }),
        3 => (any::<bool>(), prop::option::weighted(0.5, i()), rel_num())
            .prop_map(|(edges, at, value)| Edit::Pointer { edges, at, value }),
    ]
}

/// One to three edits applied together.
fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop_oneof![4 => one_edit().prop_map(|e| vec![e]), 1 => prop::collection::vec(one_edit(), 2..=3)]
}

// ---------------------------------------------------------------- the store

/// A working copy of one reference store, with what the edits pick from.
struct Work {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// Every file of the pristine store, relative path -> bytes.
    base: BTreeMap<PathBuf, Vec<u8>>,
    /// zarr.json files (relative).
    json: Vec<PathBuf>,
    /// Array zarr.json files (relative).
    arrays: Vec<PathBuf>,
    /// Chunk files (relative), sharded or not.
    chunks: Vec<PathBuf>,
    /// Shard files: (relative path, inner chunks per shard, crc32c on the index).
    shards: Vec<(PathBuf, usize, bool)>,
    /// Unsharded zstd chunk files and their element size.
    zstd_chunks: Vec<(PathBuf, usize)>,
}

fn dtype_size(name: &str) -> usize {
    match name {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        _ => 8,
    }
}

impl Work {
    fn new(name: &str) -> Work {
        let dir = common::tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        common::copy_dir(&common::assets().join(format!("{name}.zarr")), &path);
        let base = common::snapshot(&path);
        let mut w = Work {
            _dir: dir,
            path,
            base,
            json: vec![],
            arrays: vec![],
            chunks: vec![],
            shards: vec![],
            zstd_chunks: vec![],
        };
        for (rel, bytes) in &w.base {
            if rel.file_name().is_some_and(|n| n == "zarr.json") {
                w.json.push(rel.clone());
                let v: Value = serde_json::from_slice(bytes).unwrap();
                if v["node_type"] == "array" {
                    w.arrays.push(rel.clone());
                }
            }
        }
        for rel in w.base.keys() {
            let Some(array) = rel.ancestors().find(|a| a.file_name().is_some_and(|n| n == "c")).and_then(Path::parent)
            else {
                continue;
            };
            w.chunks.push(rel.clone());
            let meta: Value = serde_json::from_slice(&w.base[&array.join("zarr.json")]).unwrap();
            let size = dtype_size(meta["data_type"].as_str().unwrap());
            let codecs = meta["codecs"].as_array().unwrap();
            if codecs[0]["name"] == "sharding_indexed" {
                let outer = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap();
                let inner = codecs[0]["configuration"]["chunk_shape"][0].as_u64().unwrap();
                let crc = codecs[0]["configuration"]["index_codecs"].as_array().unwrap().len() == 2;
                w.shards.push((rel.clone(), (outer / inner) as usize, crc));
            } else if codecs.len() == 2 && codecs[1]["name"] == "zstd" {
                w.zstd_chunks.push((rel.clone(), size));
            }
        }
        assert!(!w.arrays.is_empty() && !w.chunks.is_empty());
        w
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    fn read_json(&self, rel: &Path) -> Value {
        serde_json::from_slice(&std::fs::read(self.abs(rel)).unwrap()).unwrap_or(Value::Null)
    }

    fn write_json(&self, rel: &Path, v: &Value) {
        std::fs::write(self.abs(rel), serde_json::to_vec_pretty(v).unwrap()).unwrap();
    }

    /// Puts back every file an edit may have touched (and removes new ones).
    fn restore(&self, touched: &[PathBuf]) {
        for rel in touched {
            let p = self.abs(rel);
            match self.base.get(rel) {
                Some(b) => std::fs::write(&p, b).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }

    /// Applies `e`, recording the files it writes in `touched` (before
    /// writing them, so a failed edit is restored too).
    fn apply(&self, e: &Edit, touched: &mut Vec<PathBuf>) {
        match e {
            Edit::Number { file, leaf, value } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let leaves = paths(&v, true);
                if leaves.is_empty() {
                    return;
                }
                let at = leaf.get(&leaves);
                let node = get_mut(&mut v, at);
                *node = value.apply(node);
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Replace { file, node, with } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let nodes = paths(&v, false);
                let at = node.get(&nodes);
                *get_mut(&mut v, at) = with.get(&pool()).clone();
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Remove { file, node } => {
                let rel = file.get(&self.json).clone();
                let mut v = self.read_json(&rel);
                let nodes: Vec<Vec<Seg>> =
                    paths(&v, false).into_iter().filter(|p| matches!(p.last(), Some(Seg::Key(_)))).collect();
                if nodes.is_empty() {
                    return;
                }
                let at = node.get(&nodes);
                if let (Some(Seg::Key(k)), Some(parent)) =
                    (at.last(), get_mut(&mut v, &at[..at.len() - 1]).as_object_mut())
                {
                    parent.remove(k);
                }
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Dim { file, dims, dim, value } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                if let Some(arr) = v.pointer_mut(dims.pointer()).and_then(Value::as_array_mut)
                    && !arr.is_empty()
                {
                    let k = dim.index(arr.len());
                    arr[k] = value.apply(&arr[k]);
                    touched.push(rel.clone());
                    self.write_json(&rel, &v);
                }
            }
            Edit::Rank { file, dims, add } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                if let Some(arr) = v.pointer_mut(dims.pointer()).and_then(Value::as_array_mut) {
                    if *add {
                        arr.push(json!(3));
                    } else {
                        arr.pop();
                    }
                    touched.push(rel.clone());
                    self.write_json(&rel, &v);
                }
            }
            Edit::DataType { file, name } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                set(&mut v, &["data_type"], json!(name.get(DTYPES)));
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::FillValue { file, with } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                let mut choices = pool();
                choices.extend([
                    json!(1),
                    json!(-1),
                    json!(1e300),
                    json!("Infinity"),
                    json!("0x7fc00000"),
                    json!(false),
                ]);
                set(&mut v, &["fill_value"], with.get(&choices).clone());
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::Codecs { file, chain } => {
                let rel = file.get(&self.arrays).clone();
                let mut v = self.read_json(&rel);
                set(&mut v, &["codecs"], chain.get(&chains()).clone());
                touched.push(rel.clone());
                self.write_json(&rel, &v);
            }
            Edit::NumSamples { value, pointers } => {
                let root = PathBuf::from("zarr.json");
                let mut v = self.read_json(&root);
                let n = value.apply(v.pointer("/attributes/num_samples").unwrap_or(&Value::Null));
                set(&mut v, &["attributes", "num_samples"], n.clone());
                touched.push(root.clone());
                self.write_json(&root, &v);
                if *pointers && let Some(n) = n.as_u64() {
                    for (rel, len) in [
                        ("meta/atoms_ptr", n.saturating_add(1)),
                        ("meta/edges_ptr", n.saturating_add(1)),
                        ("meta/samples_mask", n),
                    ] {
                        let rel = Path::new(rel).join("zarr.json");
                        let mut a = self.read_json(&rel);
                        set(&mut a, &["shape"], json!([len]));
                        touched.push(rel.clone());
                        self.write_json(&rel, &a);
                    }
                }
            }
            Edit::Fields { field, change } => {
                let root = PathBuf::from("zarr.json");
                let mut v = self.read_json(&root);
                let Some(core) = v.pointer_mut("/attributes/fields/core").and_then(Value::as_object_mut) else {
                    return;
                };
                let names: Vec<String> = core.keys().cloned().collect();
                if names.is_empty() {
                    return;
                }
                let name = field.get(&names).clone();
                match change {
                    0 => {
                        core.remove(&name);
                    }
                    1 => {
                        let level = match core[&name].as_str() {
                            Some("atom") => "edge",
                            Some("edge") => "system",
                            _ => "atom",
                        };
                        core.insert(name, json!(level));
                    }
                    2 => {
                        core.insert("no_such_field".into(), json!("atom"));
                    }
                    3 => {
                        // A name that walks out of the store.
                        core.insert(format!("../../{name}"), json!("atom"));
                    }
                    _ => {
                        core.insert(name, json!(42));
                    }
                }
                touched.push(root.clone());
                self.write_json(&root, &v);
            }
            Edit::Chunk { file, how } => {
                let rel = file.get(&self.chunks).clone();
                let old = self.base[&rel].clone();
                let new = match how {
                    Bytes::Flip { at, bit } if !old.is_empty() => {
                        let mut b = old;
                        let k = at.index(b.len());
                        b[k] ^= 1 << bit;
                        b
                    }
                    Bytes::Header { at, value } if (*at as usize) < old.len() => {
                        let mut b = old;
                        b[*at as usize] = *value;
                        b
                    }
                    Bytes::Set { at, value } if !old.is_empty() => {
                        let mut b = old;
                        let k = at.index(b.len());
                        b[k] = *value;
                        b
                    }
                    Bytes::Truncate { at } => old[..at.index(old.len().max(1))].to_vec(),
                    Bytes::Extend { bytes } => [old, bytes.clone()].concat(),
                    Bytes::Empty => vec![],
                    Bytes::Zero => vec![0; old.len()],
                    Bytes::Random { bytes } => bytes.clone(),
                    _ => return,
                };
                touched.push(rel.clone());
                std::fs::write(self.abs(&rel), new).unwrap();
            }
            Edit::ShardIndex { file, entry, offset, size, fix_crc } => {
                if self.shards.is_empty() {
                    return;
                }
                let (rel, per_shard, crc) = file.get(&self.shards).clone();
                let mut b = self.base[&rel].clone();
                let index_len = per_shard * 16 + if crc { 4 } else { 0 };
                if b.len() < index_len {
                    return;
                }
                let start = b.len() - index_len;
                let k = entry.index(per_shard);
                let at = start + 16 * k;
                let word = |b: &[u8], i: usize| i64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                let o = offset.as_i64(word(&b, at));
                let s = size.as_i64(word(&b, at + 8));
                b[at..at + 8].copy_from_slice(&o.to_le_bytes());
                b[at + 8..at + 16].copy_from_slice(&s.to_le_bytes());
                if crc && *fix_crc {
                    let sum = crc32c::crc32c(&b[start..start + per_shard * 16]);
                    let end = b.len();
                    b[end - 4..].copy_from_slice(&sum.to_le_bytes());
                }
                touched.push(rel.clone());
                std::fs::write(self.abs(&rel), b).unwrap();
            }
            Edit::Value { file, elem, value } => {
                if self.zstd_chunks.is_empty() {
                    return;
                }
                let (rel, size) = file.get(&self.zstd_chunks).clone();
                self.set_element(&rel, size, |n| elem.index(n), value, touched);
            }
            Edit::Pointer { edges, at, value } => {
                let array = if *edges { "meta/edges_ptr" } else { "meta/atoms_ptr" };
                // The chunk holding the chosen pointer: the last chunk file
                // for the last pointer, any for another.
                let files: Vec<&PathBuf> = self.chunks.iter().filter(|c| c.starts_with(array)).collect();
                if files.is_empty() {
                    return;
                }
                match at {
                    Some(i) => {
                        let rel = i.get(&files).to_path_buf();
                        self.set_element(&rel, 8, |n| i.index(n), value, touched);
                    }
                    None => {
                        // The last pointer (the total), not the chunk's padding.
                        let meta: Value =
                            serde_json::from_slice(&self.base[&Path::new(array).join("zarr.json")]).unwrap();
                        let last = meta["shape"][0].as_u64().unwrap_or(1).saturating_sub(1);
                        let rows = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap_or(1).max(1);
                        let rel = Path::new(array).join("c").join((last / rows).to_string());
                        if self.base.contains_key(&rel) {
                            self.set_element(&rel, 8, |_| (last % rows) as usize, value, touched);
                        }
                    }
                }
            }
        }
    }

    /// Sets one element (`pick(elements)`) of an unsharded `bytes` + `zstd`
    /// chunk, re-encoding it validly.
    fn set_element(
        &self,
        rel: &PathBuf,
        size: usize,
        pick: impl FnOnce(usize) -> usize,
        value: &Num,
        touched: &mut Vec<PathBuf>,
    ) {
        let Ok(mut raw) = zstd::decode_all(&self.base[rel][..]) else { return };
        let n = raw.len() / size;
        if n == 0 {
            return;
        }
        let k = pick(n).min(n - 1) * size;
        let mut old = [0u8; 8];
        old[..size].copy_from_slice(&raw[k..k + size]);
        let new = value.as_i64(i64::from_le_bytes(old)).to_le_bytes();
        raw[k..k + size].copy_from_slice(&new[..size]);
        touched.push(rel.clone());
        std::fs::write(self.abs(rel), zstd::encode_all(&raw[..], 1).unwrap()).unwrap();
    }
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Idx(usize),
}

/// JSON paths of every node (or only of number leaves), pre-order.
fn paths(v: &Value, numbers_only: bool) -> Vec<Vec<Seg>> {
    fn walk(v: &Value, at: &mut Vec<Seg>, numbers_only: bool, out: &mut Vec<Vec<Seg>>) {
        if !numbers_only || v.is_number() {
            out.push(at.clone());
        }
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    at.push(Seg::Key(k.clone()));
                    walk(c, at, numbers_only, out);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    at.push(Seg::Idx(i));
                    walk(c, at, numbers_only, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = vec![];
    walk(v, &mut vec![], numbers_only, &mut out);
    out
}

/// Sets `v[path]` where every step is an object (else leaves `v` alone:
/// an earlier edit may have made it something else).
fn set(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = v;
    for k in parents {
        match at.get_mut(*k) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(m) = at.as_object_mut() {
        m.insert((*last).to_string(), value);
    }
}

fn get_mut<'a>(mut v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    for s in path {
        v = match s {
            Seg::Key(k) => &mut v[k.as_str()],
            Seg::Idx(i) => &mut v[*i],
        };
    }
    v
}

// ---------------------------------------------------------------- the reads

/// What a case saw: how far it got (for the summary).
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    opened: bool,
    read_all: bool,
}

/// A failure must be one of the crate's errors and name the store.
fn typed(e: &Error, store: &Path, what: &str) -> Result<(), String> {
    let msg = e.to_string();
    if std::env::var_os("FUZZ_STATS").is_some() {
        // The error's shape without numbers or paths, for a histogram.
        let kind: String = msg
            .replace(&store.display().to_string(), "STORE")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(90)
            .collect();
        *STATS.lock().unwrap().entry(format!("{what}: {kind}")).or_default() += 1;
    }
    if msg.contains(&store.display().to_string()) {
        Ok(())
    } else {
        Err(format!("{what}: error {e:?} ({msg}) does not name the store {}", store.display()))
    }
}

/// Byte-exact equality of two collated batches (floats may be NaN).
fn same_batch(a: &CollatedBatch, b: &CollatedBatch) -> bool {
    a.indices == b.indices
        && a.atoms_ptr == b.atoms_ptr
        && a.edges_ptr == b.edges_ptr
        && a.fields.len() == b.fields.len()
        && a.fields.iter().zip(&b.fields).all(|((na, fa), (nb, fb))| {
            na == nb
                && fa.level == fb.level
                && fa.trailing_shape == fb.trailing_shape
                && fa.data.dtype() == fb.data.dtype()
                && fa.data.as_bytes() == fb.data.as_bytes()
        })
}

/// Reads the store every way; `Err` describes a broken rule.
fn exercise(store: &Path) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let r = match AtomicDataZarrReader::open(store) {
        Ok(r) => r,
        Err(e) => return typed(&e, store, "open").map(|()| out),
    };
    out.opened = true;
    let n = r.len();
    let all: Vec<i64> = (0..n as i64).collect();
    let samples = match r.read_many(&all) {
        Ok(s) => {
            if s.len() != n {
                return Err(format!("read_many returned {} samples for {n}", s.len()));
            }
            // Each sample's rows agree with the pointers the reader reports.
            for (i, s) in s.iter().enumerate() {
                let (atoms, edges) =
                    r.sample_sizes(i).map_err(|e| format!("get_metadata({i}) after a good read: {e}"))?;
                for (name, f) in &s.data.fields {
                    let rows = match f.level {
                        Level::Atom => atoms,
                        Level::Edge => edges,
                        Level::System => 1,
                    };
                    if f.shape.first() != Some(&rows) || f.data.len() != f.shape.iter().product::<usize>() {
                        return Err(format!(
                            "sample {i} field {name}: shape {:?} with {} values, pointers say {rows} rows",
                            f.shape,
                            f.data.len()
                        ));
                    }
                }
            }
            out.read_all = true;
            Some(s)
        }
        Err(e) => {
            typed(&e, store, "read_many")?;
            None
        }
    };
    let batches: Vec<Vec<usize>> = (0..n).collect::<Vec<_>>().chunks(7).map(<[usize]>::to_vec).collect();
    let mut collated = Vec::new();
    match r.load_collated(&batches, &mut collated) {
        Ok(()) => {
            if let Some(samples) = &samples {
                let data: Vec<_> = samples.iter().map(|s| s.data.clone()).collect();
                let mut start = 0;
                for (b, got) in batches.iter().zip(&collated) {
                    let want = CollatedBatch::from_samples(b, &data[start..start + b.len()])
                        .map_err(|e| format!("collating good samples: {e}"))?;
                    if !same_batch(&want, got) {
                        return Err(format!("collated batch {b:?} differs from the collated samples"));
                    }
                    start += b.len();
                }
            }
        }
        Err(e) => typed(&e, store, "load_collated")?,
    }
    if let Err(e) = atomzarr::formats::dump::dump_json(&r, &mut std::io::sink()) {
        typed(&e, store, "dump_json")?;
    }
    if let Err(e) = atomzarr::store::inspect::inspect(store) {
        typed(&e, store, "inspect")?;
    }
    Ok(out)
}

// ---------------------------------------------------------------- the harness

/// Error kinds seen (with `FUZZ_STATS`).
static STATS: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
/// The message and place of the last panic (any thread), for the report.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
/// Start and description of the case each test is running, for the watchdog.
static RUNNING: Mutex<BTreeMap<String, (Instant, String)>> = Mutex::new(BTreeMap::new());

fn install_hooks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            *LAST_PANIC.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(info.to_string());
            prev(info);
        }));
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for (test, (start, case)) in running.iter() {
                    if start.elapsed() > CASE_LIMIT {
                        eprintln!("{test}: a case ran longer than {CASE_LIMIT:?} (a hang): {case}");
                        std::process::exit(101);
                    }
                }
            }
        });
    });
}

fn fuzz(name: &str, seed: u64) {
    install_hooks();
    let work = Work::new(name);
    // The pristine store reads cleanly (else every case below proves nothing).
    let clean = exercise(&work.path).unwrap();
    assert!(clean.opened && clean.read_all, "{name}: the reference store itself failed");

    let cases = std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES_PER_STORE);
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse::<u64>().ok()).map_or(seed, |s| s ^ seed);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let t0 = Instant::now();
    let counts = Mutex::new((0u32, 0u32, 0u32));
    let result = runner.run(&edits(), |edits| {
        let mut touched = Vec::new();
        let desc = format!("{name}: {edits:?}");
        if std::env::var_os("FUZZ_LOG").is_some() {
            eprintln!("case {desc}");
        }
        RUNNING.lock().unwrap().insert(name.to_string(), (Instant::now(), desc.clone()));
        for e in &edits {
            work.apply(e, &mut touched);
        }
        *LAST_PANIC.lock().unwrap() = None;
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| exercise(&work.path)));
        RUNNING.lock().unwrap().remove(name);
        work.restore(&touched);
        let verdict = match r {
            Ok(Ok(o)) => {
                let mut c = counts.lock().unwrap();
                c.0 += 1;
                c.1 += u32::from(o.opened);
                c.2 += u32::from(o.read_all);
                Ok(())
            }
            Ok(Err(broken)) => Err(broken),
            Err(_) => Err(format!("panicked: {}", LAST_PANIC.lock().unwrap().take().unwrap_or_default())),
        };
        verdict.map_err(|why| TestCaseError::fail(format!("{desc}\n  -> {why}")))
    });
    let (total, opened, read_all) = *counts.lock().unwrap();
    eprintln!(
        "{name}: {total} passing case runs (incl. shrinking) in {:.1}s; {opened} opened, {read_all} read every sample",
        t0.elapsed().as_secs_f64()
    );
    if std::env::var_os("FUZZ_STATS").is_some() {
        let mut by_count: Vec<(u32, String)> = STATS.lock().unwrap().iter().map(|(k, v)| (*v, k.clone())).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        for (count, kind) in by_count {
            eprintln!("{count:6}  {kind}");
        }
    }
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    // The mutations must reach past open, or the reads are not fuzzed.
    assert!(opened > total / 10 && read_all > 0, "{name}: too few mutated stores opened ({opened} of {total})");
}

#[test]
fn hostile_nva_default() {
    fuzz("nva_default", 0x5eed_0001);
}

#[test]
fn hostile_nva_sharded_zstd() {
    fuzz("nva_sharded_zstd", 0x5eed_0002);
}

#[test]
fn hostile_nva_custom_deleted() {
    fuzz("nva_custom_deleted", 0x5eed_0003);
}

// ---------------------------------------------------------------- named cases

/// A writable copy of reference store `name`.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = common::tmpdir();
    let path = dir.path().join(format!("{name}.zarr"));
    common::copy_dir(&common::assets().join(format!("{name}.zarr")), &path);
    (dir, path)
}

fn edit_json(store: &Path, rel: &str, f: impl FnOnce(&mut Value)) {
    let file = store.join(rel).join("zarr.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&file, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// The error opening `store` must be, caught unwinding or not.
fn open_error(store: &Path) -> Error {
    let r = std::panic::catch_unwind(|| AtomicDataZarrReader::open(store));
    match r.expect("open panicked") {
        Ok(r) => panic!("{}: a hostile store opened ({} samples)", store.display(), r.len()),
        Err(e) => e,
    }
}

/// `Inconsistent` naming the store and `array`, with `needle` in the reason.
fn assert_inconsistent(e: &Error, store: &Path, array: &str, needle: &str) {
    match e {
        Error::Inconsistent { store: s, array: a, reason } => {
            assert_eq!((s.local().unwrap(), a.as_str()), (store, array), "{e}");
            assert!(reason.contains(needle), "{e}: lacks {needle:?}");
        }
        e => panic!("expected Inconsistent for {array}, got {e:?}"),
    }
}

/// Reads every sample of an opened store; the error it must end in.
fn read_error(store: &Path) -> Error {
    let r = AtomicDataZarrReader::open(store).unwrap_or_else(|e| panic!("open: {e}"));
    let all: Vec<i64> = (0..r.len() as i64).collect();
    let got = std::panic::catch_unwind(AssertUnwindSafe(|| r.read_many(&all))).expect("read_many panicked");
    match got {
        Ok(_) => panic!("{}: a hostile store read", store.display()),
        Err(e) => e,
    }
}

/// Sets the last element of int64 array `rel` (1-d, bytes + zstd).
fn set_last_i64(store: &Path, rel: &str, value: i64) {
    let meta: Value = serde_json::from_slice(&std::fs::read(store.join(rel).join("zarr.json")).unwrap()).unwrap();
    let last = meta["shape"][0].as_u64().unwrap() - 1;
    let rows = meta["chunk_grid"]["configuration"]["chunk_shape"][0].as_u64().unwrap();
    let file = store.join(rel).join("c").join((last / rows).to_string());
    let mut raw = zstd::decode_all(&std::fs::read(&file).unwrap()[..]).unwrap();
    let at = (last % rows) as usize * 8;
    raw[at..at + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(&file, zstd::encode_all(&raw[..], 1).unwrap()).unwrap();
}

#[test]
fn num_samples_of_2_pow_60_with_matching_pointer_shapes_is_refused() {
    // Shapes alone can not tell: only the pointer files, which hold 121
    // entries, can. Before, the reader went on to allocate 2^60+1 pointers.
    let (_dir, store) = copy_of("nva_default");
    let n = 1u64 << 60;
    edit_json(&store, "", |v| v["attributes"]["num_samples"] = json!(n));
    edit_json(&store, "meta/atoms_ptr", |v| v["shape"] = json!([n + 1]));
    edit_json(&store, "meta/edges_ptr", |v| v["shape"] = json!([n + 1]));
    edit_json(&store, "meta/samples_mask", |v| v["shape"] = json!([n]));
    let e = open_error(&store);
    assert_inconsistent(&e, &store, "meta/atoms_ptr", &format!("num_samples {n} claims {} rows", n + 1));
    assert!(e.to_string().contains(&store.display().to_string()), "{e}");
}

#[test]
fn chunk_shapes_whose_product_overflows_or_is_absurd_are_refused() {
    for (rel, chunk) in [
        ("core/positions", json!([1u64 << 32, 1u64 << 32])),
        ("core/positions", json!([u64::MAX, 3])),
        ("core/positions", json!([1u64 << 40, 3])),
        ("meta/atoms_ptr", json!([1u64 << 62])),
        ("core/cell", json!([60, 1u64 << 31, 1u64 << 31])),
    ] {
        let (_dir, store) = copy_of("nva_default");
        edit_json(&store, rel, |v| v["chunk_grid"]["configuration"]["chunk_shape"] = chunk.clone());
        let e = open_error(&store);
        assert_inconsistent(&e, &store, rel, "exceeds the 268435456-byte limit");
    }
}

#[test]
fn shard_indexes_beyond_the_file_are_errors() {
    // An index too large for any limit: refused at open.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    edit_json(&store, "core/positions", |v| {
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([1u64 << 40, 3]);
        v["codecs"][0]["configuration"]["chunk_shape"] = json!([1, 3]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/positions", "needs an index over the");

    // An index within the limit but beyond the shard file: the read fails.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    edit_json(&store, "core/positions", |v| {
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([1u64 << 20, 3]);
        v["codecs"][0]["configuration"]["chunk_shape"] = json!([1, 3]);
    });
    match read_error(&store) {
        Error::Chunk { store: s, array, reason, .. } => {
            assert_eq!((s.local().unwrap(), array.as_str()), (store.as_path(), "core/positions"));
            assert!(reason.contains("shorter than its 16777220-byte index"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }

    // An index entry pointing past the file, its crc32c made to match.
    let (_dir, store) = copy_of("nva_sharded_zstd");
    let shard = store.join("core/positions/c/0/0");
    let mut b = std::fs::read(&shard).unwrap();
    let start = b.len() - (4 * 16 + 4); // 4 inner chunks per shard
    b[start..start + 8].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    let sum = crc32c::crc32c(&b[start..start + 64]);
    let end = b.len();
    b[end - 4..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&shard, b).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("outside the shard's data"), "{reason}");
        }
        e => panic!("expected a Chunk error for chunk 0, got {e:?}"),
    }
}

#[test]
fn absurd_trailing_shapes_are_refused() {
    // Overflowing the row size.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1u64 << 62]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "overflows");
    // Rows of 4 TiB: one chunk's rows would not fit any buffer.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1u64 << 40]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "per inner chunk exceed");
    // Rows of 128 KiB (chunks of 80 MiB): 152 MB claimed, files of 1.2 KB.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/atomic_numbers", |v| {
        v["shape"] = json!([1159, 1 << 14]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([614, 1 << 14]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/atomic_numbers", "but its chunk files hold at most");
    // A fill-only field (no chunk file: all zeros) 256 KiB wide per atom.
    let (_dir, store) = copy_of("nva_default");
    assert!(!store.join("core/velocities/c").exists(), "velocities are all fill values in the fixture");
    edit_json(&store, "core/velocities", |v| {
        v["shape"] = json!([1159, 1 << 16]);
        v["chunk_grid"]["configuration"]["chunk_shape"] = json!([614, 1 << 16]);
    });
    assert_inconsistent(&open_error(&store), &store, "core/velocities", "fill values at most 8192 per row");
}

#[test]
fn negative_and_huge_pointer_values_are_refused() {
    let (_dir, store) = copy_of("nva_default");
    set_last_i64(&store, "meta/atoms_ptr", -5);
    assert_inconsistent(&open_error(&store), &store, "meta/atoms_ptr", "pointers decrease");

    // The last pointer at 2^62 atoms, every atom-level array's shape made to
    // match: only the files can tell.
    let (_dir, store) = copy_of("nva_default");
    let huge = 1u64 << 62;
    set_last_i64(&store, "meta/atoms_ptr", huge as i64);
    for rel in [
        "meta/atoms_mask",
        "core/positions",
        "core/forces",
        "core/velocities",
        "core/atomic_numbers",
        "core/atomic_masses",
        "core/atom_categories",
    ] {
        edit_json(&store, rel, |v| v["shape"][0] = json!(huge));
    }
    assert_inconsistent(
        &open_error(&store),
        &store,
        "meta/atoms_ptr",
        &format!("the last pointer ({huge}) claims {huge} rows"),
    );

    // Edge pointers at i64::MAX.
    let (_dir, store) = copy_of("nva_default");
    set_last_i64(&store, "meta/edges_ptr", i64::MAX);
    for rel in ["meta/edges_mask", "core/neighbor_list", "core/shifts"] {
        edit_json(&store, rel, |v| v["shape"][0] = json!(i64::MAX));
    }
    assert_inconsistent(&open_error(&store), &store, "meta/edges_ptr", "claims");
}

/// A zstd frame declaring 2^40 content bytes, holding 16.
fn lying_zstd_frame() -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0]; // magic; 8-byte content size, single segment
    f.extend((1u64 << 40).to_le_bytes());
    f.extend([1 | (1 << 1) | (16 << 3), 0, 0, 0]); // last block, RLE, 16 bytes of 0
    f
}

#[test]
fn a_zstd_header_claiming_a_huge_size_is_an_error_not_an_abort() {
    // Through zarrs' decoder (pointer arrays): before, zarrs allocated the
    // 1 TiB the header claims, and the process aborted.
    // (Pointers are read through the reader's own checksummed decoder,
    // which bounds the output by the chunk's size too.) Open reads the last
    // page of each pointer array, a read the pages of its samples.
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("meta/atoms_ptr/c/1"), lying_zstd_frame()).unwrap();
    match open_error(&store) {
        Error::Zarr { array, .. } | Error::Chunk { array, .. } => assert_eq!(array, "meta/atoms_ptr"),
        e => panic!("expected a Zarr or Chunk error, got {e:?}"),
    }
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("meta/atoms_ptr/c/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Zarr { array, .. } | Error::Chunk { array, .. } => assert_eq!(array, "meta/atoms_ptr"),
        e => panic!("expected a Zarr or Chunk error, got {e:?}"),
    }
    // Through the reader's own decoder (bytes + zstd field chunks).
    let (_dir, store) = copy_of("nva_default");
    std::fs::write(store.join("core/positions/c/0/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, .. } => assert_eq!(array, "core/positions"),
        e => panic!("expected a Chunk error, got {e:?}"),
    }
    // Through zarrs for a chain the reader does not decode itself.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["codecs"][0]["configuration"]["endian"] = json!("big"));
    std::fs::write(store.join("core/positions/c/0/0"), lying_zstd_frame()).unwrap();
    match read_error(&store) {
        Error::Chunk { array, chunk: 0, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("zstd"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }
}

#[test]
fn a_blosc_header_claiming_a_huge_size_is_an_error() {
    use atomzarr::{AtomicDataZarrWriter, Codec, Shuffle, ZarrArrayConfig, ZarrWriteConfig};
    let dir = common::tmpdir();
    let store = dir.path().join("blosc.zarr");
    // No chunk checksum: it would refuse the edited header before blosc sees it.
    let c = ZarrArrayConfig::default()
        .with_codec(Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle })
        .with_chunk_size(16)
        .with_checksum(false);
    let config = ZarrWriteConfig::default().with_core(c);
    AtomicDataZarrWriter::create(&store, config)
        .unwrap()
        .write(&atomzarr::data::synth::generate(8, 3, 6, 1).unwrap())
        .unwrap();
    let chunk = store.join("core/positions/c/0/0");
    let mut b = std::fs::read(&chunk).unwrap();
    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes()); // decoded size: 4 GiB
    std::fs::write(&chunk, b).unwrap();
    match read_error(&store) {
        Error::Chunk { array, reason, .. } => {
            assert_eq!(array, "core/positions");
            assert!(reason.contains("blosc: header claims 4294967295 bytes"), "{reason}");
        }
        e => panic!("expected a Chunk error, got {e:?}"),
    }
}

#[test]
fn field_names_that_leave_the_store_are_refused() {
    // `../core/positions` under core/ is the store's own positions array, read
    // as another field: harmless here, but any path outside works the same.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "", |v| v["attributes"]["fields"]["core"]["../core/positions"] = json!("atom"));
    match open_error(&store) {
        Error::Format { store: s, reason } => {
            assert_eq!(s, atomzarr::Location::Local(store.clone()));
            assert!(reason.contains("../core/positions") && reason.contains("path separator"), "{reason}");
        }
        e => panic!("expected a Format error, got {e:?}"),
    }
}

#[test]
fn a_row_wider_than_its_chunk_is_refused_before_decoding() {
    // Trailing shape [2^16] but chunks [614, 3]: whole rows per chunk would be
    // 614 x 256 KiB, decoded into one buffer.
    let (_dir, store) = copy_of("nva_default");
    edit_json(&store, "core/positions", |v| v["shape"] = json!([1159, 1 << 26]));
    assert_inconsistent(&open_error(&store), &store, "core/positions", "rows of 268435456 bytes per inner chunk");
}
