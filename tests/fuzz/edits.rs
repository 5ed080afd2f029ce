//! What the hostile-store fuzzer changes: values (numbers, shapes, dtypes,
//! codec chains) and the edits made of them (metadata, chunk bytes, shard
//! indexes, pointer and field values), as proptest strategies.

use super::*;

// ---------------------------------------------------------------- values

/// Numbers that break size arithmetic: zero, powers of two around the integer
/// widths, the extremes, negatives and fractions.
pub(crate) fn num() -> impl Strategy<Value = Value> {
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
pub(crate) enum Num {
    Lit(Value),
    Plus(i64),
    Times(u64),
    Half,
}

pub(crate) fn rel_num() -> impl Strategy<Value = Num> {
    prop_oneof![
        3 => num().prop_map(Num::Lit),
        1 => prop::sample::select(vec![-2i64, -1, 1, 2, 1000]).prop_map(Num::Plus),
        1 => prop::sample::select(vec![2u64, 3, 1 << 20, 1 << 40]).prop_map(Num::Times),
        1 => Just(Num::Half),
    ]
}

impl Num {
    pub(crate) fn apply(&self, old: &Value) -> Value {
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
    pub(crate) fn as_i64(&self, old: i64) -> i64 {
        match self {
            Num::Lit(v) => v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).unwrap_or(old.wrapping_add(7)),
            Num::Plus(d) => old.wrapping_add(*d),
            Num::Times(k) => old.wrapping_mul(*k as i64),
            Num::Half => old / 2,
        }
    }
}

/// JSON values that are the wrong kind almost anywhere.
pub(crate) fn pool() -> Vec<Value> {
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

pub(crate) const DTYPES: &[&str] = &[
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
pub(crate) fn chains() -> Vec<Value> {
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
pub(crate) enum Dims {
    Shape,
    Chunk,
    /// The sharding codec's inner chunk shape.
    Inner,
}

impl Dims {
    pub(crate) fn pointer(&self) -> &'static str {
        match self {
            Dims::Shape => "/shape",
            Dims::Chunk => "/chunk_grid/configuration/chunk_shape",
            Dims::Inner => "/codecs/0/configuration/chunk_shape",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Bytes {
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
pub(crate) enum Edit {
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

pub(crate) fn bytes_edit() -> impl Strategy<Value = Bytes> {
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

pub(crate) fn dims() -> impl Strategy<Value = Dims> {
    prop_oneof![2 => Just(Dims::Shape), 2 => Just(Dims::Chunk), 1 => Just(Dims::Inner)]
}

pub(crate) fn one_edit() -> impl Strategy<Value = Edit> {
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
pub(crate) fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop_oneof![4 => one_edit().prop_map(|e| vec![e]), 1 => prop::collection::vec(one_edit(), 2..=3)]
}
