//! [`Workers`]: a fixed set of named threads taking boxed jobs from one
//! queue, the crate's one set of threads for work that blocks (prefetch reads
//! of a `Dataset`, the writer's `fsync`s), where rayon's workers, one per
//! core, must not sit waiting on I/O.
//!
//! (The loader's upload threads are not one: each owns a device stream, so
//! a batch must go to a chosen thread, not to whichever is free.)

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// A job for a [`Workers`].
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// Locks a mutex whose data stays whole even if a holder panicked: each
/// caller's critical sections write whole values (counters, a swapped
/// `Arc`, one map insert), so a poisoned lock still guards valid data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fixed set of threads running submitted jobs in submission order, each
/// job on whichever thread is free. Dropping it lets queued jobs run,
/// then joins the threads.
pub(crate) struct Workers {
    tx: Mutex<Option<Sender<Job>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `n` threads (at least one) named `{name}-{i}`. Threads the
    /// system refuses are left out; [`len`](Self::len) says how many run.
    pub(crate) fn new(name: &str, n: usize) -> Workers {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n.max(1))
            .filter_map(|i| {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                    loop {
                        // One thread waits on the queue at a time; the lock is
                        // released before the job runs.
                        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return, // the Workers were dropped
                        }
                    }
                });
                spawned.ok()
            })
            .collect();
        Workers { tx: Mutex::new(Some(tx)), threads }
    }

    /// How many threads run.
    pub(crate) fn len(&self) -> usize {
        self.threads.len()
    }

    /// Queues `job`; gives it back when no thread runs to take it.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let g = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_ref() {
            Some(tx) if !self.threads.is_empty() => tx.send(job).map_err(|e| e.0),
            _ => Err(job),
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(PoisonError::into_inner).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_the_threads_and_dropped_workers_finish_their_queue() {
        let workers = Workers::new("test-workers", 3);
        assert_eq!(workers.len(), 3);
        let (tx, rx) = channel();
        for i in 0..20 {
            let tx = tx.clone();
            let queued = workers.submit(Box::new(move || {
                let name = std::thread::current().name().map(str::to_string);
                tx.send((i, name)).unwrap();
            }));
            assert!(queued.is_ok());
        }
        drop(tx);
        drop(workers);
        let mut got: Vec<(i32, Option<String>)> = rx.iter().collect();
        got.sort();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
        assert!(got.iter().all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("test-workers-"))));
    }
}
