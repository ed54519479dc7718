//! Malformed streams from a client sent by hand: each refused (an error answer, or
//! the connection closed) and its job failed with a reason, while the server goes
//! on serving the other clients and a well-behaved backup runs through it all.

use crate::common::server_kit::{
    self, admin_token, chunk_start, chunked, connect, exchange, frame, get, send_and_go,
    send_stream, stream_head as head, token, Server,
};
use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tapeloom_format::{BlockHeader, BLOCK_HEADER_LEN};

/// The block size of the jobs begun by hand.
const SIZE: usize = 65536;

/// Begins a job named `name` of one stream for `token`: (backup, tag).
fn begin(s: &Server, token: &str, name: &str) -> (u64, u64) {
    let v = server_kit::begin(s, token, name, None);
    assert_eq!(v["block_size"], SIZE, "{v}");
    (v["backup"].as_u64().unwrap(), v["tag"].as_u64().unwrap())
}

/// Sends `bytes`, then one byte of `trickle` every 100 ms, then reads what the
/// server answered.
fn send_trickle(s: &Server, bytes: &[u8], trickle: &[u8]) -> String {
    let mut tls = connect(&s.addr);
    tls.write_all(bytes).unwrap();
    for b in trickle {
        if tls.write_all(&[*b]).and_then(|()| tls.flush()).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut got = Vec::new();
    let _ = tls.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

/// A block of `len` bytes of stream 1 of job `tag`, seq 0 at offset 0 (a
/// well-formed first block), changed by `f` before it is sealed.
fn block(tag: u64, len: usize, f: impl FnOnce(&mut BlockHeader)) -> Vec<u8> {
    let mut h = BlockHeader {
        volume: [0; 16],
        lbn: 0,
        job_tag: tag,
        stream: 1,
        payload_len: 100,
        stream_offset: 0,
        first_record: 0,
        compressed: false,
        encrypted: false,
    };
    f(&mut h);
    let mut buf = noise(tag, len);
    buf[..BLOCK_HEADER_LEN].fill(0);
    h.seal(&mut buf);
    buf
}

/// The answer's status (none: closed without one).
fn status(answer: &str) -> Option<u16> {
    let line = answer.strip_prefix("HTTP/1.1 ")?;
    line.get(..3)?.parse().ok()
}

/// The state and reasons of job `name` (backup `backup` of the queue) once it
/// ended (waiting up to 20 s): the catalog's, with the queue's reason.
fn ended_job(
    s: &Server,
    home: &Path,
    admin: &str,
    (backup, name): (u64, &str),
) -> (String, Vec<String>) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let q = s.json(admin, &["queue"]);
        let over = (q["recent"].as_array().unwrap().iter()).find(|e| e["backup"] == backup);
        let found = sql(
            home,
            &format!("SELECT id, status FROM jobs WHERE name = '{name}'"),
        );
        let row = found
            .first()
            .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()));
        if let (Some(e), Some((id, status))) = (over, row.as_ref()) {
            assert_eq!(e["state"], "failed", "{name}: {e}");
            let q = format!("SELECT reason FROM job_errors WHERE job_id = {id}");
            let mut reasons: Vec<String> = (sql(home, &q).into_iter())
                .filter_map(|r| r[0].clone())
                .collect();
            reasons.extend(e["reason"].as_str().map(str::to_string));
            reasons.dedup();
            return (status.clone(), reasons);
        }
        assert!(
            Instant::now() < until,
            "job {name} did not end: {row:?} {q}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a case sends: on the job it began (backup, tag), what it answered.
type Send<'a> = Box<dyn Fn(&Server, u64, u64) -> String + 'a>;

/// A case: its name, what it sends, the status it must be answered with (none:
/// closed, or any error), and what its job's reason says (none: it begins no job).
struct Case<'a> {
    name: &'static str,
    send: Send<'a>,
    status: Option<u16>,
    why: Option<&'static str>,
}

fn case<'a>(
    name: &'static str,
    status: Option<u16>,
    why: Option<&'static str>,
    send: impl Fn(&Server, u64, u64) -> String + 'a,
) -> Case<'a> {
    Case {
        name,
        send: Box::new(send),
        status,
        why,
    }
}

