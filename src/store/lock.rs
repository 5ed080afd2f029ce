//! The writer lock: one writer per store at a time, any number of readers.
//!
//! Every operation that changes a store (create, write, append, add_custom,
//! delete, defragment, repair, import, copy into a local store) holds an
//! exclusive lock on the file [`LOCK_FILE`] inside the store for as long as
//! its writer lives. A second writer fails at once with [`Error::Locked`],
//! which names the holder (pid, host, since when) as the holder wrote them
//! into the file, or waits for the lock up to a timeout
//! ([`ZarrWriteConfig::with_lock_timeout`](crate::ZarrWriteConfig::with_lock_timeout),
//! `--wait SECONDS` on the command line). Readers never take it: every
//! commit is an atomic rename (see `store::durable`), so a
//! reader sees one commit or the next, never a mix.
//!
//! The lock is the operating system's, taken with `std`'s
//! [`File::try_lock`] (`flock(2)` on Unix, `LockFileEx` on Windows), not a
//! lock file whose mere existence means "locked": the kernel releases it
//! when the holding process exits or is killed, so a crash never leaves a
//! stale lock and the next writer gets it at once. The file itself stays in
//! the store (removing it would race with a writer that has just opened
//! it); it holds one JSON line naming the current holder, cleared when the
//! holder lets go. No Zarr reader looks at it: it is neither a group nor an
//! array, and zarr-python lists a group's members by their `zarr.json`.
//!
//! Shared filesystems. On Linux, an NFS client turns `flock` into a
//! whole-file byte-range lock held on the server (since Linux 2.6.12), so
//! writers on different machines exclude each other, provided the mount
//! has working locks: NFSv4, or NFSv3 with `lockd`/`statd` running; not
//! mounts with `nolock` or `local_lock=flock|all`, where the lock only
//! excludes writers on the same machine. A machine that crashes while
//! holding the lock keeps it until the server notices (NFSv4: the lease,
//! about 90 s; NFSv3: when the client reboots). Other network and FUSE
//! filesystems (SMB/CIFS, sshfs, some cluster filesystems) may keep `flock`
//! locks local to one machine: there, run the writers of a store on one
//! machine. A filesystem that refuses locks altogether (`ENOLCK`) makes
//! every writer fail with an I/O error naming the lock file rather than
//! write unlocked.
//!
//! Within one process, a second writer of a store is refused from a table
//! of the locks this process holds, without opening the lock file a second
//! time: where `flock` is emulated with `fcntl` locks, locks belong to the
//! process, so a second descriptor would neither conflict with the first
//! nor be safe to close.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use std::time::Duration;
//! use atomzarr::store::lock::StoreLock;
//! let dir = tempfile::tempdir().unwrap();
//! let held = StoreLock::acquire(dir.path(), Duration::ZERO)?;
//! match StoreLock::acquire(dir.path(), Duration::from_millis(20)) {
//!     Err(atomzarr::Error::Locked { holder, .. }) => {
//!         assert_eq!(holder.map(|h| h.pid), Some(std::process::id()));
//!     }
//!     other => panic!("expected Locked, got {other:?}"),
//! }
//! drop(held);
//! let _again = StoreLock::acquire(dir.path(), Duration::ZERO)?;
//! # Ok(()) }
//! ```

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;
#[cfg(not(unix))]
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Error, LockHolder, Result};

/// The lock file's name inside a store.
pub const LOCK_FILE: &str = ".atomzarr-lock";

