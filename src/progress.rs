//! Progress of long library calls (a defragment, a large write, loading a
//! whole source into memory), shown only when the caller asks for it
//! ([`AtomicDataZarrWriter::with_progress`](crate::AtomicDataZarrWriter::with_progress),
//! [`InMemoryOptions::progress`](crate::InMemoryOptions::progress)).
//!
//! With the `progress` feature (off by default; the CLI turns it on) it is a bar
//! on stderr. Without it the library has no terminal dependency and reports
//! through the `log` crate instead (`log::info!`): a line at the start, one
//! at every tenth of the work, and one at the end.

#[cfg(feature = "progress")]
mod imp {
    use std::borrow::Cow;

    use indicatif::{ProgressBar, ProgressStyle};

    /// A progress bar on stderr (hidden when not asked for).
    pub(crate) struct Progress(ProgressBar);

    impl Progress {
        /// Progress over `len` units of work, labelled `msg`; `show` false
        /// shows nothing.
        pub(crate) fn new(show: bool, len: u64, msg: impl Into<Cow<'static, str>>) -> Progress {
            if !show {
                return Progress(ProgressBar::hidden());
            }
            let b = ProgressBar::new(len);
            if let Ok(style) = ProgressStyle::with_template("{msg:>12} {bar:40} {pos}/{len} {elapsed} {per_sec}") {
                b.set_style(style);
            }
            b.set_message(msg);
            Progress(b)
        }

        /// `n` more units done (from any thread).
        pub(crate) fn inc(&self, n: u64) {
            self.0.inc(n);
        }

        /// The work is done: the bar is removed.
        pub(crate) fn finish_and_clear(&self) {
            self.0.finish_and_clear();
        }
    }
}

#[cfg(not(feature = "progress"))]
mod imp {
    use std::borrow::Cow;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    /// Progress reported as `log::info!` lines (none when not asked for).
    pub(crate) struct Progress {
        show: bool,
        len: u64,
        msg: Cow<'static, str>,
        done: AtomicU64,
        start: Instant,
    }

    impl Progress {
        /// Progress over `len` units of work, labelled `msg`; `show` false
        /// logs nothing.
        pub(crate) fn new(show: bool, len: u64, msg: impl Into<Cow<'static, str>>) -> Progress {
            let msg = msg.into();
            if show {
                log::info!("{msg}: 0/{len}");
            }
            Progress { show, len, msg, done: AtomicU64::new(0), start: Instant::now() }
        }

        /// `n` more units done (from any thread); logs on crossing a tenth.
        pub(crate) fn inc(&self, n: u64) {
            let before = self.done.fetch_add(n, Ordering::Relaxed);
            let after = before + n;
            if self.show && self.len > 0 && before * 10 / self.len != after * 10 / self.len {
                log::info!("{}: {after}/{}", self.msg, self.len);
            }
        }

        /// The work is done.
        pub(crate) fn finish_and_clear(&self) {
            if self.show {
                let done = self.done.load(Ordering::Relaxed);
                log::info!("{}: done, {done}/{} in {:.1?}", self.msg, self.len, self.start.elapsed());
            }
        }
    }
}

pub(crate) use imp::Progress;