/// The cases that send blocks the server's check refuses.
fn bad_blocks(a: &str) -> Vec<Case<'_>> {
    let one = move |s: &Server, b: u64, blk: Vec<u8>| send_stream(&s.addr, b, a, &frame(&blk));
    vec![
        case("bad-crc", Some(409), Some("block 0"), move |s, b, tag| {
            let mut blk = block(tag, SIZE, |_| {});
            blk[5000] ^= 1;
            one(s, b, blk)
        }),
        case(
            "other-tag",
            Some(409),
            Some("another job's"),
            move |s, b, tag| one(s, b, block(tag ^ 1, SIZE, |_| {})),
        ),
        case(
            "other-stream",
            Some(409),
            Some("another stream's"),
            move |s, b, tag| one(s, b, block(tag, SIZE, |h| h.stream = 2)),
        ),
        case(
            "out-of-sequence",
            Some(409),
            Some("out of sequence"),
            move |s, b, tag| one(s, b, block(tag, SIZE, |h| h.lbn = 1)),
        ),
        case(
            "other-offset",
            Some(409),
            Some("stream offset"),
            move |s, b, tag| one(s, b, block(tag, SIZE, |h| h.stream_offset = 4096)),
        ),
        case(
            "long-block",
            Some(409),
            Some("longer than the job's"),
            move |s, b, tag| one(s, b, block(tag, SIZE + 10, |_| {})),
        ),
        case(
            "sealed",
            Some(409),
            Some("sealed for a volume"),
            move |s, b, tag| one(s, b, block(tag, SIZE, |h| h.volume = [7; 16])),
        ),
        case(
            "encrypted",
            Some(409),
            Some("encrypted"),
            move |s, b, tag| one(s, b, block(tag, SIZE, |h| h.encrypted = true)),
        ),
    ]
}

/// The cases whose frames are malformed, cut short or too slow.
fn bad_frames(a: &str) -> Vec<Case<'_>> {
    let partial = || {
        let mut p = 1000u32.to_le_bytes().to_vec();
        p.extend_from_slice(&[0; 10]);
        p
    };
    vec![
        case(
            "frame-over-limit",
            Some(413),
            Some("longer than any block"),
            move |s, b, _| {
                let len = (SIZE + BLOCK_HEADER_LEN + 1) as u32;
                send_stream(&s.addr, b, a, &len.to_le_bytes())
            },
        ),
        case(
            "frame-u32-max",
            Some(413),
            Some("longer than any block"),
            move |s, b, _| send_stream(&s.addr, b, a, &u32::MAX.to_le_bytes()),
        ),
        case(
            "cut-frame",
            None,
            Some("before the body's end"),
            move |s, b, _| {
                let mut req = head(b, 1, a);
                req.extend_from_slice(&chunk_start(partial().len() + 1000, &partial()));
                send_and_go(&s.addr, &req);
                String::new()
            },
        ),
        case(
            "cut-length",
            None,
            Some("before the body's end"),
            move |s, b, _| {
                let mut req = head(b, 1, a);
                req.extend_from_slice(&chunk_start(100, &[0x10, 0x00]));
                send_and_go(&s.addr, &req);
                String::new()
            },
        ),
        case(
            "stall",
            Some(409),
            Some("not received in time"),
            move |s, b, _| {
                let mut req = head(b, 1, a);
                req.extend_from_slice(&chunk_start(partial().len() + 1000, &partial()));
                // Past the server's timeout of 2 s.
                exchange(&s.addr, &req, Duration::from_secs(3))
            },
        ),
        case(
            "trickle",
            Some(409),
            Some("not received in time"),
            move |s, b, _| {
                let mut req = head(b, 1, a);
                req.extend_from_slice(&chunk_start(4 + 4000, &4000u32.to_le_bytes()));
                // 25 bytes in 2.5 s, past the server's timeout of 2 s for the frame.
                send_trickle(s, &req, &[1; 25])
            },
        ),
        case(
            "bad-note",
            Some(400),
            Some("malformed note"),
            move |s, b, _| {
                let mut body = (2 | (1u32 << 31)).to_le_bytes().to_vec();
                body.extend_from_slice(&[9, 9]);
                send_stream(&s.addr, b, a, &body)
            },
        ),
        case(
            "no-end-record",
            // Refused at its end: a stream is acknowledged only whole.
            Some(409),
            Some("end record"),
            move |s, b, _| send_stream(&s.addr, b, a, &0u32.to_le_bytes()),
        ),
    ]
}