/// Identity of a lock file: device and inode where the platform has them,
/// else its canonical path. Two paths name the same lock when these agree.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileId(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata, _path: &Path) -> FileId {
    use std::os::unix::fs::MetadataExt;
    FileId((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata, path: &Path) -> FileId {
    FileId(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// The locks this process holds, with when it took each.
static HELD: Mutex<Vec<(FileId, SystemTime)>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<(FileId, SystemTime)>> {
    // Each update is one push or remove, so a poisoned table is still whole.
    HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This machine's name (empty where it cannot be read).
fn host_name() -> String {
    #[cfg(unix)]
    {
        // libc is already a dependency; this is its one call here.
        let mut buf = [0u8; 256];
        // SAFETY: `buf` is valid for `buf.len()` bytes for the whole call;
        // gethostname writes at most that many.
        if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            return String::from_utf8_lossy(&buf[..end]).into_owned();
        }
        String::new()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_default()
    }
}

/// The holder line written into the lock file.
#[derive(serde::Serialize, serde::Deserialize)]
struct HolderLine {
    pid: u32,
    host: String,
    /// Seconds since the Unix epoch.
    since: u64,
}

fn holder_of(line: HolderLine) -> LockHolder {
    LockHolder { pid: line.pid, host: line.host, since: SystemTime::UNIX_EPOCH + Duration::from_secs(line.since) }
}

/// The holder this process is, for a lock it took at `since`.
fn this_process(since: SystemTime) -> LockHolder {
    LockHolder { pid: std::process::id(), host: host_name(), since }
}

/// An exclusive writer lock on a store directory, released on drop (and by
/// the kernel if the process dies). See the [module docs](self).
#[derive(Debug)]
pub struct StoreLock {
    /// Always `Some` until drop, which closes it before the table forgets
    /// the lock (see the module docs on `fcntl`-emulated locks).
    file: Option<File>,
    id: FileId,
    /// Exclusive (a writer, which records itself in the file) or shared.
    exclusive: bool,
}

/// One attempt's outcome.
enum Attempt {
    Got(StoreLock),
    /// Held by someone else (the holder, where known).
    Busy(Option<LockHolder>),
    /// A shared hold on a store whose lock file is missing or unreadable.
    Unlockable,
}

/// Writers hold the lock exclusively; a whole-store reader such as `copy`
/// holds it shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exclusive,
    Shared,
}

impl StoreLock {
    /// Takes the writer lock of the store directory `dir`, waiting up to
    /// `timeout` for another writer to let go (zero: fail at once).
    ///
    /// Creates the lock file if the store has none (stores written by other
    /// tools).
    ///
    /// # Errors
    /// [`Error::Locked`] when another writer holds it past the timeout;
    /// [`Error::NotFound`] when `dir` does not exist; [`Error::Io`] naming the
    /// lock file when it cannot be created or the filesystem refuses locks.
    pub fn acquire(dir: &Path, timeout: Duration) -> Result<StoreLock> {
        Self::acquire_for(dir, dir, timeout)
    }

    /// [`acquire`](Self::acquire) of the lock in `dir` on behalf of the
    /// store at `store`, which errors name (a store being built or restored
    /// in a sibling folder of its path).
    pub(crate) fn acquire_for(dir: &Path, store: &Path, timeout: Duration) -> Result<StoreLock> {
        Self::wait_for(dir, store, timeout, Mode::Exclusive)?.ok_or_else(|| Error::NotFound { store: store.into() })
    }

    /// A shared hold on the writer lock of `dir`, for a process that reads
    /// a store whole and must not see a writer's commits midway (`copy`):
    /// it keeps writers out while letting other such readers in, and writes
    /// nothing into the store. `None` when the store has no lock file or
    /// it cannot be opened (a read-only store no writer of ours has
    /// written): such a store is read unlocked.
    ///
    /// # Errors
    /// [`Error::Locked`] when a writer holds the lock past `timeout`;
    /// [`Error::Io`] naming the lock file when the filesystem refuses the lock.
    pub fn acquire_shared(dir: &Path, timeout: Duration) -> Result<Option<StoreLock>> {
        Self::wait_for(dir, dir, timeout, Mode::Shared)
    }

    fn wait_for(dir: &Path, store: &Path, timeout: Duration, mode: Mode) -> Result<Option<StoreLock>> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match Self::attempt(dir, store, mode)? {
                Attempt::Got(lock) => return Ok(Some(lock)),
                Attempt::Unlockable => return Ok(None),
                Attempt::Busy(holder) => {
                    let waited = start.elapsed();
                    if waited >= timeout {
                        let holder = holder.or_else(|| holder_once_written(&dir.join(LOCK_FILE)));
                        return Err(Error::Locked { store: store.into(), holder, waited: timeout });
                    }
                    // Polled: std's blocking `lock` has no timeout. Short
                    // pauses first (a writer about to finish), then at most
                    // 50 ms between attempts.
                    std::thread::sleep(pause.min(timeout - waited));
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
            }
        }
    }

    /// One try; `Busy` when someone holds it, loops over a lock file that
    /// was replaced between opening and locking it.
    fn attempt(dir: &Path, store: &Path, mode: Mode) -> Result<Attempt> {
        let path = dir.join(LOCK_FILE);
        let exclusive = mode == Mode::Exclusive;
        loop {
            // The table stays locked for the whole attempt, so two threads of
            // this process never both open the file.
            let mut table = held();
            if let Ok(meta) = std::fs::metadata(&path) {
                let id = file_id(&meta, &path);
                if let Some((_, since)) = table.iter().find(|(h, _)| *h == id) {
                    return Ok(Attempt::Busy(Some(this_process(*since))));
                }
            }
            let opened = if exclusive {
                OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)
            } else {
                File::open(&path)
            };
            let mut file = match opened {
                Ok(f) => f,
                Err(e) if !exclusive => {
                    log::debug!("{}: read without the writer lock ({e})", store.display());
                    return Ok(Attempt::Unlockable);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::NotFound { store: store.into() });
                }
                Err(e) => return Err(Error::io(&path, e)),
            };
            let locked = if exclusive { file.try_lock() } else { file.try_lock_shared() };
            match locked {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(Attempt::Busy(read_holder(&mut file))),
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
            // The file may have been replaced or removed between the open and
            // the lock (a defragment swaps the whole store folder; a create
            // renames its build folder into place): a lock on a file that is
            // no longer the store's locks nothing. Try again with the new one.
            let mine = file.metadata().map_err(|e| Error::io(&path, e))?;
            let id = file_id(&mine, &path);
            match std::fs::metadata(&path) {
                Ok(now) if file_id(&now, &path) == id => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::NotFound { store: store.into() });
                }
                Err(e) => return Err(Error::io(&path, e)),
            }
            let since = SystemTime::now();
            if exclusive {
                write_holder(&mut file, &this_process(since));
            }
            table.push((id.clone(), since));
            return Ok(Attempt::Got(StoreLock { file: Some(file), id, exclusive }));
        }
    }
}

