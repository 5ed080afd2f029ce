//! `atomzarr roundtrip` and `atomzarr read`: the library's I/O benchmark
//! ([`atomzarr::bench`]) run from the command line, its rows printed as the
//! reference toolkit's table or as JSON lines.

use atomzarr::bench::{Phase, ReadOptions, ReportRow, WriteOptions, fmt_bytes};
use atomzarr::data::synth::Preset;
use atomzarr::{Codec, Location};

use crate::args::{MixArgs, PresetArg, ReadArgs, RoundtripArgs};
use crate::output::{json_err, write_stdout};

/// Pins glibc's mmap threshold (`M_MMAP_THRESHOLD`) at `bytes`: allocations
/// at least that large get their own mapping and go back to the system when
/// freed. Nothing on other allocators.
///
/// Why: `roundtrip` writes a large store a batch at a time, freeing and
/// reallocating ~250 MB per batch; with glibc's default (a threshold that
/// rises to the largest buffer freed so far) those buffers land on the heap
/// and fragment it, and the process grew by ~1.2 KB per sample written
/// (peaks near 900 MB at 400,000 samples) though it holds one batch. Pinned
/// at 128 KiB for the write, it went back to ~30 MB after each batch. The read
/// passes after it run with the threshold at glibc's maximum (32 MiB), where
/// the default settles in a long read.
fn set_mmap_threshold(bytes: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning parameter.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, i32::try_from(bytes).unwrap_or(i32::MAX));
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

/// The rows as JSON lines, or under `title` as the table.
fn print_rows(title: &str, rows: &[ReportRow], json: bool) -> atomzarr::Result<()> {
    let mut text = String::new();
    if json {
        for r in rows {
            text.push_str(&serde_json::to_string(r).map_err(json_err)?);
            text.push('\n');
        }
    } else {
        text = format!("{title}\n{}\n", table(rows));
        if rows.iter().any(|r| r.mixture.is_some()) {
            text.push_str(&format!("Per store\n{}\n", stores_table(rows)));
        }
    }
    write_stdout(&text)
}

/// A mixture's per-store figures: one line per pass and store.
fn stores_table(rows: &[ReportRow]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    t.set_header([
        "pass",
        "store",
        "systems",
        "samples",
        "expected",
        "per batch",
        "decoded",
        "mixing",
        "pool",
        "check",
    ]);
    for r in rows {
        let Some(m) = &r.mixture else { continue };
        for c in &m.children {
            let per_batch = match c.samples_per_batch {
                Some(k) => format!("{}-{} (of {k})", c.per_batch_min, c.per_batch_max),
                None => format!("{}-{}", c.per_batch_min, c.per_batch_max),
            };
            let promised = c.expected_samples.is_some() || c.samples_per_batch.is_some();
            let ok = c.expected_samples.is_none_or(|e| e == c.samples_read)
                && c.samples_per_batch.is_none_or(|k| c.per_batch_min == k && c.per_batch_max == k);
            t.add_row([
                r.epoch.to_string(),
                c.store.to_string(),
                c.systems.to_string(),
                c.samples_read.to_string(),
                c.expected_samples.map_or("-".into(), |e| e.to_string()),
                per_batch,
                fmt_bytes(c.decoded_bytes),
                c.mixing.map_or("-".into(), |x| format!("{x:.3}")),
                c.pool_blocks.map_or("-".into(), |k| format!("pool_blocks={k}")),
                (if !promised {
                    "-"
                } else if ok {
                    "ok"
                } else {
                    "FAILED"
                })
                .to_string(),
            ]);
        }
    }
    for i in [0, 2, 3, 4, 5, 6, 7, 8] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t
}