/// The cases that send a stream the job does not await, or by the wrong client.
fn bad_requests<'a>(a: &'a str, bob: &'a str, admin: &'a str) -> Vec<Case<'a>> {
    vec![
        case(
            "stream-not-in-job",
            Some(409),
            Some("not awaited"),
            move |s, b, _| {
                let mut req = head(b, 2, a);
                req.extend_from_slice(&chunked(&0u32.to_le_bytes()));
                exchange(&s.addr, &req, Duration::ZERO)
            },
        ),
        case(
            "stream-twice",
            Some(409),
            Some("not awaited"),
            move |s, b, tag| {
                // The first sending stays open, its second block not yet sent.
                let mut first = head(b, 1, a);
                let f = frame(&block(tag, SIZE, |_| {}));
                first.extend_from_slice(&chunk_start(f.len() + 4, &f));
                let addr = s.addr.clone();
                let t = std::thread::spawn(move || exchange(&addr, &first, Duration::ZERO));
                std::thread::sleep(Duration::from_millis(500));
                let again = send_stream(&s.addr, b, a, &0u32.to_le_bytes());
                let first = t.join().unwrap();
                assert!(status(&first).is_some_and(|c| c >= 400), "{first}");
                again
            },
        ),
        case("no-such-backup", Some(404), None, move |s, _, _| {
            send_stream(&s.addr, 999_999, a, &0u32.to_le_bytes())
        }),
        case(
            "other-client",
            Some(404),
            Some("before the body's end"),
            move |s, b, _| {
                let answer = send_stream(&s.addr, b, bob, &0u32.to_le_bytes());
                // Another client cannot touch the job: it still waits for its stream,
                // until its own client cuts it short.
                let q = s.json(admin, &["queue"]);
                let e = (q["queue"].as_array().unwrap().iter()).find(|e| e["backup"] == b);
                assert_eq!(
                    e.map(|e| e["state"].clone()),
                    Some("receiving".into()),
                    "{q}"
                );
                let mut req = head(b, 1, a);
                req.extend_from_slice(&chunk_start(100, &[1, 0]));
                send_and_go(&s.addr, &req);
                answer
            },
        ),
        case("not-tls", None, None, move |s, _, _| {
            let mut sock = TcpStream::connect(&s.addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let _ = sock.write_all(b"GET / HTTP/1.1\r\n\r\n\x00\xff garbage");
            let mut got = Vec::new();
            let closed = sock.read_to_end(&mut got);
            assert!(closed.is_ok() || got.is_empty(), "{closed:?}");
            // Whatever came back is no HTTP answer (at most a TLS alert).
            String::from_utf8_lossy(&got).replace("HTTP/1.1", "")
        }),
    ]
}

#[test]
fn each_malformed_stream_fails_only_its_job() {
    let t0 = Instant::now();
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let alice = token(&home, "alice");
    let bob = token(&home, "bob");
    let admin = admin_token(&home, "admin");
    // A short timeout, for the stalls; bob's slow job waits on the spool until
    // whole, so the drive takes the others' at once.
    let config = t.path().join("server.toml");
    std::fs::write(
        &config,
        "[limits]\ntimeout_seconds = 2\n[queue]\nstart_rate_mb_s = 100\n",
    )
    .unwrap();
    let mut s = Server::start(&home, Some(&config));
    let src = t.path().join("src");
    write(&src.join("big"), &noise(1, 48_000_000));
    write(&src.join("small"), b"small");
    // Bob's backup, held to 1 MB/s: 48 s, longer than all the cases (those that
    // break their connection off wait two timeouts each for their client).
    let well = s.spawn_backup(&bob, &src, Some("1MB"));
    let mut cases = bad_blocks(&alice);
    cases.extend(bad_frames(&alice));
    cases.extend(bad_requests(&alice, &bob, &admin));
    assert!(cases.len() >= 20);
    for c in &cases {
        let (backup, tag) = match c.why {
            Some(_) => begin(&s, &alice, c.name),
            None => (0, 0),
        };
        let answer = (c.send)(&s, backup, tag);
        let line = answer.lines().next().unwrap_or("(closed)").to_string();
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        eprintln!("{}: {} {body}", c.name, line.escape_debug());
        if status(&answer) == Some(409) {
            assert_eq!(line, "HTTP/1.1 409 Conflict");
        }
        match c.status {
            Some(code) => assert_eq!(status(&answer), Some(code), "{}: {answer}", c.name),
            None => assert!(
                status(&answer).is_none_or(|c| c >= 400),
                "{}: {answer}",
                c.name
            ),
        }
        if let Some(why) = c.why {
            let (state, reasons) = ended_job(&s, &home, &admin, (backup, c.name));
            eprintln!("  job {}: {state}: {reasons:?}", c.name);
            assert_eq!(state, "failed", "{}", c.name);
            assert!(
                reasons.iter().any(|r| r.contains(why)),
                "{}: {reasons:?}",
                c.name
            );
        }
        assert!(s.alive(), "{}: the server died: {}", c.name, s.log());
        let (code, _) = get(&s.addr, "/api/jobs", Some(&bob));
        assert_eq!(code, 200, "{}", c.name);
    }
    // Every failed job is over in the queue, with its reason.
    let q = s.json(&admin, &["queue"]);
    let recent = q["recent"].as_array().unwrap();
    let failed = (recent.iter())
        .filter(|e| e["state"] == "failed" && e["reason"].is_string())
        .count();
    assert_eq!(
        failed,
        cases.iter().filter(|c| c.why.is_some()).count(),
        "{q}"
    );
    // Bob's backup went on through them all.
    let e = (q["queue"].as_array().unwrap().iter()).find(|e| e["client"] == "bob");
    assert!(e.is_some(), "bob's job was over before the cases: {q}");
    let (code, doc, err) = parse(well.wait_with_output().unwrap());
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["status"], "ok", "{doc}");
    let job = doc["job_id"].as_i64().unwrap().to_string();
    let out = t.path().join("out");
    let (code, _, err) = s.client(&bob, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&src, &out);
    eprintln!(
        "{} cases in {:.1} s",
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
}
