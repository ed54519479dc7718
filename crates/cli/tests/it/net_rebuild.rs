//! A catalog rebuilt from the cartridges alone keeps who ran each job: a client's
//! backup through the server and a schedule's job come back as their clients',
//! listed and restored by them alone; a job run on the server's machine comes back
//! as no client's.

use crate::common::server_kit::{fast_clock, token, Server};
use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const SCHEDULE: &str = "nightly";

/// Every job of the catalog by tag: (id, name, client).
fn jobs_by_tag(home: &Path) -> BTreeMap<u64, (i64, String, Option<String>)> {
    let cat = open_catalog(home);
    (cat.jobs().unwrap().into_iter())
        .map(|j| (j.tag, (j.id, j.name, j.client)))
        .collect()
}

/// A server whose schedule runs once for `carol` (about a second after its
/// start) over `sched`; alice backs up `src` through it; both jobs ended when it
/// is stopped.
fn clients_back_up(t: &Path, home: &Path, (src, sched): (&Path, &Path)) -> i64 {
    let (alice, carol) = (token(home, "alice"), token(home, "carol"));
    let config = t.join("server.toml");
    let text = format!(
        "[[schedule]]\nname = \"{SCHEDULE}\"\ncalendar = \"*-*-* 03:01:00\"\n\
         client = \"carol\"\nsources = [{:?}]\n",
        sched.to_str().unwrap()
    );
    std::fs::write(&config, text).unwrap();
    let env = fast_clock("2026-01-05T03:00:30Z");
    let s = Server::start_with_env(home, Some(&config), &env);
    let doc = s.json(&alice, &["backup", src.to_str().unwrap()]);
    assert_eq!(doc["status"], "ok", "{doc}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let jobs = s.json(&carol, &["jobs"]);
        let done = (jobs["jobs"].as_array().unwrap().iter())
            .any(|j| j["name"] == SCHEDULE && j["status"] == "ok");
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "{jobs}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    doc["job_id"].as_i64().unwrap()
}

#[test]
fn a_rebuilt_catalog_keeps_each_jobs_client() {
    if !test_hooks() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (src, sched) = (t.path().join("src"), t.path().join("sched"));
    rich_tree(&src);
    write(&sched.join("a.txt"), b"scheduled");
    write(&sched.join("dir/b.bin"), &noise(7, 100_000));
    let local = ok(&home, &["backup", src.to_str().unwrap(), "--set", "here"]);
    let local = local["job_id"].as_i64().unwrap();
    let alices = clients_back_up(t.path(), &home, (&src, &sched));
    // The server is stopped; the catalog is lost (its tokens with it).
    let before = jobs_by_tag(&home);
    let client_of = |id: i64| before.values().find(|j| j.0 == id).unwrap().2.clone();
    assert_eq!(client_of(local), None);
    assert_eq!(client_of(alices).as_deref(), Some("alice"));
    forget_catalog(&home);
    let r = ok(&home, &["catalog", "rebuild"]);
    assert_eq!(r["jobs_added"].as_array().unwrap().len(), 3, "{r}");
    let after = jobs_by_tag(&home);
    let clients = |m: &BTreeMap<u64, (i64, String, Option<String>)>| {
        m.iter()
            .map(|(tag, (_, name, c))| (*tag, name.clone(), c.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(clients(&after), clients(&before));
    let named = |name: &str| after.values().find(|j| j.1 == name).unwrap();
    assert_eq!(named(SCHEDULE).2.as_deref(), Some("carol"));
    // The rebuilt catalog's id of the job of id `id` before.
    let again = |id: i64| {
        let (tag, _) = before.iter().find(|(_, j)| j.0 == id).unwrap();
        after[tag].0
    };
    let (alices, local) = (again(alices), again(local));
    // The clients get tokens again under their names, and see their jobs.
    let (alice, bob, carol) = (
        token(&home, "alice"),
        token(&home, "bob"),
        token(&home, "carol"),
    );
    let s = Server::start(&home, None);
    assert_eq!(job_ids(&s.json(&alice, &["jobs"])), vec![alices]);
    assert_eq!(job_ids(&s.json(&carol, &["jobs"])), vec![named(SCHEDULE).0]);
    assert_eq!(job_ids(&s.json(&bob, &["jobs"])), Vec::<i64>::new());
    let out = t.path().join("out");
    let job = alices.to_string();
    s.json(&alice, &["restore", &job, "--to", out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    let refused = t.path().join("bob");
    let (code, _, err) = s.client(&bob, &["restore", &job, "--to", refused.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    assert!(is_empty_or_absent(&refused));
    // The job run on the server's machine is no client's.
    let nothing = t.path().join("local");
    let to = nothing.to_str().unwrap();
    let (code, _, err) = s.client(&alice, &["restore", &local.to_string(), "--to", to]);
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    assert!(is_empty_or_absent(&nothing));
}