/// Writes the holder line. Best effort: the line only names the holder in
/// another writer's error, and the lock holds without it.
fn write_holder(file: &mut File, holder: &LockHolder) {
    let since = holder.since.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let line = HolderLine { pid: holder.pid, host: holder.host.clone(), since };
    let Ok(mut text) = serde_json::to_vec(&line) else { return };
    text.push(b'\n');
    let written = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(&text));
    if let Err(e) = written {
        log::debug!("could not record the lock holder: {e}");
    }
}

/// The holder line of a lock someone else holds (`None` when it is missing,
/// being rewritten, or unreadable).
fn read_holder(file: &mut File) -> Option<LockHolder> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    parse_holder(&text)
}

/// The holder a lock file's text names (`None` when it is empty or not a
/// holder line).
fn parse_holder(text: &str) -> Option<LockHolder> {
    serde_json::from_str::<HolderLine>(text.trim()).ok().map(holder_of)
}

/// The holder line of a lock found busy with no line yet: a writer writes
/// it just after taking the lock, so an error raised in between would name
/// no one. Looks again for up to 100 ms; `None` if the line never comes (a
/// shared hold, which writes none, or a holder that cannot write it).
fn holder_once_written(path: &Path) -> Option<LockHolder> {
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(5));
        let holder = parse_holder(&std::fs::read_to_string(path).ok()?);
        if holder.is_some() {
            return holder;
        }
    }
    None
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        let mut table = held();
        if let Some(file) = self.file.take() {
            // Clear the holder line first, so no later error names a writer
            // that has gone; the lock itself goes with the descriptor.
            if self.exclusive {
                let _ = file.set_len(0);
            }
            // Unlocked explicitly, not only by closing: a child process
            // forked by another thread of this process (any `Command`
            // spawn) holds a copy of this descriptor until its `exec`, and
            // a `flock` lock lives until the last copy closes. `LOCK_UN`
            // releases it for every copy at once.
            let _ = file.unlock();
            drop(file);
        }
        table.retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_in_the_process_is_refused_and_names_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StoreLock::acquire(dir.path(), Duration::ZERO).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        let line: HolderLine = serde_json::from_str(text.trim()).unwrap();
        assert_eq!((line.pid, line.host.as_str()), (std::process::id(), host_name().as_str()));
        let t = Instant::now();
        match StoreLock::acquire(dir.path(), Duration::from_millis(30)) {
            Err(Error::Locked { store, holder: Some(h), waited }) => {
                assert_eq!(store, crate::Location::from(dir.path()));
                assert_eq!(h.pid, std::process::id());
                assert_eq!(waited, Duration::from_millis(30));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(t.elapsed() >= Duration::from_millis(30));
        drop(lock);
        assert_eq!(std::fs::read(dir.path().join(LOCK_FILE)).unwrap(), b"", "the holder line is cleared");
        drop(StoreLock::acquire(dir.path(), Duration::ZERO).unwrap());
    }

    #[test]
    fn a_dropped_lock_is_free_even_while_a_copy_of_its_descriptor_lives() {
        // A copy of the descriptor is what a child forked by another thread
        // holds until its exec: the next writer must not wait for it.
        let dir = tempfile::tempdir().unwrap();
        let held = StoreLock::acquire(dir.path(), Duration::ZERO).unwrap();
        let copy = held.file.as_ref().unwrap().try_clone().unwrap();
        drop(held);
        let again = StoreLock::acquire(dir.path(), Duration::ZERO);
        assert!(again.is_ok(), "the lock outlived its writer: {again:?}");
        drop(copy);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_the_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StoreLock::acquire(dir.path(), Duration::ZERO).unwrap();
        let path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || StoreLock::acquire(&path, Duration::from_secs(30)).map(|_| ()));
        std::thread::sleep(Duration::from_millis(50));
        drop(lock);
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn a_shared_hold_keeps_writers_out_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(StoreLock::acquire_shared(dir.path(), Duration::ZERO).unwrap().is_none(), "no lock file: unlocked");
        assert!(!dir.path().join(LOCK_FILE).exists(), "a shared hold creates nothing");
        drop(StoreLock::acquire(dir.path(), Duration::ZERO).unwrap());
        let shared = StoreLock::acquire_shared(dir.path(), Duration::ZERO).unwrap().unwrap();
        assert!(matches!(StoreLock::acquire(dir.path(), Duration::ZERO), Err(Error::Locked { .. })));
        drop(shared);
        drop(StoreLock::acquire(dir.path(), Duration::ZERO).unwrap());
    }

    #[test]
    fn a_replaced_lock_file_is_not_a_lock() {
        // The holder's file is moved away (as a defragment's swap moves the
        // old store): a new writer locks the file now at the path.
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        let old = StoreLock::acquire(&a, Duration::ZERO).unwrap();
        std::fs::rename(&a, &b).unwrap();
        std::fs::create_dir(&a).unwrap();
        let new = StoreLock::acquire(&a, Duration::ZERO).unwrap();
        assert!(matches!(StoreLock::acquire(&b, Duration::ZERO), Err(Error::Locked { .. })));
        drop((old, new));
        assert!(matches!(StoreLock::acquire(&dir.path().join("missing"), Duration::ZERO), Err(Error::NotFound { .. })));
    }
}
