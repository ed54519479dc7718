//! The server's admission and budgets: a job that names what the server will not
//! hold is refused before anything is allocated, and uploads held open by stalled
//! clients never starve the status page, `/metrics` or `jobs`.

use crate::common::server_kit::{self, admin_token, exchange, get, home_with_clients, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// POSTs `body` to `path` as `token`: the answer, head and body.
fn post(s: &Server, token: &str, path: &str, body: &str) -> String {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(&s.addr, req.as_bytes(), Duration::ZERO)
}

/// Begins the job of `doc` as `token`, which the server lets in: its backup number.
fn begun(s: &Server, token: &str, doc: &str) -> u64 {
    let answer = post(s, token, "/api/backups", doc);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["backup"].as_u64().unwrap()
}

/// A backup document of `streams` streams of blocks of `block_size` bytes.
fn begin_doc(name: &str, block_size: u64, streams: usize) -> String {
    let all: Vec<String> = (1..=streams)
        .map(|i| format!(r#"{{"name":"s{i}","source":"/x/s{i}","root":"s{i}"}}"#))
        .collect();
    let all = all.join(",");
    format!(
        r#"{{"name":"{name}","set":null,"pool":null,"block_size":{block_size},"streams":[{all}]}}"#
    )
}

#[test]
fn jobs_the_server_will_not_hold_are_refused_before_anything_is_allocated() {
    let (_t, home, alice, _bob) = home_with_clients();
    let s = Server::start(&home, None);
    // Idle, after one request of each kind.
    let _ = get(&s.addr, "/", None);
    let idle = rss(s.pid());
    for (what, doc, why) in [
        ("a block of 2 GiB", begin_doc("big", 2 << 30, 1), "block"),
        (
            "10,000 streams",
            begin_doc("many", 256 << 10, 10_000),
            "streams",
        ),
        ("257 streams", begin_doc("many", 256 << 10, 257), "streams"),
        ("no stream", begin_doc("none", 256 << 10, 0), "streams"),
        (
            "a pool that does not exist",
            begin_doc("p", 256 << 10, 1).replace(r#""pool":null"#, r#""pool":"nowhere""#),
            "no pool",
        ),
        (
            "a level that does not exist",
            begin_doc("l", 256 << 10, 1).replace(r#""streams""#, r#""level":"hourly","streams""#),
            "no level",
        ),
    ] {
        let answer = post(&s, &alice, "/api/backups", &doc);
        assert!(answer.starts_with("HTTP/1.1 400"), "{what}: {answer}");
        assert!(answer.contains(why), "{what}: {answer}");
    }
    // A frame of 4 GiB in a job of 64 KiB blocks is refused at its length.
    let backup = begun(&s, &alice, &begin_doc("frames", 64 << 10, 1));
    let mut req = format!(
        "POST /api/backups/{backup}/streams/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(b"4\r\n");
    req.extend_from_slice(&u32::MAX.to_le_bytes());
    req.extend_from_slice(b"\r\n");
    let answer = exchange(&s.addr, &req, Duration::ZERO);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // Nothing of what was named was allocated.
    let after = rss(s.pid());
    eprintln!("server RSS idle {idle} B, after the refusals {after} B");
    assert!(after < idle + (64 << 20), "idle {idle} B, after {after} B");
    // The server still serves.
    assert_eq!(get(&s.addr, "/", None).0, 200);
}

#[test]
fn uploads_held_open_by_stalled_clients_starve_no_control_request() {
    let (_t, home, alice, _bob) = home_with_clients();
    let admin = admin_token(&home, "root");
    let s = Server::start(&home, None);
    // One job of 64 streams, each sent by a client that stalls after its first bytes.
    let backup = begun(&s, &alice, &begin_doc("stalled", 64 << 10, 64));
    let stalled: Vec<_> = (1..=64)
        .map(|n| {
            let sock = TcpStream::connect(&s.addr).unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let conn = rustls::ClientConnection::new(server_kit::raw::config(), name).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let req = format!(
                "POST /api/backups/{backup}/streams/{n} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n\x00\x10"
            );
            tls.write_all(req.as_bytes()).unwrap();
            tls.flush().unwrap();
            tls
        })
        .collect();
    // The uploads are in: the job receives.
    std::thread::sleep(Duration::from_millis(500));
    for (what, path, token) in [
        ("the status page", "/", None),
        ("metrics", "/metrics", Some(admin.as_str())),
        ("the queue", "/api/queue", Some(admin.as_str())),
    ] {
        let t = Instant::now();
        let (status, body) = get(&s.addr, path, token);
        let took = t.elapsed();
        eprintln!("{what}: {status} in {took:?} beside 64 stalled uploads");
        assert_eq!(status, 200, "{what}: {body}");
        assert!(took < Duration::from_secs(1), "{what}: {took:?}");
    }
    let t = Instant::now();
    let (code, _, err) = s.client(&admin, &["jobs"]);
    let took = t.elapsed();
    eprintln!("jobs: exit {code} in {took:?} beside 64 stalled uploads");
    assert_eq!(code, 0, "{err}");
    assert!(took < Duration::from_secs(1), "jobs: {took:?}");
    drop(stalled);
}
