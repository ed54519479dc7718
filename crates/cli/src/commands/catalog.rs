//! `tapeloom catalog ...`: the catalog itself.

use super::Context;
use crate::error::OpsResult;
use crate::output::{emit, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::escape_controls;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Read every labelled cartridge and add the jobs the catalog lacks, from the
    /// indexes on tape.
    Rebuild {
        #[command(flatten)]
        key: super::key::KeyArg,
    },
    /// Recover a job that did not end (killed before it wrote its index) from its
    /// data streams on tape: every entry whose blocks reached tape whole gets its
    /// row; the others are named in the job's errors. The job becomes partial.
    Recover {
        /// The job's id.
        #[arg(value_parser = super::parse_job_id)]
        job: i64,
        #[command(flatten)]
        key: super::key::KeyArg,
    },
    /// Check the catalog: SQLite's integrity check, then that every file row and
    /// extent lies inside its job's segments, that no two extents of a job overlap,
    /// and that no row names a job or volume the catalog lacks. Exits 1 when it
    /// finds a problem.
    Check,
    /// Copy every row of the home's catalog into an empty PostgreSQL catalog
    /// (jobs, files, sets, pools, tokens, stages, samples), then check the copy.
    /// The home keeps its own catalog until its home.toml names the new one.
    Copy {
        /// The PostgreSQL catalog (`postgresql://USER@HOST/DB`); its password
        /// comes from PGPASSWORD or ~/.pgpass.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        match self.cmd {
            Cmd::Rebuild { key } => emit(&rebuild(ctx, &key)?, ctx.json),
            Cmd::Recover { job, key } => emit(&recover(ctx, job, &key)?, ctx.json),
            Cmd::Check => emit(&check(ctx)?, ctx.json),
            Cmd::Copy { to } => emit(&copy(ctx, &to)?, ctx.json),
        }
    }
}

/// What `catalog rebuild` read and added.
#[derive(Serialize)]
pub struct Rebuilt {
    volumes_scanned: u64,
    volumes_added: u64,
    jobs_added: Vec<i64>,
    jobs_known: u64,
    /// Jobs without an index whose entries were recovered from their data streams.
    jobs_recovered: Vec<i64>,
    /// Jobs whose start record could not be used, added from their blocks alone
    /// (state `salvaged`).
    jobs_salvaged: Vec<i64>,
    files_added: u64,
    bad_blocks: u64,
    /// Jobs relative to a base on no cartridge read: their set's tree at them is
    /// not known, and a backup of the set relative to them runs as a full.
    bases_missing: Vec<i64>,
    /// Blocks that begin a record the rebuild could not use: a job start (the job
    /// is salvaged from its blocks, or missing) or a record of a job's index (the
    /// job lacks entries).
    unusable: Vec<UnusableBlock>,
    /// Further copies of jobs found on tape and added, each as
    /// `{"job": ID, "copy_no": N}`.
    copies_added: Vec<CopyAdded>,
    /// Jobs found only in copies (moved by `migrate` or `repack`), each with the
    /// copy it is read from, as `{"job": ID, "copy_no": N}`.
    jobs_moved: Vec<CopyAdded>,
}

/// A further copy of a job that `catalog rebuild` added.
#[derive(Serialize)]
struct CopyAdded {
    job: i64,
    copy_no: u32,
}

/// A block that begins a record `catalog rebuild` could not use.
#[derive(Serialize)]
struct UnusableBlock {
    volume: String,
    block: u64,
    what: String,
}

fn rebuild(ctx: &Context, key: &super::key::KeyArg) -> Result<Rebuilt> {
    let mut home = ctx.open_home()?;
    key.give(&mut home)?;
    let r = tapeloom_engine::rebuild(&home)?;
    Ok(Rebuilt {
        volumes_scanned: r.volumes_scanned,
        volumes_added: r.volumes_added,
        jobs_added: r.jobs_added,
        jobs_known: r.jobs_known,
        jobs_recovered: r.jobs_recovered,
        jobs_salvaged: r.jobs_salvaged,
        files_added: r.files_added,
        bad_blocks: r.bad_blocks,
        bases_missing: r.bases_missing,
        unusable: r
            .unusable
            .into_iter()
            .map(|u| UnusableBlock {
                volume: u.barcode,
                block: u.block,
                what: u.what,
            })
            .collect(),
        copies_added: (r.copies_added.into_iter())
            .map(|(job, copy_no)| CopyAdded { job, copy_no })
            .collect(),
        jobs_moved: (r.jobs_moved.into_iter())
            .map(|(job, copy_no)| CopyAdded { job, copy_no })
            .collect(),
    })
}

impl Output for Rebuilt {
    fn print(&self) {
        outln!(
            "read {} cartridges: {} jobs added, {} salvaged ({} entries), {} already known, {} volumes added, {} bad blocks",
            self.volumes_scanned,
            self.jobs_added.len(),
            self.jobs_salvaged.len(),
            self.files_added,
            self.jobs_known,
            self.volumes_added,
            self.bad_blocks
        );
        for j in &self.bases_missing {
            outln!("job {j}: its base job is on none of the cartridges read");
        }
        for c in &self.copies_added {
            outln!("job {}: copy {} found and added", c.job, c.copy_no);
        }
        for c in &self.jobs_moved {
            outln!(
                "job {}: found only in copies; read from copy {}, which stands in for its own cartridges",
                c.job,
                c.copy_no
            );
        }
        for u in &self.unusable {
            outln!("{} block {}: unusable: {}", u.volume, u.block, u.what);
        }
        for j in &self.jobs_salvaged {
            outln!("job {j}: salvaged from its blocks, without its start record");
        }
    }

