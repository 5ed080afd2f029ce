//! The process's memory as Linux reports it: resident bytes, and the part of
//! them mapped by the NVIDIA driver (page-locked host memory that CUDA
//! allocates, `cuMemHostAlloc`, is mapped through `/dev/nvidia*`). Shared by
//! `gpu_check` and `train_mlip` (`#[path]` include). `None` off Linux.
#![allow(dead_code)]

/// Resident bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    kib(status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?)
}

/// Resident bytes of the mappings backed by a `/dev/nvidia*` device file
/// (`/proc/self/smaps`): the driver's page-locked host memory this process
/// can see. Zero without an NVIDIA driver.
pub fn driver_mapped_bytes() -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut total = 0;
    let mut in_driver = false;
    for line in smaps.lines() {
        // A mapping's header line starts with its address range.
        if line.split_whitespace().next().is_some_and(|a| a.contains('-') && !a.ends_with(':')) {
            in_driver = line.split_whitespace().nth(5).is_some_and(|p| p.starts_with("/dev/nvidia"));
        } else if in_driver && let Some(v) = line.strip_prefix("Rss:") {
            total += kib(v)?;
        }
    }
    Some(total)
}

/// `"  1234 kB"` as bytes.
fn kib(v: &str) -> Option<u64> {
    Some(v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()? * 1024)
}

/// Mebibytes, for reports.
pub fn mib(b: Option<u64>) -> String {
    b.map_or_else(|| "n/a".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0))
}
