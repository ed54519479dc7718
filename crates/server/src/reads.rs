//! Where a restore or a verify of a job is read when the server is one of a
//! site's. It is read here when this server's library holds the job's
//! cartridges. When another server's library holds them all, the client is sent
//! on to it (`303`). When they sit in several libraries, the job is read in
//! parts (`300` with a [`SplitRead`]): each part is a run of the job's
//! cartridges, in the job's volume order, that one library holds, and the
//! client asks each part of that library's server with `volume=BARCODE`. A part
//! whose server is down, or a cartridge no library of the site holds, is
//! refused in one line that names them.

use super::api::Answer;
use super::serve::Shared;
use super::site::{sent_on, shown, Site};
use tapeloom_catalog::Catalog;
use tapeloom_proto::site::{ReadPart, SplitRead, SPLIT};

/// The holder named for a cartridge no server of the site holds.
const NO_SERVER: &str = "no server";

/// Where job `job` is read, `asked` being the cartridges the request names
/// (`volume=`; all of the job's when empty): none when this server's library
/// holds them (or the server is alone); else the answer that sends the client
/// on, splits the reading, or refuses it.
pub fn route_read(shared: &Shared, cat: &Catalog, job: i64, asked: &[String]) -> Option<Answer> {
    let site = shared.site.as_ref()?;
    let barcodes = match job_barcodes(cat, job) {
        Ok(b) => b,
        Err(e) => return Some(Answer::error(503, &format!("the catalog: {e}"))),
    };
    if let Some(b) = asked.iter().find(|b| !barcodes.contains(b)) {
        return Some(Answer::error(404, &format!("job {job} is not on {b}")));
    }
    let wanted: Vec<String> = match asked.is_empty() {
        true => barcodes,
        false => barcodes.into_iter().filter(|b| asked.contains(b)).collect(),
    };
    let parts = parts(cat, site, &wanted);
    if parts.iter().all(|(holder, _)| *holder == site.name) {
        return None;
    }
    if let Some(refused) = unreachable(cat, site, &format!("job {job}"), &parts) {
        return Some(refused);
    }
    if let [(holder, _)] = parts.as_slice() {
        let why = format!("job {job}'s cartridges are in server {holder}'s library");
        return Some(sent_on(cat, site, holder, None, &why));
    }
    if !asked.is_empty() {
        // A part is asked of one server only: a part split again would never end.
        let why = format!(
            "job {job}'s cartridges {} are not all in one library",
            asked.join(", ")
        );
        return Some(Answer::error(409, &why));
    }
    Some(split(cat, site, job, parts))
}

/// Where the restore of a set is read, `jobs` being the jobs it reads data from:
/// none when this server's library holds all their cartridges (or the server is
/// alone); else the `303` naming the server whose library does, or the refusal
/// naming the libraries that hold them (a set is not read in parts) or the
/// server that is down.
pub fn route_set(shared: &Shared, cat: &Catalog, set: &str, jobs: &[i64]) -> Option<Answer> {
    let site = shared.site.as_ref()?;
    let mut barcodes: Vec<String> = Vec::new();
    for &job in jobs {
        let of = match job_barcodes(cat, job) {
            Ok(b) => b,
            Err(e) => return Some(Answer::error(503, &format!("the catalog: {e}"))),
        };
        barcodes.extend(
            of.into_iter()
                .filter(|b| !barcodes.contains(b))
                .collect::<Vec<_>>(),
        );
    }
    let mut parts = parts(cat, site, &barcodes);
    if parts.iter().all(|(holder, _)| *holder == site.name) {
        return None;
    }
    // By library, whatever the order of the cartridges.
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    parts.dedup_by(|b, a| {
        let same = a.0 == b.0;
        if same {
            a.1.append(&mut b.1);
        }
        same
    });
    if let Some(refused) = unreachable(cat, site, &format!("set {set}"), &parts) {
        return Some(refused);
    }
    if let [(holder, _)] = parts.as_slice() {
        let why = format!("set {set}'s cartridges are in server {holder}'s library");
        return Some(sent_on(cat, site, holder, None, &why));
    }
    let said: Vec<String> = (parts.iter())
        .map(|(h, run)| format!("{h}: {}", run.join(", ")))
        .collect();
    let why = format!(
        "set {set}'s jobs are on cartridges in more than one library ({}): restore each job from its server",
        said.join("; ")
    );
    Some(Answer::error(409, &why))
}

