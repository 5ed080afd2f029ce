//! fairchem's ASE LMDB (`.aselmdb`: OMat24, OMol25, fine-tuning sets), read
//! as frames (feature `lmdb`: heed over a bundled LMDB).
//!
//! One LMDB file (`subdir=False`); key `"<id>"` maps to
//! `zlib(orjson(row))`, `row` the dict of an ASE `AtomsRow` (numbers,
//! positions, cell, pbc, energy, forces, stress in Voigt order,
//! key_value_pairs, data, ...). The keys `nextid`, `metadata` and
//! `deleted_ids` are bookkeeping: ids run from 1 to `nextid - 1`, without
//! the deleted ones, in that order (fairchem's order). Each batch copies
//! its compressed rows out of the map and decodes them in parallel, so
//! memory holds one batch. What becomes what: `source::ase_row`.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::formats::ase_row::{AseRow, AseRows, RowSource};
use crate::formats::units::Units;

/// Streams the rows of an `.aselmdb` file as frames.
pub type AseLmdbFrames = AseRows<LmdbRows>;

/// The compressed rows of an `.aselmdb` file, in id order without the deleted ids.
pub struct LmdbRows {
    env: Env<WithoutTls>,
    db: Database<Bytes, Bytes>,
    next_id: i64,
    end_id: i64,
    deleted: BTreeSet<i64>,
}

/// The row as orjson wrote it (unknown keys, `data` among them, skipped).
#[derive(Deserialize)]
struct RowJson {
    numbers: Vec<i64>,
    positions: Vec<[f64; 3]>,
    cell: Option<Vec<[f64; 3]>>,
    pbc: Option<Vec<bool>>,
    energy: Option<f64>,
    free_energy: Option<f64>,
    magmom: Option<f64>,
    forces: Option<Vec<[f64; 3]>>,
    stress: Option<crate::formats::stress::JsonStress>,
    dipole: Option<Vec<f64>>,
    magmoms: Option<Vec<f64>>,
    charges: Option<Vec<f64>>,
    initial_magmoms: Option<Vec<f64>>,
    initial_charges: Option<Vec<f64>>,
    masses: Option<Vec<f64>>,
    momenta: Option<Vec<[f64; 3]>>,
    tags: Option<Vec<i64>>,
    key_value_pairs: Option<serde_json::Map<String, serde_json::Value>>,
}

fn flat(v: Vec<[f64; 3]>) -> Vec<f64> {
    v.into_iter().flatten().collect()
}

/// zlib, then orjson's JSON.
fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> std::result::Result<T, String> {
    let mut json = Vec::with_capacity(bytes.len() * 4);
    flate2::read::ZlibDecoder::new(bytes).read_to_end(&mut json).map_err(|e| format!("not zlib data ({e})"))?;
    serde_json::from_slice(&json).map_err(|e| format!("not the JSON of a row ({e})"))
}

