//! What the status page's earlier requests saw (`status.rs`): the figures from
//! which the running jobs' rates are taken, and the library's last look, which
//! many pages polling at once share.
//!
//! The library is looked at as `library status` does, without the home's lock
//! (a client's backup may hold it): its inventory only, nothing that moves a tape
//! (`tapeloom_ops::library::status`).

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tapeloom_ops::status_page::Cartridge;
use tapeloom_ops::{Conn, OpsError};

/// Rates are taken over this much of the latest figures.
const WINDOW: Duration = Duration::from_secs(5);

/// A rate needs figures at least this far apart.
const SHORTEST: Duration = Duration::from_millis(500);

/// Figures kept per series, at most (many pages polling at once).
const KEPT: usize = 64;

/// The library is looked at once in this long at most, however many pages ask
/// (a real changer answers each look with a READ ELEMENT STATUS).
const LOOK_EVERY: Duration = Duration::from_secs(2);

/// What earlier requests saw.
#[derive(Default)]
pub struct Seen {
    /// The figures of the running jobs' last looks, for their rates.
    pub rates: Rates,
    /// The library's last look, and when.
    library: Mutex<Option<(Instant, LibraryView)>>,
    /// Whether a request looks at the library now.
    looking: AtomicBool,
}

/// The figures seen by earlier looks, from which rates are taken.
#[derive(Default)]
pub struct Rates(Mutex<HashMap<String, VecDeque<(Instant, u64)>>>);

impl Rates {
    /// Records `figures` (key, bytes so far) seen at `now`, forgets the series not
    /// among them, and gives each the rate since the oldest figure in the window.
    pub fn observe(&self, now: Instant, figures: &[(&str, u64)]) -> HashMap<String, f64> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|k, _| figures.iter().any(|(f, _)| f == k));
        let mut rates = HashMap::new();
        for &(key, bytes) in figures {
            let q = seen.entry(key.to_string()).or_default();
            while q.len() >= KEPT
                || (q.len() > 1 && q.front().is_some_and(|(t, _)| now - *t > WINDOW))
            {
                q.pop_front();
            }
            q.push_back((now, bytes));
            if let Some(&(t0, b0)) = q.front() {
                let dt = now.saturating_duration_since(t0);
                if dt >= SHORTEST {
                    let rate = bytes.saturating_sub(b0) as f64 / dt.as_secs_f64();
                    rates.insert(key.to_string(), rate);
                }
            }
        }
        rates
    }
}

impl Seen {
    /// The library's last look, looked at again when older than [`LOOK_EVERY`].
    /// The look (a changer's inventory may take seconds) runs with no lock held;
    /// while one runs, other requests are answered with the last look.
    pub fn library(&self, home: &Path, conn: &Conn, now: Instant) -> Result<LibraryView, OpsError> {
        {
            let last = self.library.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, view)) = &*last {
                let fresh = now.saturating_duration_since(*at) < LOOK_EVERY;
                if fresh || self.looking.swap(true, Ordering::AcqRel) {
                    return Ok(view.clone());
                }
            }
        }
        let view = tapeloom_ops::status_page::status(home, conn).map(LibraryView::from);
        self.looking.store(false, Ordering::Release);
        let view = view?;
        let mut last = self.library.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Some((now, view.clone()));
        Ok(view)
    }
}

/// The library as its inventory says, or why it could not be looked at.
#[derive(Serialize, Default, Clone)]
pub struct LibraryView {
    /// What it is (`virtual library in ...`, `SCSI library ...`).
    pub description: Option<String>,
    /// Why the library could not be looked at.
    pub error: Option<String>,
    /// Its drives.
    pub drives: Vec<Drive>,
    /// Its cartridges.
    pub cartridges: Vec<Cartridge>,
}

impl From<tapeloom_ops::status_page::Status> for LibraryView {
    fn from(s: tapeloom_ops::status_page::Status) -> Self {
        LibraryView {
            description: s.description,
            error: s.error,
            drives: (s.drives.into_iter())
                .map(|d| Drive {
                    index: d.index,
                    device: d.device,
                    loaded: d.loaded,
                    job: None,
                    bytes: None,
                    bytes_per_s: None,
                })
                .collect(),
            cartridges: s.cartridges,
        }
    }
}

/// A drive, its cartridge, and the running job writing on it.
#[derive(Serialize, Clone)]
pub struct Drive {
    /// Its index.
    pub index: usize,
    /// Its device, for people.
    pub device: String,
    /// The barcode of the cartridge in it.
    pub loaded: Option<String>,
    /// The job writing on it (one the token may see).
    pub job: Option<i64>,
    /// The bytes that job wrote on it so far.
    pub bytes: Option<u64>,
    /// Its rate over the last seconds, bytes per second.
    pub bytes_per_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_taken_over_the_window_and_forgotten_with_its_series() {
        let r = Rates::default();
        let t0 = Instant::now();
        assert!(r.observe(t0, &[("a", 0)]).is_empty());
        let at = |s: u64| t0 + Duration::from_secs(s);
        let got = r.observe(at(1), &[("a", 1000)]);
        assert_eq!(got.get("a"), Some(&1000.0));
        // Older figures leave the window: the rate is that of the last seconds.
        for s in 2..=10 {
            r.observe(at(s), &[("a", 1000 + (s - 1) * 10)]);
        }
        let got = r.observe(at(11), &[("a", 1100)]);
        let a = got["a"];
        assert!((9.0..=11.0).contains(&a), "{a}");
        // A series not seen is forgotten: seen again, it has no rate yet.
        r.observe(at(12), &[("b", 5)]);
        assert!(r.observe(at(12), &[("a", 2000)]).is_empty());
    }
}
