//! Buckets. Each bucket names the pool its objects go to tape in, so a bucket's
//! objects take that pool's rules (its key, its copy pool, its retention) as
//! every job of the pool does.

use super::{check_bucket_name, may_use, now_ns, Batching, Bucket, Refused, Result, S3Key};
use crate::access::Catalogued;
use tapeloom_catalog::DEFAULT_POOL;

/// Makes bucket `name`, whose objects go to `pool` (the default pool when none)
/// in batches that close as `batching` says.
pub fn create(
    at: &impl Catalogued,
    name: &str,
    pool: Option<&str>,
    batching: Batching,
) -> Result<Bucket> {
    check_bucket_name(name)?;
    let pool = pool.unwrap_or(DEFAULT_POOL);
    if pool != DEFAULT_POOL && at.ops_catalog().pool(pool)?.is_none() {
        return Err(Refused::NoPool { pool: pool.into() }.into());
    }
    let b = Bucket {
        name: name.to_string(),
        pool: pool.to_string(),
        created_ns: now_ns()?,
        batching,
    };
    at.ops_catalog().create_bucket(&b)?;
    Ok(b)
}

/// The buckets `key` may use (every bucket without a key), by name.
pub fn list(at: &impl Catalogued, key: Option<&S3Key>) -> Result<Vec<Bucket>> {
    let all = at.ops_catalog().buckets()?;
    Ok(match key {
        Some(k) => all.into_iter().filter(|b| may_use(k, &b.name)).collect(),
        None => all,
    })
}

/// Bucket `name`, or [`Refused::NoSuchBucket`].
pub fn get(at: &impl Catalogued, name: &str) -> Result<Bucket> {
    let all = at.ops_catalog().buckets()?;
    all.into_iter()
        .find(|b| b.name == name)
        .ok_or_else(|| Refused::NoSuchBucket { name: name.into() }.into())
}

/// Removes bucket `name`, which must hold no object and no upload in progress.
pub fn delete(at: &impl Catalogued, name: &str) -> Result<()> {
    match at.ops_catalog().delete_bucket(name)? {
        true => Ok(()),
        false => Err(Refused::NoSuchBucket { name: name.into() }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3s_rules() {
        for good in ["abc", "my-bucket.2026", "a".repeat(63).as_str()] {
            assert!(check_bucket_name(good).is_ok(), "{good}");
        }
        for bad in [
            "ab",
            "Abc",
            "-abc",
            "abc-",
            "a..b",
            "192.168.1.1",
            "a_b",
            &"a".repeat(64),
        ] {
            assert_eq!(
                check_bucket_name(bad).unwrap_err().code(),
                "InvalidBucketName",
                "{bad}"
            );
        }
    }
}
