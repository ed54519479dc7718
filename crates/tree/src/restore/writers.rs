//! Parallel writers for small restored files.
//!
//! Creating a small file costs a handful of system calls whose time is spent in the
//! file system, not in copying data; with several threads they overlap. The restore
//! thread still creates every directory and checks every path before a file is
//! handed over, so the safety rules do not depend on the workers.

use crate::restore::place::{create_file, Owners};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use tapeloom_format::Entry;

/// Files at most this large are handed to the writers.
pub(crate) const SMALL: u64 = 256 * 1024;

struct Job {
    path: PathBuf,
    entry: Entry,
    data: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<usize>,
    idle: Condvar,
    files: AtomicU64,
    bytes: AtomicU64,
    errors: Mutex<Vec<(String, String)>>,
}

/// A pool of file writers.
pub(crate) struct Writers {
    tx: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Writers {
    pub fn new(threads: usize) -> Self {
        let (tx, rx) = sync_channel::<Job>(256);
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared::default());
        let threads = (0..threads.max(1))
            .map(|_| {
                let rx = Arc::clone(&rx);
                let sh = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut owners = Owners::new();
                    loop {
                        let job = match rx.lock() {
                            Ok(g) => match g.recv() {
                                Ok(j) => j,
                                Err(_) => return,
                            },
                            Err(_) => return,
                        };
                        match write(&job, &mut owners) {
                            Ok(()) => {
                                sh.files.fetch_add(1, Ordering::Relaxed);
                                sh.bytes.fetch_add(job.entry.size, Ordering::Relaxed);
                            }
                            Err(e) => {
                                if let Ok(mut errs) = sh.errors.lock() {
                                    errs.push((crate::display_path(&job.entry.path), e));
                                }
                            }
                        }
                        if let Ok(mut n) = sh.pending.lock() {
                            *n -= 1;
                            if *n == 0 {
                                sh.idle.notify_all();
                            }
                        }
                    }
                })
            })
            .collect();
        Writers {
            tx: Some(tx),
            threads,
            shared,
        }
    }

    /// Hands a checked file over. `path` is where it goes; its parents exist.
    pub fn submit(&self, path: PathBuf, entry: Entry, data: Vec<u8>) -> Result<(), String> {
        if let Ok(mut n) = self.shared.pending.lock() {
            *n += 1;
        }
        let tx = self.tx.as_ref().ok_or("the writers are closed")?;
        tx.send(Job { path, entry, data })
            .map_err(|_| "the writers stopped".to_string())
    }

    /// Waits until every submitted file is written (before a hard link to one of them).
    pub fn wait(&self) {
        let Ok(mut n) = self.shared.pending.lock() else {
            return;
        };
        while *n > 0 {
            n = match self.shared.idle.wait(n) {
                Ok(n) => n,
                Err(_) => return,
            };
        }
    }

    /// Waits for the workers and returns (files, bytes, errors).
    pub fn finish(mut self) -> (u64, u64, Vec<(String, String)>) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let errors = self
            .shared
            .errors
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default();
        (
            self.shared.files.load(Ordering::Relaxed),
            self.shared.bytes.load(Ordering::Relaxed),
            errors,
        )
    }
}

/// Writes a file under its temporary name and places it once whole.
fn write(job: &Job, owners: &mut Owners) -> Result<(), String> {
    let t = create_file(&job.path, &job.entry).map_err(|e| e.to_string())?;
    t.file()
        .write_all(&job.data)
        .map_err(|e| format!("write {}: {e}", job.path.display()))?;
    t.place(&job.entry, owners).map_err(|e| e.to_string())
}
