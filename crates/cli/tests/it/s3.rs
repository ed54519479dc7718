//! The S3 front end as its users reach it: boto3 and aws-cli (with botocore's
//! checksum defaults since 1.36) against `tapeloom server --s3-listen`, once
//! over plain HTTP and once over TLS with the server's certificate as the CA
//! bundle (tests/s3/walk.py checks every answer).

use crate::common::ok;
use crate::common::server_kit::Server;
use std::path::{Path, PathBuf};
use std::process::Command;
use tapeloom_testkit::need::need;

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

fn walk(plain: bool) {
    let found = python();
    let py = match &found {
        Ok(p) => p.clone(),
        Err(why) => {
            need(Err(why.clone()));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    ok(&home, &["s3", "bucket", "create", "limited"]);
    let (ak, sk) = key(&home, "walker", None);
    let (lak, lsk) = key(&home, "limited", Some("limited"));
    let (_server, url) = Server::start_s3(&home, plain);
    // The certificate names localhost, not the address.
    let url = url.replace("https://127.0.0.1", "https://localhost");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/walk.py");
    let mut c = Command::new(py);
    c.arg(script).args([&url, &ak, &sk, &lak, &lsk]);
    if !plain {
        c.arg(home.join("server/cert.pem"));
    }
    let out = c.env("HOME", dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "walk.py: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["failed"], serde_json::json!([]), "{report}");
    assert!(report["checks"].as_u64().unwrap() >= 50, "{report}");
    assert!(out.status.success());
}

#[test]
fn boto3_and_aws_cli_get_s3s_answers_over_plain_http() {
    walk(true);
}

#[test]
fn boto3_and_aws_cli_get_s3s_answers_over_tls_with_the_servers_certificate() {
    walk(false);
}