impl AseRows<LmdbRows> {
    /// Opens an `.aselmdb` file read-only; `units` are its energies' and
    /// lengths' (eV and Å unless told otherwise).
    ///
    /// # Errors
    /// [`Error::Parse`] naming `path` when it cannot be opened as an LMDB file,
    /// has no main database, or its `nextid` or `deleted_ids` entries do not decode.
    pub fn open(path: &Path, units: Units) -> Result<AseLmdbFrames> {
        let lmdb = |e: heed::Error| Error::in_file(path, "lmdb", e);
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        // SAFETY: NO_LOCK is unsafe when another process writes the file
        // meanwhile; an import reads a finished data set (the same as
        // fairchem's readonly=True, lock=False). NO_SUB_DIR and READ_ONLY
        // are safe.
        let env =
            unsafe { opts.flags(EnvFlags::NO_SUB_DIR | EnvFlags::READ_ONLY | EnvFlags::NO_LOCK).max_dbs(1).open(path) }
                .map_err(lmdb)?;
        let rtxn = env.read_txn().map_err(lmdb)?;
        let db: Database<Bytes, Bytes> = env
            .open_database(&rtxn, None)
            .map_err(lmdb)?
            .ok_or_else(|| Error::in_file(path, "lmdb", "no main database"))?;
        let bad = |key: &str, reason: String| Error::in_file(path, key, reason);
        let next_id: i64 = match db.get(&rtxn, b"nextid").map_err(lmdb)? {
            Some(b) => decode(b).map_err(|r| bad("nextid", r))?,
            None => 1,
        };
        let deleted: BTreeSet<i64> = match db.get(&rtxn, b"deleted_ids").map_err(lmdb)? {
            Some(b) => decode::<Vec<i64>>(b).map_err(|r| bad("deleted_ids", r))?.into_iter().collect(),
            None => BTreeSet::new(),
        };
        let total = (1..next_id).filter(|i| !deleted.contains(i)).count() as u64;
        drop(rtxn);
        Ok(AseRows::new(path, LmdbRows { env, db, next_id: 1, end_id: next_id, deleted }, total, units))
    }
}

impl RowSource for LmdbRows {
    /// The row's id and its compressed JSON.
    type Raw = (i64, Vec<u8>);

    fn next_rows(&mut self, max: usize, file: &Path, done: u64) -> Result<Vec<Self::Raw>> {
        let lmdb = |e: heed::Error| Error::in_file(file, "lmdb", e);
        let mut raw: Vec<(i64, Vec<u8>)> = Vec::new();
        {
            let rtxn = self.env.read_txn().map_err(lmdb)?;
            while raw.len() < max && self.next_id < self.end_id {
                let id = self.next_id;
                self.next_id += 1;
                if self.deleted.contains(&id) {
                    continue;
                }
                match self.db.get(&rtxn, id.to_string().as_bytes()).map_err(lmdb)? {
                    Some(b) => raw.push((id, b.to_vec())),
                    // fairchem's reader fails here too ("missing from the database").
                    None => {
                        return Err(Error::Parse {
                            file: file.to_path_buf(),
                            line: done as usize + raw.len() + 1,
                            field: "lmdb".into(),
                            reason: format!("id {id} is below nextid and not deleted, but missing"),
                        });
                    }
                }
            }
        }
        Ok(raw)
    }

    fn parse(file: &Path, record: usize, (id, bytes): Self::Raw) -> Result<AseRow> {
        let err = |field: &str, reason: String| Error::Parse {
            file: file.to_path_buf(),
            line: record,
            field: field.to_string(),
            reason: format!("row id {id}: {reason}"),
        };
        let j: RowJson = decode(&bytes).map_err(|r| err("row", r))?;
        let pbc = j.pbc.unwrap_or_default();
        let key_value_pairs = j
            .key_value_pairs
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| {
                Ok((k.clone(), crate::formats::ase_row::key_value(k, v).map_err(|r| err("key_value_pairs", r))?))
            })
            .collect::<Result<Vec<_>>>()?;
        let row = AseRow {
            id,
            numbers: j.numbers,
            positions: flat(j.positions),
            cell: j.cell.map(flat).unwrap_or_else(|| vec![0.0; 9]),
            pbc: [pbc.first() == Some(&true), pbc.get(1) == Some(&true), pbc.get(2) == Some(&true)],
            energy: j.energy,
            free_energy: j.free_energy,
            magmom: j.magmom,
            forces: j.forces.map(flat),
            stress: j.stress.map(|s| s.flat()).transpose().map_err(|r| err("stress", r))?,
            dipole: j.dipole,
            magmoms: j.magmoms,
            charges: j.charges,
            initial_magmoms: j.initial_magmoms,
            initial_charges: j.initial_charges,
            masses: j.masses,
            momenta: j.momenta.map(flat),
            tags: j.tags,
            key_value_pairs,
        };
        Ok(row)
    }
}
