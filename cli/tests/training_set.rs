//! From a store to a training set: splits (disjoint, covering, grouped,
//! reproducible, stable under append), E0s recovered from a generated set,
//! and the collated-batch transforms (E0 subtraction, scale and shift,
//! random rotation, sample weights, the child index of a MultiReader),
//! each checked against a model written here.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::data::neighbors::{neighbor_list, with_neighbors};
use atomzarr::prep::saved::SavedStats;
use atomzarr::prep::split::{Split, SplitRule};
use atomzarr::prep::stats::{StatsOptions, dataset_stats, subset_stats};
use atomzarr::prep::transforms::{RandomRotation, SampleWeights, ScaleShift, SubtractE0s};
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, DataLoader, Dataset, InMemoryReader,
    MultiReader, MultiReaderOptions, Reader, ZarrWriteConfig,
};
use common::SplitMix;

// ---------------------------------------------------------------- model of the split hash

/// FNV-1a 64 then SplitMix64, written out from the published constants
/// (the store records the hash as `fnv1a64-splitmix64/1`).
fn model_unit(seed: u64, key: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.to_le_bytes().iter().chain(key.as_bytes()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The part of `key` under cumulative fractions.
fn model_part(seed: u64, key: &str, fractions: &[f64]) -> usize {
    let u = model_unit(seed, key);
    let mut c = 0.0;
    for (k, f) in fractions.iter().enumerate() {
        c += f;
        if u < c {
            return k;
        }
    }
    fractions.len() - 1
}

/// Samples of molecules of 1 to 6 conformers, labelled `mol`.
fn molecules(first_mol: usize, n: usize, seed: u64) -> Vec<AtomicData> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(n);
    let mut mol = first_mol;
    while out.len() < n {
        let conformers = 1 + rng.below(6) as usize;
        for _ in 0..conformers.min(n - out.len()) {
            let atoms = 1 + rng.below(5) as usize;
            let pos = (0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect();
            out.push(AtomicData::new(vec![1; atoms], pos).unwrap().with_string("mol", format!("m{mol}")));
        }
        mol += 1;
    }
    out
}

fn part_of(split: &Split) -> BTreeMap<usize, String> {
    split.parts().flat_map(|(name, idx)| idx.iter().map(move |&i| (i, name.to_string()))).collect()
}

#[test]
fn split_is_disjoint_covering_grouped_and_the_same_on_a_rerun() {
    let samples = molecules(0, 3000, 1);
    let data = InMemoryReader::from_samples(&samples, "mols").unwrap();
    let fractions = [0.8, 0.1, 0.1];
    let rule = SplitRule::parse("train=0.8,val=0.1,test=0.1").unwrap().with_by(Some("mol".into())).with_seed(17);
    let split = Split::compute(&data, &rule).unwrap();

    // Disjoint and covering: every index exactly once.
    let mut all: Vec<usize> = split.parts().flat_map(|(_, idx)| idx.to_vec()).collect();
    assert_eq!(all.len(), samples.len(), "each sample in one part");
    all.sort_unstable();
    assert_eq!(all, (0..samples.len()).collect::<Vec<_>>(), "every sample in a part");

    // Grouped, and each group where the hash model puts it.
    let parts = part_of(&split);
    let names = ["train", "val", "test"];
    let mut group_part: HashMap<&str, &str> = HashMap::new();
    for (i, s) in samples.iter().enumerate() {
        let key = s.string("mol").unwrap();
        let p = group_part.entry(key).or_insert(parts[&i].as_str());
        assert_eq!(*p, parts[&i], "molecule {key} split across parts");
        assert_eq!(names[model_part(17, key, &fractions)], parts[&i], "sample {i} ({key}) against the hash model");
    }

    // Fractions within 4 standard deviations of the group-level binomial.
    for p in split.summary() {
        assert!((p.sample_fraction - p.fraction).abs() < 4.0 * p.sample_sigma, "{p:?}");
        assert!((p.atom_fraction - p.fraction).abs() < 4.0 * p.atom_sigma, "{p:?}");
        assert!(p.sample_sigma > 0.0 && p.sample_sigma < 0.02, "{p:?}");
    }

    // A rerun over a fresh reader of the same samples gives the same split;
    // another seed gives another.
    let again = Split::compute(&InMemoryReader::from_samples(&samples, "again").unwrap(), &rule).unwrap();
    assert_eq!(part_of(&again), parts);
    let other = Split::compute(&data, &rule.clone().with_seed(18)).unwrap();
    assert_ne!(part_of(&other), parts);

    // Without `by`, each sample is its own group, keyed by its physical index.
    let plain = Split::compute(&data, &SplitRule::parse("train=0.5,val=0.5").unwrap().with_seed(3)).unwrap();
    for (i, name) in part_of(&plain) {
        assert_eq!(["train", "val"][model_part(3, &i.to_string(), &[0.5, 0.5])], name, "sample {i}");
    }
}

#[test]
fn saved_split_is_stable_under_append_and_matches_the_cli() {
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    let old = molecules(0, 600, 2);
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap();
    w.write(&old).unwrap();
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    let by_mol = SplitRule::parse("train=0.8,val=0.1,test=0.1").unwrap().with_by(Some("mol".into())).with_seed(5);
    let plain = SplitRule::parse("train=0.7,val=0.3").unwrap().with_seed(5);
    let (s1, s2) = (Split::compute(&reader, &by_mol).unwrap(), Split::compute(&reader, &plain).unwrap());
    w.save_split("bymol", &s1, &reader).unwrap();
    w.save_split("plain", &s2, &reader).unwrap();

    // The CLI prints the same split.
    let (ok, out, err) = common::cli(&[
        "split",
        path.to_str().unwrap(),
        "--by",
        "mol",
        "--fractions",
        "train=0.8,val=0.1,test=0.1",
        "--seed",
        "5",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for (name, idx) in s1.parts() {
        let got: Vec<usize> = serde_json::from_value(v["splits"][name].clone()).unwrap();
        assert_eq!(got, idx, "cli part {name}");
    }

    // 1,000 samples appended: half of them conformers of molecules already
    // there, half new molecules.
    let mut rng = SplitMix(9);
    let mut new = molecules(10_000, 500, 3);
    new.extend((0..500).map(|_| {
        let m = &old[rng.below(old.len() as u64) as usize];
        m.clone()
    }));
    w.append(&new).unwrap();
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    assert_eq!(reader.len(), 1600);

    for (name, before) in [("bymol", &s1), ("plain", &s2)] {
        let after = Split::from_store(&reader, name).unwrap();
        let (pb, pa) = (part_of(before), part_of(&after));
        assert_eq!(pa.len(), 1600, "{name}: covering after the append");
        for (i, p) in &pb {
            assert_eq!(&pa[i], p, "{name}: old sample {i} moved");
        }
        if name == "bymol" {
            // New conformers of old molecules join their molecule's part.
            let old_part: HashMap<&str, &String> =
                old.iter().enumerate().map(|(i, s)| (s.string("mol").unwrap(), &pb[&i])).collect();
            for (k, s) in new.iter().enumerate() {
                if let Some(p) = old_part.get(s.string("mol").unwrap()) {
                    assert_eq!(&pa[&(600 + k)], *p, "appended sample {k}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------- E0s

/// Standard normal draws (Box-Muller).
fn normal(rng: &mut SplitMix) -> f64 {
    let u1 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

const E0: [(i64, f64); 4] = [(1, -3.25), (6, -8.125), (7, -7.375), (8, -5.0)];
const NOISE: f64 = 0.02;

/// Samples of random composition with `E = Σ E0 + offset + noise`, with a
/// `config_type` of `kind`.
fn labelled_energies(n: usize, seed: u64, offset: f64, kind: &str) -> Vec<AtomicData> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| {
            let atoms = 2 + rng.below(10) as usize;
            let z: Vec<i64> = (0..atoms).map(|_| E0[rng.below(4) as usize].0).collect();
            let e: f64 = z.iter().map(|z| E0.iter().find(|p| p.0 == *z).unwrap().1).sum::<f64>()
                + offset
                + NOISE * normal(&mut rng);
            let pos = (0..atoms).map(|k| [k as f32 * 1.5, 0.0, 0.0]).collect();
            let forces = (0..atoms).map(|_| [rng.f32(), rng.f32(), rng.f32()]).collect();
            AtomicData::new(z, pos)
                .unwrap()
                .with_energy(e as f32)
                .with_forces(forces)
                .unwrap()
                .with_string("config_type", kind)
        })
        .collect()
}

#[test]
fn e0s_fitted_on_a_generated_set_come_back_within_the_noise() {
    let data = InMemoryReader::from_samples(&labelled_energies(4000, 7, 0.0, "dft"), "e0").unwrap();
    let s = dataset_stats(&data, &StatsOptions::default()).unwrap();
    assert_eq!(s.elements.len(), 4);
    for (z, e0) in E0 {
        let got = s.elements.iter().find(|e| e.z == z).unwrap().e0.unwrap();
        assert!((got - e0).abs() < NOISE, "E0[{z}] = {got}, made with {e0} and noise {NOISE}");
    }
    // What is left per atom is the noise divided by the atom count.
    let r = s.residual_energy_per_atom.unwrap();
    assert!(r.mean.abs() < NOISE / 10.0 && r.std < NOISE, "{r:?}");

    // Fitted on one part only: samples outside it (offset by 100 eV) do not
    // pull the E0s, while a fit over all of them is off.
    let mut mixed = labelled_energies(2000, 8, 0.0, "dft");
    mixed.extend(labelled_energies(500, 9, 100.0, "aimd"));
    let data = InMemoryReader::from_samples(&mixed, "mixed").unwrap();
    let train: Vec<usize> = (0..2000).collect();
    let part = subset_stats(&data, &train, &StatsOptions::default()).unwrap();
    let all = dataset_stats(&data, &StatsOptions::default()).unwrap();
    let err = |s: &atomzarr::prep::stats::DatasetStats| -> f64 {
        E0.iter()
            .map(|(z, e0)| (s.elements.iter().find(|e| e.z == *z).unwrap().e0.unwrap() - e0).abs())
            .fold(0.0, f64::max)
    };
    assert!(err(&part) < NOISE, "train-only E0 error {}", err(&part));
    assert!(err(&all) > 1.0, "a fit over every sample is pulled by the offset ones: {}", err(&all));
}

// ---------------------------------------------------------------- E0 subtraction, scale and shift

fn f64s(b: &CollatedBatch, name: &str) -> Vec<f64> {
    b.fields[name].data.to_f64_vec()
}

#[test]
fn saved_stats_drive_e0_subtraction_and_scale_shift_on_every_read_path() {
    let dir = common::tmpdir();
    let path = dir.path().join("e.zarr");
    let samples = labelled_energies(300, 11, 0.0, "dft");
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&samples).unwrap();
    let (ok, _, err) = common::cli(&["stats", path.to_str().unwrap(), "--save"]);
    assert!(ok, "{err}");
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    let saved = SavedStats::from_store(&reader).unwrap().expect("saved statistics");
    assert_eq!(saved.staleness(&reader).unwrap(), None);
    let stats = &saved.stats;
    let (e0s, ss) = (SubtractE0s::from_stats(stats).unwrap(), ScaleShift::from_stats(stats).unwrap());
    assert_eq!(ss.scale(), stats.force_rms.unwrap());

    // The model: per sample, in f64, from the samples as written.
    let e0 = e0s.e0s().clone();
    let want = |s: &AtomicData| -> (f64, Vec<f64>) {
        let e = s.field("energy").unwrap().data.to_f64_vec()[0];
        let z = s.field("atomic_numbers").unwrap().data.to_i64_vec().unwrap();
        let sum: f64 = z.iter().map(|z| e0[z]).sum();
        let e = (e - sum - ss.shift() * z.len() as f64) / ss.scale();
        (e, s.field("forces").unwrap().data.to_f64_vec().iter().map(|f| f / ss.scale()).collect())
    };
    let check = |b: &CollatedBatch, what: &str| {
        let (e, f) = (f64s(b, "energy"), f64s(b, "forces"));
        let mut at = 0;
        for (k, &i) in b.indices.iter().enumerate() {
            let (we, wf) = want(&samples[i]);
            assert!((e[k] - we).abs() < 1e-4 * (1.0 + we.abs()), "{what}: energy of {i}: {} vs {we}", e[k]);
            for (g, w) in f[at..at + wf.len()].iter().zip(&wf) {
                assert!((g - w).abs() < 1e-5 * (1.0 + w.abs()), "{what}: forces of {i}");
            }
            at += wf.len();
        }
    };
    // The residual energies are what a model learns: centred, of the order
    // of the noise over the force RMS.
    let lists = vec![(0..150).collect::<Vec<_>>(), (150..300).rev().collect()];
    for skip in [true, false] {
        let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap())
            .with_skip_validation(skip)
            .with_collated_transform(e0s.clone())
            .with_collated_transform(ss);
        for b in ds.load_batches(&lists).unwrap() {
            check(&b, &format!("load_batches skip_validation={skip}"));
        }
        let one = ds.get_sample(42).unwrap();
        check(&CollatedBatch::from_samples(&[42], &[one]).unwrap(), "get_sample");
    }
    // The same as DataLoader options, through the loader's background reads.
    let loader = DataLoader::builder(Dataset::new(reader))
        .with_batch_size(32)
        .with_subtract_e0s(e0s)
        .with_scale_shift(ss)
        .build(&Device::flex())
        .unwrap();
    let mut seen = 0;
    for b in loader.iter() {
        let b = b.unwrap();
        let host = b.to_host_f64().unwrap();
        let (e, f) = (&host["energy"].1, &host["forces"].1);
        let mut at = 0;
        for (k, &i) in b.indices.iter().enumerate() {
            let (we, wf) = want(&samples[i]);
            assert!((e[k] - we).abs() < 1e-4 * (1.0 + we.abs()), "loader: energy of {i}");
            assert!(f[at..at + wf.len()].iter().zip(&wf).all(|(g, w)| (g - w).abs() < 1e-5 * (1.0 + w.abs())));
            at += wf.len();
            seen += 1;
        }
    }
    assert_eq!(seen, 300);

    // An append makes the saved statistics stale, and says so.
    AtomicDataZarrWriter::open(&path, ZarrWriteConfig::default()).unwrap().append(&samples[..3]).unwrap();
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    assert!(saved.staleness(&reader).unwrap().is_some());
}

// ---------------------------------------------------------------- rotation

const CUTOFF: f64 = 3.0;

/// A smooth pair potential, `φ(r) = (rc - r)²` within the cutoff.
fn phi(r: f64) -> (f64, f64) {
    ((CUTOFF - r).powi(2), -2.0 * (CUTOFF - r))
}

/// Energy, forces and virial per volume of `φ` over a sample's own
/// neighbor list and shifts (`r_ij = r_j - r_i + shift`, each pair counted
/// in both directions).
fn pair_model(s: &AtomicData) -> (f64, Vec<[f64; 3]>, [[f64; 3]; 3]) {
    let p = s.field("positions").unwrap().data.to_f64_vec();
    let nl = s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
    let sh = s.field("shifts").unwrap().data.to_f64_vec();
    let c = s.field("cell").unwrap().data.to_f64_vec();
    let vol = (c[0] * (c[4] * c[8] - c[5] * c[7]) - c[1] * (c[3] * c[8] - c[5] * c[6])
        + c[2] * (c[3] * c[7] - c[4] * c[6]))
        .abs();
    let (mut e, mut f, mut w) = (0.0, vec![[0.0; 3]; p.len() / 3], [[0.0; 3]; 3]);
    for (k, ij) in nl.chunks(2).enumerate() {
        let (i, j) = (ij[0] as usize, ij[1] as usize);
        let r: [f64; 3] = std::array::from_fn(|d| p[3 * j + d] - p[3 * i + d] + sh[3 * k + d]);
        let d = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
        let (v, dv) = phi(d);
        e += 0.5 * v;
        for a in 0..3 {
            f[i][a] += dv * r[a] / d;
            for b in 0..3 {
                w[a][b] += 0.5 * dv * r[a] * r[b] / d / vol;
            }
        }
    }
    (e, f, w)
}

/// A periodic triclinic structure with its neighbor list, and energy,
/// forces and stress from [`pair_model`].
fn periodic(seed: u64) -> AtomicData {
    let mut rng = SplitMix(seed);
    let cell = [[4.0, 0.0, 0.0], [0.8, 4.2, 0.0], [0.3, 0.5, 4.5]];
    let pos: Vec<[f32; 3]> = (0..6)
        .map(|_| {
            let u: [f32; 3] = std::array::from_fn(|_| rng.below(1000) as f32 / 1000.0);
            std::array::from_fn(|d| (0..3).map(|k| u[k] * cell[k][d]).sum())
        })
        .collect();
    let s = AtomicData::new(vec![14; 6], pos).unwrap().with_cell(cell).with_pbc([true; 3]);
    let s = with_neighbors(s, CUTOFF).unwrap();
    let (e, f, w) = pair_model(&s);
    s.with_energy(e as f32)
        .with_forces(f.iter().map(|v| v.map(|x| x as f32)).collect())
        .unwrap()
        .with_stress(w.map(|r| r.map(|x| x as f32)))
}

fn rows3(v: &[f64]) -> Vec<[f64; 3]> {
    v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect()
}

/// Solves `R` from `P' = R P` over three atoms (the columns of P), by the
/// explicit inverse of P: independent of how the transform applies it.
fn recover_rotation(before: &[[f64; 3]], after: &[[f64; 3]]) -> [[f64; 3]; 3] {
    let p = [0, 1, 2].map(|r| [0, 1, 2].map(|c| before[c][r])); // columns = atoms 0..3
    let det = p[0][0] * (p[1][1] * p[2][2] - p[1][2] * p[2][1]) - p[0][1] * (p[1][0] * p[2][2] - p[1][2] * p[2][0])
        + p[0][2] * (p[1][0] * p[2][1] - p[1][1] * p[2][0]);
    let inv: [[f64; 3]; 3] = std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            let (r0, r1, c0, c1) = ([1, 0, 0][j], [2, 2, 1][j], [1, 0, 0][i], [2, 2, 1][i]);
            let m = p[r0][c0] * p[r1][c1] - p[r0][c1] * p[r1][c0];
            if (i + j) % 2 == 0 { m / det } else { -m / det }
        })
    });
    let q = [0, 1, 2].map(|r| [0, 1, 2].map(|c| after[c][r]));
    std::array::from_fn(|i| std::array::from_fn(|j| (0..3).map(|k| q[i][k] * inv[k][j]).sum()))
}

fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() < tol * (1.0 + y.abs()), "{what}[{k}]: {x} vs {y}");
    }
}

