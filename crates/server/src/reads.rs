//! Where a restore or a verify of a job is read when the server is one of a
//! site's. It is read here when this server's library holds the job's
//! cartridges. When another server's library holds them all, the client is sent
//! on to it (`303`). When they sit in several libraries, the job is read in
//! parts (`300` with a `SplitRead`): each part is a run of the job's
//! cartridges, in the job's volume order, that one library holds, and the
//! client asks each part of that library's server with `volume=BARCODE`. A part
//! whose server is down, or a cartridge no library of the site holds, is
//! refused in one line that names them. `tapeloom_ops::site` decides where;
//! this module answers as it says.

use crate::http::Answer;
use crate::site::Site;
use tapeloom_engine::RestoreOptions;
use tapeloom_ops::site::{self as ops_site, ReadAt, Refusal};
use tapeloom_ops::Conn;
use tapeloom_proto::site::SPLIT;

/// Where job `job` is read, `asked` being the cartridges the request names
/// (`volume=`; all of the job's when empty): none when this server's library
/// holds them (or the server is alone); else the answer that sends the client
/// on, splits the reading, or refuses it.
pub fn route_read(site: Option<&Site>, conn: &Conn, job: i64, asked: &[String]) -> Option<Answer> {
    let site = site?;
    answer(ops_site::read_at(conn, &site.member, job, asked))
}

/// Where the restore `opts` of set `set` at `when` is read: none when this
/// server's library holds the cartridges of all the jobs it reads (or the server
/// is alone); else the `303` naming the server whose library does, or the
/// refusal naming the libraries that hold them (a set is not read in parts) or
/// the server that is down.
pub fn route_set(
    site: Option<&Site>,
    conn: &Conn,
    (set, when): (&str, Option<&str>),
    opts: &RestoreOptions,
) -> Option<Answer> {
    let site = site?;
    answer(ops_site::set_read_at(conn, &site.member, (set, when), opts))
}

/// The answer that sends a read where the site says; none to read it here.
fn answer(at: tapeloom_ops::Result<ReadAt>) -> Option<Answer> {
    Some(match at {
        Ok(ReadAt::Here) => return None,
        Ok(ReadAt::SentOn { server, reason }) => crate::tickets::sent_on_to(server, None, reason),
        Ok(ReadAt::Split(split)) => {
            let mut a = Answer::json(&split);
            a.status = SPLIT;
            a
        }
        Ok(ReadAt::Refused(Refusal::NotOn(why))) => Answer::error(404, &why),
        Ok(ReadAt::Refused(Refusal::Unreachable(why))) => Answer::error(503, &why),
        Ok(ReadAt::Refused(Refusal::Scattered(why))) => Answer::error(409, &why),
        Err(e) => Answer::error(503, &format!("the catalog: {e}")),
    })
}

/// The cartridges a request names (`volume=BARCODE`, each again).
pub fn asked_volumes(query: &[(String, Vec<u8>)]) -> Vec<String> {
    (query.iter())
        .filter(|(k, _)| k == "volume")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect()
}
