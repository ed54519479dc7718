//! What moving bytes over loopback costs alone, with tapeloom's own TLS: rustls
//! with the ring provider, the server's self-signed certificate and the client's
//! pinning, TLS 1.3 as they agree on it. One thread sends GIB GiB in writes of
//! 1 MiB, another receives them into a buffer of 1 MiB, first over plain TCP,
//! then over TLS; each thread's CPU time is its own (`/proc/thread-self/schedstat`).
//! Prints one JSON document.
//!
//! No backup through a server can cost less than this: every byte the client
//! sends is encrypted and copied into the socket, then copied out and decrypted
//! by the server. `bench/transport.py` runs it.
//!
//!   cargo run --release -p tapeloom-proto --example tls_floor -- [GIB]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use tapeloom_proto::tls::{home_identity, Pinned};

const CHUNK: usize = 1 << 20;

/// CPU seconds the calling thread has run.
fn thread_cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns: u64 = s
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    ns as f64 / 1e9
}

/// Sends `total` bytes on `s`, then waits for the receiver's one byte.
fn send(mut s: impl Read + Write, total: u64) -> std::io::Result<f64> {
    let t0 = thread_cpu();
    let buf: Vec<u8> = (0..CHUNK).map(|i| (i * 7919 % 251) as u8).collect();
    let mut sent = 0u64;
    while sent < total {
        s.write_all(&buf)?;
        sent += CHUNK as u64;
    }
    s.flush()?;
    let cpu = thread_cpu() - t0;
    // Closed only once the receiver has everything: a socket closed with bytes
    // unread would reset the connection.
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack)?;
    Ok(cpu)
}

/// Receives `total` bytes from `s`, then answers one byte.
fn receive(mut s: impl Read + Write, total: u64) -> std::io::Result<f64> {
    let t0 = thread_cpu();
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < total {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "the receiver got {got} of {total} bytes"
            )));
        }
        got += n as u64;
    }
    let cpu = thread_cpu() - t0;
    s.write_all(b"k")?;
    s.flush()?;
    Ok(cpu)
}

type Figures = Result<(f64, f64), Box<dyn std::error::Error + Send + Sync>>;

/// (sender, receiver) CPU seconds for `total` bytes, over TLS when `tls` holds its
/// two configurations.
fn one(total: u64, tls: Option<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>)>) -> Figures {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let server_tls = tls.as_ref().map(|t| t.0.clone());
    let receiver = thread::spawn(move || -> std::io::Result<f64> {
        let (sock, _) = listener.accept()?;
        match server_tls {
            None => receive(sock, total),
            Some(cfg) => {
                let conn = rustls::ServerConnection::new(cfg).map_err(std::io::Error::other)?;
                receive(rustls::StreamOwned::new(conn, sock), total)
            }
        }
    });
    let sock = TcpStream::connect(addr)?;
    let sent = match tls {
        None => send(sock, total)?,
        Some((_, cfg)) => {
            let name = rustls::pki_types::ServerName::try_from("localhost")?;
            let conn = rustls::ClientConnection::new(cfg, name)?;
            send(rustls::StreamOwned::new(conn, sock), total)?
        }
    };
    let received = receiver.join().map_err(|_| "the receiver panicked")??;
    Ok((sent, received))
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let gib: f64 = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 1.0,
    };
    let total = ((gib * (1u64 << 30) as f64) as u64 / CHUNK as u64).max(1) * CHUNK as u64;
    let home = std::env::temp_dir().join(format!("tapeloom-tls-floor-{}", std::process::id()));
    let identity = home_identity(&home);
    let _ = std::fs::remove_dir_all(&home);
    let identity = identity?;
    let pinned = Pinned::new(identity.fingerprint());
    let configs = (identity.server_config()?, pinned.client_config()?);
    let per = total as f64 / (1u64 << 30) as f64;
    let (tcp_send, tcp_recv) = one(total, None)?;
    let (tls_send, tls_recv) = one(total, Some(configs))?;
    let r = |x: f64| (x / per * 1000.0).round() / 1000.0;
    println!(
        "{{\"gib\": {per}, \"tcp\": {{\"send_cpu_s_per_gib\": {}, \"recv_cpu_s_per_gib\": {}}}, \
         \"tls\": {{\"send_cpu_s_per_gib\": {}, \"recv_cpu_s_per_gib\": {}}}}}",
        r(tcp_send),
        r(tcp_recv),
        r(tls_send),
        r(tls_recv)
    );
    Ok(())
}
