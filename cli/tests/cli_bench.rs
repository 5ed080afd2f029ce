//! The I/O benchmark CLI (`atomzarr roundtrip`, `atomzarr read`) run as a
//! binary: every read path and order delivers every sample exactly once, in
//! the requested order, with exactly the store's bytes; the Python toolkit's
//! stores read (deleted samples excluded); bad options fail clearly.
//! With `--checksum`, what was read must hash to the checksum of the written
//! samples (or of the toolkit's `*.expected.json`), computed here by a
//! re-implementation of the hash, not by the library.
//! Timings are printed, never asserted.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use atomzarr::{AtomicData, HostData};
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_atomzarr"))
}

fn assets() -> PathBuf {
    common::assets()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run the atomzarr binary")
}

/// Runs a `--json` command that must succeed; returns its rows.
fn rows(args: &[&str]) -> Vec<Value> {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: line {l:?} is not JSON: {e}")))
        .collect();
    assert!(!rows.is_empty(), "{args:?}: no rows");
    rows
}

fn u(r: &Value, key: &str) -> u64 {
    r[key].as_u64().unwrap_or_else(|| panic!("{key} missing or not an integer in {r}"))
}

/// Every sample once, in order, with the store's bytes.
fn check_complete(r: &Value, systems: u64, what: &str) {
    let ctx = format!("{what}: {} {} epoch {}", r["read_path"], r["read_order"], r["epoch"]);
    assert_eq!(u(r, "systems"), systems, "{ctx}");
    assert_eq!(u(r, "samples_read"), systems, "{ctx}: samples delivered");
    assert_eq!(u(r, "unique_samples"), systems, "{ctx}: distinct samples delivered");
    assert_eq!(r["order_ok"], true, "{ctx}: delivered in the requested order");
    assert_eq!(u(r, "read_bytes"), u(r, "raw_bytes"), "{ctx}: bytes delivered vs the store's raw bytes");
    assert!(u(r, "raw_bytes") > 0, "{ctx}");
    for key in ["read_time", "read_samples_per_s", "avg_atoms", "avg_edges", "ratio"] {
        assert!(r[key].as_f64().is_some_and(f64::is_finite), "{ctx}: {key} = {}", r[key]);
    }
    eprintln!("{ctx}: {:.0} samples/s", r["read_samples_per_s"].as_f64().unwrap_or(0.0));
}

// ------------------------------------------------ the content checksum, again

/// FNV-1a, 64 bit.
fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h = (*h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
}

/// One field as the checksum sees it: name, dtype name, shape, data as
/// little-endian bytes.
type FieldBytes = (String, String, Vec<u64>, Vec<u8>);

/// A sample's hash: fields by name; each length-prefixed name, dtype, rank
/// and dims, byte length and bytes (all integers u64 little endian).
fn hash_fields(mut fields: Vec<FieldBytes>) -> u64 {
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let u = |h: &mut u64, x: u64| fnv(h, &x.to_le_bytes());
    for (name, dtype, shape, data) in fields {
        u(&mut h, name.len() as u64);
        fnv(&mut h, name.as_bytes());
        u(&mut h, dtype.len() as u64);
        fnv(&mut h, dtype.as_bytes());
        u(&mut h, shape.len() as u64);
        shape.iter().for_each(|&d| u(&mut h, d));
        u(&mut h, data.len() as u64);
        fnv(&mut h, &data);
    }
    h
}

/// The order-independent checksum: wrapping sum of sample hashes, as printed.
fn checksum(hashes: impl Iterator<Item = u64>) -> String {
    format!("{:016x}", hashes.fold(0u64, u64::wrapping_add))
}

