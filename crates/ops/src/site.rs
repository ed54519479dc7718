//! Several servers, one site: a server whose catalog is PostgreSQL shares it with
//! the other servers of its site. This module is what a server does in the
//! site's part of the catalog: it joins and leaves the site, sends its
//! heartbeat and takes silent servers for dead, claims backups of the site's
//! queue it can write, follows each ticket from its claim to its end, and says
//! which server's library holds the cartridges a read needs.
//!
//! A server is named here by its [`Member`]: what it registered as, and the
//! cartridges its library held when it started.

use crate::access::Catalogued;
use crate::Result;
use tapeloom_catalog::db::Dialect;
use tapeloom_catalog::{Catalog, JobState, VolumeState, DEFAULT_POOL};
pub use tapeloom_catalog::{Reaped, Ticket, TicketState};
use tapeloom_engine::RestoreOptions;
use tapeloom_proto::site::{ReadPart, SiteDoc, SiteServer, SiteTicket, SplitRead};

/// The holder named for a cartridge no server of the site holds.
const NO_SERVER: &str = "no server";

/// A server as it stands in its site.
pub struct Member {
    /// Its name (its home's).
    pub name: String,
    /// Where clients reach it.
    pub url: String,
    /// Its certificate's fingerprint.
    pub fingerprint: String,
    /// What its library is, as it registers (a line of JSON).
    pub libraries: String,
    /// The cartridges of its library when it started.
    pub barcodes: Vec<String>,
    /// How long, in seconds, a silent server is waited for before it is taken
    /// for dead.
    pub timeout_s: i64,
    /// Where it serves S3, when it does: the other servers send on to it the
    /// S3 requests whose data is on its disk.
    pub s3_url: Option<String>,
}

/// Whether the catalog may be a site's: a PostgreSQL one, which other servers
/// may share.
pub fn is_shared(at: &impl Catalogued) -> bool {
    at.ops_catalog().dialect() == Dialect::Postgres
}

/// Registers `me` in the site with its library's cartridges, and gives back the
/// claims it held before it stopped; how many were given back.
pub fn join(at: &impl Catalogued, me: &Member) -> Result<u64> {
    let cat = at.ops_catalog();
    cat.register_server(&me.name, &me.url, &me.fingerprint, &me.libraries)?;
    cat.set_server_cartridges(&me.name, &me.barcodes)?;
    cat.set_server_s3_url(&me.name, me.s3_url.as_deref())?;
    Ok(cat.unclaim_all(&me.name)?)
}

/// `me` stops: its claims go back to the site's queue, and the catalog says it
/// stopped.
pub fn leave(at: &impl Catalogued, me: &Member) -> Result<()> {
    let cat = at.ops_catalog();
    cat.unclaim_all(&me.name)?;
    cat.server_stopped(&me.name)?;
    Ok(())
}

/// What a heartbeat found.
pub struct Beat {
    /// The site had taken `me` for dead (a pause, a cut network): its running
    /// jobs were failed and its claims given back, and it registered again.
    pub registered_again: bool,
    /// The servers `me` took for dead now.
    pub reaped: Vec<Reaped>,
}

/// One heartbeat of `me`: its own, then the dead servers', then the end of the
/// tickets `me` began whose jobs ended without it seeing them (resumed after a
/// restart, or failed before it). `running(ticket)` says whether a ticket's job
/// still runs on `me`: those are left to it.
pub fn heartbeat(at: &impl Catalogued, me: &Member, running: impl Fn(i64) -> bool) -> Result<Beat> {
    let cat = at.ops_catalog();
    let registered_again = !cat.heartbeat(&me.name)?;
    if registered_again {
        cat.register_server(&me.name, &me.url, &me.fingerprint, &me.libraries)?;
    }
    let reaped = cat.reap_dead(&me.name, me.timeout_s)?;
    end_tickets(cat, me, running)?;
    Ok(Beat {
        registered_again,
        reaped,
    })
}

