//! Mixtures of stores with different labels: a periodic store with cells,
//! stress (absent, NaN, on some frames) and neighbor shifts, and a
//! molecular store with none of them but an integer label of its own. The
//! mixture's fields, absent values and `<name>_present` flags are compared
//! with a model built here from the samples as written, through the
//! loader's shuffled mixed batches and through single reads; the
//! multi-task loss with a sum written out by hand.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use burn::tensor::{Device, Tensor};

use atomzarr::pipeline::loss::{Predicted, TermWeights, multi_task_loss};
use atomzarr::sampler::MultiDatasetSampler;
use atomzarr::{
    AtomicBatcher, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, Field, HostData,
    InMemoryReader, Level, MultiReader, MultiReaderOptions, Reader, ReaderExt, ZarrWriteConfig,
};

const NP: usize = 40;
const NM: usize = 30;

/// A small deterministic generator (the test's own, independent of the crate's).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / (1u64 << 24) as f32
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() * n as f32) as usize % n
    }
}

/// Atomic numbers, positions, forces and neighbor pairs of `n` atoms.
type Atoms = (Vec<i64>, Vec<[f32; 3]>, Vec<[f32; 3]>, Vec<[i64; 2]>);

fn atoms(r: &mut Lcg, n: usize) -> Atoms {
    let z = (0..n).map(|_| 1 + r.below(8) as i64).collect();
    let pos = (0..n).map(|_| [r.next() * 3.0, r.next() * 3.0, r.next() * 3.0]).collect();
    let forces = (0..n).map(|_| [r.next() - 0.5, r.next() - 0.5, r.next() - 0.5]).collect();
    let pairs = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i && (i + j) % 2 == 0).map(move |j| [i as i64, j as i64]))
        .collect();
    (z, pos, forces, pairs)
}

/// Periodic frames: cell, pbc, stress (NaN, absent, on every fifth), shifts.
fn periodic() -> Vec<AtomicData> {
    let mut r = Lcg(11);
    (0..NP)
        .map(|k| {
            let n = 2 + r.below(5);
            let (z, pos, forces, pairs) = atoms(&mut r, n);
            let shifts = pairs.iter().map(|_| [r.next().round(), 0.0, 0.0]).collect();
            let s = if k % 5 == 3 { f32::NAN } else { r.next() * 0.1 };
            AtomicData::new(z, pos)
                .unwrap()
                .with_forces(forces)
                .unwrap()
                .with_energy(-r.next() * 10.0)
                .with_cell([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]])
                .with_pbc([true, true, true])
                .with_stress([[s, 0.0, 0.0], [0.0, s, 0.0], [0.0, 0.0, s]])
                .with_neighbor_list(pairs, Some(shifts))
                .unwrap()
        })
        .collect()
}

/// Molecules: no cell, pbc, stress or shifts; an int64 label of their own.
fn molecules() -> Vec<AtomicData> {
    let mut r = Lcg(12);
    (0..NM)
        .map(|k| {
            let n = 1 + r.below(6);
            let (z, pos, forces, pairs) = atoms(&mut r, n);
            AtomicData::new(z, pos)
                .unwrap()
                .with_forces(forces)
                .unwrap()
                .with_energy(-r.next() * 5.0)
                .with_neighbor_list(pairs, None)
                .unwrap()
                .with_field("charge_state", Field::new(Level::System, vec![1], vec![(k % 3) as i64 - 1]).unwrap())
        })
        .collect()
}

fn write(path: &Path, samples: &[AtomicData]) {
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default()).unwrap().write(samples).unwrap();
}