/// The checksum of generated samples, from their typed values.
fn checksum_of_samples(samples: &[AtomicData]) -> String {
    fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }
    checksum(samples.iter().map(|s| {
        let fields = s
            .fields
            .iter()
            .map(|(name, f)| {
                let (dtype, data) = match &f.data {
                    HostData::Bool(v) => ("bool", v.iter().map(|&b| u8::from(b)).collect()),
                    HostData::Int8(v) => ("int8", le(v, i8::to_le_bytes)),
                    HostData::Int16(v) => ("int16", le(v, i16::to_le_bytes)),
                    HostData::Int32(v) => ("int32", le(v, i32::to_le_bytes)),
                    HostData::Int64(v) => ("int64", le(v, i64::to_le_bytes)),
                    HostData::UInt8(v) => ("uint8", v.clone()),
                    HostData::UInt16(v) => ("uint16", le(v, u16::to_le_bytes)),
                    HostData::UInt32(v) => ("uint32", le(v, u32::to_le_bytes)),
                    HostData::UInt64(v) => ("uint64", le(v, u64::to_le_bytes)),
                    HostData::Float16(v) => ("float16", le(v, half::f16::to_le_bytes)),
                    HostData::BFloat16(v) => ("bfloat16", le(v, half::bf16::to_le_bytes)),
                    HostData::Float32(v) => ("float32", le(v, f32::to_le_bytes)),
                    HostData::Float64(v) => ("float64", le(v, f64::to_le_bytes)),
                };
                (name.clone(), dtype.to_string(), f.shape.iter().map(|&d| d as u64).collect(), data)
            })
            .collect();
        hash_fields(fields)
    }))
}

/// The checksum of a reference store's `*.expected.json` (what the Python
/// toolkit's reader returns: active samples, neighbor lists sample-local).
fn checksum_of_expected(name: &str) -> String {
    let text = std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).expect("expected json");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let samples = doc["samples"].as_array().expect("samples");
    checksum(samples.iter().map(|s| {
        let fields = s
            .as_object()
            .expect("sample")
            .iter()
            .map(|(name, f)| {
                let dtype = f["dtype"].as_str().expect("dtype").to_string();
                let shape: Vec<u64> =
                    f["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim")).collect();
                let values = f["data"].as_array().expect("data");
                let float = |x: &Value| x.as_f64().expect("float");
                let int = |x: &Value| x.as_i64().expect("int");
                let data: Vec<u8> = values
                    .iter()
                    .flat_map(|x| match dtype.as_str() {
                        "bool" => vec![u8::from(x.as_bool().expect("bool"))],
                        "float16" => half::f16::from_f64(float(x)).to_le_bytes().to_vec(),
                        "float32" => (float(x) as f32).to_le_bytes().to_vec(),
                        "float64" => float(x).to_le_bytes().to_vec(),
                        "int8" | "uint8" => vec![int(x) as u8],
                        "int16" | "uint16" => (int(x) as i16).to_le_bytes().to_vec(),
                        "int32" | "uint32" => (int(x) as i32).to_le_bytes().to_vec(),
                        "int64" | "uint64" => int(x).to_le_bytes().to_vec(),
                        other => panic!("{name}: dtype {other} not in the fixtures"),
                    })
                    .collect();
                (name.clone(), dtype, shape, data)
            })
            .collect();
        hash_fields(fields)
    }))
}

/// The samples `roundtrip` writes for `-n n` with the default generator
/// settings (10-100 atoms, seed 42).
fn roundtrip_samples(n: usize) -> Vec<AtomicData> {
    atomzarr::data::synth::generate(n, 10, 100, 42).expect("generate")
}

const SMALL: &[&str] = &[
    "-n",
    "300",
    "--codec",
    "zstd",
    "--level",
    "3",
    "--chunk-size",
    "512",
    "--shard-size",
    "2048",
    "--edge-chunk-size",
    "1024",
    "--edge-shard-size",
    "4096",
    "--batch-size",
    "16",
    "--prefetch-factor",
    "4",
];

