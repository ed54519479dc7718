//! What the engine asks of the dataset generator, which lives in the measuring
//! tools above it: a [`Generator`] turns a generator source's text into a
//! [`GeneratedTree`], whose folders, files and bytes `generated.rs` turns into
//! the objects of a walk. This module imports nothing of the engine, so that the
//! source walker and the generated source both name these traits without
//! naming each other.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

/// Makes the trees that generator sources name.
pub trait Generator: Send + Sync {
    /// The tree that the text of a generator source names, given without its
    /// `gen:` prefix and its `@RATE` (`hp-typical:100G:2`); `Err` says in one line
    /// why the text names no tree.
    fn tree(&self, spec: &str) -> std::result::Result<Arc<dyn GeneratedTree>, String>;
}

/// One tree a generator makes, as it would write it to disk.
pub trait GeneratedTree: Send + Sync {
    /// Its folders relative to its root: the root itself first (an empty path),
    /// every other folder after its parent.
    fn folders(&self) -> Vec<PathBuf>;
    /// The modification time of folder `index` of [`GeneratedTree::folders`].
    fn folder_time(&self, index: usize) -> SystemTime;
    /// The files folder `index` holds, in any order.
    fn files_in(&self, index: usize) -> Vec<GeneratedFile>;
    /// Bytes of all its files.
    fn bytes(&self) -> u64;
    /// Makes the `size` bytes of file `number`, handing them to `put` in pieces;
    /// `scratch` is reused from file to file. Stops when `put` breaks, and says so.
    fn make(
        &self,
        number: u64,
        size: u64,
        scratch: &mut Vec<u8>,
        put: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> ControlFlow<()>;
}

/// One file of a generated tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Its number in the tree, unique among its files (from 0).
    pub number: u64,
    /// Its name in its folder.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time.
    pub mtime: SystemTime,
}
