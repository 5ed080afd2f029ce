//! The library's neighbor lists equal ASE's `neighbor_list('ijS', atoms,
//! cutoff)` (assets/import/neighbors.ase.json, made by
//! scripts/ase_reference.py): periodic triclinic bulk, a cell smaller than
//! the cutoff, a one-atom cell, unwrapped positions, a molecule, slabs
//! (`pbc = T T F`, with and without a c vector) and a wire (`T F F`).
//! Compared as sorted edge sets; shifts (S·cell) within 1e-5 Å.

mod common;

use atomzarr::AtomicData;
use atomzarr::data::neighbors::{Geometry, add_neighbors, neighbor_list, neighbor_lists};
use serde_json::Value;

fn v3(v: &Value) -> [f64; 3] {
    [0, 1, 2].map(|k| v[k].as_f64().unwrap())
}

struct Case {
    name: String,
    cutoff: f64,
    positions: Vec<[f64; 3]>,
    cell: [[f64; 3]; 3],
    pbc: [bool; 3],
    edges: Vec<(i64, i64, [i32; 3])>,
}

fn cases() -> Vec<Case> {
    let doc = common::json(&common::assets().join("import/neighbors.ase.json"));
    doc.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let cell_v = &c["cell"];
            let mut edges: Vec<(i64, i64, [i32; 3])> = c["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let n: Vec<i64> = e.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
                    (n[0], n[1], [n[2] as i32, n[3] as i32, n[4] as i32])
                })
                .collect();
            edges.sort();
            Case {
                name: c["name"].as_str().unwrap().to_string(),
                cutoff: c["cutoff"].as_f64().unwrap(),
                positions: c["positions"].as_array().unwrap().iter().map(v3).collect(),
                cell: [v3(&cell_v[0]), v3(&cell_v[1]), v3(&cell_v[2])],
                pbc: [0, 1, 2].map(|k| c["pbc"][k].as_bool().unwrap()),
                edges,
            }
        })
        .collect()
}

#[test]
fn equals_ase_on_every_case() {
    let cases = cases();
    assert!(cases.len() >= 8);
    for c in &cases {
        let nl = neighbor_list(&c.positions, &c.cell, c.pbc, c.cutoff).unwrap();
        let mut got: Vec<(i64, i64, [i32; 3])> =
            (0..nl.len()).map(|e| (nl.pairs[e][0], nl.pairs[e][1], nl.images[e])).collect();
        got.sort();
        assert_eq!(got.len(), c.edges.len(), "{}: edge count", c.name);
        assert_eq!(got, c.edges, "{}: edge set", c.name);
        assert!(!got.iter().any(|&(i, j, s)| i == j && s == [0, 0, 0]), "{}: self edge", c.name);
        // Shifts are S·cell, and r_j - r_i + shift is within the cutoff.
        for e in 0..nl.len() {
            let s = nl.images[e];
            let [i, j] = nl.pairs[e].map(|x| x as usize);
            let mut d2 = 0.0;
            for x in 0..3 {
                let want: f64 = (0..3).map(|k| f64::from(s[k]) * c.cell[k][x]).sum();
                assert!((nl.shifts[e][x] - want).abs() < 1e-5, "{}: shift of edge {e}", c.name);
                let d = c.positions[j][x] - c.positions[i][x] + nl.shifts[e][x];
                d2 += d * d;
            }
            assert!(d2.sqrt() < c.cutoff, "{}: edge {e} longer than the cutoff", c.name);
        }
    }
}

#[test]
fn parallel_batches_and_samples_equal_ase() {
    let cases = cases();
    let structures: Vec<_> =
        cases.iter().map(|c| Geometry { positions: c.positions.clone(), cell: c.cell, pbc: c.pbc }).collect();
    // One cutoff for all: the first case's; compare with the single-structure call.
    let cutoff = cases[0].cutoff;
    let many = neighbor_lists(&structures, cutoff).unwrap();
    for (c, nl) in cases.iter().zip(&many) {
        assert_eq!(*nl, neighbor_list(&c.positions, &c.cell, c.pbc, cutoff).unwrap(), "{}", c.name);
    }
    // Through AtomicData (f32 positions as stored: the ASE inputs are f32-exact).
    let samples: Vec<AtomicData> = cases
        .iter()
        .map(|c| {
            let pos = c.positions.iter().map(|p| p.map(|x| x as f32)).collect();
            AtomicData::new(vec![1; c.positions.len()], pos)
                .unwrap()
                .with_cell(c.cell.map(|r| r.map(|x| x as f32)))
                .with_pbc(c.pbc)
        })
        .collect();
    let cutoffs: Vec<f64> = cases.iter().map(|c| c.cutoff).collect();
    for (k, c) in cases.iter().enumerate() {
        let out = add_neighbors(vec![samples[k].clone()], cutoffs[k]).unwrap().pop().unwrap();
        let nl = out.field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
        let sh = out.field("shifts").unwrap().data.to_f64_vec();
        let mut got: Vec<(i64, i64, [i64; 3])> = nl
            .chunks(2)
            .zip(sh.chunks(3))
            .map(|(p, s)| (p[0], p[1], [0, 1, 2].map(|x| (s[x] * 1e4).round() as i64)))
            .collect();
        got.sort();
        let mut want: Vec<(i64, i64, [i64; 3])> = c
            .edges
            .iter()
            .map(|&(i, j, s)| {
                let v = [0, 1, 2].map(|x| (0..3).map(|k| f64::from(s[k]) * c.cell[k][x]).sum::<f64>());
                (i, j, v.map(|x| ((x as f32 as f64) * 1e4).round() as i64))
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "{}: through AtomicData", c.name);
    }
}

/// A structure whose list cannot be built while loading (a singular
/// periodic cell) fails the read with an error naming its logical index,
/// whichever batch of a window it is in.
#[test]
fn a_list_that_fails_while_loading_names_its_sample() {
    use atomzarr::{Dataset, Error, InMemoryReader};
    let pair = |cell: [[f32; 3]; 3]| {
        AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.7, 0.0, 0.0]]).unwrap().with_cell(cell).with_pbc([true; 3])
    };
    let box10 = [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]];
    let mut samples: Vec<AtomicData> = (0..6).map(|_| pair(box10)).collect();
    samples[4] = pair([[0.0; 3]; 3]);
    let ds = Dataset::new(InMemoryReader::from_samples(&samples, "singular").unwrap())
        .with_skip_validation(true)
        .with_cutoff(3.0)
        .unwrap();
    assert!(ds.load_batches(&[vec![0, 1], vec![5, 3], vec![2]]).is_ok());
    match ds.load_batches(&[vec![0, 1], vec![5, 4, 3], vec![2]]) {
        Err(Error::Validation { source_name, index, reason }) => {
            assert_eq!((source_name.as_str(), index), ("singular", 4), "{reason}");
            assert!(reason.contains("cutoff 3"), "{reason}");
        }
        other => panic!("expected a validation error naming sample 4, got {other:?}"),
    }
}
