//! The `atomzarr` command line: parses the arguments ([`args`]) and hands
//! each command to its module, which calls the library and prints the
//! result. Nothing here reads or writes a store itself.

mod args;
mod bench;
mod copy;
mod curate;
mod dump;
mod import;
mod inspect;
mod output;
mod repair;
mod split;
mod stats;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Cmd};

fn run(cli: Cli) -> atomzarr::Result<()> {
    match cli.cmd {
        Cmd::Dump { store, cutoff } => dump::dump(&store, cutoff),
        Cmd::Inspect { store } => inspect::inspect(&store),
        Cmd::Demo { output, n } => inspect::demo(output, n),
        Cmd::Roundtrip(a) => bench::roundtrip(&a),
        Cmd::Read { stores, cutoff, mix, read } => bench::read(&stores, cutoff, &mix, &read),
        Cmd::Repair { store, dry_run, json, wait } => repair::repair(&store, dry_run, json, wait.wait),
        Cmd::Delete(a) => curate::delete(&a),
        Cmd::Filter(a) => curate::filter(&a),
        Cmd::Defragment { store, wait } => curate::defragment(&store, wait.wait),
        Cmd::Verify { store, json } => verify::verify(&store, json),
        Cmd::Import(a) => import::import(a),
        Cmd::Export { store, out } => import::export(&store, &out),
        Cmd::Stats { store, split, part, save, json } => stats::stats(&store, split.as_deref(), &part, save, json),
        Cmd::Split { store, by, fractions, seed, save, json } => {
            split::split(&store, by, &fractions, seed, save.as_deref(), json)
        }
        Cmd::Copy { src, dst, remote, wait } => copy::copy(&src, &dst, &remote, wait.wait),
    }
}

fn main() -> ExitCode {
    // The library's log lines (which shuffle a loader chose, ...) on
    // stderr; RUST_LOG overrides the default `info` level.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("atomzarr=info"))
        .format_timestamp(None)
        .format_target(false)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