/// Sample `i` of the mixture as this test expects it, from the written samples.
fn expected(p: &[AtomicData], m: &[AtomicData], i: usize) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    let (s, periodic) = if i < NP { (&p[i], true) } else { (&m[i - NP], false) };
    let mut out: BTreeMap<String, (Vec<usize>, Vec<f64>)> =
        s.fields.iter().map(|(n, f)| (n.clone(), (f.shape.clone(), f.data.to_f64_vec()))).collect();
    let ne = s.num_edges();
    if periodic {
        out.insert("charge_state".into(), (vec![1], vec![atomzarr::data::absent::ABSENT_I64 as f64]));
        let stress = &out["stress"].1;
        let has = !stress.iter().any(|x| x.is_nan());
        if !has {
            // A graph without the label reads absent in every element.
            out.insert("stress".into(), (vec![1, 3, 3], vec![f64::NAN; 9]));
        }
        out.insert("stress_present".into(), (vec![1], vec![f64::from(u8::from(has))]));
        out.insert("charge_state_present".into(), (vec![1], vec![0.0]));
    } else {
        out.insert("cell".into(), (vec![1, 3, 3], vec![0.0; 9]));
        out.insert("pbc".into(), (vec![1, 3], vec![0.0; 3]));
        out.insert("stress".into(), (vec![1, 3, 3], vec![f64::NAN; 9]));
        out.insert("shifts".into(), (vec![ne, 3], vec![0.0; 3 * ne]));
        out.insert("stress_present".into(), (vec![1], vec![0.0]));
        out.insert("charge_state_present".into(), (vec![1], vec![1.0]));
    }
    out
}

fn as_model(s: &AtomicData) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    s.fields.iter().map(|(n, f)| (n.clone(), (f.shape.clone(), f.data.to_f64_vec()))).collect()
}

fn same(a: &BTreeMap<String, (Vec<usize>, Vec<f64>)>, b: &BTreeMap<String, (Vec<usize>, Vec<f64>)>) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((na, (sa, va)), (nb, (sb, vb)))| {
            na == nb
                && sa == sb
                && va.len() == vb.len()
                && va.iter().zip(vb).all(|(x, y)| x == y || x.is_nan() && y.is_nan())
        })
}

struct Stores {
    _dir: tempfile::TempDir,
    p: Vec<AtomicData>,
    m: Vec<AtomicData>,
    multi: MultiReader,
}

fn stores() -> Stores {
    let dir = common::tmpdir();
    let (p, m) = (periodic(), molecules());
    let (pp, mp) = (dir.path().join("p.zarr"), dir.path().join("m.zarr"));
    write(&pp, &p);
    write(&mp, &m);
    let children: Vec<Arc<dyn Reader>> =
        vec![Arc::new(AtomicDataZarrReader::open(&pp).unwrap()), Arc::new(AtomicDataZarrReader::open(&mp).unwrap())];
    let opts = MultiReaderOptions::default().with_output_strict(false).with_cache_bytes(1 << 20);
    let multi = MultiReader::with_options(children, opts).unwrap();
    Stores { _dir: dir, p, m, multi }
}

#[test]
fn the_union_of_fields_and_the_flags_equal_a_model_of_the_written_samples() {
    let s = stores();
    let fields: Vec<String> = s.multi.schema().fields.keys().cloned().collect();
    let mut want: Vec<String> = expected(&s.p, &s.m, 0).keys().cloned().collect();
    want.sort();
    assert_eq!(fields, want, "the mixture's fields are the union, with a flag per label a sample may lack");
    assert!(!fields.contains(&"energy_present".to_string()) && !fields.contains(&"cell_present".to_string()));
    // Single reads.
    for i in 0..NP + NM {
        let got = as_model(&s.multi.read(i as i64).unwrap().data);
        assert!(same(&got, &expected(&s.p, &s.m, i)), "sample {i}: {got:?}\nexpected {:?}", expected(&s.p, &s.m, i));
    }
    // The loader's shuffled, mixed batches.
    let sampler =
        MultiDatasetSampler::for_lengths(vec![NP, NM]).with_weights(vec![0.5, 0.5]).with_seed(3).build().unwrap();
    let loader = DataLoader::builder(Dataset::new(s.multi).with_skip_validation(true))
        .with_batch_size(8)
        .with_prefetch_factor(3)
        .with_sampler(sampler)
        .build(&Device::flex())
        .unwrap();
    let (mut seen, mut mixed) = (0, 0);
    for b in loader.iter_host() {
        let b = b.unwrap();
        let kinds: std::collections::BTreeSet<bool> = b.indices.iter().map(|&i| i < NP).collect();
        mixed += usize::from(kinds.len() == 2);
        for (k, &i) in b.indices.iter().enumerate() {
            let got = as_model(&b.sample(k).unwrap());
            assert!(same(&got, &expected(&s.p, &s.m, i)), "batch graph {k}, sample {i}: {got:?}");
            seen += 1;
        }
    }
    assert_eq!(seen, NP + NM);
    assert!(mixed > 0, "some batches mix the two stores");
}

