//! `tapeloom s3 ...`: the S3 front end's access keys and buckets. A key's secret
//! is shown once, when it is made; the catalog keeps it sealed with the home's
//! `s3-seal.key` (docs/S3.md).

use crate::commands::Context;
use crate::error::OpsResult;
use crate::output::{self, emit, Output};
use crate::size;
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::escape_controls;
use tapeloom_ops::s3::{buckets, keys, Batching, Bucket, S3Key};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Access keys: an id and a secret, which S3 clients sign requests with.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Buckets, each with the pool its objects go to tape in.
    #[command(subcommand)]
    Bucket(BucketCmd),
}

#[derive(clap::Subcommand)]
enum KeyCmd {
    /// Make an access key and print its id and secret (once: the secret is kept
    /// only sealed).
    Add {
        /// The key's name: 1 to 64 letters, digits, '.', '_' or '-'.
        name: String,
        /// A bucket the key may use (again for more). Without it the key may use
        /// and make every bucket.
        #[arg(long = "bucket", value_name = "BUCKET")]
        buckets: Vec<String>,
    },
    /// Every access key: name, id, buckets, when made and revoked.
    List,
    /// Revoke an access key: a running server refuses it from its next request on.
    Revoke {
        /// The key's name.
        name: String,
    },
}

#[derive(clap::Subcommand)]
enum BucketCmd {
    /// Make a bucket whose objects go to tape in POOL.
    Create {
        /// The bucket's name, as S3 allows: 3 to 63 lower-case letters, digits,
        /// '.' or '-'.
        name: String,
        /// The pool its objects go to tape in (its key, copy pool and retention
        /// apply). Default: the default pool.
        #[arg(long, value_name = "POOL")]
        pool: Option<String>,
        /// The longest an object waits on disk before its batch goes to tape,
        /// in seconds.
        #[arg(long, value_name = "SECS", default_value_t = Batching::default().age_s,
              value_parser = clap::value_parser!(i64).range(0..=31_536_000))]
        batch_age: i64,
        /// The most objects in one batch.
        #[arg(long, value_name = "N", default_value_t = Batching::default().objects,
              value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        batch_objects: u64,
        /// The most bytes in one batch (a larger object goes alone).
        #[arg(long, value_name = "SIZE", default_value = "4G",
              value_parser = size::within(1, size::MAX))]
        batch_size: u64,
    },
    /// Every bucket and its pool.
    List,
    /// Remove an empty bucket.
    Delete {
        /// The bucket's name.
        name: String,
    },
}

/// An access key as the commands show it.
#[derive(Serialize)]
pub struct KeyOut {
    name: String,
    access_key: String,
    buckets: Vec<String>,
    created: String,
    revoked: Option<String>,
    /// The secret: only when the key was just made.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl KeyOut {
    fn new(k: S3Key, secret: Option<String>) -> KeyOut {
        KeyOut {
            name: k.name,
            access_key: k.access_key,
            buckets: k.buckets,
            created: output::time(k.created_ns),
            revoked: k.revoked_ns.map(output::time),
            secret,
        }
    }
}

/// Every access key.
#[derive(Serialize)]
pub struct KeysOut {
    keys: Vec<KeyOut>,
}

/// A bucket as the commands show it.
#[derive(Serialize)]
pub struct BucketOut {
    name: String,
    pool: String,
    created: String,
}

impl From<Bucket> for BucketOut {
    fn from(b: Bucket) -> BucketOut {
        BucketOut {
            name: b.name,
            pool: b.pool,
            created: output::time(b.created_ns),
        }
    }
}

/// Every bucket.
#[derive(Serialize)]
pub struct BucketsOut {
    buckets: Vec<BucketOut>,
}

/// A bucket removed.
#[derive(Serialize)]
pub struct Deleted {
    deleted: String,
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        let home = ctx.open_home()?;
        match self.cmd {
            Cmd::Key(KeyCmd::Add { name, buckets }) => {
                let (k, secret) = keys::add(&home, &name, &buckets).ops()?;
                emit(&KeyOut::new(k, Some(secret)), ctx.json)
            }
            Cmd::Key(KeyCmd::List) => {
                let keys = keys::list(&home).ops()?.into_iter();
                let keys = keys.map(|k| KeyOut::new(k, None)).collect();
                emit(&KeysOut { keys }, ctx.json)
            }
            Cmd::Key(KeyCmd::Revoke { name }) => {
                keys::revoke(&home, &name).ops()?;
                let k = keys::list(&home)
                    .ops()?
                    .into_iter()
                    .find(|k| k.name == name);
                let k = k.ok_or_else(|| anyhow::anyhow!("no S3 key {name}"))?;
                emit(&KeyOut::new(k, None), ctx.json)
            }
            Cmd::Bucket(BucketCmd::Create {
                name,
                pool,
                batch_age,
                batch_objects,
                batch_size,
            }) => {
                let batching = Batching {
                    age_s: batch_age,
                    objects: batch_objects,
                    bytes: batch_size,
                };
                let b = buckets::create(&home, &name, pool.as_deref(), batching).ops()?;
                emit(&BucketOut::from(b), ctx.json)
            }
            Cmd::Bucket(BucketCmd::List) => {
                let all = buckets::list(&home, None).ops()?;
                let buckets = all.into_iter().map(BucketOut::from).collect();
                emit(&BucketsOut { buckets }, ctx.json)
            }
            Cmd::Bucket(BucketCmd::Delete { name }) => {
                buckets::delete(&home, &name).ops()?;
                emit(&Deleted { deleted: name }, ctx.json)
            }
        }
    }
}

impl Output for KeyOut {
    fn print(&self) {
        match &self.secret {
            // The id and the secret alone on stdout, so a script can take them.
            Some(s) => {
                outln!("{} {s}", self.access_key);
                eprintln!(
                    "access key id and secret of {} (the secret is shown once)",
                    escape_controls(&self.name)
                );
            }
            None => outln!(
                "{} {} {}",
                escape_controls(&self.name),
                self.access_key,
                self.revoked
                    .as_ref()
                    .map_or_else(|| "active".to_string(), |r| format!("revoked {r}"))
            ),
        }
    }
}

impl Output for KeysOut {
    fn print(&self) {
        for k in &self.keys {
            let buckets = match k.buckets.is_empty() {
                true => "every bucket".to_string(),
                false => k.buckets.join(","),
            };
            outln!(
                "{:<24} {:<20} {:<24} created {}  {}",
                escape_controls(&k.name),
                k.access_key,
                buckets,
                k.created,
                k.revoked
                    .as_ref()
                    .map_or_else(|| "active".to_string(), |r| format!("revoked {r}"))
            );
        }
    }
}

impl Output for BucketOut {
    fn print(&self) {
        outln!("{} (pool {})", self.name, escape_controls(&self.pool));
    }
}

impl Output for BucketsOut {
    fn print(&self) {
        for b in &self.buckets {
            outln!(
                "{:<40} pool {:<16} created {}",
                b.name,
                escape_controls(&b.pool),
                b.created
            );
        }
    }
}

impl Output for Deleted {
    fn print(&self) {
        outln!("bucket {} removed", self.deleted);
    }
}
