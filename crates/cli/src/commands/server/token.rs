//! `tapeloom server token ...`: the tokens clients give the server. A token is
//! shown once, when it is made; the catalog keeps only its SHA-256.

use crate::commands::Context;
use crate::error::OpsResult;
use crate::output::{self, emit, Output};
use anyhow::Result;
use serde::Serialize;
use tapeloom_engine::escape_controls;
use tapeloom_ops::tokens::{self, Token};

#[derive(clap::Subcommand)]
pub enum Cmd {
    /// Make a token for a client and print it (once: it is not kept, only its hash).
    Add {
        /// The client's name: 1 to 64 letters, digits, '.', '_' or '-'. Jobs the
        /// client runs record it.
        name: String,
        /// An admin's token: it sees every client's jobs and the metrics.
        #[arg(long)]
        admin: bool,
    },
    /// Every token: name, admin or not, when made and revoked.
    List,
    /// Revoke a token; a running server refuses it from its next request on.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// A token as the commands show it.
#[derive(Serialize)]
pub struct TokenOut {
    name: String,
    admin: bool,
    created: String,
    revoked: Option<String>,
    /// The token itself: only when it was just made.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

impl TokenOut {
    fn new(t: Token, token: Option<String>) -> Self {
        TokenOut {
            name: t.name,
            admin: t.admin,
            created: output::time(t.created_ns),
            revoked: t.revoked_ns.map(output::time),
            token,
        }
    }
}

/// Every token, by name.
#[derive(Serialize)]
pub struct Tokens {
    tokens: Vec<TokenOut>,
}

impl Cmd {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        let home = ctx.open_home()?;
        match self {
            Cmd::Add { name, admin } => {
                let (t, token) = tokens::add(&home, &name, admin).ops()?;
                emit(&TokenOut::new(t, Some(token)), ctx.json)
            }
            Cmd::List => {
                let tokens = tokens::list(&home).ops()?.into_iter();
                let tokens = tokens.map(|t| TokenOut::new(t, None)).collect();
                emit(&Tokens { tokens }, ctx.json)
            }
            Cmd::Revoke { name } => {
                let t = tokens::revoke(&home, &name).ops()?;
                emit(&TokenOut::new(t, None), ctx.json)
            }
        }
    }
}

impl Output for TokenOut {
    fn print(&self) {
        match &self.token {
            // The token alone on stdout, so a script can take it as it is.
            Some(t) => {
                outln!("{t}");
                eprintln!(
                    "token of {} (shown once: the catalog keeps only its hash)",
                    escape_controls(&self.name)
                );
            }
            None => outln!(
                "{} {}{}",
                escape_controls(&self.name),
                if self.admin { "(admin) " } else { "" },
                self.revoked
                    .as_ref()
                    .map_or_else(|| "active".to_string(), |r| format!("revoked {r}"))
            ),
        }
    }
}

impl Output for Tokens {
    fn print(&self) {
        for t in &self.tokens {
            outln!(
                "{:<24} {:<6} created {}  {}",
                escape_controls(&t.name),
                if t.admin { "admin" } else { "client" },
                t.created,
                t.revoked
                    .as_ref()
                    .map_or_else(|| "active".to_string(), |r| format!("revoked {r}"))
            );
        }
    }
}
