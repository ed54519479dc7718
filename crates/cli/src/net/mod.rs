//! The flags that send a command to a server (`--server`, `--token`,
//! `--fingerprint`); the client itself is `tapeloom-client`.

pub use tapeloom_client::Server;
use tapeloom_proto::ServerError;

/// The flags that send a command to a server.
#[derive(clap::Args, Default)]
pub struct Remote {
    /// Ask the tapeloom server at https://HOST:PORT instead of this machine's home.
    /// Default: $TAPELOOM_SERVER.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// The token `tapeloom server token add` made for this client. Default:
    /// $TAPELOOM_TOKEN (better: the command line is visible to other users).
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// The SHA-256 fingerprint of the server's certificate, as the server prints
    /// it; no other certificate is accepted. Default: $TAPELOOM_FINGERPRINT.
    #[arg(long, value_name = "SHA256")]
    fingerprint: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Remote {
    /// The server to ask, when one is named by flag or environment.
    pub fn resolve(&self) -> Result<Option<Server>, ServerError> {
        let Some(url) = self.server.clone().or_else(|| env("TAPELOOM_SERVER")) else {
            return Ok(None);
        };
        let token = (self.token.clone().or_else(|| env("TAPELOOM_TOKEN")))
            .ok_or(ServerError::Missing("--token", "TAPELOOM_TOKEN"))?;
        let fp = (self
            .fingerprint
            .clone()
            .or_else(|| env("TAPELOOM_FINGERPRINT")))
        .ok_or(ServerError::Missing(
            "--fingerprint",
            "TAPELOOM_FINGERPRINT",
        ))?;
        Ok(Some(Server::new(&url, token, &fp)?))
    }
}