/// The report table (the reference's columns; samples/s is read throughput).
fn table(rows: &[ReportRow]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    // Only runs with --checksum have the checksum column.
    let checksums = rows.iter().any(|r| r.content_checksum.is_some());
    let floors = rows.iter().any(|r| r.decode_floor_samples_per_s.is_some());
    let mut header = vec![
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
        "decode amp",
        "peak RSS",
        "1st batch",
    ];
    if floors {
        header.extend(["floor/s", "of floor"]);
    }
    if checksums {
        header.push("content checksum");
    }
    t.set_header(header);
    for r in rows {
        let mut order = r.read_order.to_string();
        if let Some(b) = r.read_order_block_size {
            order.push_str(&format!(" (blk={b})"));
        }
        if let Some(k) = r.pool_blocks {
            order.push_str(&format!(" (pool_blocks={k})"));
        }
        if let Some(m) = &r.mixture {
            order.push_str(&format!(" ({})", m.sampler));
        }
        let mut path = r.read_path.to_string();
        if r.epoch > 1 {
            path.push_str(&format!(" #{}", r.epoch));
        }
        let mut row = vec![
            r.systems.to_string(),
            path,
            order,
            r.batch.to_string(),
            r.prefetch.to_string(),
            r.read_window.to_string(),
            format!("{:.0}", r.avg_atoms),
            format!("{:.0}", r.avg_edges),
            fmt_bytes(r.raw_bytes),
            fmt_bytes(r.disk_bytes),
            format!("{:.2}x", r.ratio),
            r.num_files.to_string(),
            r.write_time.map_or("-".into(), |t| format!("{t:.3}s")),
            format!("{:.3}s", r.read_time),
            format!("{:.0}", r.read_samples_per_s),
            r.decode_amplification.map_or("-".into(), |a| format!("{a:.2}x")),
            r.peak_rss_bytes.map_or("-".into(), fmt_bytes),
            r.first_batch_s.map_or("-".into(), |t| format!("{t:.3}s")),
        ];
        if floors {
            row.push(r.decode_floor_samples_per_s.map_or("-".into(), |f| format!("{f:.0}")));
            row.push(r.floor_fraction.map_or("-".into(), |f| format!("{:.0}%", f * 100.0)));
        }
        if checksums {
            row.push(r.content_checksum.clone().unwrap_or_else(|| "-".into()));
        }
        t.add_row(row);
    }
    for i in [0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t
}

/// `atomzarr roundtrip`: the I/O benchmark's write and read.
pub(crate) fn roundtrip(a: &RoundtripArgs) -> atomzarr::Result<()> {
    let read = a.read.options();
    let preset = match a.preset {
        PresetArg::Reference => Preset::Reference,
        PresetArg::Bulk => Preset::Bulk { cutoff: a.cutoff },
    };
    let (min_atoms, max_atoms) = preset.default_atoms();
    let w = WriteOptions {
        num_systems: a.num_systems.clone(),
        preset,
        min_atoms: a.min_atoms.unwrap_or(min_atoms),
        max_atoms: a.max_atoms.unwrap_or(max_atoms),
        seed: a.seed,
        codec: a.codec.as_deref().map(|name| Codec::from_name(name, a.level)).transpose()?,
        chunk_size: a.chunk_size,
        shard_size: a.shard_size,
        edge_chunk_size: a.edge_chunk_size,
        edge_shard_size: a.edge_shard_size,
        output_dir: a.output_dir.clone(),
        checksum: !a.no_checksum,
        write_batch: a.write_batch,
    };
    if !a.read.json {
        eprintln!(
            "atomzarr roundtrip  atoms={}-{}  config={}  read window={}",
            w.min_atoms,
            w.max_atoms,
            w.describe(),
            read.read_window()
        );
    }
    // Keeps the batch-at-a-time write from fragmenting the heap; the reads
    // then run as a long-lived process would (see set_mmap_threshold).
    let rows = atomzarr::bench::roundtrip(&w, &read, &mut |phase| match phase {
        Phase::Write => set_mmap_threshold(128 << 10),
        Phase::Read => set_mmap_threshold(32 << 20),
    })?;
    print_rows(&format!("Zarr I/O roundtrip benchmark: {}", w.describe()), &rows, a.read.json)?;
    Ok(())
}

/// `atomzarr read`: the I/O benchmark against an existing store, or two or
/// more read as one mixture. A mixture whose stores gave other counts than
/// its sampler promises fails (after printing its rows), with one line per
/// store on standard error.
pub(crate) fn read(stores: &[Location], cutoff: Option<f64>, mix: &MixArgs, a: &ReadArgs) -> atomzarr::Result<()> {
    let mut opts = ReadOptions { cutoff, mix: mix.options(), ..a.options() };
    if a.batch_size.is_none()
        && let Some(counts) = &opts.mix.samples_per_dataset
    {
        opts.batch_size = counts.iter().sum();
    }
    let rows = atomzarr::bench::read_bench_many(stores, &opts)?;
    let title = match stores {
        [one] => format!("Zarr read benchmark: {one}"),
        _ => format!(
            "Zarr read benchmark: mixture of {}",
            stores.iter().map(Location::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    print_rows(&title, &rows, a.json)?;
    let mut failed = 0;
    for r in &rows {
        for line in r.mixture.iter().flat_map(|m| m.failures()) {
            eprintln!("count check FAILED (pass {}): {line}", r.epoch);
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(atomzarr::Error::Internal(format!(
            "the mixture's loader delivered other per-store counts than its sampler promises ({failed} above)"
        )));
    }
    Ok(())
}
