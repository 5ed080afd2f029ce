//! Peak resident memory of the benchmark process (Linux `/proc`), so a run
//! can show that a pass stays inside its memory bound.

/// Peak resident set size since the process started or since the last
/// [`reset_peak_rss`], in bytes (`VmHWM` of `/proc/self/status`); `None`
/// where the file or the field is missing (not Linux).
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak to the current resident size (`echo 5 >
/// /proc/self/clear_refs`, Linux 4.0+). Returns whether the kernel took it;
/// when it did not, [`peak_rss`] keeps counting from the process start. The
/// kernel keeps one peak: this also resets what `getrusage` (and `time -v`)
/// report as the maximum resident size.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_grows_with_a_touched_allocation() {
        if !super::reset_peak_rss() {
            return; // not Linux: nothing to measure
        }
        let before = super::peak_rss().unwrap_or(0);
        let v = vec![1u8; 64 << 20];
        let after = super::peak_rss().unwrap_or(0);
        assert!(v.iter().step_by(4096).all(|&b| b == 1));
        assert!(after >= before + (60 << 20), "{before} -> {after}");
    }
}
