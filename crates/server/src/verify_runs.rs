//! The verifies clients asked for (`verifies.rs`), by number: each from its
//! request to its end, kept an hour for its client to ask for it.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a verify's outcome waits for its client to ask for it.
const KEEP_OUTCOME: Duration = Duration::from_secs(3600);

/// The verifies clients asked for, by number.
#[derive(Default)]
pub struct Verifies {
    runs: Mutex<Runs>,
    /// Told whenever a verify ends.
    pub changed: Condvar,
}

/// The verifies, and the last number given.
#[derive(Default)]
pub struct Runs {
    /// The last number given.
    last: u64,
    /// Each verify, by its number.
    pub by_number: BTreeMap<u64, Run>,
}

/// One verify.
pub struct Run {
    /// The name of the token that asked.
    pub client: String,
    /// The job it reads.
    pub job: i64,
    /// Its end, once it came.
    pub outcome: Option<Outcome>,
    ended: Option<Instant>,
}

/// A verify's end: the document of `tapeloom verify --json`, or why the job could
/// not be read (answered 409).
pub type Outcome = Result<Vec<u8>, String>;

impl Verifies {
    /// The verifies, locked.
    pub fn lock(&self) -> MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new verify of `job` for `client`: its number.
    pub fn add(&self, client: &str, job: i64) -> u64 {
        let mut runs = self.lock();
        (runs.by_number).retain(|_, r| r.ended.is_none_or(|t| t.elapsed() < KEEP_OUTCOME));
        runs.last += 1;
        let number = runs.last;
        let run = Run {
            client: client.to_string(),
            job,
            outcome: None,
            ended: None,
        };
        runs.by_number.insert(number, run);
        number
    }

    /// Verify `number` ended with `outcome`.
    pub fn end(&self, number: u64, outcome: Outcome) {
        if let Some(r) = self.lock().by_number.get_mut(&number) {
            r.outcome = Some(outcome);
            r.ended = Some(Instant::now());
        }
        self.changed.notify_all();
    }
}
