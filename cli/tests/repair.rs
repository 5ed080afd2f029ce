//! `atomzarr repair` (and the library's `repair`) rewrites what
//! nvalchemi-toolkit's append bug wrote: the reference stores' appended
//! halves, several buggy appends each with its own shift, and a list of
//! what it cannot fix, left as it is. Expected values come from
//! `assets/*.expected.json` and from the raw pointer arrays, never from the
//! code under test.
#![allow(clippy::single_range_in_vec_init)] // zarrs subsets are `&[Range]`

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "integrity/mod.rs"]
mod integrity;

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde_json::Value;

use atomzarr::data::CollateOptions;
use atomzarr::store::format;
use atomzarr::store::repair::{self, RepairReport};
use atomzarr::testing as arrays;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, DataLoader, Dataset, Error, Reader,
    ReaderExt, ZarrArrayConfig, ZarrWriteConfig,
};
use common::*;
use integrity::*;

#[test]
fn repair_fixes_the_reference_stores_appended_halves() {
    for name in fixture_names() {
        let dir = tmpdir();
        let path = dir.path().join(format!("{name}.zarr"));
        copy_dir(&assets().join(format!("{name}.zarr")), &path);
        let l = layout(&path);
        let k = l.atoms_ptr[l.half];
        let want = expected(&name);
        let fixed_want = corrected(&want, &l);

        // Which samples the repair must touch: appended, active, with edges.
        let appended: Vec<usize> =
            l.physical.iter().copied().filter(|&p| p >= l.half && l.edges_ptr[p + 1] > l.edges_ptr[p]).collect();
        let dry = repair::check(&path).unwrap();
        assert!(!dry.written);
        let report = repair::repair(&path).unwrap();
        assert!(report.written);
        assert_eq!(dry.fixed, report.fixed, "{name}: dry run plans what repair does");
        assert_eq!(report.unfixed, vec![], "{name}");
        assert_eq!(report.fixed.len(), 1, "{name}: one appended batch");
        assert_eq!(report.fixed[0].shift, k, "{name}: shift");
        assert_eq!(report.fixed[0].physical, appended, "{name}: fixed samples");

        // Every sample now reads as the toolkit should have written it...
        let r = AtomicDataZarrReader::open(&path).unwrap();
        for (i, s) in read_all(&r).iter().enumerate() {
            assert_sample_matches_json(s, &fixed_want[i], &format!("{name} repaired, sample {i}"));
        }
        // ...and batches: the collated neighbor list is each sample's
        // corrected list plus its batch atom offset.
        let n = r.len();
        let order: Vec<usize> = (0..n).rev().collect();
        let lists: Vec<Vec<usize>> = order.chunks(9).map(<[usize]>::to_vec).collect();
        for opts in [CollateOptions::default(), CollateOptions::default().with_narrow_int64(true)] {
            let mut out = Vec::new();
            r.load_collated_opt(&lists, opts, &mut out).unwrap();
            for (b, list) in out.iter().zip(&lists) {
                let mut nl = Vec::new();
                let mut base = 0;
                for &i in list {
                    let s = &fixed_want[i];
                    nl.extend(
                        s["neighbor_list"]["data"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap() + base),
                    );
                    base += s["atomic_numbers"]["shape"][0].as_i64().unwrap();
                }
                assert_eq!(b.fields["neighbor_list"].data.to_i64_vec().unwrap(), nl, "{name} {opts:?} batch {list:?}");
            }
        }
        // The DataLoader reads a whole epoch, and the CLI every mode.
        let loader =
            DataLoader::builder(Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true))
                .with_batch_size(8)
                .with_shuffle(true)
                .build(&Device::flex())
                .unwrap();
        assert_eq!(loader.iter().map(|b| b.unwrap().num_graphs).sum::<usize>(), n);
        let (ok, _, stderr) = cli(&["read", path.to_str().unwrap(), "--read-mode", "both", "--read-mode", "raw"]);
        assert!(ok, "{name}: {stderr}");
        // A second repair finds nothing; the CLI agrees (exit 0).
        let again = repair::repair(&path).unwrap();
        assert!(again.fixed.is_empty() && again.unfixed.is_empty() && !again.written, "{name}: {again:?}");
        let (ok, stdout, stderr) = cli(&["repair", path.to_str().unwrap()]);
        assert!(ok && stdout.contains("every neighbor index is in range"), "{name}: {stdout} {stderr}");
    }
}

#[test]
fn cli_repair_reports_and_fixes_a_copy() {
    let dir = tmpdir();
    let path = dir.path().join("d.zarr");
    copy_dir(&assets().join("nva_custom_deleted.zarr"), &path);
    let l = layout(&path);
    let k = l.atoms_ptr[l.half];
    let p = path.to_str().unwrap();
    let (ok, stdout, stderr) = cli(&["repair", p, "--dry-run", "--json"]);
    assert!(ok, "{stderr}");
    let plan: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(plan["written"], false);
    assert_eq!(plan["fixed"][0]["shift"], k);
    // The dry run changed nothing.
    let (_, dump, _) = cli(&["dump", p]);
    assert_eq!(serde_json::from_str::<Value>(&dump).unwrap(), expected("nva_custom_deleted"));
    let (ok, stdout, stderr) = cli(&["repair", p]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&format!("indices shifted by -{k}")), "{stdout}");
    let (_, dump, _) = cli(&["dump", p]);
    let got: Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(got["samples"].as_array().unwrap(), &corrected(&expected("nva_custom_deleted"), &l));
}