#[test]
fn roundtrip_every_order_and_mode_reads_each_sample_once() {
    for order in ["sequential", "shuffle", "block-shuffle"] {
        let mut args = vec![
            "roundtrip",
            "--json",
            "--checksum",
            "--read-order",
            order,
            "--read-order-block-size",
            "50",
            "--read-seed",
            "7",
        ];
        args.extend_from_slice(SMALL);
        args.extend_from_slice(&["--read-mode", "batch", "--read-mode", "single", "--read-mode", "raw"]);
        let rs = rows(&args);
        let want = checksum_of_samples(&roundtrip_samples(300));
        let paths: Vec<&str> = rs.iter().map(|r| r["read_path"].as_str().unwrap_or("?")).collect();
        assert_eq!(paths, ["batch", "single", "raw"], "{order}");
        for r in &rs {
            check_complete(r, 300, order);
            assert_eq!(
                r["content_checksum"],
                want.as_str(),
                "{order} {}: content of the written samples",
                r["read_path"]
            );
            assert_eq!(r["read_order"], order);
            assert!(r["write_time"].as_f64().is_some_and(|t| t > 0.0), "{r}");
            assert!(r["write_samples_per_s"].as_f64().is_some_and(|t| t > 0.0), "{r}");
            assert!(u(r, "disk_bytes") > 0 && u(r, "num_files") > 0, "{r}");
            assert_eq!(
                r["read_order_block_size"],
                if order == "block-shuffle" { Value::from(50) } else { Value::Null }
            );
        }
        let single = &rs[1];
        assert_eq!((u(single, "batch"), u(single, "prefetch"), u(single, "read_window")), (1, 0, 1));
        let raw = &rs[2];
        assert_eq!((u(raw, "batch"), u(raw, "prefetch"), u(raw, "read_window")), (16, 4, 64));
    }
}

#[test]
fn roundtrip_bulk_preset_writes_periodic_cells_with_their_neighbor_lists() {
    let rs = rows(&[
        "roundtrip",
        "--json",
        "--checksum",
        "--preset",
        "bulk",
        "-n",
        "30",
        "--read-order",
        "shuffle",
        "--read-mode",
        "batch",
        "--read-mode",
        "raw",
    ]);
    let cells =
        atomzarr::data::synth::Generator::with_preset(atomzarr::data::synth::Preset::Bulk { cutoff: 5.0 }, 50, 300, 42)
            .and_then(|mut g| g.batch(30))
            .expect("generate");
    let want = checksum_of_samples(&cells);
    for r in &rs {
        check_complete(r, 30, "bulk");
        assert_eq!(r["content_checksum"], want.as_str(), "{}", r["read_path"]);
        let (atoms, edges) = (r["avg_atoms"].as_f64().unwrap(), r["avg_edges"].as_f64().unwrap());
        assert!((50.0..=300.0).contains(&atoms), "{atoms} atoms per cell");
        // fcc metals at 5 Å: 42 (Cu, Al) to 54 (Ni) neighbors, rattled.
        assert!((35.0..=60.0).contains(&(edges / atoms)), "{} neighbors per atom", edges / atoms);
    }
}

#[test]
fn roundtrip_several_sizes_codecs_epochs_and_no_cache() {
    // -n repeatable (sorted ascending), both = batch then single, epochs with
    // one reader, cache disabled, prefetch 0 (window = batch), blosc codecs.
    for codec in ["lz4", "blosc-zstd"] {
        let rs = rows(&[
            "roundtrip",
            "--json",
            "--checksum",
            "-n",
            "200",
            "-n",
            "120",
            "--codec",
            codec,
            "--chunk-size",
            "256",
            "--read-mode",
            "both",
            "--read-mode",
            "raw",
            "--epochs",
            "2",
            "--cache-bytes",
            "0",
            "--prefetch-factor",
            "0",
            "--batch-size",
            "32",
            "--read-order",
            "shuffle",
        ]);
        assert_eq!(rs.len(), 2 * 3 * 2, "{codec}: 2 sizes x 3 paths x 2 epochs");
        let samples = roundtrip_samples(200);
        for r in &rs {
            check_complete(r, u(r, "systems"), codec);
            let want = checksum_of_samples(&samples[..u(r, "systems") as usize]);
            assert_eq!(r["content_checksum"], want.as_str(), "{codec} {} epoch {}", r["read_path"], r["epoch"]);
            assert_eq!(u(r, "cache_hits"), 0, "{codec}: cache disabled");
            assert!(u(r, "cache_misses") > 0);
        }
        assert_eq!(u(&rs[0], "systems"), 120);
        assert_eq!(u(&rs[6], "systems"), 200);
        let paths: Vec<&str> = rs[..6].iter().map(|r| r["read_path"].as_str().unwrap_or("?")).collect();
        assert_eq!(paths, ["batch", "batch", "single", "single", "raw", "raw"]);
        assert_eq!(u(&rs[4], "read_window"), 32, "prefetch 0 reads one batch at a time");
    }
}

