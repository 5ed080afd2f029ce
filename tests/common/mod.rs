//! Helpers shared by every integration test: the fixtures, the one place
//! temporary stores are made ([`tmpdir`], [`disk_tmpdir`]), sample
//! generators and comparisons. Each test binary uses a subset, hence the
//! allow.
#![allow(dead_code)]

pub mod http_server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atomzarr::{AtomicData, DType, Field, HostData, Level, Reader, ReaderExt};
use half::{bf16, f16};
use serde_json::Value;

/// The repository root: the folder above the testing crate's manifest
/// (the library's, or the command line's in `cli/`) that holds `assets/`.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().find(|p| p.join("assets").is_dir()).unwrap_or(manifest).to_path_buf()
}

/// The fixtures folder of the repository.
pub fn assets() -> PathBuf {
    repo_root().join("assets")
}

/// `atomzarr dump`'s JSON of a reader (through the library).
pub fn dump_json(r: &atomzarr::AtomicDataZarrReader) -> String {
    let mut out = Vec::new();
    atomzarr::formats::dump::dump_json(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The toolkit's dump of fixture `name` (`assets/NAME.expected.json`).
pub fn expected_dump(name: &str) -> String {
    std::fs::read_to_string(assets().join(format!("{name}.expected.json"))).unwrap()
}

/// A temporary folder on disk (Cargo's `target/tmp`), never a tmpfs: for
/// tests whose syncs and renames must be real (the crash tests).
pub fn disk_tmpdir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new().prefix("atomzarr-disk-").tempdir_in(base).unwrap()
}

/// A temporary folder for a test's stores: in `/dev/shm` where it exists
/// (every commit syncs; memory makes that free), else the system's.
pub fn tmpdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if let Some(d) =
        shm.is_dir().then(|| tempfile::Builder::new().prefix("atomzarr-test-").tempdir_in(shm).ok()).flatten()
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// Names (without `.zarr`) of every reference store in `assets/`.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(assets())
        .expect("assets/ is readable")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".zarr").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "expected the reference stores in assets/, found {names:?}");
    names
}

/// Copies a directory tree, making every copy writable (the fixtures are
/// read-only and `fs::copy` keeps permissions).
/// An 8-sample blosc-lz4 store at `dir/blosc.zarr` without chunk checksums
/// (a checksum would refuse the edited header before blosc sees it), whose
/// first `core/positions` chunk's blosc header claims `decoded` bytes.
pub fn blosc_store_claiming(dir: &Path, decoded: u32) -> PathBuf {
    use atomzarr::{AtomicDataZarrWriter, Codec, Shuffle, ZarrArrayConfig, ZarrWriteConfig};
    let store = dir.join("blosc.zarr");
    let c = ZarrArrayConfig::default()
        .with_codec(Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle })
        .with_chunk_size(16)
        .with_checksum(false);
    AtomicDataZarrWriter::create(&store, ZarrWriteConfig::default().with_core(c))
        .unwrap()
        .write(&atomzarr::data::synth::generate(8, 3, 6, 1).unwrap())
        .unwrap();
    let chunk = store.join("core/positions/c/0/0");
    let mut b = std::fs::read(&chunk).unwrap();
    b[4..8].copy_from_slice(&decoded.to_le_bytes());
    std::fs::write(&chunk, b).unwrap();
    store
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    set_writable(dst);
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
            set_writable(&to);
        }
    }
}