/// Writes `batches` as the toolkit does: a correct first write, then each
/// further batch appended with the bug (its stored indices offset within the
/// batch, not the store). Returns the samples in physical order.
fn toolkit_like_store(path: &Path, batches: &[Vec<AtomicData>]) -> Vec<AtomicData> {
    let mut all = Vec::new();
    for (j, b) in batches.iter().enumerate() {
        // A writer per batch: the rows are rewritten below, behind the
        // writer's back, which only a store no writer holds may see.
        if j == 0 {
            AtomicDataZarrWriter::create(path, config()).unwrap().write(b)
        } else {
            AtomicDataZarrWriter::open(path, config()).unwrap().append(b)
        }
        .unwrap();
        let (atoms_ptr, edges_ptr) = (raw_i64(path, format::ATOMS_PTR), raw_i64(path, format::EDGES_PTR));
        if j > 0 {
            let q0 = all.len();
            for (i, s) in b.iter().enumerate() {
                let p = q0 + i;
                let local = s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
                let buggy: Vec<i64> = local.iter().map(|x| x + atoms_ptr[p] - atoms_ptr[q0]).collect();
                if !buggy.is_empty() {
                    set_neighbor_rows(path, edges_ptr[p] as u64, buggy);
                }
            }
        }
        all.extend(b.iter().cloned());
    }
    all
}

#[test]
fn repair_fixes_consecutive_buggy_appends_each_with_its_own_shift() {
    let dir = tmpdir();
    let path = dir.path().join("t.zarr");
    let synth = |n, seed| atomzarr::data::synth::generate(n, 4, 12, seed).unwrap();
    let all = toolkit_like_store(&path, &[synth(5, 1), synth(4, 2), synth(6, 3)]);
    let atoms_ptr = raw_i64(&path, format::ATOMS_PTR);
    let report = repair::repair(&path).unwrap();
    assert_eq!(report.unfixed, vec![]);
    let runs: Vec<(Vec<usize>, i64)> = report.fixed.iter().map(|r| (r.physical.clone(), r.shift)).collect();
    assert_eq!(runs, vec![((5..9).collect(), atoms_ptr[5]), ((9..15).collect(), atoms_ptr[9])]);
    // The store now holds exactly what was meant.
    let r = AtomicDataZarrReader::open(&path).unwrap();
    for (i, s) in read_all(&r).iter().enumerate() {
        assert_sample_eq(s, &all[i], &format!("sample {i}"));
    }
    let mut out = Vec::new();
    r.load_collated(&[(0..15).collect()], &mut out).unwrap();
    assert_eq!(out[0], CollatedBatch::from_samples(&(0..15).collect::<Vec<_>>(), &all).unwrap());
}

#[test]
fn repair_lists_what_it_cannot_fix_and_leaves_it() {
    // An index past the atoms is not the append bug.
    let bad = bad_store();
    let report: RepairReport = repair::repair(&bad.path).unwrap();
    assert!(report.fixed.is_empty() && !report.written);
    assert_eq!(report.unfixed.len(), 1);
    let u = &report.unfixed[0];
    assert_eq!((u.index, u.physical_index, u.value, u.num_atoms), (BAD_LOGICAL, BAD_PHYSICAL, bad.value, bad.atoms));
    assert!(u.reason.contains("not the toolkit's append bug"), "{}", u.reason);
    let (ok, stdout, stderr) = cli(&["repair", bad.path.to_str().unwrap()]);
    assert!(!ok, "unfixed samples: exit status 1");
    assert!(
        stdout.contains(&format!("not fixed: sample {BAD_LOGICAL} (physical {BAD_PHYSICAL}): index {}", bad.value)),
        "{stdout}"
    );
    assert!(stderr.contains("could not be fixed"), "{stderr}");
    assert_eq!(
        AtomicDataZarrReader::open(&bad.path)
            .unwrap()
            .read(BAD_LOGICAL as i64)
            .unwrap()
            .data
            .field("neighbor_list")
            .unwrap()
            .data
            .to_i64_vec()
            .unwrap()[1],
        bad.value
    );

    // Ambiguous: one appended sample whose only edge fits two atom offsets.
    // Samples of 3, 2, 4 and 5 atoms; the last is appended with the bug and
    // its single edge (3, 3) reads back as (-2, -2): a shift of 3 or 5 both
    // bring it into [0, 5).
    let dir = tmpdir();
    let path = dir.path().join("amb.zarr");
    let mk = |n: usize, nl: Vec<[i64; 2]>| {
        AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap().with_neighbor_list(nl, None).unwrap()
    };
    toolkit_like_store(
        &path,
        &[vec![mk(3, vec![[0, 1]]), mk(2, vec![[1, 0]]), mk(4, vec![[2, 3]])], vec![mk(5, vec![[3, 3]])]],
    );
    // The toolkit bug with K = atoms_ptr[3] = 9 would read back -6; make the
    // stored value the ambiguous one instead (read-back -2).
    set_neighbor_rows(&path, 3, vec![9 - 2, 9 - 2]);
    let report = repair::repair(&path).unwrap();
    assert!(report.fixed.is_empty());
    assert_eq!(report.unfixed.len(), 1);
    assert!(
        report.unfixed[0].reason.contains("ambiguous") && report.unfixed[0].reason.contains("[3, 5]"),
        "{:?}",
        report.unfixed
    );
}