#[test]
fn second_epoch_is_served_from_the_cache() {
    let mut args = vec!["roundtrip", "--json", "--read-mode", "raw", "--read-order", "shuffle", "--epochs", "2"];
    args.extend_from_slice(SMALL);
    let rs = rows(&args);
    assert_eq!(rs.len(), 2);
    assert!(u(&rs[0], "cache_misses") > 0);
    assert_eq!(u(&rs[1], "cache_misses"), 0, "the store fits the default budget: epoch 2 decodes nothing");
    assert!(u(&rs[1], "cache_hits") > 0);
}

/// Bytes of every field of every sample in a reference `*.expected.json`.
fn expected_bytes(name: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).expect("expected json");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let samples = doc["samples"].as_array().expect("samples");
    let size = |d: &str| match d {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        _ => 8,
    };
    let bytes = samples
        .iter()
        .flat_map(|s| s.as_object().expect("sample").values())
        .map(|f| f["data"].as_array().map_or(0, Vec::len) as u64 * size(f["dtype"].as_str().unwrap_or("")))
        .sum();
    (samples.len() as u64, bytes)
}

/// Copies a directory tree, writable (the fixtures are read-only).
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
            let mut perm = std::fs::metadata(&to).expect("metadata").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&to, perm).expect("chmod");
        }
    }
}

#[test]
fn read_reference_stores_every_mode_and_order() {
    // The toolkit's appended halves hold neighbor indices outside their
    // samples (its append bug), which batch paths refuse: the batch and raw
    // paths read a repaired copy (same samples, same bytes), the single
    // path (`read`, as the toolkit returns samples) the store itself.
    let dir = common::tmpdir();
    for name in ["nva_custom_deleted", "nva_sharded_zstd", "nva_default"] {
        let (active, bytes) = expected_bytes(name);
        let store = assets().join(format!("{name}.zarr"));
        let repaired = dir.path().join(format!("{name}.zarr"));
        copy_dir(&store, &repaired);
        let out = run(&["repair", repaired.to_str().unwrap_or_default()]);
        assert!(out.status.success(), "{name}: repair: {}", String::from_utf8_lossy(&out.stderr));
        for order in ["sequential", "shuffle", "block-shuffle"] {
            let common = [
                "--json",
                "--read-order",
                order,
                "--read-order-block-size",
                "8",
                "--batch-size",
                "8",
                "--prefetch-factor",
                "2",
            ];
            let mut args = vec!["read", repaired.to_str().unwrap_or_default()];
            args.extend(common);
            args.extend(["--read-mode", "batch", "--read-mode", "raw"]);
            let mut rs = rows(&args);
            let mut args = vec!["read", store.to_str().unwrap_or_default()];
            args.extend(common);
            args.extend(["--read-mode", "single"]);
            rs.extend(rows(&args));
            assert_eq!(rs.len(), 3);
            let paths: Vec<&str> = rs.iter().map(|r| r["read_path"].as_str().unwrap_or("?")).collect();
            assert_eq!(paths, ["batch", "raw", "single"]);
            for r in &rs {
                check_complete(r, active, name);
                assert_eq!(u(r, "raw_bytes"), bytes, "{name}: raw bytes vs the reference reader's samples");
                assert_eq!(r["write_time"], Value::Null);
            }
        }
    }
    // The deleted samples really are excluded.
    let (active, _) = expected_bytes("nva_custom_deleted");
    let physical = std::fs::read_to_string(assets().join("nva_custom_deleted.zarr/zarr.json")).expect("root");
    let physical: Value = serde_json::from_str(&physical).expect("json");
    assert_eq!(u(&physical["attributes"], "num_samples"), active + 5);
}

