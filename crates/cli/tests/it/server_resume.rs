//! A client whose connection breaks off mid-stream goes on over a new one from
//! the block the server holds next: the job ends ok and restores identical, and
//! only what was in flight is sent twice.

use crate::common::server_kit::{client_tree, token, Server};
use crate::common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A TCP proxy on 127.0.0.1 in front of the server: it forwards each connection
/// both ways, counts the bytes clients send, and cuts (both ways) the first
/// connection whose client has sent more than `cut_after` bytes.
struct Proxy {
    addr: String,
    /// Bytes clients sent through it.
    sent: Arc<AtomicU64>,
    /// Whether it cut a connection.
    cut: Arc<AtomicBool>,
}

impl Proxy {
    fn start(to: &str, cut_after: u64) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (sent, cut) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (to, sent2, cut2) = (to.to_string(), sent.clone(), cut.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                let Ok(s) = TcpStream::connect(&to) else {
                    return;
                };
                let (sent, cut) = (sent2.clone(), cut2.clone());
                let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
                std::thread::spawn(move || up(c, s, (cut_after, &sent, &cut)));
                std::thread::spawn(move || down(s2, c2));
            }
        });
        Proxy { addr, sent, cut }
    }
}

/// Client to server, the cut made here.
fn up(mut c: TcpStream, mut s: TcpStream, (cut_after, sent, cut): (u64, &AtomicU64, &AtomicBool)) {
    let mut buf = vec![0u8; 64 << 10];
    let mut mine = 0u64;
    loop {
        let n = match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        mine += n as u64;
        if mine > cut_after && !cut.swap(true, Ordering::SeqCst) {
            let _ = c.shutdown(Shutdown::Both);
            let _ = s.shutdown(Shutdown::Both);
            return;
        }
        sent.fetch_add(n as u64, Ordering::SeqCst);
        if s.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// Server to client.
fn down(mut s: TcpStream, mut c: TcpStream) {
    let _ = std::io::copy(&mut s, &mut c);
    let _ = c.shutdown(Shutdown::Write);
}

/// A backup of `src` through `proxy` to `server`: (exit code, document, stderr).
fn backup_through(proxy: &Proxy, server: &Server, tok: &str, src: &Path) -> (i32, Value, String) {
    let out = Command::new(bin())
        .args(["--json", "backup", src.to_str().unwrap()])
        .args(["--server", &format!("https://{}", proxy.addr)])
        .args(["--fingerprint", &server.fingerprint, "--token", tok])
        .env_remove("TAPELOOM_SERVER")
        .output()
        .unwrap();
    parse(out)
}

/// The bytes in flight the client said it sends again: `N bytes were in flight`.
fn in_flight(stderr: &str) -> u64 {
    let line = (stderr.lines())
        .find(|l| l.contains("sending again from frame"))
        .unwrap_or_else(|| panic!("the client did not say it resumed: {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "bytes").unwrap();
    words[at - 1].trim_start_matches('(').parse().unwrap()
}

#[test]
fn a_cut_connection_resumes_from_the_block_the_server_holds() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    library(&home, 1, 16, "4G");
    let tok = token(&home, "c0");
    let s = Server::start(&home, None);
    let src = t.path().join("src");
    client_tree(&src, 7, 24_000_000);
    // What one backup of the tree sends when nothing is cut.
    let whole = Proxy::start(&s.addr, u64::MAX);
    let (code, doc, err) = backup_through(&whole, &s, &tok, &src);
    assert_eq!((code, &doc["status"]), (0, &Value::from("ok")), "{err}");
    let baseline = whole.sent.load(Ordering::SeqCst);
    // Ten cuts at points spread over the stream (a seeded sequence).
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for trial in 0..10 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let cut_after = 1_000_000 + seed % 20_000_000;
        let proxy = Proxy::start(&s.addr, cut_after);
        let (code, doc, err) = backup_through(&proxy, &s, &tok, &src);
        assert_eq!(
            code, 0,
            "trial {trial} (cut after {cut_after} bytes): {err}"
        );
        assert_eq!(doc["status"], "ok", "trial {trial}: {doc}");
        assert!(
            proxy.cut.load(Ordering::SeqCst),
            "trial {trial}: nothing was cut"
        );
        let flight = in_flight(&err);
        let twice = proxy.sent.load(Ordering::SeqCst).saturating_sub(baseline);
        // Sent twice: what was in flight, and the new connection's TLS handshake
        // and request heads (a few KiB), never the stream from its start.
        assert!(
            twice <= flight + (64 << 10),
            "trial {trial}: {twice} bytes more than a whole backup, {flight} in flight"
        );
        assert!(flight < 16 << 20, "trial {trial}: {flight} bytes in flight");
        eprintln!(
            "trial {trial}: cut after {cut_after} bytes, {flight} in flight, {twice} sent twice"
        );
        let job = doc["job_id"].as_i64().unwrap().to_string();
        let out = t.path().join(format!("out{trial}"));
        let (code, _, err) = s.client(&tok, &["restore", &job, "--to", out.to_str().unwrap()]);
        assert_eq!(code, 0, "trial {trial}: {err}");
        assert_same_tree(&src, &out);
        std::fs::remove_dir_all(&out).unwrap();
    }
    drop(s);
    let check = ok(&home, &["catalog", "check"]);
    assert_eq!(check["ok"], true, "{check}");
}
