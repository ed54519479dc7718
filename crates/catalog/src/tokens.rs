//! The server's tokens: each client's name, whether it is an admin's, and the
//! SHA-256 of its token (schema 16). The token itself is never stored: whoever
//! reads the catalog cannot act as a client.

use crate::db::{params, OptionalExtension};
use crate::error::{is_duplicate_key, CatalogError, Doing, Result};
use crate::Catalog;

/// A token, as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The client's name (jobs it runs record it).
    pub name: String,
    /// Whether the token sees every client's jobs and the server's metrics.
    pub admin: bool,
    /// When it was made, nanoseconds since the epoch.
    pub created_ns: i64,
    /// When it was revoked; a revoked token is refused.
    pub revoked_ns: Option<i64>,
}

const TOKEN_COLS: &str = "name, admin, created_ns, revoked_ns";

fn token_row(r: &crate::db::Row) -> crate::db::Result<Token> {
    Ok(Token {
        name: r.get(0)?,
        admin: r.get(1)?,
        created_ns: r.get(2)?,
        revoked_ns: r.get(3)?,
    })
}

/// Whether `name` can name a token: 1 to 64 letters, digits, `.`, `_` or `-`.
fn check_name(name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(CatalogError::BadTokenName {
            name: name.to_string(),
        })
    }
}

impl Catalog {
    /// Records a new token named `name` whose SHA-256 is `hash`.
    pub fn add_token(
        &self,
        name: &str,
        hash: &[u8; 32],
        admin: bool,
        now_ns: i64,
    ) -> Result<Token> {
        check_name(name)?;
        let r = self.conn.execute(
            "INSERT INTO tokens (name, hash, admin, created_ns) VALUES (?1, ?2, ?3, ?4)",
            params![name, &hash[..], admin, now_ns],
        );
        match r {
            Ok(_) => Ok(Token {
                name: name.to_string(),
                admin,
                created_ns: now_ns,
                revoked_ns: None,
            }),
            Err(e) if is_duplicate_key(&e) => Err(CatalogError::TokenExists {
                name: name.to_string(),
            }),
            Err(source) => Err(CatalogError::Database {
                what: "add a token",
                source,
            }),
        }
    }

    /// Every token, by name.
    pub fn tokens(&self) -> Result<Vec<Token>> {
        let run = || -> crate::db::Result<Vec<Token>> {
            let mut st = self
                .conn
                .prepare(&format!("SELECT {TOKEN_COLS} FROM tokens ORDER BY name"))?;

            st.query_map(params![], token_row)?.collect()
        };
        run().doing("list tokens")
    }

    /// The token whose SHA-256 is `hash`, revoked or not.
    pub fn token_by_hash(&self, hash: &[u8; 32]) -> Result<Option<Token>> {
        self.conn
            .query_row(
                &format!("SELECT {TOKEN_COLS} FROM tokens WHERE hash = ?1"),
                params![&hash[..]],
                token_row,
            )
            .optional()
            .doing("look up a token")
    }

    /// Revokes the token `name` (again: it stays revoked since the first time).
    pub fn revoke_token(&self, name: &str, now_ns: i64) -> Result<Token> {
        let n = self
            .conn
            .execute(
                "UPDATE tokens SET revoked_ns = COALESCE(revoked_ns, ?2) WHERE name = ?1",
                params![name, now_ns],
            )
            .doing("revoke a token")?;
        if n == 0 {
            return Err(CatalogError::NoToken {
                name: name.to_string(),
            });
        }
        let t = self
            .conn
            .query_row(
                &format!("SELECT {TOKEN_COLS} FROM tokens WHERE name = ?1"),
                params![name],
                token_row,
            )
            .doing("revoke a token")?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::both;
    use crate::tests::scratch;
    use crate::CatalogError;

    both! {
        fn tokens_are_found_by_hash_and_revoked_by_name() {
            let (_d, c) = scratch();
            let t = c.add_token("alice", &[1; 32], false, 5).unwrap();
            c.add_token("root", &[2; 32], true, 6).unwrap();
            assert_eq!(c.token_by_hash(&[1; 32]).unwrap(), Some(t));
            assert_eq!(c.token_by_hash(&[3; 32]).unwrap(), None);
            assert!(matches!(
                c.add_token("alice", &[4; 32], false, 7),
                Err(CatalogError::TokenExists { name }) if name == "alice"
            ));
            assert!(matches!(
                c.add_token("a b", &[5; 32], false, 7),
                Err(CatalogError::BadTokenName { .. })
            ));
            assert_eq!(c.revoke_token("alice", 9).unwrap().revoked_ns, Some(9));
            assert_eq!(c.revoke_token("alice", 10).unwrap().revoked_ns, Some(9));
            assert!(matches!(
                c.revoke_token("bob", 9),
                Err(CatalogError::NoToken { name }) if name == "bob"
            ));
            let names: Vec<_> = c.tokens().unwrap().into_iter().map(|t| t.name).collect();
            assert_eq!(names, ["alice", "root"]);
        }
    }

    both! {
        fn a_job_records_the_client_that_ran_it() {
            let (_d, c) = scratch();
            let j = c.begin_job(1, "j", 0, 262144, &[]).unwrap();
            assert_eq!(c.job(j).unwrap().unwrap().client, None);
            c.set_job_client(j, "alice").unwrap();
            assert_eq!(c.job(j).unwrap().unwrap().client.as_deref(), Some("alice"));
            assert!(matches!(
                c.set_job_client(j + 1, "alice"),
                Err(CatalogError::NoJob { .. })
            ));
        }
    }
}
