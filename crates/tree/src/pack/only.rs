//! The objects a backup stores when it stores only some (`hsm migrate`).

use std::path::PathBuf;

/// The objects a backup stores when it stores only some: files by their
/// absolute path, and the folders above them.
#[derive(Debug, Clone, Default)]
pub struct Only {
    files: std::collections::HashSet<PathBuf>,
    dirs: std::collections::HashSet<PathBuf>,
}

impl Only {
    /// The files `files` (absolute paths) and every folder above them.
    pub fn new(files: impl IntoIterator<Item = PathBuf>) -> Only {
        let mut only = Only::default();
        for f in files {
            let mut up = f.parent();
            while let Some(d) = up {
                if !only.dirs.insert(d.to_path_buf()) {
                    break;
                }
                up = d.parent();
            }
            only.files.insert(f);
        }
        only
    }

    /// Whether the object at `abs` is stored (`dir`: it is a folder).
    pub fn keeps(&self, abs: &std::path::Path, dir: bool) -> bool {
        match dir {
            true => self.dirs.contains(abs),
            false => self.files.contains(abs),
        }
    }
}
