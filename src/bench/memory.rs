//! Peak resident memory and page faults of the benchmark process, so a run
//! can show that a pass stays inside its memory bound and how often it
//! touched fresh memory.

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

/// Minor page faults of the process so far (`getrusage`): each is a page
/// touched for the first time since it was mapped (or handed back to the
/// system), which the kernel zero-fills. `None` where `getrusage` fails.
pub fn minor_faults() -> Option<u64> {
    // SAFETY: `getrusage` writes one `rusage`, which lives on this stack and
    // is read only when the call succeeds.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (rc == 0).then(|| u64::try_from(usage.ru_minflt).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_grows_with_a_touched_allocation() {
        if !super::reset_peak_rss() {
            return; // not Linux: nothing to measure
        }
        // The peak is the whole process's, and the other tests of this
        // binary allocate and free beside this one: 256 MiB touched, of
        // which at least 192 MiB must show, leaves them 64 MiB of room.
        let before = super::peak_rss().unwrap_or(0);
        let v = vec![1u8; 256 << 20];
        let after = super::peak_rss().unwrap_or(0);
        assert!(v.iter().step_by(4096).all(|&b| b == 1));
        assert!(after >= before + (192 << 20), "{before} -> {after}");
    }

    #[test]
    fn touching_fresh_pages_counts_minor_faults() {
        let Some(before) = super::minor_faults() else { return };
        // 8 MiB mapped and touched page by page: at least one fault per
        // huge page even if the kernel backs it with 2 MiB pages.
        let mut v: Vec<u8> = Vec::with_capacity(8 << 20);
        v.resize(8 << 20, 1);
        let after = super::minor_faults().unwrap_or(0);
        assert!(v.iter().step_by(4096).all(|&b| b == 1));
        assert!(after >= before + 4, "{before} -> {after}");
    }
}
