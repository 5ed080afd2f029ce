//! The `atomzarr` command line: a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use comfy_table::Table;

use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Codec, ZarrArrayConfig, ZarrWriteConfig};

#[derive(Parser)]
#[command(name = "atomzarr", version, about = "Atomic-structure Zarr stores for Burn training")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every logical sample as JSON (the reference fixtures' format).
    Dump {
        /// The store.
        store: PathBuf,
    },
    /// Summarise a store: samples, and per array level, dtype, shape, codec,
    /// chunk, shard, bytes on disk and file count.
    Inspect {
        /// The store.
        store: PathBuf,
    },
    /// Write a small synthetic store (default: a temp dir) and inspect it.
    Demo {
        /// Where to write (must not exist); default a temporary directory.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Number of structures.
        #[arg(short, long, default_value_t = 1000)]
        n: usize,
    },
}

fn print_inspect(path: &std::path::Path) -> atomzarr::Result<()> {
    let r = atomzarr::inspect::inspect(path)?;
    println!("store {}", path.display());
    println!(
        "samples: {} physical, {} active, {} deleted; {} bytes on disk in {} files",
        r.num_samples,
        r.active,
        r.num_samples - r.active,
        r.disk_bytes,
        r.files
    );
    let mut t = Table::new();
    t.set_header(["array", "level", "dtype", "shape", "codec", "chunk", "shard", "disk bytes", "files"]);
    for a in &r.arrays {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
        t.add_row([
            a.path.clone(),
            a.level.map_or("meta".into(), |l| l.to_string()),
            a.dtype.to_string(),
            format!("{:?}", a.shape),
            a.config.codec.map_or("-".into(), |c| c.to_string()),
            opt(a.config.chunk_size),
            opt(a.config.shard_size),
            a.disk_bytes.to_string(),
            a.files.to_string(),
        ]);
    }
    println!("{t}");
    Ok(())
}

fn run(cli: Cli) -> atomzarr::Result<()> {
    match cli.cmd {
        Cmd::Dump { store } => {
            let reader = AtomicDataZarrReader::open(&store)?;
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            atomzarr::dump::dump_json(&reader, &mut lock)?;
            use std::io::Write;
            lock.write_all(b"\n").map_err(|e| atomzarr::Error::Background(e.to_string()))?;
        }
        Cmd::Inspect { store } => print_inspect(&store)?,
        Cmd::Demo { output, n } => {
            let tmp;
            let path = match output {
                Some(p) => p,
                None => {
                    tmp = tempfile::tempdir().map_err(|e| atomzarr::Error::Background(e.to_string()))?;
                    tmp.path().join("demo.zarr")
                }
            };
            let samples = atomzarr::synth::generate(n, 10, 100, 0)?;
            let config = ZarrWriteConfig::default()
                .with_core(ZarrArrayConfig::default().codec(Codec::Zstd { level: 3 }).chunk_size(10_000).shard_size(500_000));
            AtomicDataZarrWriter::create(&path, config)?.write(&samples)?;
            print_inspect(&path)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
