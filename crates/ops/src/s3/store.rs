//! The S3 stage: the folder `s3/` of the server's home, where each object's
//! data is kept in a file of its own (`s3/data/NAME`, NAME random) from the
//! moment its PUT is answered. A file is written and flushed to disk (fsync of
//! the file and of its folder) before the object's row is committed; a server
//! killed in between leaves a file no row names, which [`Store::sweep`] removes
//! when the server starts again.

use crate::{OpsError, Result};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The folder of the batches being archived, beside the data files.
const BATCHES: &str = "batches";

/// The folder of the restores being read, beside the data files.
const RESTORING: &str = "restoring";

/// The S3 stage of a home.
#[derive(Debug, Clone)]
pub struct Store {
    data: PathBuf,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> OpsError {
    move |source| OpsError::Io { what, source }
}

impl Store {
    /// The S3 stage of home `home`, made when missing.
    pub fn open(home: &Path) -> Result<Store> {
        let data = home.join("s3").join("data");
        std::fs::create_dir_all(&data).map_err(io(format!("make {}", data.display())))?;
        // Absolute, as a backup names the files it keeps ([`Store::dir`]).
        let data = data
            .canonicalize()
            .map_err(io(format!("find {}", data.display())))?;
        Ok(Store { data })
    }

    /// A new, empty data file: its name and the file, open to write.
    pub fn create(&self) -> Result<(String, File)> {
        let mut b = [0u8; 12];
        getrandom::fill(&mut b).map_err(|e| OpsError::Random(e.to_string()))?;
        let name = hex::encode(b);
        let path = self.path(&name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io(format!("make {}", path.display())))?;
        Ok((name, f))
    }

    /// A new, empty folder beside the data files, for a restore to write its
    /// files into before [`Store::adopt`] takes them.
    pub fn scratch(&self) -> Result<tempfile::TempDir> {
        self.folder_in(RESTORING)
    }

    /// A new folder beside the data files holding a second name (a hard link)
    /// of each data file of `folders` that is still there: the source of the
    /// job that archives them, which a delete of one of them does not change.
    /// One list of names is linked in the folder itself; several are linked
    /// in its subfolders `s1`, `s2`, ..., one per list (the job's streams).
    /// The folder, the sources (the folder, or its subfolders) and the names
    /// linked, in the order given.
    pub fn batch(
        &self,
        folders: &[Vec<&str>],
    ) -> Result<(tempfile::TempDir, Vec<PathBuf>, Vec<String>)> {
        let dir = self.folder_in(BATCHES)?;
        let mut sources = Vec::with_capacity(folders.len());
        let mut linked = Vec::new();
        for (i, names) in folders.iter().enumerate() {
            let into = match folders.len() {
                1 => dir.path().to_path_buf(),
                _ => {
                    let sub = dir.path().join(format!("s{}", i + 1));
                    std::fs::create_dir(&sub).map_err(io(format!("make {}", sub.display())))?;
                    sub
                }
            };
            for name in names {
                let to = into.join(name);
                match std::fs::hard_link(self.path(name), &to) {
                    Ok(()) => linked.push(name.to_string()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(format!("link {}", to.display()))(e)),
                }
            }
            sources.push(into);
        }
        Ok((dir, sources, linked))
    }

    fn folder_in(&self, kind: &str) -> Result<tempfile::TempDir> {
        let parent = self.data.parent().unwrap_or(&self.data).join(kind);
        std::fs::create_dir_all(&parent).map_err(io(format!("make {}", parent.display())))?;
        tempfile::tempdir_in(&parent).map_err(io(format!("make a folder in {}", parent.display())))
    }

    /// Removes the folders of batches and restores a stop cut short; run it
    /// only while no batch is archived and no restore runs (at the start of
    /// the server).
    pub fn clear_scratch(&self) -> Result<()> {
        for kind in [BATCHES, RESTORING] {
            let dir = self.data.parent().unwrap_or(&self.data).join(kind);
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io(format!("remove {}", dir.display()))(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Moves the file at `path` (on the same file system) into the stage under
    /// a new name, flushed: its name.
    pub fn adopt(&self, path: &Path) -> Result<String> {
        let (name, f) = self.create()?;
        drop(f);
        let to = self.path(&name);
        std::fs::rename(path, &to).map_err(io(format!(
            "move {} to {}",
            path.display(),
            to.display()
        )))?;
        let f = File::open(&to).map_err(io(format!("open {}", to.display())))?;
        self.sync(&f)?;
        Ok(name)
    }

    /// A second name for data file `name` (a hard link), flushed: how an object
    /// whose data is still on disk is restored.
    pub fn link(&self, name: &str) -> Result<String> {
        let (new, f) = self.create()?;
        drop(f);
        let to = self.path(&new);
        std::fs::remove_file(&to).map_err(io(format!("remove {}", to.display())))?;
        std::fs::hard_link(self.path(name), &to).map_err(io(format!("link {}", to.display())))?;
        let f = File::open(&to).map_err(io(format!("open {}", to.display())))?;
        self.sync(&f)?;
        Ok(new)
    }

    /// The path of data file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.data.join(name)
    }

    /// Flushes data file `f` and the stage's folder to disk, so that the file
    /// and its name survive a crash from here on.
    pub fn sync(&self, f: &File) -> Result<()> {
        f.sync_all().map_err(io("flush an object's data".into()))?;
        let dir = File::open(&self.data).map_err(io(format!("open {}", self.data.display())))?;
        dir.sync_all()
            .map_err(io(format!("flush {}", self.data.display())))
    }

    /// Removes data file `name`; one already gone is not an error.
    pub fn remove(&self, name: &str) -> Result<()> {
        match std::fs::remove_file(self.path(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("remove {}", self.path(name).display()))(e))
            }
            _ => Ok(()),
        }
    }

    /// Removes every data file that no row of the catalog names (left by a
    /// server killed between writing a file and committing its row); the number
    /// removed. Run it only while no request writes.
    pub fn sweep(&self, at: &impl crate::Catalogued) -> Result<usize> {
        let kept: std::collections::HashSet<String> =
            at.ops_catalog().s3_files()?.into_iter().collect();
        let read =
            std::fs::read_dir(&self.data).map_err(io(format!("read {}", self.data.display())))?;
        let mut removed = 0;
        for e in read {
            let e = e.map_err(io(format!("read {}", self.data.display())))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !kept.contains(&name) {
                self.remove(&name)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
