//! Progress of a backup on a terminal.

use crate::output::bytes;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tapeloom_engine::Progress;

/// Progress on stderr, only when stderr is a terminal: a line for the job, and once
/// the job has run a second, a line per drive and per stream with its bytes and rate
/// (and a drive's backhitches, when it has a model).
pub fn progress_bar(p: Arc<Progress>) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let sub =
        ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bar = multi.add(ProgressBar::new_spinner());
    bar.set_style(style);
    let b = bar.clone();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let mut lines: std::collections::BTreeMap<String, (ProgressBar, u64, f64)> =
            Default::default();
        while !b.is_finished() {
            let now = t0.elapsed().as_secs_f64();
            let bytes_done = p.bytes.load(Ordering::Relaxed);
            let files = p.files.load(Ordering::Relaxed);
            let rate = bytes_done as f64 / 1e6 / now.max(1e-3);
            b.set_message(format!(
                "{files} files, {} ({rate:.1} MB/s)",
                bytes(bytes_done)
            ));
            b.tick();
            let live = p.series.lock().map(|s| s.clone()).unwrap_or_default();
            for (name, latest) in live {
                let (n, hitches) = (latest.bytes, latest.backhitches);
                let (line, last_n, last_t) = lines.entry(name.to_string()).or_insert_with(|| {
                    let l = multi.add(ProgressBar::new_spinner());
                    l.set_style(sub.clone());
                    (l, 0, 0.0)
                });
                if n != *last_n || now - *last_t > 2.0 {
                    let r = (n.saturating_sub(*last_n)) as f64 / 1e6 / (now - *last_t).max(1e-3);
                    let extra = hitches
                        .map(|h| format!(", {h} backhitches"))
                        .unwrap_or_default();
                    let name = tapeloom_engine::escape_controls(&name.to_string()).into_owned();
                    line.set_message(format!("  {name}: {} ({r:.1} MB/s){extra}", bytes(n)));
                    *last_n = n;
                    *last_t = now;
                }
                line.tick();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        for (l, _, _) in lines.into_values() {
            l.finish();
        }
    });
    Some(bar)
}
