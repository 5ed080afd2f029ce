//! `atomzarr inspect` and `atomzarr demo`: a store's arrays as a table
//! ([`atomzarr::store::inspect`]), and a small synthetic store inspected.

use std::path::PathBuf;

use comfy_table::Table;

use atomzarr::{AtomicDataZarrWriter, Codec, Location, ZarrArrayConfig, ZarrWriteConfig};

/// `atomzarr inspect`: samples, and per array its level, dtype, shape,
/// codec, chunk, shard, checksum, bytes on disk and files.
pub(crate) fn inspect(store: &Location) -> atomzarr::Result<()> {
    let r = atomzarr::store::inspect::inspect(store)?;
    println!("store {store}");
    println!(
        "samples: {} physical, {} active, {} deleted; {} bytes on disk in {} files",
        r.num_samples,
        r.active,
        r.num_samples - r.active,
        r.disk_bytes,
        r.files
    );
    let mut t = Table::new();
    t.set_header(["array", "level", "dtype", "shape", "codec", "chunk", "shard", "checksum", "disk bytes", "files"]);
    for a in &r.arrays {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
        t.add_row([
            a.path.clone(),
            a.level.map_or("meta".into(), |l| l.to_string()),
            a.dtype.to_string(),
            format!("{:?}", a.shape),
            a.config.codec().map_or("-".into(), |c| c.to_string()),
            opt(a.config.chunk_size()),
            opt(a.config.shard_size()),
            match a.config.checksum() {
                Some(true) => "crc32c".into(),
                Some(false) => "none".into(),
                None => "-".into(),
            },
            a.disk_bytes.to_string(),
            a.files.to_string(),
        ]);
    }
    println!("{t}");
    Ok(())
}

/// `atomzarr demo`: a small synthetic store, inspected.
pub(crate) fn demo(output: Option<PathBuf>, n: usize) -> atomzarr::Result<()> {
    let tmp;
    let path = match output {
        Some(p) => p,
        None => {
            tmp = tempfile::tempdir().map_err(|e| atomzarr::Error::Io { path: std::env::temp_dir(), source: e })?;
            tmp.path().join("demo.zarr")
        }
    };
    let samples = atomzarr::data::synth::generate(n, 10, 100, 0)?;
    let config = ZarrWriteConfig::default().with_core(
        ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(10_000)
            .with_shard_size(500_000),
    );
    AtomicDataZarrWriter::create(&path, config)?.write(&samples)?;
    inspect(&Location::Local(path))?;
    Ok(())
}