/// Ends the tickets `me` began whose jobs ended, or which it began and lost
/// before their jobs were; a failed job whose chunks are staged is not ended, as
/// its resume goes on.
fn end_tickets(cat: &Catalog, me: &Member, running: impl Fn(i64) -> bool) -> Result<()> {
    let staged = cat.jobs_with_chunks()?;
    for t in cat.live_tickets()? {
        if t.state != TicketState::Begun || t.server.as_deref() != Some(me.name.as_str()) {
            continue;
        }
        if running(t.id) {
            continue;
        }
        let Some(job) = t.job_id.map(|j| cat.job(j)).transpose()?.flatten() else {
            // Begun and gone before its job was: it ended with the server.
            cat.end_ticket(t.id, Some("the server stopped before the job began"))?;
            continue;
        };
        let reason = match job.status {
            JobState::Running | JobState::Queued => continue,
            JobState::Failed if staged.contains(&job.id) => continue,
            JobState::Failed => Some("failed"),
            _ => None,
        };
        cat.end_ticket(t.id, reason)?;
    }
    Ok(())
}

/// Gives up ticket `id`, which `me` claimed and whose client did not come, for
/// `why`: the backup is over.
pub fn drop_claim(at: &impl Catalogued, me: &Member, id: i64, why: &str) -> Result<()> {
    Ok(at.ops_catalog().drop_claim(id, &me.name, why)?)
}

/// Claims for `me` the oldest queued backup of a pool its library can write;
/// none when there is none.
pub fn claim(at: &impl Catalogued, me: &Member) -> Result<Option<Ticket>> {
    let cat = at.ops_catalog();
    let volumes = cat.volumes()?;
    let writable = |pool: Option<&str>| writable(cat, &volumes, &me.barcodes, pool);
    Ok(cat.claim(&me.name, writable)?)
}

/// Whether the library holds a cartridge a backup of `pool` may be written on:
/// an appendable volume of the pool, or a cartridge the catalog does not know
/// (blank) that no other pool holds. The drives' writer chooses among them when
/// it writes; this only tells whether there is a choice.
fn writable(
    cat: &Catalog,
    volumes: &[tapeloom_catalog::Volume],
    barcodes: &[String],
    pool: Option<&str>,
) -> bool {
    let pool = pool.unwrap_or(DEFAULT_POOL);
    barcodes.iter().any(|b| {
        if tapeloom_device::is_cleaning(b) {
            return false;
        }
        match volumes.iter().find(|v| &v.barcode == b) {
            Some(v) => v.pool == pool && v.status == VolumeState::Append,
            None => cat
                .pool_of_barcode(b)
                .is_ok_and(|p| p.is_none_or(|p| p == pool)),
        }
    })
}

/// Queues the backup `doc` (the bytes of the document a client sent) of
/// `client`, named `name`, into `pool`; its number, the ticket's.
pub fn enqueue(
    at: &impl Catalogued,
    client: &str,
    (name, pool): (&str, Option<&str>),
    doc: &[u8],
) -> Result<i64> {
    Ok(at.ops_catalog().enqueue(client, name, pool, doc)?)
}

/// Ticket `id` of `client`; none when there is no such ticket of that client.
pub fn ticket_of(at: &impl Catalogued, client: &str, id: i64) -> Result<Option<Ticket>> {
    let t = at.ops_catalog().ticket(id)?;
    Ok(t.filter(|t| t.client == client))
}

/// Where a ticket stands for the server `me` that waits for its claim.
pub enum Claim {
    /// There is no such ticket.
    Unknown,
    /// `me` claimed it: it begins here.
    Mine(Ticket),
    /// Another server claimed or began it: its name.
    Elsewhere(String),
    /// It was begun already (by `me`, for another request).
    Begun,
    /// It ended: why.
    Over(String),
    /// Nobody claimed it yet.
    Queued,
}

