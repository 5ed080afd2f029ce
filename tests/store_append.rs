//! Appends: crash safety at every step (via the `fail_after` test hook),
//! refusal of mismatched data without touching the store, and the
//! write/create guards.
#![allow(clippy::single_range_in_vec_init, clippy::type_complexity)] // zarrs subsets are `&[Range]`; table-driven cases

mod common;

use std::path::Path;

use atomzarr::{
    AppendStep, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DType, Error, Field, HostData, Level,
    Reader, ReaderExt, Shuffle, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;

const STEPS: [AppendStep; 4] = [AppendStep::Schema, AppendStep::FieldData, AppendStep::Masks, AppendStep::Pointers];

fn configs() -> Vec<(&'static str, ZarrWriteConfig)> {
    let plain = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(4);
    let sharded = ZarrArrayConfig::default()
        .with_codec(Codec::BloscLz4 { clevel: 3, shuffle: Shuffle::Shuffle })
        .with_chunk_size(3)
        .with_shard_size(9);
    vec![
        ("chunked", ZarrWriteConfig::default().with_meta(plain).with_core(plain).with_custom(plain)),
        ("sharded", ZarrWriteConfig::default().with_meta(sharded).with_core(sharded).with_custom(sharded)),
        ("defaults", ZarrWriteConfig::default()),
    ]
}

fn extras() -> Extras {
    Extras {
        custom: vec![
            ("spin_density".into(), Level::Atom, DType::Float32, vec![1]),
            ("bond_order".into(), Level::Edge, DType::Float16, vec![]),
            ("tag".into(), Level::System, DType::Int32, vec![]),
        ],
        full_core: true,
    }
}

fn dump(r: &AtomicDataZarrReader) -> Vec<u8> {
    let mut out = Vec::new();
    atomzarr::formats::dump::dump_json(r, &mut out).unwrap();
    out
}

fn assert_reads(path: &Path, want: &[AtomicData], what: &str) {
    let r = AtomicDataZarrReader::open(path).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    assert_eq!(r.len(), want.len(), "{what}: len");
    assert_eq!(r.num_physical(), want.len(), "{what}: num_physical");
    for (k, (g, w)) in read_all(&r).iter().zip(want).enumerate() {
        assert_sample_eq(g, w, &format!("{what}: sample {k}"));
    }
    for (k, s) in want.iter().enumerate() {
        assert_eq!(r.sample_sizes(k).unwrap(), (s.num_atoms(), s.num_edges()), "{what}: get_metadata({k})");
    }
}

#[test]
fn append_interrupted_after_any_step_keeps_the_last_complete_state() {
    for (cname, config) in configs() {
        for step in STEPS {
            let what = format!("{cname}, fail after {step:?}");
            let dir = tmpdir();
            let path = dir.path().join("a.zarr");
            let a = samples(1, 9, 6, 8, &extras());
            // B is large, C small, D large again: after the failed B, C leaves
            // stale rows past its end, which D must overwrite, not expose.
            let b = samples(2, 6, 12, 20, &extras());
            let c = samples(3, 2, 3, 3, &extras());
            let d = samples(4, 5, 10, 16, &extras());
            let mut w = AtomicDataZarrWriter::create(&path, config.clone()).unwrap();
            w.write(&a).unwrap();
            let open_before = AtomicDataZarrReader::open(&path).unwrap();
            let dump_before = dump(&open_before);

            w.fail_after(Some(step));
            match w.append(&b) {
                Err(Error::Injected(s)) => assert_eq!(s, step, "{what}"),
                other => panic!("{what}: expected Error::Injected, got {other:?}"),
            }
            assert_reads(&path, &a, &format!("{what}: after the failure"));
            open_before.refresh().unwrap();
            assert_eq!(open_before.len(), a.len(), "{what}: refreshed reader");
            assert!(dump(&open_before) == dump_before, "{what}: the dump changed");

            // A later append (same writer, hook off) picks up from there.
            w.fail_after(None);
            w.append(&c).unwrap();
            let mut want: Vec<AtomicData> = a.iter().chain(&c).cloned().collect();
            assert_reads(&path, &want, &format!("{what}: after retrying with C"));
            // A fresh writer too, once the first lets go of the lock.
            drop(w);
            let mut w2 = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
            w2.append(&d).unwrap();
            want.extend(d.iter().cloned());
            assert_reads(&path, &want, &format!("{what}: after appending D"));
            open_before.refresh().unwrap();
            assert_eq!(open_before.len(), want.len());
        }
    }
}

#[test]
fn failure_after_the_commit_point_has_committed() {
    let dir = tmpdir();
    let path = dir.path().join("c.zarr");
    let a = samples(5, 4, 5, 6, &extras());
    let b = samples(6, 3, 5, 6, &extras());
    let mut w = AtomicDataZarrWriter::create(&path, configs()[0].1.clone()).unwrap();
    w.write(&a).unwrap();
    w.fail_after(Some(AppendStep::NumSamples));
    assert!(matches!(w.append(&b), Err(Error::Injected(AppendStep::NumSamples))));
    let all: Vec<AtomicData> = a.iter().chain(&b).cloned().collect();
    assert_reads(&path, &all, "failure after NumSamples");
}

#[test]
fn first_write_interrupted_after_any_step_leaves_an_empty_store() {
    for (cname, config) in configs() {
        for step in STEPS {
            let what = format!("{cname}, first write fails after {step:?}");
            let dir = tmpdir();
            let path = dir.path().join("f.zarr");
            let a = samples(7, 8, 6, 8, &extras());
            let a2 = samples(8, 3, 4, 4, &extras());
            let mut w = AtomicDataZarrWriter::create(&path, config.clone()).unwrap();
            w.fail_after(Some(step));
            assert!(matches!(w.write(&a), Err(Error::Injected(s)) if s == step), "{what}");
            assert_reads(&path, &[], &what);
            // `write` is still allowed: the store holds no samples.
            w.fail_after(None);
            w.write(&a2).unwrap();
            assert_reads(&path, &a2, &format!("{what}: then written"));
        }
    }
}

#[test]
fn interrupted_append_then_delete_add_custom_and_append() {
    let dir = tmpdir();
    let path = dir.path().join("m.zarr");
    let a = samples(9, 6, 5, 7, &extras());
    let mut w = AtomicDataZarrWriter::create(&path, configs()[1].1.clone()).unwrap();
    w.write(&a).unwrap();
    w.fail_after(Some(AppendStep::Pointers));
    assert!(w.append(&samples(10, 4, 9, 9, &extras())).is_err());
    w.fail_after(None);
    // Delete and add_custom work on the committed state only.
    w.delete(&[5]).unwrap();
    let atoms: usize = a.iter().map(AtomicData::num_atoms).sum();
    let extra: Vec<u8> = (0..atoms).map(|i| i as u8).collect();
    w.add_custom("late", Level::Atom, &[atoms], extra.clone()).unwrap();
    let mut want: Vec<AtomicData> = Vec::new();
    let mut off = 0;
    for (p, s) in a.iter().enumerate() {
        let n = s.num_atoms();
        let mut s = s.clone();
        s.fields.insert("late".into(), Field::new(Level::Atom, vec![n], extra[off..off + n].to_vec()).unwrap());
        off += n;
        if p != 5 {
            want.push(s);
        }
    }
    let mut c = samples(11, 3, 4, 4, &extras());
    for s in &mut c {
        let n = s.num_atoms();
        s.fields.insert("late".into(), Field::new(Level::Atom, vec![n], vec![9u8; n]).unwrap());
    }
    w.append(&c).unwrap();
    want.extend(c);
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!((r.len(), r.num_physical()), (want.len(), want.len() + 1));
    for (k, (g, w)) in read_all(&r).iter().zip(&want).enumerate() {
        assert_sample_eq(g, w, &format!("sample {k}"));
    }
}

/// Variants of a good sample that the store must refuse.
fn mismatches(good: &AtomicData) -> Vec<(&'static str, AtomicData)> {
    let n = good.num_atoms();
    let e = good.num_edges();
    let mut out = Vec::new();
    let mut s = good.clone();
    s.fields.insert("extra".into(), Field::new(Level::Atom, vec![n], vec![1.0f32; n]).unwrap());
    out.push(("extra field", s));
    let mut s = good.clone();
    s.fields.remove("forces");
    out.push(("missing core field", s));
    let mut s = good.clone();
    s.fields.remove("tag");
    out.push(("missing custom field", s));
    let mut s = good.clone();
    s.fields.insert("positions".into(), Field::new(Level::Atom, vec![n, 3], vec![0.5f64; n * 3]).unwrap());
    out.push(("different dtype", s));
    let mut s = good.clone();
    s.fields.insert("spin_density".into(), Field::new(Level::Atom, vec![n, 2], vec![0.5f32; n * 2]).unwrap());
    out.push(("different trailing shape", s));
    let mut s = good.clone();
    s.fields.insert("energy".into(), Field::new(Level::System, vec![1], vec![0.5f32]).unwrap());
    out.push(("fewer dimensions", s));
    let mut s = good.clone();
    s.fields.insert("tag".into(), Field::new(Level::Atom, vec![n], vec![3i32; n]).unwrap());
    out.push(("different level", s));
    let mut s = good.clone();
    s.fields.insert(
        "bond_order".into(),
        Field::new(Level::Edge, vec![e + 1], HostData::zeros(DType::Float16, e + 1)).unwrap(),
    );
    out.push(("edge rows disagree", s));
    let mut s = good.clone();
    let nl = s.fields.get_mut("neighbor_list").unwrap();
    if let HostData::Int64(v) = &mut nl.data {
        v[0] = n as i64;
    }
    out.push(("neighbor index out of range", s));
    let mut s = good.clone();
    s.fields.get_mut("positions").unwrap().data = HostData::Float32(vec![f32::NAN; n * 3]);
    out.push(("non-finite positions", s));
    out
}

#[test]
fn mismatched_appends_are_refused_and_change_no_byte() {
    let dir = tmpdir();
    let path = dir.path().join("mm.zarr");
    let a = samples(12, 5, 5, 6, &extras());
    let mut w = AtomicDataZarrWriter::create(&path, configs()[1].1.clone()).unwrap();
    w.write(&a).unwrap();
    w.delete(&[1]).unwrap();
    let before = snapshot(&path);
    let mut rng = SplitMix(13);
    let good = sample(&mut rng, 4, 5, &extras());
    for (what, bad) in mismatches(&good) {
        for batch in [vec![bad.clone()], vec![good.clone(), bad.clone()]] {
            match w.append(&batch) {
                Err(Error::InvalidInput { context, reason }) => {
                    assert!(context.contains(path.to_str().unwrap()), "{what}: context {context:?} names the store");
                    assert!(!reason.is_empty());
                }
                other => panic!("{what}: expected InvalidInput, got {other:?}"),
            }
            assert_same_snapshot(&before, &snapshot(&path), what);
        }
    }
    // The store still takes the good sample afterwards.
    w.append(std::slice::from_ref(&good)).unwrap();
    let r = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(r.len(), 5);
    assert_sample_eq(&r.read(-1).unwrap().data, &good, "good sample after refusals");
}

#[test]
fn inconsistent_first_write_is_refused_and_changes_no_byte() {
    let dir = tmpdir();
    let path = dir.path().join("fw.zarr");
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap();
    let before = snapshot(&path);
    let mut rng = SplitMix(14);
    let good = sample(&mut rng, 3, 2, &extras());
    for (what, bad) in mismatches(&good) {
        assert!(matches!(w.write(&[good.clone(), bad]), Err(Error::InvalidInput { .. })), "{what}");
        assert_same_snapshot(&before, &snapshot(&path), what);
    }
    assert!(matches!(w.write(&[AtomicData::default()]), Err(Error::InvalidInput { .. })), "a sample without fields");
    assert_same_snapshot(&before, &snapshot(&path), "no fields");
    assert_reads(&path, &[], "still empty");
    w.write(std::slice::from_ref(&good)).unwrap();
    assert_reads(&path, &[good], "then written");
}

#[test]
fn write_on_a_non_empty_store_and_create_on_an_existing_path_are_refused() {
    let dir = tmpdir();
    let path = dir.path().join("w.zarr");
    let a = samples(15, 3, 4, 4, &extras());
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap();
    w.write(&a).unwrap();
    let before = snapshot(&path);
    match w.write(&a) {
        Err(Error::InvalidInput { context, reason }) => {
            assert!(context.contains(path.to_str().unwrap()));
            assert!(reason.contains("append"), "{reason}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    // A second writer of the store waits for the first (one at a time).
    match AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()) {
        Err(Error::Locked { store, holder: Some(h), .. }) => {
            assert_eq!((store, h.pid), (atomzarr::Location::Local(path.clone()), std::process::id()));
        }
        other => panic!("expected Locked, got {:?}", other.map(|w| w.path().to_path_buf())),
    }
    // An empty append is a no-op.
    w.append(&[]).unwrap();
    assert_same_snapshot(&before, &snapshot(&path), "empty append");
    drop(w);
    let mut w2 = AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap();
    assert!(matches!(w2.write(&a), Err(Error::InvalidInput { .. })));
    assert_same_snapshot(&before, &snapshot(&path), "write on a non-empty store");

    // create() refuses an existing store, an empty directory and a file.
    match AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()) {
        Err(Error::AlreadyExists { store }) => assert_eq!(store, atomzarr::Location::Local(path.clone())),
        other => panic!("expected AlreadyExists, got {:?}", other.map(|w| w.path().to_path_buf())),
    }
    assert_same_snapshot(&before, &snapshot(&path), "create on an existing store");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        AtomicDataZarrWriter::create(&empty, ZarrWriteConfig::default()),
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        AtomicDataZarrWriter::create(&file, ZarrWriteConfig::default()),
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    assert_reads(&path, &a, "store intact");
}

#[test]
fn neighbor_list_of_a_non_index_dtype_is_refused_before_anything_is_written() {
    // Stored neighbor lists are offset by the atom count, which only the
    // index dtypes (int32/int64/uint32/uint64) support. A first write must
    // refuse the others up front, not after creating the schema.
    for dtype in [DType::Int8, DType::Int16, DType::UInt8, DType::UInt16, DType::Bool, DType::Float32] {
        let dir = tmpdir();
        let path = dir.path().join("nl.zarr");
        let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap();
        let before = snapshot(&path);
        let s = AtomicData::new(vec![1, 1], vec![[0.0; 3], [1.0, 0.0, 0.0]])
            .unwrap()
            .with_field("neighbor_list", Field::new(Level::Edge, vec![1, 2], HostData::zeros(dtype, 2)).unwrap());
        match w.write(&[s.clone(), s]) {
            Err(Error::InvalidInput { reason, .. }) => assert!(reason.contains("neighbor_list"), "{dtype}: {reason}"),
            other => panic!("{dtype}: expected InvalidInput, got {other:?}"),
        }
        assert_same_snapshot(&before, &snapshot(&path), dtype.name());
        assert_reads(&path, &[], dtype.name());
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Append `count` samples (seeded); fail after step `fail` (index into
    /// AppendStep order incl. NumSamples) when set.
    Append { seed: u64, count: usize, fail: Option<usize> },
    /// Delete the physical samples whose bit is set.
    Delete { bits: u32 },
    /// Defragment, keeping settings or switching to the other config.
    Defragment { switch_config: bool },
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (any::<u64>(), 0usize..5, proptest::option::weighted(0.4, 0usize..5))
            .prop_map(|(seed, count, fail)| Op::Append { seed, count, fail }),
        1 => any::<u32>().prop_map(|bits| Op::Delete { bits }),
        1 => any::<bool>().prop_map(|switch_config| Op::Defragment { switch_config }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, failure_persistence: None, ..Default::default() })]

    /// Random sequences of appends (some interrupted at a random step),
    /// deletes and defragments read back as the model says, through a fresh
    /// reader and through one refreshed after every operation.
    #[test]
    fn random_operation_sequences_match_the_model(
        ops in proptest::collection::vec(op_strategy(), 1..8),
        sharded in proptest::bool::ANY,
    ) {
        let all_steps = [STEPS[0], STEPS[1], STEPS[2], STEPS[3], AppendStep::NumSamples];
        let cfgs = configs();
        let mut cfg_ix = usize::from(sharded);
        let dir = tmpdir();
        let path = dir.path().join("ops.zarr");
        let mut w = AtomicDataZarrWriter::create(&path, cfgs[cfg_ix].1.clone()).unwrap();
        let live = AtomicDataZarrReader::open(&path).unwrap();
        let mut physical: Vec<AtomicData> = Vec::new();
        let mut deleted: std::collections::BTreeSet<usize> = Default::default();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Append { seed, count, fail } => {
                    let new = samples(*seed, *count, 5, 7, &extras());
                    w.fail_after(fail.map(|f| all_steps[f]));
                    let res = w.append(&new);
                    w.fail_after(None);
                    match fail {
                        Some(f) if *count > 0 => {
                            assert!(matches!(res, Err(Error::Injected(s)) if s == all_steps[*f]), "op {i}: {res:?}");
                            if all_steps[*f] == AppendStep::NumSamples {
                                physical.extend(new);
                            }
                        }
                        _ => {
                            res.unwrap();
                            physical.extend(new);
                        }
                    }
                }
                Op::Delete { bits } => {
                    let del: Vec<usize> = (0..physical.len().min(32)).filter(|p| bits & (1 << p) != 0).collect();
                    w.delete(&del).unwrap();
                    deleted.extend(del);
                }
                Op::Defragment { switch_config } => {
                    let config = if *switch_config {
                        cfg_ix = 1 - cfg_ix;
                        Some(cfgs[cfg_ix].1.clone())
                    } else {
                        None
                    };
                    w.defragment(config).unwrap();
                    physical = physical.into_iter().enumerate().filter(|(p, _)| !deleted.contains(p)).map(|(_, s)| s).collect();
                    deleted.clear();
                }
            }
            let want: Vec<AtomicData> =
                physical.iter().enumerate().filter(|(p, _)| !deleted.contains(p)).map(|(_, s)| s.clone()).collect();
            live.refresh().unwrap();
            for r in [&live, &AtomicDataZarrReader::open(&path).unwrap()] {
                assert_eq!(r.num_physical(), physical.len(), "op {i} {op:?}");
                assert_eq!(r.len(), want.len(), "op {i} {op:?}");
                for (k, (g, s)) in read_all(r).iter().zip(&want).enumerate() {
                    assert_sample_eq(g, s, &format!("op {i} {op:?}, sample {k}"));
                }
            }
        }
    }
}
