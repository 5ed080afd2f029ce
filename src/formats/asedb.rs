//! ASE's SQLite database (`ase.db.connect("x.db")`), read as frames
//! (feature `sqlite`: rusqlite with a bundled SQLite, nothing to install).
//!
//! The `systems` table holds one row per structure: arrays as raw
//! little-endian blobs (`numbers` int32, the rest float64), `pbc` as a
//! bitmask, `key_value_pairs` as JSON. Rows are read in id order, a batch
//! at a time (`WHERE id > last ORDER BY id LIMIT batch`), so memory holds
//! one batch of rows whatever the database's size. What becomes what:
//! `source::ase_row`.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};
use crate::formats::ase_row::{AseRow, AseRows, RowSource, key_values};
use crate::formats::units::Units;

/// Streams the rows of an ASE SQLite database as frames.
pub type AseDbFrames = AseRows<SqliteRows>;

/// The `systems` table, read in id order a batch at a time.
pub struct SqliteRows {
    conn: Connection,
    last_id: i64,
}

const COLUMNS: &str = "id, numbers, positions, cell, pbc, initial_magmoms, initial_charges, masses, tags, momenta, \
     energy, free_energy, forces, stress, dipole, magmoms, magmom, charges, key_value_pairs";

fn floats(b: Option<Vec<u8>>) -> Option<Vec<f64>> {
    b.map(|b| b.chunks_exact(8).map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect())
}

fn ints(b: Option<Vec<u8>>) -> Option<Vec<i64>> {
    b.map(|b| b.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
}

impl AseRows<SqliteRows> {
    /// Opens a database read-only; `units` are its energies' and lengths'
    /// (ASE's eV and Å unless told otherwise).
    ///
    /// # Errors
    /// [`Error::Parse`] naming `path` when it cannot be opened as an SQLite
    /// database with a `systems` table.
    pub fn open(path: &Path, units: Units) -> Result<AseDbFrames> {
        let sql = |e: rusqlite::Error| Error::in_file(path, "systems", format!("not an ASE database? {e}"));
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(sql)?;
        let total: i64 = conn.query_row("SELECT COUNT(*) FROM systems", [], |r| r.get(0)).map_err(sql)?;
        Ok(AseRows::new(path, SqliteRows { conn, last_id: i64::MIN }, total.max(0) as u64, units))
    }
}

impl RowSource for SqliteRows {
    /// The row without its `key_value_pairs`, and their JSON.
    type Raw = (AseRow, Option<String>);

    fn next_rows(&mut self, max: usize, file: &Path, _done: u64) -> Result<Vec<Self::Raw>> {
        let sql = |e: rusqlite::Error| Error::in_file(file, "systems", e);
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM systems WHERE id > ?1 ORDER BY id LIMIT ?2"))
            .map_err(sql)?;
        let mut rows = stmt.query(rusqlite::params![self.last_id, max as i64]).map_err(sql)?;
        let mut raw: Vec<(AseRow, Option<String>)> = Vec::new();
        while let Some(r) = rows.next().map_err(sql)? {
            let row = AseRow {
                id: r.get(0).map_err(sql)?,
                numbers: ints(r.get(1).map_err(sql)?).unwrap_or_default(),
                positions: floats(r.get(2).map_err(sql)?).unwrap_or_default(),
                cell: floats(r.get(3).map_err(sql)?).unwrap_or_default(),
                pbc: {
                    let bits: Option<i64> = r.get(4).map_err(sql)?;
                    let b = bits.unwrap_or(0);
                    [b & 1 != 0, b & 2 != 0, b & 4 != 0]
                },
                initial_magmoms: floats(r.get(5).map_err(sql)?),
                initial_charges: floats(r.get(6).map_err(sql)?),
                masses: floats(r.get(7).map_err(sql)?),
                tags: ints(r.get(8).map_err(sql)?),
                momenta: floats(r.get(9).map_err(sql)?),
                energy: r.get(10).map_err(sql)?,
                free_energy: r.get(11).map_err(sql)?,
                forces: floats(r.get(12).map_err(sql)?),
                stress: floats(r.get(13).map_err(sql)?),
                dipole: floats(r.get(14).map_err(sql)?),
                magmoms: floats(r.get(15).map_err(sql)?),
                magmom: r.get(16).map_err(sql)?,
                charges: floats(r.get(17).map_err(sql)?),
                key_value_pairs: vec![],
            };
            let kvp: Option<String> = r.get(18).map_err(sql)?;
            raw.push((row, kvp));
        }
        if let Some((last, _)) = raw.last() {
            self.last_id = last.id;
        }
        Ok(raw)
    }

    fn parse(file: &Path, record: usize, (mut row, kvp): Self::Raw) -> Result<AseRow> {
        if let Some(j) = kvp {
            row.key_value_pairs = key_values(&j).map_err(|reason| Error::Parse {
                file: file.to_path_buf(),
                line: record,
                field: "key_value_pairs".into(),
                reason,
            })?;
        }
        Ok(row)
    }
}
