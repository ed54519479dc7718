//! The server's status page, loaded in headless Chromium while a client's backup
//! runs on a slow (modeled, real-clock) drive: the running job, its bytes rising
//! between two loads, the drive it writes on, then its plot once it ended. The
//! browser accepts the server's self-signed certificate by its key's pin only.
//! With S3 on, the page's S3 section shows the front end's figures. And
//! `/api/status` itself: a token needed, a client sees its own jobs.

use crate::common::server_kit::{admin_token, get, token, Server};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a browser may take to start, load and dump the page.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The pin Chromium takes: base64 of the SHA-256 of the certificate's
/// SubjectPublicKeyInfo, from the key the server made in HOME/server/.
fn spki_pin(home: &Path) -> String {
    let pem = std::fs::read_to_string(home.join("server/key.pem")).unwrap();
    let key = rcgen::KeyPair::from_pem(&pem).unwrap();
    let spki = key.public_key_der();
    base64(ring::digest::digest(&ring::digest::SHA256, &spki).as_ref())
}

/// Loads `url` in headless Chromium (a fresh profile in `profile`), trusting the
/// certificate whose key has `pin`; the DOM after 3 s of the page's time.
fn load_page(url: &str, pin: &str, profile: &Path) -> String {
    let mut child = Command::new("chromium")
        .args(["--headless=new", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--ignore-certificate-errors-spki-list={pin}"))
        .args(["--virtual-time-budget=3000", "--dump-dom", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start chromium (Debian package chromium): {e}"));
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut out, &mut dom).map(|_| dom)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not dump {url} within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "chromium: {status}");
    reader.join().unwrap().unwrap()
}

/// The element opening with `start` in `dom`, up to its end tag `end`.
fn element<'a>(dom: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = dom.find(start)?;
    let len = dom[from..].find(end)?;
    Some(&dom[from..from + len])
}

/// The value of attribute `name` in the first tag of `html` holding it.
fn attr(html: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let from = html.find(&key)? + key.len();
    Some(html[from..].split('"').next()?.to_string())
}

/// The text of the cell of class `class` in `row`.
fn cell(row: &str, class: &str) -> Option<String> {
    let td = element(row, &format!("<td class=\"{class}\""), "</td>")?;
    Some(td[td.find('>')? + 1..].to_string())
}

/// The running job's row in a dumped page: (job id, name, bytes so far).
fn running_row(dom: &str) -> (i64, String, u64) {
    let row = element(dom, "<tr class=\"job running", "</tr>")
        .unwrap_or_else(|| panic!("no running job in the page:\n{dom}"));
    let job = attr(row, "data-job").unwrap().parse().unwrap();
    let bytes_td = element(row, "<td class=\"bytes\"", ">").unwrap();
    let bytes = attr(bytes_td, "data-bytes").unwrap().parse().unwrap();
    (job, cell(row, "name").unwrap(), bytes)
}

/// The job the server writes, once a drive's sample shows bytes: (job, bytes).
fn wait_for_bytes(s: &Server, admin: &str) -> (i64, u64) {
    let start = Instant::now();
    loop {
        let (status, body) = get(&s.addr, "/api/status", Some(admin));
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let drive = &v["library"]["drives"][0];
        if drive["bytes"].as_u64().unwrap_or(0) > 0 {
            return (
                drive["job"].as_i64().unwrap(),
                drive["bytes"].as_u64().unwrap(),
            );
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{v}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn the_page_shows_a_running_job_its_bytes_rising_and_its_drive() {
    if !need(program("chromium", "chromium")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    // LTO-3 at 1/40 writes 2 MB/s: 120 MB of noise keep the drive busy ~60 s,
    // time for a loaded machine's browser to load the page twice (with 60 MB, a
    // fresh-clone run once saw the job end before the second page).
    ok(
        &home,
        &[
            "library", "create", "--drives", "1", "--slots", "2", "--model", "lto3", "--clock",
            "real", "--scale", "0.025",
        ],
    );
    let (alice, root) = (token(&home, "alice"), admin_token(&home, "root"));
    let src = t.path().join("src");
    for i in 0..12u64 {
        write(&src.join(format!("f{i}")), &noise(i, 10 << 20));
    }
    let s = Server::start(&home, None);
    let pin = spki_pin(&home);
    let url = format!("{}/?token={root}", s.url);
    let profile = |n: &str| t.path().join(format!("profile-{n}"));
    std::thread::scope(|sc| {
        let backup = sc.spawn(|| {
            let args = ["backup", src.to_str().unwrap(), "--name", "slowjob"];
            s.client(&alice, &args)
        });
        let (job, _) = wait_for_bytes(&s, &root);
        let first = load_page(&url, &pin, &profile("1"));
        std::thread::sleep(Duration::from_secs(3));
        let second = load_page(&url, &pin, &profile("2"));
        let (job1, name, bytes1) = running_row(&first);
        let (job2, _, bytes2) = running_row(&second);
        assert_eq!((job1, job2, name.as_str()), (job, job, "slowjob"));
        assert!(bytes1 > 0 && bytes2 > bytes1, "{bytes1} then {bytes2}");
        let drive = element(&second, "<tr class=\"drive\"", "</tr>")
            .unwrap_or_else(|| panic!("no drive in the page:\n{second}"));
        assert_eq!(attr(drive, "data-drive").as_deref(), Some("0"));
        assert_eq!(attr(drive, "data-job"), Some(job.to_string()));
        assert_eq!(cell(drive, "loaded").as_deref(), Some("TL0001L9"));
        let stream = element(&second, "<tr class=\"flow stream\"", "</tr>").unwrap();
        assert_eq!(attr(stream, "data-stream").as_deref(), Some("src"));
        // Another key's pin: the browser refuses the certificate, no page.
        let other = base64(&[7u8; 32]);
        let refused = load_page(&url, &other, &profile("3"));
        assert!(!refused.contains("<h1>tapeloom server</h1>"), "{refused}");
        let (code, _, err) = backup.join().unwrap();
        assert_eq!(code, 0, "{err}");
        // Ended: the page draws its plot.
        let ended = load_page(&url, &pin, &profile("4"));
        let plot = element(
            &ended,
            &format!("<div class=\"plot\" data-job=\"{job}\""),
            ">",
        )
        .unwrap_or_else(|| panic!("no plot of job {job}:\n{ended}"));
        assert_eq!(attr(plot, "data-loaded").as_deref(), Some("svg"), "{ended}");
    });
}

#[test]
fn status_needs_a_token_and_shows_a_client_its_own_jobs() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (alice, bob) = (token(&home, "alice"), token(&home, "bob"));
    let root = admin_token(&home, "root");
    let src = t.path().join("src");
    write(&src.join("a"), b"alice's");
    let s = Server::start(&home, None);
    let (code, _, err) = s.client(&alice, &["backup", src.to_str().unwrap(), "--name", "hers"]);
    assert_eq!(code, 0, "{err}");
    let (status, body) = get(&s.addr, "/api/status", None);
    assert_eq!(status, 401, "{body}");
    let (status, page) = get(&s.addr, "/", None);
    assert_eq!(status, 200);
    assert!(
        page.contains("/api/status") && !page.contains("hers"),
        "{page}"
    );
    let seen = |token: &str| {
        let (status, body) = get(&s.addr, "/api/status", Some(token));
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let names = |k: &str| -> Vec<String> {
            let list = if k == "jobs" {
                &v["jobs"]["jobs"]
            } else {
                &v[k]
            };
            (list.as_array().unwrap().iter())
                .map(|j| j["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(v["library"]["drives"].as_array().unwrap().len(), 2, "{v}");
        (names("jobs"), names("recent"))
    };
    let hers = vec!["hers".to_string()];
    assert_eq!(seen(&alice), (hers.clone(), hers.clone()));
    assert_eq!(seen(&root), (hers.clone(), hers));
    assert_eq!(seen(&bob), (vec![], vec![]));
    let (status, svg) = get(&s.addr, "/api/jobs/1/report.svg", Some(&alice));
    assert_eq!(status, 200);
    assert!(svg.contains("<svg"), "{svg}");
    assert_eq!(get(&s.addr, "/api/jobs/1/report.svg", Some(&bob)).0, 404);
    assert_eq!(get(&s.addr, "/api/jobs/1/report.svg", None).0, 401);
}

#[test]
fn with_s3_on_the_page_shows_the_front_ends_figures() {
    if !need(program("chromium", "chromium")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let root = admin_token(&home, "root");
    let (s, s3) = Server::start_s3(&home, true);
    // Two unsigned requests: each refused 403, and counted.
    let host = s3.strip_prefix("http://").unwrap();
    for _ in 0..2 {
        let mut sock = std::net::TcpStream::connect(host).unwrap();
        let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        std::io::Write::write_all(&mut sock, req.as_bytes()).unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut sock, &mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }
    let url = format!("{}/?token={root}", s.url);
    let dom = load_page(&url, &spki_pin(&home), &t.path().join("profile"));
    let section = element(&dom, "<div id=\"s3\"", "</table>")
        .unwrap_or_else(|| panic!("no S3 section in the page:\n{dom}"));
    assert!(!section.starts_with("<div id=\"s3\" hidden"), "{section}");
    let value = |class: &str| {
        let td = element(section, &format!("<td class=\"{class}\""), ">").unwrap();
        attr(td, "data-value")
    };
    assert_eq!(value("requests").as_deref(), Some("2"), "{section}");
    assert_eq!(value("objects-waiting").as_deref(), Some("0"), "{section}");
    assert_eq!(value("restores").as_deref(), Some("0"), "{section}");
    assert_eq!(cell(section, "cache").as_deref(), Some("0 B of 68.7 GB"));
    // Without S3 the section stays hidden.
    let plain = t.path().join("plain");
    let root = admin_token(&plain, "root");
    let s = Server::start(&plain, None);
    let url = format!("{}/?token={root}", s.url);
    let dom = load_page(&url, &spki_pin(&plain), &t.path().join("profile-plain"));
    assert!(dom.contains("<div id=\"s3\" hidden"), "{dom}");
}