/// Where ticket `id` stands for `me`.
pub fn claim_of(at: &impl Catalogued, me: &Member, id: i64) -> Result<Claim> {
    let Some(t) = at.ops_catalog().ticket(id)? else {
        return Ok(Claim::Unknown);
    };
    Ok(match (t.state, t.server.as_deref()) {
        (TicketState::Claimed, Some(s)) if s == me.name => Claim::Mine(t),
        (TicketState::Claimed | TicketState::Begun, Some(s)) => Claim::Elsewhere(s.to_string()),
        (TicketState::Begun, _) => Claim::Begun,
        (TicketState::Ended, _) => Claim::Over(t.reason.unwrap_or_else(|| "it ended".into())),
        _ => Claim::Queued,
    })
}

/// How many backups queued before ticket `id` wait for a server.
pub fn queued_ahead(at: &impl Catalogued, id: i64) -> Result<usize> {
    let live = at.ops_catalog().live_tickets()?;
    Ok((live.iter())
        .filter(|o| o.id < id && o.state == TicketState::Queued)
        .count())
}

/// Begins ticket `id`, which `me` claimed; false when it was begun already (a
/// ticket is begun once, so a job never runs twice).
pub fn begin(at: &impl Catalogued, me: &Member, id: i64) -> Result<bool> {
    Ok(at.ops_catalog().begin_ticket(id, &me.name)?)
}

/// Ticket `id` was begun as job `job` of the catalog.
pub fn job_begun(at: &impl Catalogued, id: i64, job: i64) -> Result<()> {
    Ok(at.ops_catalog().set_ticket_job(id, job)?)
}

/// Ticket `id`'s job ended: failed for `why`, or well.
pub fn ended(at: &impl Catalogued, id: i64, why: Option<&str>) -> Result<()> {
    Ok(at.ops_catalog().end_ticket(id, why)?)
}

/// The name this connection's server has in the site (its home's).
pub fn host(at: &impl Catalogued) -> String {
    at.ops_catalog().host().to_string()
}

/// Where server `name` of the site serves S3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Peer {
    /// Its S3 front end's URL (`https://HOST:PORT` or `http://HOST:PORT`).
    pub url: String,
    /// Its certificate's fingerprint, which the servers that send requests
    /// on to it pin.
    pub fingerprint: String,
}

/// Where server `name` serves S3; none when it is not registered, is not up
/// or serves no S3.
pub fn s3_peer(at: &impl Catalogued, name: &str) -> Result<Option<S3Peer>> {
    let servers = at.ops_catalog().servers()?;
    Ok((servers.into_iter())
        .find(|s| s.name == name && s.state == "up")
        .and_then(|s| {
            Some(S3Peer {
                url: s.s3_url?,
                fingerprint: s.fingerprint,
            })
        }))
}

/// Server `name` of the site as clients reach it, seen by `me`; none when it is
/// not registered.
pub fn server(at: &impl Catalogued, me: &Member, name: &str) -> Result<Option<SiteServer>> {
    let servers = at.ops_catalog().servers()?;
    Ok((servers.iter())
        .find(|s| s.name == name)
        .map(|s| shown(s, me.timeout_s)))
}

fn shown(s: &tapeloom_catalog::ServerRow, timeout_s: i64) -> SiteServer {
    SiteServer {
        name: s.name.clone(),
        url: s.url.clone(),
        fingerprint: s.fingerprint.clone(),
        alive: s.alive(timeout_s),
        silent_s: s.silent_s,
    }
}

/// The site as `me` sees it: every server, and the backups of the site's queue
/// not ended whose client `sees` says may be shown.
pub fn view(at: &impl Catalogued, me: &Member, sees: impl Fn(&str) -> bool) -> Result<SiteDoc> {
    let cat = at.ops_catalog();
    Ok(SiteDoc {
        me: me.name.clone(),
        servers: (cat.servers()?.iter())
            .map(|s| shown(s, me.timeout_s))
            .collect(),
        queue: (cat.live_tickets()?.into_iter())
            .filter(|t| sees(&t.client))
            .map(|t| SiteTicket {
                backup: t.id as u64,
                client: t.client,
                name: t.name,
                state: t.state.name().to_string(),
                server: t.server,
                job: t.job_id,
            })
            .collect(),
    })
}