fn set_writable(p: &Path) {
    let mut perm = std::fs::metadata(p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(p, perm).unwrap();
}

/// Every file under `dir` (relative path -> bytes), except the writer
/// lock's file, which names whichever writer holds it (not store data).
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name() != atomzarr::store::lock::LOCK_FILE {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

/// Asserts two snapshots are identical, naming the first differing file.
pub fn assert_same_snapshot(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let kb: Vec<_> = before.keys().collect();
    let ka: Vec<_> = after.keys().collect();
    assert_eq!(kb, ka, "{what}: the set of files changed");
    for (k, v) in before {
        assert!(after[k] == *v, "{what}: {} changed", k.display());
    }
}

/// Reads a JSON file.
pub fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A `zarr.json` inside a store.
pub fn zarr_json(store: &Path, rel: &str) -> Value {
    json(&store.join(rel).join("zarr.json"))
}

/// Deterministic pseudo-random numbers (splitmix64), so tests need no seed plumbing.
#[derive(Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A float in [-4, 4) with a few fractional bits, exactly representable in f32.
    pub fn f32(&mut self) -> f32 {
        (self.below(1 << 16) as f32 - 32768.0) / 8192.0 + (self.below(1000) as f32) * 1e-7
    }
}

/// `len` values of `dtype`, spanning the type's range (extremes included).
pub fn host_data(dtype: DType, len: usize, rng: &mut SplitMix) -> HostData {
    let mut r = || rng.next_u64();
    match dtype {
        DType::Bool => HostData::Bool((0..len).map(|_| r() & 1 == 1).collect()),
        DType::Int8 => HostData::Int8((0..len).map(|_| r() as i8).collect()),
        DType::Int16 => HostData::Int16((0..len).map(|_| r() as i16).collect()),
        DType::Int32 => HostData::Int32((0..len).map(|_| r() as i32).collect()),
        DType::Int64 => HostData::Int64((0..len).map(|i| if i == 0 { i64::MIN } else { r() as i64 }).collect()),
        DType::UInt8 => HostData::UInt8((0..len).map(|_| r() as u8).collect()),
        DType::UInt16 => HostData::UInt16((0..len).map(|_| r() as u16).collect()),
        DType::UInt32 => HostData::UInt32((0..len).map(|_| r() as u32).collect()),
        DType::UInt64 => HostData::UInt64((0..len).map(|i| if i == 0 { u64::MAX } else { r() }).collect()),
        DType::Float16 => HostData::Float16((0..len).map(|_| f16::from_bits((r() as u16) & 0x7bff)).collect()),
        DType::BFloat16 => HostData::BFloat16((0..len).map(|_| bf16::from_bits((r() as u16) & 0x7f7f)).collect()),
        DType::Float32 => HostData::Float32((0..len).map(|_| f32::from_bits((r() as u32) & 0x7f7f_ffff)).collect()),
        DType::Float64 => HostData::Float64((0..len).map(|_| f64::from_bits(r() & 0x7fef_ffff_ffff_ffff)).collect()),
    }
}

/// Which custom fields a generated sample carries.
#[derive(Debug, Clone)]
pub struct Extras {
    /// `(name, level, dtype, trailing shape)` of each custom field.
    pub custom: Vec<(String, Level, DType, Vec<usize>)>,
    /// Add shifts, forces, cell, pbc, energy (the usual core set).
    pub full_core: bool,
}

impl Default for Extras {
    fn default() -> Self {
        Extras { custom: vec![], full_core: true }
    }
}

/// A valid sample with `atoms` atoms and `edges` edges (edges must be 0
/// when atoms is 0).
pub fn sample(rng: &mut SplitMix, atoms: usize, edges: usize, extras: &Extras) -> AtomicData {
    assert!(atoms > 0 || edges == 0);
    let z: Vec<i64> = (0..atoms).map(|_| 1 + rng.below(100) as i64).collect();
    let pos: Vec<[f32; 3]> = (0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect();
    let mut s = AtomicData::new(z, pos).unwrap();
    let pairs: Vec<[i64; 2]> =
        (0..edges).map(|_| [rng.below(atoms as u64) as i64, rng.below(atoms as u64) as i64]).collect();
    if extras.full_core {
        let shifts: Vec<[f32; 3]> = (0..edges).map(|_| [rng.f32(), 0.0, -rng.f32()]).collect();
        s = s
            .with_neighbor_list(pairs, Some(shifts))
            .unwrap()
            .with_forces((0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect())
            .unwrap()
            .with_energy(rng.f32() * 100.0)
            .with_cell([[rng.f32(), 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, rng.f32()]])
            .with_pbc([rng.below(2) == 1, true, false]);
    } else {
        s = s.with_neighbor_list(pairs, None).unwrap();
    }
    for (name, level, dtype, trailing) in &extras.custom {
        let rows = match level {
            Level::Atom => atoms,
            Level::Edge => edges,
            Level::System => 1,
        };
        let mut shape = vec![rows];
        shape.extend(trailing);
        let n: usize = shape.iter().product();
        s = s.with_custom(name, *level, shape, host_data(*dtype, n, rng)).unwrap();
    }
    s
}

/// `count` samples with atom counts in `0..=max_atoms` and edge counts in
/// `0..=max_edges` (0 edges for 0 atoms).
pub fn samples(seed: u64, count: usize, max_atoms: usize, max_edges: usize, extras: &Extras) -> Vec<AtomicData> {
    let mut rng = SplitMix(seed);
    (0..count)
        .map(|_| {
            let atoms = rng.below(max_atoms as u64 + 1) as usize;
            let edges = if atoms == 0 { 0 } else { rng.below(max_edges as u64 + 1) as usize };
            sample(&mut rng, atoms, edges, extras)
        })
        .collect()
}

/// Bit-exact comparison of two samples (names, level, dtype, shape, bytes).
pub fn assert_sample_eq(got: &AtomicData, want: &AtomicData, what: &str) {
    let gk: Vec<_> = got.fields.keys().collect();
    let wk: Vec<_> = want.fields.keys().collect();
    assert_eq!(gk, wk, "{what}: field names");
    for (name, w) in &want.fields {
        let g = &got.fields[name];
        assert_eq!(g.level, w.level, "{what}: {name} level");
        assert_eq!(g.dtype(), w.dtype(), "{what}: {name} dtype");
        assert_eq!(g.shape, w.shape, "{what}: {name} shape");
        assert!(
            g.data.as_bytes() == w.data.as_bytes(),
            "{what}: {name} data differ:\n got {:?}\nwant {:?}",
            g.data,
            w.data
        );
    }
}

/// Compares one sample to its `expected.json` entry: dtype name, shape and
/// every value exactly (floats widened to f64; the JSON holds the f64 repr of
/// each float32, so equality is exact).
pub fn assert_sample_matches_json(got: &AtomicData, want: &Value, what: &str) {
    let want = want.as_object().unwrap_or_else(|| panic!("{what}: sample is not an object"));
    let gk: Vec<&String> = got.fields.keys().collect();
    let wk: Vec<&String> = want.keys().collect();
    let mut wk_sorted = wk.clone();
    wk_sorted.sort();
    assert_eq!(gk, wk_sorted, "{what}: field names");
    for (name, w) in want {
        let f: &Field = &got.fields[name];
        let what = format!("{what}, field {name}");
        assert_eq!(f.dtype().name(), w["dtype"].as_str().unwrap(), "{what}: dtype");
        let shape: Vec<usize> = w["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        assert_eq!(f.shape, shape, "{what}: shape");
        let data = w["data"].as_array().unwrap();
        assert_eq!(f.data.len(), data.len(), "{what}: element count");
        match &f.data {
            HostData::Bool(v) => {
                for (i, (g, w)) in v.iter().zip(data).enumerate() {
                    assert_eq!(Some(*g), w.as_bool(), "{what}[{i}]");
                }
            }
            HostData::UInt64(v) => {
                for (i, (g, w)) in v.iter().zip(data).enumerate() {
                    assert_eq!(Some(*g), w.as_u64(), "{what}[{i}]");
                }
            }
            d if d.to_i64_vec().is_some() => {
                for (i, (g, w)) in d.to_i64_vec().unwrap().iter().zip(data).enumerate() {
                    assert!(w.is_i64(), "{what}[{i}]: JSON value {w} is not an integer");
                    assert_eq!(Some(*g), w.as_i64(), "{what}[{i}]");
                }
            }
            d => {
                for (i, (g, w)) in d.to_f64_vec().iter().zip(data).enumerate() {
                    assert!(w.is_f64(), "{what}[{i}]: JSON value {w} is not a float");
                    let w = w.as_f64().unwrap();
                    assert!(g.to_bits() == w.to_bits(), "{what}[{i}]: {g:?} != {w:?}");
                }
            }
        }
    }
}

/// The built `atomzarr` binary: Cargo names it to the command line's own
/// tests (cli/tests), which are the tests that run it.
pub fn cli_binary() -> &'static str {
    match option_env!("CARGO_BIN_EXE_atomzarr") {
        Some(path) => path,
        None => panic!("the atomzarr binary: run this test from the atomzarr-cli crate (cli/tests)"),
    }
}

/// Runs the built CLI; returns (status success, stdout, stderr).
pub fn cli(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(cli_binary()).args(args).output().expect("run the atomzarr binary");
    (
        out.status.success(),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every logical sample of a reader, in order.
pub fn read_all(r: &dyn Reader) -> Vec<AtomicData> {
    let idx: Vec<i64> = (0..r.len() as i64).collect();
    r.read_many(&idx).unwrap().into_iter().map(|s| s.data).collect()
}

/// `narrow` is `wide` read with `CollateOptions::narrow_int64`: the same
/// batch, except that each int64 field listed in `narrowed` is int32 with
/// the same values, and every other field is unchanged.
pub fn assert_narrowed_eq(
    narrow: &atomzarr::CollatedBatch,
    wide: &atomzarr::CollatedBatch,
    narrowed: &[&str],
    what: &str,
) {
    assert_eq!(narrow.indices, wide.indices, "{what}: indices");
    assert_eq!(narrow.atoms_ptr, wide.atoms_ptr, "{what}: atoms_ptr");
    assert_eq!(narrow.edges_ptr, wide.edges_ptr, "{what}: edges_ptr");
    assert_eq!(narrow.fields.keys().collect::<Vec<_>>(), wide.fields.keys().collect::<Vec<_>>(), "{what}: fields");
    for (name, w) in &wide.fields {
        let n = &narrow.fields[name];
        assert_eq!((n.level, &n.trailing_shape), (w.level, &w.trailing_shape), "{what}: {name} layout");
        if narrowed.contains(&name.as_str()) {
            assert_eq!(w.data.dtype(), DType::Int64, "{what}: {name} is stored int64");
            assert_eq!(n.data.dtype(), DType::Int32, "{what}: {name} narrowed");
            assert_eq!(n.data.to_i64_vec(), w.data.to_i64_vec(), "{what}: {name} values");
        } else {
            assert_eq!(n.data, w.data, "{what}: {name} unchanged");
        }
    }
}

/// `atomzarr dump STORE` as JSON (`NaN`, which Python's json writes and serde_json does
/// not read, becomes `null`).
pub fn cli_dump(store: &Path) -> Value {
    let (ok, out, err) = cli(&["dump", store.to_str().unwrap()]);
    assert!(ok, "dump: {err}");
    let fixed = out.replace("[NaN", "[null").replace(", NaN", ", null");
    serde_json::from_str(&fixed).unwrap()
}

/// Every number of a JSON value, flattened (booleans as 0 and 1, `null` as NaN).
pub fn flat_numbers(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat_numbers).collect(),
        Value::Bool(b) => vec![f64::from(u8::from(*b))],
        Value::Number(n) => vec![n.as_f64().unwrap()],
        Value::Null => vec![f64::NAN],
        other => panic!("not numeric: {other}"),
    }
}

/// A dumped float32 (widened) against the tool's f64 value: equal to it
/// rounded to float32, give or take one float32 step (the tool and the
/// importer multiply unit factors in different orders).
pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{k}]: {g}, the tool has NaN");
            continue;
        }
        let w32 = f64::from(*w as f32);
        let step = (w32.abs() * f64::from(f32::EPSILON)).max(f64::from(f32::MIN_POSITIVE));
        assert!((g - w32).abs() <= step, "{what}[{k}]: {g} vs {w} (as f32 {w32})");
    }
}