#[test]
fn rotation_keeps_physics_and_rotates_vectors_and_tensors() {
    let samples: Vec<AtomicData> = (0..6).map(periodic).collect();
    let data = Dataset::new(InMemoryReader::from_samples(&samples, "pbc").unwrap())
        .with_collated_transform(RandomRotation::new(99))
        .with_epoch(3);
    let batch = data.load_batches(&[vec![4, 1, 0, 5]]).unwrap().pop().unwrap();
    let mut moved = 0.0f64;
    for (k, &i) in batch.indices.iter().enumerate() {
        let (orig, rot) = (&samples[i], batch.sample(k).unwrap());
        let p0 = rows3(&orig.field("positions").unwrap().data.to_f64_vec());
        let p1 = rows3(&rot.field("positions").unwrap().data.to_f64_vec());
        let r = recover_rotation(&p0, &p1);
        // A proper rotation.
        for a in 0..3 {
            for b in 0..3 {
                let dot: f64 = (0..3).map(|c| r[a][c] * r[b][c]).sum();
                assert!((dot - f64::from(u8::from(a == b))).abs() < 1e-4, "sample {i}: R Rᵀ");
            }
        }
        let rv = |v: [f64; 3]| -> [f64; 3] { std::array::from_fn(|a| (0..3).map(|b| r[a][b] * v[b]).sum()) };
        moved = moved.max((0..3).map(|a| (r[a][a] - 1.0).abs()).fold(0.0, f64::max));
        // Every atom, force, lattice vector and shift rotated by the same R.
        for name in ["positions", "forces", "cell", "shifts"] {
            let before = rows3(&orig.field(name).unwrap().data.to_f64_vec());
            let want: Vec<f64> = before.into_iter().flat_map(rv).collect();
            close(&rot.field(name).unwrap().data.to_f64_vec(), &want, 1e-4, &format!("sample {i} {name}"));
        }
        // Stress as a tensor: R S Rᵀ.
        let s = orig.field("stress").unwrap().data.to_f64_vec();
        let want: Vec<f64> = (0..9)
            .map(|ab| {
                let (a, b) = (ab / 3, ab % 3);
                (0..3).flat_map(|c| (0..3).map(move |d| (c, d))).map(|(c, d)| r[a][c] * s[3 * c + d] * r[b][d]).sum()
            })
            .collect();
        close(&rot.field("stress").unwrap().data.to_f64_vec(), &want, 1e-4, &format!("sample {i} stress"));

        // The physics of the rotated sample: the model's energy is the same,
        // its forces and stress are the rotated fields.
        let (e, f, w) = pair_model(&rot);
        let e_field = rot.field("energy").unwrap().data.to_f64_vec()[0];
        assert!((e - e_field).abs() < 1e-4 * (1.0 + e.abs()), "sample {i}: energy {e} vs {e_field}");
        close(&f.concat(), &rot.field("forces").unwrap().data.to_f64_vec(), 1e-3, &format!("sample {i} model forces"));
        close(&w.concat(), &rot.field("stress").unwrap().data.to_f64_vec(), 1e-3, &format!("sample {i} model stress"));

        // Distances and the neighbor list are unchanged: rebuilt on the
        // rotated geometry, the same (i, j, image) edges with rotated shifts.
        let dist = |p: &[[f64; 3]]| -> Vec<f64> {
            (0..p.len())
                .flat_map(|a| (0..p.len()).map(move |b| (a, b)))
                .map(|(a, b)| (0..3).map(|d| (p[a][d] - p[b][d]).powi(2)).sum::<f64>().sqrt())
                .collect()
        };
        close(&dist(&p1), &dist(&p0), 1e-5, &format!("sample {i} distances"));
        let cell = |s: &AtomicData| -> [[f64; 3]; 3] {
            let c = s.field("cell").unwrap().data.to_f64_vec();
            [[c[0], c[1], c[2]], [c[3], c[4], c[5]], [c[6], c[7], c[8]]]
        };
        let edges = |p: &[[f64; 3]], s: &AtomicData| -> BTreeSet<([i64; 2], [i32; 3])> {
            let nl = neighbor_list(p, &cell(s), [true; 3], CUTOFF).unwrap();
            nl.pairs.into_iter().zip(nl.images).collect()
        };
        assert_eq!(edges(&p1, &rot), edges(&p0, orig), "sample {i}: neighbor list");
        assert_eq!(rot.field("neighbor_list").unwrap().data, orig.field("neighbor_list").unwrap().data);
    }
    assert!(moved > 0.1, "the rotations are not the identity");
}

