//! The tree crate's values of what the server sends: the client reads the
//! protocol's documents (`tapeloom_proto`) and hands the packing and placing its
//! own types, and makes the protocol's document of what a verify here found.

use tapeloom_proto::verify::{BadBlock, Verified};

/// A row of a base's tree from the wire, as the scan compares with it.
pub(crate) fn base_row(r: tapeloom_proto::base::BaseRow) -> tapeloom_tree::BaseRow {
    tapeloom_tree::BaseRow {
        path: r.path,
        kind: r.kind,
        size: r.size,
        mtime_ns: r.mtime_ns,
        ctime_ns: r.ctime_ns,
        ino: r.ino,
        mode: r.mode,
        uid: r.uid,
        gid: r.gid,
        link: r.link,
    }
}

/// What a note of the server says the catalog lists of an entry.
pub(crate) fn expect(x: tapeloom_proto::restore::Expect) -> tapeloom_tree::Expect {
    tapeloom_tree::Expect {
        stream: x.stream,
        kind: x.kind,
        size: x.size,
    }
}

/// The document of what the verify of job `job_id` found here.
pub(crate) fn verified(job_id: i64, r: tapeloom_tree::verify::VerifyReport) -> Verified {
    Verified {
        job_id,
        ok: r.ok,
        blocks_checked: r.blocks_checked,
        bad_blocks: (r.bad_blocks.into_iter())
            .map(|(volume, block)| BadBlock { volume, block })
            .collect(),
        files_checked: r.files_checked,
        files_affected: r.files_affected,
        files_missing: r.files_missing,
        bytes_read_from_tape: r.bytes_read_from_tape,
        seconds: r.seconds,
    }
}
