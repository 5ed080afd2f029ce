//! GPU check (run by `scripts/gpu-check.sh` on a machine with an NVIDIA GPU):
//! loads the same batches on the CPU (Flex) and on CUDA, checks they are
//! equal, and prints upload throughput with pin_memory off and on.

#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::time::Instant;

    use atomzarr::{
        AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, ZarrArrayConfig, ZarrWriteConfig,
    };
    use burn::backend::{Cuda, Flex};
    use burn::tensor::backend::Backend;

    let n = 10_000;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("gpu.zarr");
    let samples = atomzarr::data::synth::generate(n, 10, 100, 0)?;
    let config = ZarrWriteConfig::default().with_core(
        ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(10_000)
            .with_shard_size(500_000),
    );
    AtomicDataZarrWriter::create(&path, config)?.write(&samples)?;
    let ds = Dataset::new(AtomicDataZarrReader::open(&path)?).with_skip_validation(true);
    let gpu = burn::backend::cuda::CudaDevice::default();

    let cpu_loader = DataLoader::<Flex, _>::builder(ds.clone())
        .with_batch_size(64)
        .with_prefetch_factor(4)
        .build(&Default::default())?;
    let gpu_loader = DataLoader::<Cuda, _>::builder(ds.clone())
        .with_batch_size(64)
        .with_prefetch_factor(4)
        .with_pin_memory(true)
        .with_use_streams(true)
        .build(&gpu)?;
    let mut compared = 0;
    for (c, g) in cpu_loader.iter().zip(gpu_loader.iter()) {
        let (c, g) = (c?, g?);
        if c.to_host_f64() != g.to_host_f64() || c.indices != g.indices {
            return Err(format!("batch {compared}: GPU batch differs from the CPU batch").into());
        }
        compared += 1;
    }
    println!("GPU batches equal CPU batches: {compared} batches compared");

    let raw_bytes: usize = samples.iter().flat_map(|s| s.fields.values()).map(|f| f.data.as_bytes().len()).sum();
    for pin in [false, true] {
        let loader = DataLoader::<Cuda, _>::builder(ds.clone())
            .with_batch_size(64)
            .with_shuffle(true)
            .with_prefetch_factor(16)
            .with_pin_memory(pin)
            .with_use_streams(true)
            .with_num_streams(2)
            .build(&gpu)?;
        for epoch in 0..3 {
            let t = Instant::now();
            let mut k = 0;
            for b in loader.iter() {
                k += b?.num_graphs;
            }
            <Cuda as Backend>::sync(&gpu)?;
            let s = t.elapsed().as_secs_f64();
            println!(
                "pin_memory={pin} epoch {epoch}: {k} samples in {s:.3} s = {:.0} samples/s, {:.1} MB/s uploaded",
                k as f64 / s,
                raw_bytes as f64 / s / 1e6
            );
        }
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("gpu_check needs the cuda feature: cargo run --release --features cuda --example gpu_check");
    std::process::exit(2);
}