/// Where a restore or a verify is read.
pub enum ReadAt {
    /// On `me`: its library holds the cartridges.
    Here,
    /// On another server, whose library holds them all.
    SentOn {
        /// The server to ask.
        server: SiteServer,
        /// Why, in a line.
        reason: String,
    },
    /// In parts, each on the server whose library holds its cartridges.
    Split(SplitRead),
    /// Nowhere now.
    Refused(Refusal),
}

/// Why a read cannot be had now.
pub enum Refusal {
    /// The job is not on a cartridge the request names: why.
    NotOn(String),
    /// A cartridge is in no library of the site, or the server whose library
    /// holds it is down or not registered: why.
    Unreachable(String),
    /// The cartridges asked are in more than one library, and the read cannot be
    /// split: why.
    Scattered(String),
}

/// Where job `job` is read for `me`, `asked` being the cartridges the request
/// names (all of the job's when empty): here when `me`'s library holds them;
/// else on the server whose library does, or in parts, or nowhere now.
pub fn read_at(at: &impl Catalogued, me: &Member, job: i64, asked: &[String]) -> Result<ReadAt> {
    let cat = at.ops_catalog();
    let barcodes = job_barcodes(cat, job)?;
    if let Some(b) = asked.iter().find(|b| !barcodes.contains(b)) {
        return Ok(ReadAt::Refused(Refusal::NotOn(format!(
            "job {job} is not on {b}"
        ))));
    }
    let wanted: Vec<String> = match asked.is_empty() {
        true => barcodes,
        false => barcodes.into_iter().filter(|b| asked.contains(b)).collect(),
    };
    let parts = parts(cat, me, &wanted);
    if parts.iter().all(|(holder, _)| *holder == me.name) {
        return Ok(ReadAt::Here);
    }
    if let Some(why) = unreachable(cat, me, &format!("job {job}"), &parts)? {
        return Ok(ReadAt::Refused(Refusal::Unreachable(why)));
    }
    if let [(holder, _)] = parts.as_slice() {
        let why = format!("job {job}'s cartridges are in server {holder}'s library");
        return sent_on(cat, me, holder, why);
    }
    if !asked.is_empty() {
        // A part is asked of one server only: a part split again would never end.
        let why = format!(
            "job {job}'s cartridges {} are not all in one library",
            asked.join(", ")
        );
        return Ok(ReadAt::Refused(Refusal::Scattered(why)));
    }
    split(cat, me, job, parts)
}

