//! What to say when an error comes from a full file system: which file system holds
//! the home, how much of it is free, and how to win space back.

use nix::errno::Errno;
use std::path::Path;
use tapeloom_ops::catalog::CatalogError;

/// The advice to add to error `e` when it, or one of its causes, is a file system
/// out of space (ENOSPC, EDQUOT, or SQLite's "database or disk is full").
pub fn hint(e: &anyhow::Error, home: &Path) -> Option<String> {
    let full = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(|e| e.raw_os_error())
            .is_some_and(|n| n == Errno::ENOSPC as i32 || n == Errno::EDQUOT as i32)
            || c.downcast_ref::<CatalogError>()
                .is_some_and(CatalogError::is_disk_full)
            || matches!(
                c.downcast_ref::<tapeloom_engine::Error>(),
                Some(tapeloom_engine::Error::Catalog(c)) if c.is_disk_full()
            )
    });
    if !full {
        return None;
    }
    let free = nix::sys::statvfs::statvfs(home)
        .ok()
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()));
    let free = free.map_or("no".to_string(), crate::output::bytes);
    Some(format!(
        "the file system of the home {} has {free} free: `tapeloom library trim` cuts what failed jobs left on its cartridges (after `catalog recover JOB` for any you want to keep), and `tapeloom expire` frees expired ones",
        home.display()
    ))
}