    /// A job found on tape but not rebuilt whole is a loss: said, and exit 1.
    fn failure(&self) -> Option<String> {
        let salvaged = match self.jobs_salvaged.as_slice() {
            [] => String::new(),
            jobs => {
                let ids: Vec<String> = jobs.iter().map(i64::to_string).collect();
                format!(
                    "; salvaged from their blocks: job {} (`tapeloom jobs` shows them as salvaged)",
                    ids.join(", ")
                )
            }
        };
        match self.unusable.len() {
            0 => None,
            n => Some(format!(
                "{n} blocks begin records the rebuild could not use; the jobs they belong to are missing or incomplete{salvaged}"
            )),
        }
    }
}

/// What `catalog recover` found.
#[derive(Serialize)]
pub struct Recovered {
    job_id: i64,
    files_known: u64,
    files_added: u64,
    bytes_added: u64,
    blocks_read: u64,
    bad_blocks: u64,
    /// Entries not whole on tape, with the reason.
    not_recovered: Vec<crate::output::PathError>,
}

fn recover(ctx: &Context, job: i64, key: &super::key::KeyArg) -> Result<Recovered> {
    let mut home = ctx.open_home()?;
    key.give(&mut home)?;
    let r = tapeloom_engine::recover(&home, job)?;
    Ok(Recovered {
        job_id: r.job_id,
        files_known: r.files_known,
        files_added: r.files_added,
        bytes_added: r.bytes_added,
        blocks_read: r.blocks_read,
        bad_blocks: r.bad_blocks,
        not_recovered: crate::output::PathError::list(&r.cut),
    })
}

impl Output for Recovered {
    fn print(&self) {
        outln!(
            "job {}: {} entries recovered from {} blocks ({} bytes), {} known before, {} not whole on tape, {} bad blocks",
            self.job_id,
            self.files_added,
            self.blocks_read,
            self.bytes_added,
            self.files_known,
            self.not_recovered.len(),
            self.bad_blocks
        );
        for e in &self.not_recovered {
            outln!(
                "  not recovered: {}: {}",
                escape_controls(&e.path),
                escape_controls(&e.reason)
            );
        }
    }
}

/// What `catalog check` found.
#[derive(Serialize)]
pub struct Checked {
    ok: bool,
    jobs: u64,
    volumes: u64,
    segments: u64,
    files: u64,
    extents: u64,
    problems: Vec<Problem>,
}

/// One thing wrong in the catalog.
#[derive(Serialize)]
struct Problem {
    /// `sqlite`, `orphan`, `missing-volume`, `segment`, `file-outside-segment`,
    /// `extent-outside-segment`, `extent-overlap` or `empty-extent`.
    kind: &'static str,
    job: Option<i64>,
    detail: String,
}

fn check(ctx: &Context) -> Result<Checked> {
    let r = tapeloom_ops::catalog::check(&ctx.open_home()?).ops()?;
    Ok(Checked {
        ok: r.ok(),
        jobs: r.jobs,
        volumes: r.volumes,
        segments: r.segments,
        files: r.files,
        extents: r.extents,
        problems: (r.problems.into_iter())
            .map(|p| Problem {
                kind: p.kind.as_str(),
                job: p.job,
                detail: p.detail,
            })
            .collect(),
    })
}

impl Output for Checked {
    fn print(&self) {
        for p in &self.problems {
            match p.job {
                Some(job) => outln!("{} (job {job}): {}", p.kind, escape_controls(&p.detail)),
                None => outln!("{}: {}", p.kind, escape_controls(&p.detail)),
            }
        }
        outln!(
            "{}: {} jobs, {} volumes, {} segments, {} files, {} extents",
            if self.ok {
                "the catalog is sound".to_string()
            } else {
                format!("{} problems", self.problems.len())
            },
            self.jobs,
            self.volumes,
            self.segments,
            self.files,
            self.extents
        );
    }

    fn failure(&self) -> Option<String> {
        (!self.ok).then(|| format!("the catalog has {} problems", self.problems.len()))
    }
}

/// What `catalog copy` copied.
#[derive(Serialize)]
pub struct CopiedCatalog {
    to: String,
    /// Rows copied, by table.
    rows: std::collections::BTreeMap<String, u64>,
    /// The copy's `catalog check`: its problems (none when sound).
    problems: Vec<String>,
}

fn copy(ctx: &Context, to: &str) -> Result<CopiedCatalog> {
    let home = ctx.open_home()?;
    let (copied, report) = tapeloom_ops::catalog::copy(&home, to).ops()?;
    Ok(CopiedCatalog {
        to: to.to_string(),
        rows: copied.tables.into_iter().collect(),
        problems: (report.problems.iter())
            .map(|p| format!("{}: {}", p.kind.as_str(), p.detail))
            .collect(),
    })
}

impl Output for CopiedCatalog {
    fn print(&self) {
        let total: u64 = self.rows.values().sum();
        let n = |t: &str| self.rows.get(t).copied().unwrap_or(0);
        outln!(
            "copied {total} rows into {} ({} jobs, {} files, {} volumes)",
            self.to,
            n("jobs"),
            n("files"),
            n("volumes")
        );
        for p in &self.problems {
            outln!("{}", escape_controls(p));
        }
        if self.problems.is_empty() {
            outln!("the copy is sound; a home uses it once its home.toml says catalog = \"URL\"");
        }
    }

    fn failure(&self) -> Option<String> {
        (!self.problems.is_empty())
            .then(|| format!("the copy has {} problems", self.problems.len()))
    }
}