/// The `300` answer: the job's parts, each with its server.
fn split(cat: &Catalog, site: &Site, job: i64, parts: Vec<(String, Vec<String>)>) -> Answer {
    let servers = cat.servers().unwrap_or_default();
    let mut out = Vec::new();
    let mut said = Vec::new();
    for (holder, volumes) in parts {
        let Some(row) = servers.iter().find(|s| s.name == holder) else {
            return Answer::error(
                503,
                &format!("server {holder} of the site is not registered"),
            );
        };
        said.push(format!("{holder}: {}", volumes.join(", ")));
        out.push(ReadPart {
            server: shown(row, site.timeout_s()),
            volumes,
        });
    }
    let reason = format!(
        "job {job}'s cartridges are in more than one library: read in {} parts ({})",
        out.len(),
        said.join("; ")
    );
    let mut a = Answer::json(&SplitRead {
        job,
        parts: out,
        reason,
    });
    a.status = SPLIT;
    a
}

/// The job's cartridges `wanted` (in the job's order) grouped in runs that one
/// server's library holds: (its name, the run's barcodes).
fn parts(cat: &Catalog, site: &Site, wanted: &[String]) -> Vec<(String, Vec<String>)> {
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for b in wanted {
        let holder = match site.barcodes.contains(b) {
            true => site.name.clone(),
            false => (cat.servers_of_cartridge(b).unwrap_or_default().into_iter())
                .next()
                .unwrap_or_else(|| NO_SERVER.into()),
        };
        match parts.last_mut() {
            Some((h, run)) if *h == holder => run.push(b.clone()),
            _ => parts.push((holder, vec![b.clone()])),
        }
    }
    parts
}

/// The refusal of a reading one of whose parts no server can read now: a
/// cartridge no library holds, or a server that is down.
fn unreachable(
    cat: &Catalog,
    site: &Site,
    what: &str,
    parts: &[(String, Vec<String>)],
) -> Option<Answer> {
    let held_by = |name: &str| -> Vec<String> {
        (parts.iter())
            .filter(|(h, _)| h == name)
            .flat_map(|(_, run)| run.iter().cloned())
            .collect()
    };
    if parts.iter().any(|(h, _)| h == NO_SERVER) {
        let why = format!(
            "{what}'s cartridges {} are in no library of the site",
            held_by(NO_SERVER).join(", ")
        );
        return Some(Answer::error(503, &why));
    }
    let servers = cat.servers().unwrap_or_default();
    for (holder, _) in parts.iter().filter(|(h, _)| *h != site.name) {
        let row = servers.iter().find(|s| s.name == *holder)?;
        if !row.alive(site.timeout_s()) {
            let why = format!(
                "server {holder} is down (no heartbeat for {} s): {what}'s cartridges {} are in its library",
                row.silent_s,
                held_by(holder).join(", ")
            );
            return Some(Answer::error(503, &why));
        }
    }
    None
}

/// The barcodes of the cartridges job `job` is on, in its volume order.
fn job_barcodes(cat: &Catalog, job: i64) -> tapeloom_catalog::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for jv in cat.job_volumes(job)? {
        if !out.contains(&jv.volume.barcode) {
            out.push(jv.volume.barcode);
        }
    }
    Ok(out)
}

/// The cartridges a request names (`volume=BARCODE`, each again).
pub fn asked_volumes(query: &[(String, Vec<u8>)]) -> Vec<String> {
    (query.iter())
        .filter(|(k, _)| k == "volume")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect()
}