/// One dumped field (`{"dtype", "shape", "data"}`) against the tool's
/// values: integers exactly (unless stored as float32), floats as float32
/// within [`assert_close`]'s step.
pub fn assert_dumped_field(dumped: &Value, want: &Value, what: &str) {
    assert!(dumped.is_object(), "{what}: not in the dump");
    let ints = want.as_array().is_some_and(|a| a.iter().all(Value::is_i64)) || want.is_i64();
    if ints && dumped["dtype"] != "float32" {
        assert_eq!(flat_numbers(&dumped["data"]), flat_numbers(want), "{what}");
    } else {
        assert_eq!(dumped["dtype"], "float32", "{what}");
        assert_close(&flat_numbers(&dumped["data"]), &flat_numbers(want), what);
    }
}

/// `atomzarr::store::verify` of `store` lists the fault a read of it met
/// (`e`): a fault of the same array, and of the same chunk or sample where
/// `e` names one, every fault naming the store. Returns the faults.
pub fn assert_verify_finds(store: &Path, e: &atomzarr::Error) -> Vec<atomzarr::store::verify::Fault> {
    use atomzarr::Error;
    use atomzarr::store::verify::{VerifyOptions, verify};
    let r = std::panic::catch_unwind(|| verify(store, &VerifyOptions::default()))
        .unwrap_or_else(|_| panic!("{}: verify panicked", store.display()));
    // Nothing to check is verify's error too.
    let r = match (r, e) {
        (Err(Error::NotFound { .. }), Error::NotFound { .. }) => return vec![],
        (r, _) => {
            r.unwrap_or_else(|v| panic!("{}: verify failed ({v}) where a read failed with: {e}", store.display()))
        }
    };
    let faults = r.faults;
    let listed: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
    assert!(!faults.is_empty(), "{}: verify found nothing where a read failed with: {e}", store.display());
    for f in &faults {
        assert_eq!(f.store, atomzarr::Location::from(store), "{f}");
    }
    let has = |array: &str, chunk: Option<u64>, sample: Option<usize>| {
        faults.iter().any(|f| {
            f.array.as_deref() == Some(array)
                && chunk.is_none_or(|c| f.chunk == Some(c))
                && sample.is_none_or(|s| f.sample == Some(s))
        })
    };
    let found = match e {
        Error::Inconsistent { array, .. } | Error::Zarr { array, .. } => has(array, None, None),
        Error::Chunk { array, chunk, .. } | Error::Checksum { array, chunk, .. } => has(array, Some(*chunk), None),
        Error::NeighborIndex { physical_index, .. } => has("core/neighbor_list", None, Some(*physical_index)),
        _ => true,
    };
    assert!(found, "{}: verify does not list the fault a read met ({e}); it lists {listed:#?}", store.display());
    faults
}
