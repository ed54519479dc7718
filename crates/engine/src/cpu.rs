//! The CPU time this process has used, user and system together: what a job
//! costs in CPU per GB it writes (a backup's `cpu_seconds`), the figure that says
//! how many cores a media server needs per drive. A server runs every job in one
//! process, so a job's figure there also counts the jobs that ran beside it.

/// Seconds of CPU this process has used so far; `None` where the kernel does not
/// say.
pub(crate) fn process_seconds() -> Option<f64> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    Some(secs(u.user_time()) + secs(u.system_time()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn work_shows_in_the_process_cpu_time() {
        let before = super::process_seconds().unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(super::process_seconds().unwrap() > before);
    }
}
