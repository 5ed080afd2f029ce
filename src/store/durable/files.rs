//! The file operations of crash-safe storage: temporaries beside their
//! target, atomic replacement and exchange, directory syncs, syncs many at
//! a time, and cleaning up the temporaries a crash left behind.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::threads::Workers;

/// Marker in the name of every temporary file this module writes.
pub const TEMP_MARK: &str = ".atomzarr-tmp";

/// Unique suffix per temporary within this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// A temporary path beside `target` (same directory, so the rename is atomic).
fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}{TEMP_MARK}.{}.{n}", std::process::id()))
}

/// `fsync` of a directory, which makes the renames and creations inside it
/// durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `fsync` of the directory holding `path` (the current directory for a
/// bare name), which makes a rename or creation of `path` durable.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => sync_dir(p),
        _ => sync_dir(Path::new(".")),
    }
}

/// Creates `dir` and its missing ancestors, returning the ones it created
/// (outermost first): their parents need an `fsync` for the new entries to
/// survive a power loss.
fn create_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.as_os_str().is_empty() && !d.exists() {
        missing.push(d.to_path_buf());
        match d.parent() {
            Some(p) => d = p,
            None => break,
        }
    }
    missing.reverse();
    for m in &missing {
        match std::fs::create_dir(m) {
            Ok(()) => {}
            // Another thread of this writer created it meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(missing)
}

/// Writes `bytes` to a new temporary file beside `target` (creating missing
/// directories, whose paths are returned), synced when `sync`.
pub(super) fn write_temp(target: &Path, bytes: &[u8], sync: bool) -> std::io::Result<(PathBuf, Vec<PathBuf>)> {
    let created = match target.parent() {
        Some(parent) => create_dirs(parent)?,
        None => Vec::new(),
    };
    let tmp = temp_path(target);
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let written = f.write_all(bytes).and_then(|()| if sync { f.sync_all() } else { Ok(()) });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if !sync && bytes.len() >= WRITEBACK_BYTES {
        start_writeback(&f);
    }
    Ok((tmp, created))
}

/// Staged files from this size on are handed to the disk as soon as they
/// are written (see [`start_writeback`]).
const WRITEBACK_BYTES: usize = 64 << 10;

/// Starts writing `f`'s dirty pages to the disk without waiting for them
/// (Linux `sync_file_range`), so that a transaction that stages many large
/// files (a delete rewriting a chunk of every array, a large append) has
/// them mostly on disk by its commit, whose fsyncs then wait for little
/// rather than for all of it. Only a hint: the commit's fsync is what makes
/// the file durable, and an error here changes nothing.
fn start_writeback(f: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the call (`f` outlives it); the
        // call reads no memory of ours.
        let _ = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
}

/// Replaces `target` with `bytes` atomically and durably: temporary file,
/// `fsync`, `rename`, `fsync` of the directory (and of the parents of any
/// directory it had to create). A crash leaves the old or the new file.
pub fn replace_file(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (tmp, created) = write_temp(target, bytes, true)?;
    if let Err(e) = std::fs::rename(&tmp, target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_parents(target, &created)
}

/// Syncs the directory holding `target` and the parents of `created` dirs.
pub(super) fn sync_parents(target: &Path, created: &[PathBuf]) -> std::io::Result<()> {
    let mut dirs: BTreeSet<&Path> = created.iter().filter_map(|d| d.parent()).collect();
    if let Some(p) = target.parent() {
        dirs.insert(p);
    }
    dirs.into_iter().filter(|d| !d.as_os_str().is_empty()).try_for_each(sync_dir)
}

/// Makes `dst` (absent, its parent existing) a copy of the directory tree
/// `src` whose files are hard links to `src`'s, or copies where the
/// filesystem refuses links; temporaries are left out. Every new
/// directory, every copied file and `dst`'s parent are synced, so the copy
/// survives a power loss as it is. For replacing several files in one
/// atomic step: change them in the copy (never in place: a write through a
/// link would change `src` too), then [`exchange`] the two trees.
pub fn link_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    let mut dirs = vec![dst.to_path_buf()];
    let mut copied = Vec::new();
    let mut stack = vec![(src.to_path_buf(), dst.to_path_buf())];
    std::fs::create_dir(dst)?;
    while let Some((from, to)) = stack.pop() {
        for entry in std::fs::read_dir(&from)? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_string_lossy().contains(TEMP_MARK) {
                continue;
            }
            let (a, b) = (entry.path(), to.join(&name));
            if entry.file_type()?.is_dir() {
                std::fs::create_dir(&b)?;
                dirs.push(b.clone());
                stack.push((a, b));
            } else if std::fs::hard_link(&a, &b).is_err() {
                std::fs::copy(&a, &b)?;
                copied.push(b);
            }
        }
    }
    copied.extend(dirs);
    sync_paths(&copied)?;
    sync_parent(dst)
}