/// Per-sample reads (the toolkit-compatible path) of the reference stores
/// deliver exactly the toolkit's samples, deleted ones excluded, in any order.
#[test]
fn reference_store_checksums_match_the_toolkit() {
    for name in ["nva_custom_deleted", "nva_sharded_zstd", "nva_default"] {
        let want = checksum_of_expected(name);
        let store = assets().join(format!("{name}.zarr"));
        for order in ["sequential", "shuffle"] {
            let rs = rows(&[
                "read",
                store.to_str().unwrap_or_default(),
                "--json",
                "--checksum",
                "--read-order",
                order,
                "--read-mode",
                "single",
            ]);
            assert_eq!(rs[0]["content_checksum"], want.as_str(), "{name} {order}");
        }
    }
}

/// Bytes changed on disk in a way no decoder notices (an uncompressed chunk)
/// pass every count check, but not the checksum. Without `--checksum` there
/// is none.
#[test]
fn the_checksum_catches_wrong_content_the_counts_do_not() {
    let dir = common::tmpdir();
    let out = dir.path().to_str().unwrap_or_default();
    // Chunk checksums off, so the flipped byte below reaches the data (with
    // them on, the read fails first: see the end of this test).
    let rt = rows(&[
        "roundtrip",
        "--json",
        "-n",
        "40",
        "--codec",
        "none",
        "--no-checksum",
        "--read-mode",
        "single",
        "--output-dir",
        out,
    ]);
    assert_eq!(rt[0]["content_checksum"], Value::Null, "computed only when asked");
    let store = dir.path().join("bench_40.zarr");
    let read = || {
        rows(&[
            "read",
            store.to_str().unwrap_or_default(),
            "--json",
            "--checksum",
            "--read-mode",
            "single",
            "--read-mode",
            "raw",
        ])
    };
    let want = checksum_of_samples(&roundtrip_samples(40));
    for r in read() {
        assert_eq!(r["content_checksum"], want.as_str());
    }
    let chunk = store.join("core/positions/c/0/0");
    let mut b = std::fs::read(&chunk).expect("chunk");
    b[100] ^= 0x40;
    std::fs::write(&chunk, b).expect("write");
    for r in read() {
        check_complete(&r, 40, "flipped byte");
        assert_ne!(r["content_checksum"], want.as_str(), "{}: a flipped byte went unnoticed", r["read_path"]);
    }
    // The same flip in a checksummed store (the default) is refused outright.
    let dir2 = common::tmpdir();
    let out2 = dir2.path().to_str().unwrap_or_default();
    rows(&["roundtrip", "--json", "-n", "40", "--codec", "none", "--read-mode", "single", "--output-dir", out2]);
    let store2 = dir2.path().join("bench_40.zarr");
    let chunk = store2.join("core/positions/c/0/0");
    let mut b = std::fs::read(&chunk).expect("chunk");
    b[100] ^= 0x40;
    std::fs::write(&chunk, b).expect("write");
    let failed = run(&["read", store2.to_str().unwrap_or_default(), "--json", "--read-mode", "single"]);
    assert!(!failed.status.success());
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(err.contains("core/positions") && err.contains("checksum mismatch"), "{err}");
}