/// Where the restore `opts` of set `set` as it was at `when` (its last job when
/// none) is read for `me`: here when `me`'s library holds the cartridges of
/// every job it reads data from; else on the server whose library does, or
/// nowhere (a set is not read in parts). A restore that cannot be planned is
/// read here, where it is refused as on a server alone.
pub fn set_read_at(
    at: &impl Catalogued,
    me: &Member,
    (set, when): (&str, Option<&str>),
    opts: &RestoreOptions,
) -> Result<ReadAt> {
    let cat = at.ops_catalog();
    let Ok(jobs) = tapeloom_engine::set_jobs_read(cat, set, when, opts) else {
        return Ok(ReadAt::Here);
    };
    let mut barcodes: Vec<String> = Vec::new();
    for job in jobs {
        for b in job_barcodes(cat, job)? {
            if !barcodes.contains(&b) {
                barcodes.push(b);
            }
        }
    }
    let mut parts = parts(cat, me, &barcodes);
    if parts.iter().all(|(holder, _)| *holder == me.name) {
        return Ok(ReadAt::Here);
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
    if let Some(why) = unreachable(cat, me, &format!("set {set}"), &parts)? {
        return Ok(ReadAt::Refused(Refusal::Unreachable(why)));
    }
    if let [(holder, _)] = parts.as_slice() {
        let why = format!("set {set}'s cartridges are in server {holder}'s library");
        return sent_on(cat, me, holder, why);
    }
    let said: Vec<String> = (parts.iter())
        .map(|(h, run)| format!("{h}: {}", run.join(", ")))
        .collect();
    let why = format!(
        "set {set}'s jobs are on cartridges in more than one library ({}): restore each job from its server",
        said.join("; ")
    );
    Ok(ReadAt::Refused(Refusal::Scattered(why)))
}

fn not_registered(name: &str) -> ReadAt {
    let why = format!("server {name} of the site is not registered");
    ReadAt::Refused(Refusal::Unreachable(why))
}

/// The read sent on to server `holder`, for `why`.
fn sent_on(cat: &Catalog, me: &Member, holder: &str, why: String) -> Result<ReadAt> {
    let servers = cat.servers()?;
    Ok(match servers.iter().find(|s| s.name == holder) {
        Some(s) => ReadAt::SentOn {
            server: shown(s, me.timeout_s),
            reason: why,
        },
        None => not_registered(holder),
    })
}

/// The job's parts, each with its server.
fn split(
    cat: &Catalog,
    me: &Member,
    job: i64,
    parts: Vec<(String, Vec<String>)>,
) -> Result<ReadAt> {
    let servers = cat.servers()?;
    let mut out = Vec::new();
    let mut said = Vec::new();
    for (holder, volumes) in parts {
        let Some(row) = servers.iter().find(|s| s.name == holder) else {
            return Ok(not_registered(&holder));
        };
        said.push(format!("{holder}: {}", volumes.join(", ")));
        out.push(ReadPart {
            server: shown(row, me.timeout_s),
            volumes,
        });
    }
    let reason = format!(
        "job {job}'s cartridges are in more than one library: read in {} parts ({})",
        out.len(),
        said.join("; ")
    );
    Ok(ReadAt::Split(SplitRead {
        job,
        parts: out,
        reason,
    }))
}

/// The cartridges `wanted` (in the job's order) grouped in runs that one server's
/// library holds: (its name, the run's barcodes).
fn parts(cat: &Catalog, me: &Member, wanted: &[String]) -> Vec<(String, Vec<String>)> {
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for b in wanted {
        let holder = match me.barcodes.contains(b) {
            true => me.name.clone(),
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

/// Why a reading one of whose parts no server can read now is refused: a
/// cartridge no library holds, or a server that is down. None when every part
/// can be read.
fn unreachable(
    cat: &Catalog,
    me: &Member,
    what: &str,
    parts: &[(String, Vec<String>)],
) -> Result<Option<String>> {
    let held_by = |name: &str| -> Vec<String> {
        (parts.iter())
            .filter(|(h, _)| h == name)
            .flat_map(|(_, run)| run.iter().cloned())
            .collect()
    };
    if parts.iter().any(|(h, _)| h == NO_SERVER) {
        return Ok(Some(format!(
            "{what}'s cartridges {} are in no library of the site",
            held_by(NO_SERVER).join(", ")
        )));
    }
    let servers = cat.servers()?;
    for (holder, _) in parts.iter().filter(|(h, _)| *h != me.name) {
        // A server not registered is said where the read is sent on.
        let Some(row) = servers.iter().find(|s| s.name == *holder) else {
            return Ok(None);
        };
        if !row.alive(me.timeout_s) {
            return Ok(Some(format!(
                "server {holder} is down (no heartbeat for {} s): {what}'s cartridges {} are in its library",
                row.silent_s,
                held_by(holder).join(", ")
            )));
        }
    }
    Ok(None)
}

/// The barcodes of the cartridges job `job` is on, in its volume order.
fn job_barcodes(cat: &Catalog, job: i64) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for jv in cat.job_volumes(job)? {
        if !out.contains(&jv.volume.barcode) {
            out.push(jv.volume.barcode);
        }
    }
    Ok(out)
}
