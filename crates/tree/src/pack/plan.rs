//! What a backup's packing will do, decided before anything is read: its
//! streams' names, sources, and where each lands in the job's namespace.

use crate::error::{io, OptionsError, Result};
use std::collections::{HashMap, VecDeque};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tapeloom_format::StreamInfo;

/// What packing a backup's sources takes of its options.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Job name; made from the source names when empty.
    pub name: String,
    /// Stream names given by the user, by source index.
    pub stream_names: Vec<Option<String>>,
    /// Reader threads per stream fetching metadata and small files.
    pub readers: usize,
    /// Most bytes per second each stream reads.
    pub limit_rate: Option<f64>,
}

/// A stream not yet started: id, source, and its root in the job's namespace.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Its id.
    pub id: u16,
    /// Its name.
    pub name: String,
    /// Its source, an absolute path (or a generator source).
    pub abs: PathBuf,
    /// Where its root lies in the job's namespace.
    pub root: Vec<u8>,
}

impl Pending {
    /// The streams of `plan`, in the order drives take them.
    pub fn of(plan: &Plan) -> VecDeque<Pending> {
        plan.streams()
            .into_iter()
            .zip(plan.sources.iter().zip(&plan.roots))
            .map(|(s, (a, r))| Pending {
                id: s.id,
                name: s.name,
                abs: a.clone(),
                root: r.clone(),
            })
            .collect()
    }
}

/// The streams of a job: checked sources, their names and their roots.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Absolute source paths.
    pub sources: Vec<PathBuf>,
    /// Stream names, unique, each a valid folder name.
    pub names: Vec<String>,
    /// Where each stream's root lies in the job's namespace: `.` for a single
    /// directory, else a top-level name.
    pub roots: Vec<Vec<u8>>,
    /// The job's name.
    pub job_name: String,
}

impl Plan {
    /// Checks the options and the sources and names the streams.
    pub fn new(sources: &[PathBuf], opts: &PackOptions) -> Result<Plan> {
        if let Some(rate) = opts.limit_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(OptionsError::RateLimit { rate }.into());
        }
        if sources.is_empty() {
            return Err(OptionsError::NoSources.into());
        }
        if sources.len() > tapeloom_format::MAX_STREAMS {
            let count = sources.len();
            return Err(OptionsError::TooManyStreams { count }.into());
        }
        let mut abs = Vec::new();
        for s in sources {
            if let Some(tree) = super::generated::spec(s) {
                tree?;
                abs.push(s.clone());
                continue;
            }
            let a = io(std::path::absolute(s), || format!("source {}", s.display()))?;
            io(std::fs::symlink_metadata(&a), || {
                format!("source {}", s.display())
            })?;
            abs.push(a);
        }
        let mut names = stream_names(&abs);
        for (n, given) in names.iter_mut().zip(&opts.stream_names) {
            if let Some(g) = given {
                *n = g.clone();
            }
        }
        for (i, n) in names.iter().enumerate() {
            if n.is_empty() || n.contains('/') || n == "." || n == ".." {
                return Err(OptionsError::StreamName { name: n.clone() }.into());
            }
            if names[..i].contains(n) {
                return Err(OptionsError::DuplicateStream { name: n.clone() }.into());
            }
        }
        let single = abs.len() == 1;
        // The namespace: one source is the root itself; several are top-level folders.
        let roots = abs
            .iter()
            .zip(&names)
            .map(|(a, n)| {
                let is_dir = super::generated::is_generated(a)
                    || std::fs::symlink_metadata(a)
                        .map(|m| m.is_dir())
                        .unwrap_or(false);
                if single && is_dir {
                    b".".to_vec()
                } else if single {
                    a.file_name()
                        .map(|f| f.as_bytes().to_vec())
                        .unwrap_or_else(|| n.as_bytes().to_vec())
                } else {
                    n.as_bytes().to_vec()
                }
            })
            .collect();
        let job_name = if opts.name.is_empty() {
            default_job_name(&names)
        } else {
            opts.name.clone()
        };
        Ok(Plan {
            sources: abs,
            names,
            roots,
            job_name,
        })
    }

    /// The streams as the job start record and the catalog describe them.
    pub fn streams(&self) -> Vec<StreamInfo> {
        self.sources
            .iter()
            .zip(&self.names)
            .enumerate()
            .map(|(i, (a, n))| StreamInfo {
                id: (i + 1) as u16,
                name: n.clone(),
                source: a.as_os_str().as_bytes().to_vec(),
            })
            .collect()
    }
}

/// The longest name a job is given after its streams (a job's name is a file name:
/// the server and the sets refuse longer ones).
const JOB_NAME_MAX: usize = 255;

/// A job's name when none is given: its streams' names joined by commas, or as many
/// of them as fit in [`JOB_NAME_MAX`] bytes followed by how many more there are.
fn default_job_name(names: &[String]) -> String {
    let all = names.join(",");
    if all.len() <= JOB_NAME_MAX {
        return all;
    }
    let mut out = String::new();
    for (i, n) in names.iter().enumerate() {
        let rest = format!(",+{} more", names.len() - i);
        let sep = if out.is_empty() { "" } else { "," };
        if out.len() + sep.len() + n.len() + rest.len() > JOB_NAME_MAX {
            if out.is_empty() {
                // Even the first name is too long: cut it at a character boundary.
                let rest = format!(",+{} more", names.len() - 1);
                let mut cut = (JOB_NAME_MAX - rest.len()).min(n.len());
                while !n.is_char_boundary(cut) {
                    cut -= 1;
                }
                return format!("{}{rest}", &n[..cut]);
            }
            return out + &rest;
        }
        out.push_str(sep);
        out.push_str(n);
    }
    out
}

/// Names streams after the last component of their source, made unique.
pub fn stream_names(sources: &[PathBuf]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    sources
        .iter()
        .map(|s| {
            let base = s
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "root".into());
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                base
            } else {
                format!("{base}-{n}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_job_name_fits_a_file_name() {
        let names = |n: usize, len: usize| -> Vec<String> {
            (0..n).map(|i| format!("{i:0len$}")).collect()
        };
        assert_eq!(default_job_name(&names(3, 2)), "00,01,02");
        let many = default_job_name(&names(1200, 86));
        assert!(many.len() <= 255, "{}", many.len());
        assert!(many.ends_with(",+1198 more"), "{many}");
        let wide: Vec<String> = vec!["é".repeat(127), "b".into()];
        let one = default_job_name(&wide);
        assert!(one.len() <= 255 && one.ends_with("é,+1 more"), "{one}");
    }

    #[test]
    fn stream_names_are_unique() {
        let names = stream_names(&[
            PathBuf::from("/a/data"),
            PathBuf::from("/b/data"),
            PathBuf::from("/"),
            PathBuf::from("/c/data"),
        ]);
        assert_eq!(names, vec!["data", "data-2", "root", "data-3"]);
    }
}