#[test]
fn read_our_own_store_matches_its_roundtrip() {
    let dir = common::tmpdir();
    let out = dir.path().to_str().unwrap_or_default();
    let mut args = vec!["roundtrip", "--json", "--read-mode", "raw", "--output-dir", out];
    args.extend_from_slice(SMALL);
    let rt = rows(&args);
    let store = dir.path().join("bench_300.zarr");
    assert!(store.join("zarr.json").exists(), "--output-dir keeps the store");
    let rd =
        rows(&["read", store.to_str().unwrap_or_default(), "--json", "--read-mode", "raw", "--read-order", "shuffle"]);
    check_complete(&rd[0], 300, "read");
    for key in ["raw_bytes", "disk_bytes", "num_files", "total_atoms", "total_edges"] {
        assert_eq!(rd[0][key], rt[0][key], "{key}");
    }
    // A second roundtrip into the same directory refuses to overwrite.
    let again = run(&args);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn table_output_has_the_reference_columns() {
    let mut args = vec!["roundtrip", "--read-mode", "raw"];
    args.extend_from_slice(SMALL);
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for col in [
        "systems",
        "read path",
        "read order",
        "batch",
        "prefetch",
        "read window",
        "avg atoms",
        "avg edges",
        "raw bytes",
        "disk bytes",
        "ratio",
        "file count",
        "write time",
        "read time",
        "samples/s",
    ] {
        assert!(text.contains(col), "column {col} missing:\n{text}");
    }
}

#[test]
fn bad_options_fail_with_a_message() {
    let store = assets().join("nva_default.zarr");
    let store = store.to_str().unwrap_or_default();
    let not_a_store = common::tmpdir();
    let missing = not_a_store.path().join("missing.zarr");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["read", store, "--prefetch-factor", "-1"], "prefetch_factor must be >= 0"),
        (vec!["read", store, "--batch-size", "0"], "batch_size must be >= 1"),
        (vec!["read", store, "--read-order-block-size", "0"], "read_order_block_size must be >= 1"),
        (vec!["roundtrip", "-n", "10", "--prefetch-factor", "-3"], "prefetch_factor must be >= 0"),
        (vec!["roundtrip", "-n", "10", "--batch-size", "0"], "batch_size must be >= 1"),
        (vec!["roundtrip", "-n", "10", "--read-order-block-size", "0"], "read_order_block_size must be >= 1"),
        (vec!["roundtrip", "-n", "10", "--codec", "lz4", "--level", "12"], "outside 0..=9"),
        (vec!["roundtrip", "-n", "10", "--chunk-size", "100", "--shard-size", "150"], "multiple"),
        (vec!["read", not_a_store.path().to_str().unwrap_or_default()], "not an atomzarr store"),
        (vec!["read", missing.to_str().unwrap_or_default()], "no such path"),
        (vec!["read", store, "--read-order", "random"], "invalid value"),
        (vec!["read", store, "--rank", "2", "--world-size", "2"], "rank 2 out of range for world_size 2"),
        (vec!["read", store, "--world-size", "0"], "out of range for world_size 0"),
    ];
    for (args, msg) in cases {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.contains(msg), "{args:?}: stderr {err:?} lacks {msg:?}");
        assert!(out.stdout.is_empty() || !String::from_utf8_lossy(&out.stdout).contains("samples/s"), "{args:?}");
    }
}

/// `read --read-order sequential --rank R`: rank R's contiguous range of
/// the store, as a loader with `with_rank` reads it; the ranks together
/// decode the store about once.
#[test]
fn sequential_ranks_read_contiguous_ranges_and_decode_their_share() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    rows(&["roundtrip", "-n", "4000", "--chunk-size", "64", "--edge-chunk-size", "256", "--output-dir", out, "--json"]);
    let store = dir.path().join("bench_4000.zarr");
    let store = store.to_str().unwrap();
    let hex = |r: &Value| u64::from_str_radix(r["content_checksum"].as_str().unwrap(), 16).unwrap();
    // The whole store's content, one rank; the content hash is a sum over
    // samples, so the ranks' hashes add up to it only if together they read
    // every sample once.
    let whole = hex(&rows(&["read", store, "--json", "--read-order", "sequential", "--checksum"])[0]);
    for mode in ["batch", "raw", "single"] {
        let (mut seen, mut sum) = (0, 0u64);
        for rank in 0..4 {
            let rank_s = rank.to_string();
            let r = &rows(&[
                "read",
                store,
                "--json",
                "--read-order",
                "sequential",
                "--read-mode",
                mode,
                "--rank",
                &rank_s,
                "--world-size",
                "4",
                "--checksum",
            ])[0];
            sum = sum.wrapping_add(hex(r));
            let ctx = format!("rank {rank}, {mode}");
            assert_eq!(u(r, "samples_read"), 1000, "{ctx}: a quarter each");
            assert_eq!(u(r, "unique_samples"), 1000, "{ctx}");
            assert_eq!(r["order_ok"], true, "{ctx}: samples {}.. in order", 1000 * rank);
            // Its range's chunks, and a partial chunk at each end.
            let amp = r["decode_amplification"].as_f64().unwrap();
            assert!(amp <= 1.1, "{ctx}: decode amplification {amp}");
            seen += u(r, "unique_samples");
        }
        assert_eq!(seen, 4000, "{mode}");
        assert_eq!(sum, whole, "{mode}: the ranks together read the store once");
    }
}