#[test]
fn a_flag_is_never_true_where_the_label_is_absent() {
    let s = stores();
    let mut out = Vec::new();
    s.multi.read_collated(&[(0..(NP + NM) as i64).rev().collect()], &mut out).unwrap();
    let b = &out[0];
    let flags = |n: &str| match &b.fields[&format!("{n}_present")].data {
        HostData::Bool(v) => v.clone(),
        other => panic!("{n}_present is {other:?}"),
    };
    let stress = b.fields["stress"].data.to_f64_vec();
    let charge = b.fields["charge_state"].data.to_i64_vec().unwrap();
    for (k, &i) in b.indices.iter().enumerate() {
        let written = if i < NP { s.p[i].field("stress") } else { None };
        let has = written.is_some_and(|f| !f.data.to_f64_vec().iter().any(|x| x.is_nan()));
        assert_eq!(flags("stress")[k], has, "stress flag of sample {i}");
        let rows = &stress[9 * k..9 * k + 9];
        assert_eq!(rows.iter().all(|x| x.is_nan()), !has, "sample {i}'s stress rows");
        assert_eq!(flags("charge_state")[k], i >= NP);
        assert_eq!(charge[k] == atomzarr::data::absent::ABSENT_I64, i < NP, "charge_state of sample {i}");
    }
}

#[test]
fn children_that_disagree_on_a_field_are_refused_naming_both() {
    let a = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_energy(1.0);
    let b = AtomicData::new(vec![1], vec![[0.0; 3]])
        .unwrap()
        .with_field("energy", Field::new(Level::System, vec![1, 1], vec![1.0f64]).unwrap())
        .with_field("extra", Field::new(Level::System, vec![1], vec![1i64]).unwrap());
    let children: Vec<Arc<dyn Reader>> = vec![
        Arc::new(InMemoryReader::from_samples(&[a], "f32-energy").unwrap()),
        Arc::new(InMemoryReader::from_samples(&[b], "f64-energy").unwrap()),
    ];
    let err = MultiReader::with_options(children, MultiReaderOptions::default().with_output_strict(false))
        .unwrap_err()
        .to_string();
    assert!(err.contains("energy") && err.contains("f32-energy") && err.contains("f64-energy"), "{err}");
}