#[test]
fn rotations_are_seeded_per_epoch_and_sample_and_replay_on_resume() {
    let samples: Vec<AtomicData> = (0..10).map(periodic).collect();
    let mem = Arc::new(InMemoryReader::from_samples(&samples, "pbc").unwrap());
    let loader = |seed: u64| {
        DataLoader::builder(Dataset::from_arc(mem.clone()))
            .with_batch_size(3)
            .with_shuffle(true)
            .with_seed(1)
            .with_random_rotation(seed)
            .build(&Device::flex())
            .unwrap()
    };
    let epoch = |l: &DataLoader<InMemoryReader>| -> BTreeMap<usize, Vec<f64>> {
        let mut out = BTreeMap::new();
        for b in l.iter() {
            let b = b.unwrap();
            let p = b.to_host_f64().unwrap()["positions"].1.clone();
            let ptr = b.atoms_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap();
            for (k, &i) in b.indices.iter().enumerate() {
                out.insert(i, p[3 * ptr[k] as usize..3 * ptr[k + 1] as usize].to_vec());
            }
        }
        out
    };
    let first = loader(7);
    let (e0, e1, e2) = (epoch(&first), epoch(&first), epoch(&first));
    assert_eq!(e0.len(), 10);
    assert_ne!(e0, e1, "each epoch draws new rotations");
    // A resumed run (a new loader set to epoch 2) sees epoch 2's rotations,
    // whatever batches the shuffle made.
    let resumed = loader(7);
    resumed.set_epoch(2);
    let r2 = epoch(&resumed);
    for i in 0..10 {
        close(&r2[&i], &e2[&i], 1e-6, &format!("resumed sample {i}"));
    }
    // Another seed, other rotations; the rotation of a sample does not
    // depend on its batch (Dataset reads of other lists agree).
    assert_ne!(epoch(&loader(8)), e0);
    let ds = Dataset::from_arc(mem.clone()).with_collated_transform(RandomRotation::new(7)).with_epoch(0);
    let alone = ds.load_batches(&[vec![6]]).unwrap().pop().unwrap();
    close(&f64s(&alone, "positions"), &e0[&6], 1e-6, "sample 6 alone");
}