#[test]
fn default_shuffle_reads_the_block_pool_per_rank_on_a_store_larger_than_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // 3,000 samples of 10-100 atoms in chunks of 256 rows, read with a
    // cache of a quarter of their decoded bytes.
    let made = rows(&[
        "roundtrip",
        "-n",
        "3000",
        "--chunk-size",
        "256",
        "--edge-chunk-size",
        "256",
        "--output-dir",
        out,
        "--json",
    ]);
    let raw = u(&made[0], "raw_bytes");
    let store = dir.path().join("bench_3000.zarr");
    let store = store.to_str().unwrap();
    let cache = (raw / 4).to_string();
    let mut seen = 0;
    for rank in ["0", "1"] {
        for mode in ["batch", "raw"] {
            let r = &rows(&[
                "read",
                store,
                "--json",
                "--read-order",
                "default-shuffle",
                "--read-mode",
                mode,
                "--cache-bytes",
                &cache,
                "--rank",
                rank,
                "--world-size",
                "2",
            ])[0];
            let ctx = format!("rank {rank}, {mode}");
            // Half the epoch each, in the loader's own order, no sample twice.
            assert_eq!(u(r, "samples_read"), 1500, "{ctx}");
            assert_eq!(u(r, "unique_samples"), 1500, "{ctx}");
            assert_eq!(r["order_ok"], true, "{ctx}");
            assert!(u(r, "pool_blocks") >= 64, "{ctx}: the pool size is reported: {r}");
            assert!(r["first_batch_s"].as_f64().is_some_and(|t| t > 0.0 && t <= r["read_time"].as_f64().unwrap()));
            // Its region's chunks, about half of the store's (blocks of a
            // few samples here: chunks straddling them add up to 1x).
            assert!(r["decode_amplification"].as_f64().unwrap() < 2.0, "{ctx}: {r}");
            if mode == "batch" {
                seen += u(r, "samples_read");
            }
        }
    }
    assert_eq!(seen, 3000);
    // A cache holding the store: a full permutation, no pool.
    let r = &rows(&["read", store, "--json", "--read-order", "default-shuffle"])[0];
    check_complete(r, 3000, "default-shuffle, store in the cache");
    assert!(r["pool_blocks"].is_null());
}

/// `read --json` counts the minor page faults of each pass and per GB
/// delivered; a second epoch over a store in the cache touches far fewer
/// fresh pages than the first, which fills the cache.
#[test]
fn read_json_reports_page_faults_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    rows(&["roundtrip", "-n", "2000", "--output-dir", out, "--json"]);
    let store = dir.path().join("bench_2000.zarr");
    let got = rows(&["read", store.to_str().unwrap(), "--json", "--read-order", "shuffle", "--epochs", "2"]);
    assert_eq!(got.len(), 2);
    if cfg!(not(target_os = "linux")) {
        return;
    }
    for r in &got {
        let faults = u(r, "minor_faults") as f64;
        let per_gb = r["minor_faults_per_gb"].as_f64().unwrap();
        let gb = u(r, "read_bytes") as f64 / 1e9;
        assert!((per_gb - faults / gb).abs() <= 1e-6 * per_gb.max(1.0), "{r}");
    }
    let (first, second) = (u(&got[0], "minor_faults"), u(&got[1], "minor_faults"));
    assert!(first > 0, "opening and filling the cache touches fresh pages");
    assert!(second < first, "the second epoch reads from the cache: {first} then {second}");
}
