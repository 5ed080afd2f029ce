//! Edge layouts and codecs on bulk structures: bytes on disk, decoded bytes
//! and the decode floor of the same 4,000 bulk cells (`roundtrip --preset
//! bulk`: fcc Cu/Ni/Al cells of 50-300 atoms, neighbor lists at 5 Å, ~41
//! neighbors per atom), written once per variant:
//!
//! - `toolkit`: the toolkit's layout, `neighbor_list` int64 `[E, 2]` and
//!   `shifts` float32 `[E, 3]` (what every reader of the format expects);
//! - `compact-i8` / `compact-i16`: `neighbor_list` int32 and integer image
//!   offsets `S` (int8 or int16 `[E, 3]`) instead of `shifts` (`S·cell`);
//! - `delta-i`: the toolkit's arrays with the sender column stored as the
//!   difference to the previous edge's sender (what a delta filter on the
//!   sorted column would give the compressor; an upper bound for one);
//!
//! each under zstd at levels 1, 3 (the default) and 9, and blosc-zstd with
//! byte and bit shuffle. The floor is [`decode_every_chunk`] on all cores,
//! best of 3, a fresh reader each time; it bounds any read of the layout.
//!
//! `cargo bench --bench edge_layout` prints one table (no criterion: the
//! figures are sizes and one-pass throughputs of a 30 M-edge store).
//!
//! [`decode_every_chunk`]: atomzarr::AtomicDataZarrReader::decode_every_chunk

use std::path::Path;
use std::time::Instant;

use atomzarr::data::synth::{Generator, Preset};
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, Field, Level, Shuffle, ZarrArrayConfig,
    ZarrWriteConfig,
};

const CELLS: usize = 4000;

/// `S` from `shifts = S·cell` (exact for the generator's integer images).
fn images(s: &AtomicData) -> Vec<[i32; 3]> {
    let cell: Vec<f64> = s.field("cell").unwrap().data.to_f64_vec();
    let c = |r: usize, k: usize| cell[3 * r + k];
    let det = c(0, 0) * (c(1, 1) * c(2, 2) - c(1, 2) * c(2, 1)) - c(0, 1) * (c(1, 0) * c(2, 2) - c(1, 2) * c(2, 0))
        + c(0, 2) * (c(1, 0) * c(2, 1) - c(1, 1) * c(2, 0));
    let inv = |r: usize, k: usize| {
        let (r1, r2, k1, k2) = ((k + 1) % 3, (k + 2) % 3, (r + 1) % 3, (r + 2) % 3);
        (c(r1, k1) * c(r2, k2) - c(r1, k2) * c(r2, k1)) / det
    };
    let shifts = s.field("shifts").unwrap().data.to_f64_vec();
    shifts
        .chunks_exact(3)
        .map(|v| std::array::from_fn(|k| (0..3).map(|r| v[r] * inv(r, k)).sum::<f64>().round() as i32))
        .collect()
}

fn pairs(s: &AtomicData) -> Vec<i64> {
    s.field("neighbor_list").unwrap().data.to_i64_vec().unwrap()
}

/// The samples in `layout`.
fn convert(cells: &[AtomicData], layout: &str) -> Vec<AtomicData> {
    cells
        .iter()
        .map(|s| {
            let e = s.num_edges();
            let mut out = s.clone();
            match layout {
                "toolkit" => {}
                "delta-i" => {
                    let mut p = pairs(s);
                    let mut prev = 0;
                    for row in p.chunks_exact_mut(2) {
                        (row[0], prev) = (row[0] - prev, row[0]);
                    }
                    out.fields.insert("neighbor_list".into(), Field::new(Level::Edge, vec![e, 2], p).unwrap());
                }
                compact => {
                    out.fields.remove("shifts");
                    let p: Vec<i32> = pairs(s).into_iter().map(|x| x as i32).collect();
                    out.fields.insert("neighbor_list".into(), Field::new(Level::Edge, vec![e, 2], p).unwrap());
                    let img = images(s).into_iter().flatten();
                    let f = if compact == "compact-i8" {
                        Field::new(Level::Edge, vec![e, 3], img.map(|x| x as i8).collect::<Vec<_>>())
                    } else {
                        Field::new(Level::Edge, vec![e, 3], img.map(|x| x as i16).collect::<Vec<_>>())
                    };
                    out.fields.insert("cell_offsets".into(), f.unwrap());
                }
            }
            out
        })
        .collect()
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn main() {
    let cells = Generator::with_preset(Preset::Bulk { cutoff: 5.0 }, 50, 300, 42).unwrap().batch(CELLS).unwrap();
    let edges: usize = cells.iter().map(AtomicData::num_edges).sum();
    let codecs: Vec<(&str, Codec)> = vec![
        ("zstd 1", Codec::Zstd { level: 1 }),
        ("zstd 3", Codec::Zstd { level: 3 }),
        ("zstd 9", Codec::Zstd { level: 9 }),
        ("blosc-zstd 3 byteshuffle", Codec::BloscZstd { clevel: 3, shuffle: Shuffle::Shuffle }),
        ("blosc-zstd 3 bitshuffle", Codec::BloscZstd { clevel: 3, shuffle: Shuffle::BitShuffle }),
    ];
    let tmp = tempfile::Builder::new().prefix("edge-layout-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    println!("{CELLS} bulk cells, {edges} edges ({:.1} per cell)", edges as f64 / CELLS as f64);
    println!(
        "{:<12} {:<26} {:>14} {:>13} {:>14} {:>12} {:>10}",
        "layout", "edge codec", "edge disk B/e", "edge dec B/e", "store disk MB", "floor smp/s", "floor GB/s"
    );
    for layout in ["toolkit", "compact-i8", "compact-i16", "delta-i"] {
        let samples = convert(&cells, layout);
        let edge_fields: &[&str] = if layout.starts_with("compact") {
            &["neighbor_list", "cell_offsets"]
        } else {
            &["neighbor_list", "shifts"]
        };
        for (name, codec) in &codecs {
            let path = tmp.path().join(format!("{layout}-{}.zarr", name.replace(' ', "_")));
            let edge = ZarrArrayConfig::default().with_codec(*codec);
            let mut config = ZarrWriteConfig::default();
            for f in edge_fields {
                config = config.with_override(*f, edge);
            }
            AtomicDataZarrWriter::create(&path, config).unwrap().write(&samples).unwrap();
            let edge_disk: u64 = edge_fields
                .iter()
                .map(|f| {
                    let core = path.join("core").join(f);
                    if core.exists() { dir_bytes(&core) } else { dir_bytes(&path.join("custom").join(f)) }
                })
                .sum();
            let decoded_edge: usize = samples[0]
                .fields
                .iter()
                .filter(|(n, _)| edge_fields.contains(&n.as_str()))
                .map(|(_, f)| f.data.dtype().size() * f.shape[1..].iter().product::<usize>())
                .sum();
            let mut best = f64::INFINITY;
            let mut decoded = 0;
            for _ in 0..3 {
                let r = AtomicDataZarrReader::open(&path).unwrap();
                let t = Instant::now();
                decoded = r.decode_every_chunk().unwrap().decoded_bytes;
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!(
                "{:<12} {:<26} {:>14.2} {:>13} {:>14.1} {:>12.0} {:>10.2}",
                layout,
                name,
                edge_disk as f64 / edges as f64,
                decoded_edge,
                dir_bytes(&path) as f64 / 1e6,
                CELLS as f64 / best,
                decoded as f64 / best / 1e9
            );
            std::fs::remove_dir_all(&path).ok();
        }
    }
}