#[test]
fn the_multi_task_loss_equals_a_hand_written_sum() {
    let s = stores();
    let multi = s.multi.with_loss_weights(vec![2.0, 0.5]).unwrap();
    let picks = [3usize, NP + 1, 7, NP + 4]; // stress absent on 3 (k % 5 == 3), present on 7
    let samples: Vec<AtomicData> = picks.iter().map(|&i| multi.read(i as i64).unwrap().data).collect();
    let dev = Device::flex();
    let batch = AtomicBatcher::new(false).try_batch(&samples, &dev).unwrap();
    let g = picks.len();
    let atoms: Vec<usize> = samples.iter().map(AtomicData::num_atoms).collect();
    let v: usize = atoms.iter().sum();
    // Predictions: energy e_k = k - 3, forces 0.1 per component, stress 0.2 everywhere (finite for molecules too).
    let pe: Vec<f32> = (0..g).map(|k| k as f32 - 3.0).collect();
    let pred = Predicted {
        energy: Tensor::<1>::from_floats(pe.as_slice(), &dev).reshape([g, 1]),
        forces: Some(Tensor::<2>::full([v, 3], 0.1, &dev)),
        stress: Some(Tensor::<3>::full([g, 3, 3], 0.2, &dev)),
    };
    let w = TermWeights { energy: 1.0, forces: 10.0, stress: 100.0 };
    let loss = multi_task_loss(&batch, &pred, w).unwrap();
    // By hand, in f64.
    let weight = |i: usize| if i < NP { 2.0 } else { 0.5 };
    let (mut e, mut f, mut st) = ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0));
    for (k, (&i, smp)) in picks.iter().zip(&samples).enumerate() {
        let n = atoms[k] as f64;
        let energy = smp.field("energy").unwrap().data.get_f64(0).unwrap();
        e.0 += weight(i) * ((f64::from(pe[k]) - energy) / n).powi(2);
        e.1 += 1.0;
        for x in smp.field("forces").unwrap().data.to_f64_vec() {
            f.0 += weight(i) * (0.1f32 as f64 - x).powi(2);
            f.1 += 1.0;
        }
        let written = if i < NP { s.p[i].field("stress").map(|f| f.data.to_f64_vec()) } else { None };
        if let Some(x) = written.filter(|x| !x.iter().any(|y| y.is_nan())) {
            for y in x {
                st.0 += weight(i) * (0.2f32 as f64 - y).powi(2);
                st.1 += 1.0;
            }
        }
    }
    let (e, f, st) = (e.0 / e.1, f.0 / f.1, st.0 / st.1);
    let close = |a: f32, b: f64| (f64::from(a) - b).abs() <= 1e-4 * b.abs().max(1e-3);
    let got = |t: Tensor<1>| t.into_scalar::<f32>();
    assert!(close(got(loss.energy.clone()), e), "energy {} vs {e}", got(loss.energy.clone()));
    assert!(close(got(loss.forces.clone().unwrap()), f));
    assert!(close(got(loss.stress.clone().unwrap()), st), "stress {} vs {st}", got(loss.stress.clone().unwrap()));
    assert!(close(got(loss.total), e + 10.0 * f + 100.0 * st));
    assert!(st > 0.0 && e > 0.0, "the sums are not empty");
}

#[test]
fn a_molecule_in_the_mixture_gets_the_open_boundary_neighbor_list() {
    let s = stores();
    let cutoff = 1.5;
    for i in NP..NP + NM {
        let mut sample = s.multi.read(i as i64).unwrap().data;
        for name in ["neighbor_list", "shifts"] {
            sample.fields.remove(name);
        }
        let built = atomzarr::data::neighbors::with_neighbors(sample.clone(), cutoff).unwrap();
        let mut got: Vec<(i64, i64)> =
            built.field("neighbor_list").unwrap().data.to_i64_vec().unwrap().chunks(2).map(|p| (p[0], p[1])).collect();
        got.sort_unstable();
        // Every ordered pair within the cutoff, no periodic image: by brute force.
        let pos = sample.field("positions").unwrap().data.to_f64_vec();
        let n = pos.len() / 3;
        let mut want = Vec::new();
        for a in 0..n {
            for b in 0..n {
                let d2: f64 = (0..3).map(|c| (pos[3 * a + c] - pos[3 * b + c]).powi(2)).sum();
                if a != b && d2 <= cutoff * cutoff {
                    want.push((a as i64, b as i64));
                }
            }
        }
        assert_eq!(got, want, "molecule {i}");
        assert!(built.field("shifts").is_none_or(|f| f.data.to_f64_vec().iter().all(|&x| x == 0.0)));
    }
}