/// Swaps two directories in one atomic step (Linux `renameat2` with
/// `RENAME_EXCHANGE`), then syncs their parents: there is no moment at which
/// either path is missing. `Ok(false)` where the platform or filesystem
/// cannot exchange (the caller falls back to two renames).
pub fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let ca = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        let cb = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        // SAFETY: both pointers are valid NUL-terminated strings that live
        // across the call; AT_FDCWD resolves relative paths as std::fs does.
        let rc =
            unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::ENOTSUP) => Ok(false),
                _ => Err(e),
            };
        }
        sync_parent(a)?;
        if a.parent() != b.parent() {
            sync_parent(b)?;
        }
        Ok(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

/// Renames `from` to `to` unless `to` exists (Linux `renameat2` with
/// `RENAME_NOREPLACE`, atomic; elsewhere a check then a rename), then syncs
/// the parent of `to`. `ErrorKind::AlreadyExists` when `to` exists: a plain
/// `rename` would silently replace an empty directory there.
pub fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let cf = CString::new(from.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        let ct = CString::new(to.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
        // SAFETY: both pointers are valid NUL-terminated strings that live
        // across the call; AT_FDCWD resolves relative paths as std::fs does.
        let rc = unsafe {
            libc::renameat2(libc::AT_FDCWD, cf.as_ptr(), libc::AT_FDCWD, ct.as_ptr(), libc::RENAME_NOREPLACE)
        };
        if rc == 0 {
            return sync_parent(to);
        }
        let e = std::io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::ENOTSUP)) {
            return Err(e);
        }
        // The filesystem cannot: fall through to check-then-rename.
    }
    if to.symlink_metadata().is_ok() {
        return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, format!("{} exists", to.display())));
    }
    std::fs::rename(from, to)?;
    sync_parent(to)
}

/// Removes every temporary file ([`TEMP_MARK`]) under `root`, left there by
/// a writer that crashed before renaming it into place. Returns how many.
/// Only the holder of the store's writer lock may call this (a reader must
/// never write; another writer's temporaries are its work in progress).
pub fn clean_temporaries(root: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let ty = entry.file_type()?;
            if ty.is_dir() {
                stack.push(entry.path());
            } else if entry.file_name().to_string_lossy().contains(TEMP_MARK) {
                std::fs::remove_file(entry.path())?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Threads kept for fsyncs across commits (spawning them anew for each
/// round of a commit cost ~1 ms of system time per round on the reference
/// VM).
fn sync_threads() -> &'static Workers {
    static SYNC_WORKERS: std::sync::OnceLock<Workers> = std::sync::OnceLock::new();
    SYNC_WORKERS.get_or_init(|| Workers::new("atomzarr-sync", SYNC_THREADS))
}

/// `fsync` of every path (files or directories), many at a time; the first
/// error in path order wins.
pub(super) fn sync_paths(paths: &[PathBuf]) -> std::io::Result<()> {
    let one = |p: &PathBuf| File::open(p)?.sync_all();
    if paths.len() < 2 {
        return paths.iter().try_for_each(one);
    }
    let (reply, answers) = std::sync::mpsc::channel();
    for (i, p) in paths.iter().enumerate() {
        let (path, answer) = (p.clone(), reply.clone());
        let job = Box::new(move || drop(answer.send((i, File::open(&path).and_then(|f| f.sync_all())))));
        if sync_threads().submit(job).is_err() {
            // No sync thread runs: the rest here, one after the other.
            let _ = reply.send((i, one(p)));
        }
    }
    drop(reply);
    let mut results: Vec<(usize, std::io::Result<()>)> = answers.iter().collect();
    if results.len() != paths.len() {
        return Err(std::io::Error::other("an fsync thread stopped"));
    }
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().try_for_each(|(_, r)| r)
}

/// Syncs in flight at once: enough that the filesystem commits its journal
/// for many files together, without a thread per file.
const SYNC_THREADS: usize = 16;