// ---------------------------------------------------------------- weights and provenance

#[test]
fn weights_from_string_labels_and_the_child_index_are_system_fields() {
    let dir = common::tmpdir();
    let path = dir.path().join("w.zarr");
    let mut samples = labelled_energies(20, 3, 0.0, "dft");
    samples.extend(labelled_energies(20, 4, 0.0, "aimd"));
    samples.extend(labelled_energies(5, 5, 0.0, "md"));
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&samples).unwrap();
    assert!(path.join("strings").join("config_type").exists(), "the label is a string label under strings/");
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    let weights = SampleWeights::parse("config_type=aimd:0.5,dft:1.0").unwrap().with_default(2.0).unwrap();
    let want = |i: usize| match samples[i].string("config_type").unwrap() {
        "aimd" => 0.5,
        "dft" => 1.0,
        _ => 2.0,
    };
    let loader = DataLoader::builder(Dataset::new(reader))
        .with_batch_size(7)
        .with_shuffle(true)
        .with_sample_weights(weights)
        .build(&Device::flex())
        .unwrap();
    let mut seen = 0;
    for b in loader.iter() {
        let b = b.unwrap();
        let (shape, w) = b.to_host_f64().unwrap()["weight"].clone();
        assert_eq!(shape, vec![b.indices.len(), 1]);
        assert_eq!(w, b.indices.iter().map(|&i| want(i)).collect::<Vec<_>>());
        seen += w.len();
    }
    assert_eq!(seen, 45);
    assert!(SampleWeights::parse("config_type=aimd").is_err());
    assert!(SampleWeights::parse("config_type=aimd:-1").is_err());

    // A MultiReader tells each sample's child.
    let a = InMemoryReader::from_samples(&samples[..20], "a").unwrap();
    let b = InMemoryReader::from_samples(&samples[20..], "b").unwrap();
    let opts = MultiReaderOptions::default().with_dataset_index(true);
    let multi = MultiReader::with_options(vec![Arc::new(a), Arc::new(b)], opts).unwrap();
    let ds = Dataset::new(multi);
    let lists = vec![vec![0, 25, 19, 20, 44], vec![3]];
    for b in ds.load_batches(&lists).unwrap() {
        let got = b.fields["dataset_index"].data.to_i64_vec().unwrap();
        assert_eq!(got, b.indices.iter().map(|&i| i64::from(i >= 20)).collect::<Vec<_>>());
        // The samples are the children's, weights and all.
        for (k, &i) in b.indices.iter().enumerate() {
            common::assert_sample_eq(&strip(b.sample(k).unwrap()), &samples[i], &format!("multi sample {i}"));
        }
    }
    assert_eq!(ds.get_sample(30).unwrap().field("dataset_index").unwrap().data.to_i64_vec(), Some(vec![1]));
}

fn strip(mut s: AtomicData) -> AtomicData {
    s.fields.remove("dataset_index");
    s
}
