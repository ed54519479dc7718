//! The rows told from a stream's blocks are the rows its packer sent with them.

use super::*;
use crate::backup::mux::{Msg, Outlet, Shared};
use crate::backup::pack::{pack_stream, HostPath};
use proptest::prelude::*;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use tapeloom_format::EntryType;
use tapeloom_format::{expand_block, FormatError, StreamPacker, Timestamp};
use tapeloom_tree::pack::compress::{CompressionCounters, Compressor};
use tapeloom_tree::pack::mux::PackedRow;

const STREAM: u16 = 3;
const BLOCK: usize = 4096;
/// Payload bytes of a full block.
const CAP: usize = BLOCK - BLOCK_HEADER_LEN;

/// A place in a packed stream, as a stream offset.
type Place<'a> = dyn Fn(&Packed) -> usize + 'a;

/// Records of a stream: kind and body.
type Records = Vec<(Kind, Vec<u8>)>;

/// What the packer sent with one block.
struct Sent {
    seq: u64,
    first_record: u32,
    payload: Vec<u8>,
    done: Vec<(PackedRow, u64, u64)>,
    keep_from: u64,
}

/// A stream as packed: its blocks, its (entries, stored bytes), and how many blocks
/// were stored compressed.
struct Packed {
    blocks: Vec<Sent>,
    end: (u64, u64),
    compressed: u64,
}

impl Packed {
    /// Stream offset where each entry's record starts, in stream order.
    fn starts(&self) -> Vec<(Vec<u8>, usize)> {
        let mut v: Vec<_> = self
            .blocks
            .iter()
            .flat_map(|b| &b.done)
            .map(|(row, start, _)| {
                (
                    row.path.clone(),
                    *start as usize * CAP + row.start_off as usize,
                )
            })
            .collect();
        v.sort_by_key(|s| s.1);
        v
    }

    /// Stream offset where the StreamEnd record starts.
    fn stream_end(&self) -> usize {
        self.blocks.iter().map(|b| b.payload.len()).sum::<usize>() - 32
    }
}

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"tapeloom "[i % 9] ^ (i / 1000) as u8)
        .collect()
}

/// A tree with an object of every kind, and `pad` bytes in the file `pad`.
fn tree(dir: &Path, pad: usize) {
    let put = |name: &str, data: &[u8]| std::fs::write(dir.join(name), data).unwrap();
    put("zero", b"");
    put("one", b"1");
    put("few", &text(3000));
    put("block", &text(5000));
    // Past the small-file size: read by the packer, not the reader.
    put("big", &text(200_000));
    let sparse = std::fs::File::create(dir.join("sparse")).unwrap();
    sparse.set_len(1 << 20).unwrap();
    sparse.write_all_at(&text(6000), 300_000).unwrap();
    std::os::unix::fs::symlink("few", dir.join("link")).unwrap();
    // An Entry record longer than a block.
    std::os::unix::fs::symlink("x".repeat(4000), dir.join("far")).unwrap();
    std::fs::create_dir(dir.join("dir")).unwrap();
    put("dir/inner", &text(700));
    put("hard-a", &text(900));
    std::fs::hard_link(dir.join("hard-a"), dir.join("hard-b")).unwrap();
    nix::unistd::mkfifo(
        &dir.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    for i in 0..30 {
        put(&format!("s{i:02}"), &text(i * 37));
    }
    put("pad", &text(pad));
}

/// Runs the backup's reader and packer over `root`, collecting what the packer sends.
fn pack(root: &Path, zstd: bool) -> Packed {
    let (tx, rx) = sync_channel::<Msg>(8);
    let out = Outlet::new(
        tx,
        Arc::new(Shared::default()),
        Arc::new(AtomicUsize::new(0)),
        None,
    );
    let counters = Arc::new(CompressionCounters::default());
    let comp = zstd.then(|| (Compressor::new().unwrap(), Arc::clone(&counters)));
    let abs = root.to_path_buf();
    let packer = std::thread::spawn(move || {
        let scan: Arc<crate::backup::changes::Scan> = Arc::default();
        let fetched = tapeloom_tree::pack::source::start(
            vec![(abs.clone(), b".".to_vec())],
            2,
            vec![],
            Arc::clone(&scan),
        );
        let host = HostPath {
            abs,
            root: b".".to_vec(),
        };
        pack_stream(
            STREAM,
            0x7a9e,
            (BLOCK, 0),
            fetched,
            out,
            &host,
            (comp, scan),
        );
    });
    let (mut blocks, mut end, mut wide) = (Vec::new(), None, Vec::new());
    for m in rx.iter() {
        match m {
            Msg::Block {
                block,
                done,
                keep_from,
            } => {
                let len = block.header.payload_len as usize;
                let payload = if block.header.compressed {
                    expand_block(&block.header, &block.buf, &mut wide).unwrap();
                    wide[BLOCK_HEADER_LEN..].to_vec()
                } else {
                    block.buf[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + len].to_vec()
                };
                assert_eq!(payload.len(), len);
                blocks.push(Sent {
                    seq: block.seq,
                    first_record: block.header.first_record,
                    payload,
                    done: done
                        .into_iter()
                        .map(|d| (d.row, d.start_block, d.end_block))
                        .collect(),
                    keep_from,
                });
            }
            Msg::Error(path, why) => panic!("{}: {why}", String::from_utf8_lossy(&path)),
            Msg::End(entries, stored) => end = Some((entries, stored)),
            Msg::OnTape { .. } => panic!("a packer found a block on tape"),
        }
    }
    packer.join().unwrap();
    Packed {
        blocks,
        end: end.unwrap(),
        compressed: counters.compressed_blocks.load(Ordering::Relaxed),
    }
}

/// Feeds the packed blocks to [`StreamRows`] and checks it says what the packer said.
fn replay(p: &Packed) {
    let mut rows = StreamRows::new(STREAM);
    for b in &p.blocks {
        let (done, keep_from) = rows.block(b.seq, b.first_record, &b.payload).unwrap();
        let done: Vec<_> = done
            .into_iter()
            .map(|d| (d.row, d.start_block, d.end_block))
            .collect();
        assert_eq!(done, b.done, "entries ending in block {}", b.seq);
        assert_eq!(keep_from, b.keep_from, "keep_from of block {}", b.seq);
    }
    assert_eq!(rows.end(), Some(p.end));
    assert!(rows.take_problems().is_empty());
}

#[test]
fn the_rows_told_from_the_blocks_are_the_packers() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), 100);
    for zstd in [false, true] {
        let p = pack(dir.path(), zstd);
        let rows: Vec<_> = p.blocks.iter().flat_map(|b| &b.done).collect();
        // Every object but the socket, and the root.
        assert_eq!(rows.len(), 45);
        assert_eq!(p.end.0, 45);
        let kind = |name: &[u8]| rows.iter().find(|r| r.0.path == name).unwrap().0.kind;
        assert_eq!(kind(b"hard-a") ^ kind(b"hard-b"), 1 ^ 4);
        assert_eq!(kind(b"pipe"), EntryType::Fifo as u8);
        assert!(rows.iter().all(|r| r.0.path != b"sock"));
        assert!(rows.iter().any(|r| r.1 < r.2), "no entry spans blocks");
        assert_eq!(p.compressed > 0, zstd);
        replay(&p);
    }
}

#[test]
fn records_cut_anywhere_by_a_block_end_give_the_packers_rows() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), 100);
    let p = pack(dir.path(), false);
    let starts = p.starts();
    let i = starts.iter().position(|s| s.0 == b"pad").unwrap();
    // The entry after `pad`, or the StreamEnd, moves with `pad`'s length.
    let after_pad = |p: &Packed| p.starts()[i + 1].1;
    let cases: [(&Place<'_>, usize); 6] = [
        // A record begins where a block is full: the packer places it in the next.
        (&after_pad, 0),
        // An Entry's header cut after its first byte, and before its last.
        (&after_pad, CAP - 1),
        (&after_pad, CAP - 15),
        // The StreamEnd's header begins in a block but ends in the next.
        (&Packed::stream_end, CAP - 1),
        (&Packed::stream_end, 0),
        // The StreamEnd fills the last block to its end.
        (&Packed::stream_end, CAP - 32),
    ];
    for (at, want) in cases {
        let shift = (want + CAP - at(&p) % CAP) % CAP;
        std::fs::write(dir.path().join("pad"), text(100 + shift)).unwrap();
        let q = pack(dir.path(), false);
        assert_eq!(at(&q) % CAP, want);
        replay(&q);
    }
}

fn entry(kind: EntryType, path: &[u8], size: u64) -> Entry {
    Entry {
        kind,
        mode: 0o644,
        uid: 1,
        gid: 2,
        size,
        mtime: Timestamp::from_nanos(1_700_000_000_123_456_789),
        atime: Timestamp::default(),
        rdev: 0,
        path: path.to_vec(),
        link: vec![],
        user: vec![],
        group: vec![],
        xattrs: vec![],
        sparse: None,
        meta_only: false,
        facts: None,
    }
}

/// The payloads of a stream of these records, in blocks of 164 bytes.
fn payloads(records: &[(Kind, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut p = StreamPacker::new(STREAM, 1, BLOCK_HEADER_LEN + 100);
    for (kind, body) in records {
        p.record(*kind, body);
    }
    p.finish_block();
    p.ready
        .drain(..)
        .map(|b| {
            let len = b.header.payload_len as usize;
            b.buf[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + len].to_vec()
        })
        .collect()
}

/// A regular file of three bytes read with `status`, a symlink, and the StreamEnd.
fn small_stream(status: FileStatus) -> Records {
    let mut link = entry(EntryType::Symlink, b"d/l", 0);
    link.link = b"/anywhere".to_vec();
    vec![
        (Kind::Entry, entry(EntryType::Regular, b"d/f", 3).encode()),
        (Kind::Data, b"abc".to_vec()),
        (
            Kind::FileEnd,
            FileEnd {
                crc: crc32c::crc32c(b"abc"),
                status,
            }
            .encode(),
        ),
        (Kind::Entry, link.encode()),
        (
            Kind::StreamEnd,
            StreamEnd {
                entries: 2,
                bytes: 3,
            }
            .encode(),
        ),
    ]
}

/// Feeds `blocks` from seq 0 and returns the first refusal.
fn first_error(blocks: &[Vec<u8>]) -> Option<Error> {
    let mut rows = StreamRows::new(STREAM);
    blocks
        .iter()
        .enumerate()
        .find_map(|(seq, b)| rows.block(seq as u64, NO_RECORD, b).err())
}

#[test]
fn files_read_with_trouble_are_reported_as_the_packer_reports_them() {
    let mut rows = StreamRows::new(STREAM);
    for (seq, b) in payloads(&small_stream(FileStatus::Grew)).iter().enumerate() {
        rows.block(seq as u64, NO_RECORD, b).unwrap();
    }
    assert_eq!(
        rows.take_problems(),
        vec![(
            b"d/f".to_vec(),
            "file grew while it was read; the excess is not stored".to_string()
        )]
    );
    assert!(rows.take_problems().is_empty());
    assert_eq!(rows.end(), Some((2, 3)));
}

#[test]
fn a_damaged_record_header_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), 100);
    let p = pack(dir.path(), false);
    let mut blocks: Vec<Vec<u8>> = p.blocks.iter().map(|b| b.payload.clone()).collect();
    let rows: Vec<_> = p.blocks.iter().flat_map(|b| &b.done).collect();
    let (row, start_block, _) = rows[rows.len() / 2];
    blocks[*start_block as usize][row.start_off as usize] = 0xee;
    assert!(matches!(
        first_error(&blocks),
        Some(Error::Format(FormatError::UnknownCode {
            what: "record kind",
            value: 0xee
        }))
    ));
}

#[test]
fn hostile_records_are_refused() {
    let refusal = |records: Records| first_error(&payloads(&records)).expect("refused");
    let absolute = entry(EntryType::Directory, b"/etc", 0).encode();
    assert!(matches!(
        refusal(vec![(Kind::Entry, absolute)]),
        Error::Format(FormatError::UnsafePath(_))
    ));
    let stream = small_stream(FileStatus::Ok);
    let cut = stream[0].1[..30].to_vec();
    assert!(matches!(
        refusal(vec![(Kind::Entry, cut)]),
        Error::Format(FormatError::Truncated("entry record"))
    ));
    let out_of_order = [
        vec![(Kind::Data, vec![0; 3])],
        // A regular file without its data.
        vec![stream[0].clone(), stream[4].clone()],
        // Data of another length than the entry's.
        vec![stream[0].clone(), (Kind::Data, vec![0; 4])],
        vec![stream[4].clone(), stream[3].clone()],
        vec![(Kind::JobEnd, vec![])],
    ];
    for records in out_of_order {
        let e = refusal(records);
        assert!(
            matches!(e, Error::Stage(StageError::StreamOrder { .. })),
            "{e}"
        );
    }
    // A header announcing more than any record other than Data may hold.
    let mut huge = RecordHeader {
        kind: Kind::Entry,
        len: 1 << 40,
    }
    .encode()
    .to_vec();
    huge.extend_from_slice(&[0; 20]);
    assert!(matches!(
        first_error(&[huge]),
        Some(Error::Format(FormatError::RecordTooLarge { .. }))
    ));
}

#[test]
fn blocks_out_of_sequence_are_refused() {
    let blocks = payloads(&small_stream(FileStatus::Ok));
    let mut rows = StreamRows::new(STREAM);
    rows.block(0, NO_RECORD, &blocks[0]).unwrap();
    assert!(matches!(
        rows.block(2, NO_RECORD, &blocks[2]),
        Err(Error::Stage(StageError::StreamOrder { seq: 2, .. }))
    ));
    // Once refused, the stream cannot be followed on.
    assert!(rows.block(1, NO_RECORD, &blocks[1]).is_err());
}

/// Feeds the packed blocks with block `lost` lost; returns the rows (entry, start
/// and end block) and what was reported lost.
fn replay_without(p: &Packed, lost: u64) -> (Vec<(PackedRow, u64, u64)>, Vec<Lost>) {
    let mut rows = StreamRows::new(STREAM);
    let (mut kept, mut keep_from, mut offset) = (Vec::new(), 0, 0u64);
    for b in &p.blocks {
        let end = offset + b.payload.len() as u64;
        if b.seq == lost {
            rows.lost_block(b.seq, offset, end).unwrap();
        } else {
            let (done, keep) = rows.block(b.seq, b.first_record, &b.payload).unwrap();
            for d in done {
                // The writer knows the positions of blocks from `keep_from` on, and
                // of no lost block.
                assert!(d.start_block >= keep_from, "{} forgotten", d.start_block);
                assert!(d.start_block != lost && d.end_block == b.seq);
                kept.push((d.row, d.start_block, d.end_block));
            }
            keep_from = keep;
        }
        offset = end;
    }
    rows.finish();
    (kept, rows.take_lost())
}

#[test]
fn after_a_lost_block_the_entries_it_cuts_are_reported_and_the_others_rowed() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), 100);
    let p = pack(dir.path(), false);
    let all: Vec<_> = p.blocks.iter().flat_map(|b| b.done.clone()).collect();
    let mut unknown = 0;
    for k in 0..p.blocks.len() as u64 {
        let (kept, lost) = replay_without(&p, k);
        let (cut, whole): (Vec<_>, Vec<_>) =
            all.iter().cloned().partition(|r| r.1 <= k && k <= r.2);
        assert_eq!(kept, whole, "block {k} lost");
        let range = (k as usize * CAP) as u64
            ..((k as usize * CAP) + p.blocks[k as usize].payload.len()) as u64;
        assert!(lost
            .iter()
            .all(|l| l.from == range.start && l.to == range.end));
        let named: Vec<_> = lost.iter().filter_map(|l| l.path.clone()).collect();
        assert!(named.len() <= 1, "block {k}: {named:?}");
        assert!(named.iter().all(|n| cut.iter().any(|c| &c.0.path == n)));
        let nameless = lost.iter().filter(|l| l.path.is_none()).count();
        assert_eq!(
            nameless,
            usize::from(cut.len() > named.len()),
            "block {k}: {lost:?}"
        );
        unknown += nameless;
    }
    assert!(unknown > 0);
}

#[test]
fn blocks_in_which_no_record_starts_are_passed_over_after_a_loss() {
    // `big` is 200 000 bytes: blocks in the middle of its data hold no record start.
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), 100);
    let p = pack(dir.path(), false);
    let big = p
        .blocks
        .iter()
        .flat_map(|b| &b.done)
        .find(|d| d.0.path == b"big")
        .unwrap();
    let k = big.1 + 2;
    assert_eq!(p.blocks[k as usize + 1].first_record, NO_RECORD);
    let (kept, lost) = replay_without(&p, k);
    assert_eq!(kept.len(), 44);
    assert_eq!(
        lost.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
        vec![Some(b"big".to_vec())]
    );
}

proptest! {
    #[test]
    fn any_bytes_are_refused_or_read_without_panic(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6)
    ) {
        let _ = first_error(&blocks);
    }

    #[test]
    fn a_stream_with_a_changed_byte_never_panics(at in 0.0f64..1.0, byte in any::<u8>()) {
        let mut blocks = payloads(&small_stream(FileStatus::Shrank));
        let total: usize = blocks.iter().map(Vec::len).sum();
        let mut at = (at * total as f64) as usize;
        for b in &mut blocks {
            if at < b.len() {
                b[at] = byte;
                break;
            }
            at -= b.len();
        }
        let _ = first_error(&blocks);
    }
}

#[test]
fn the_fixed_record_lengths_are_the_formats() {
    let fe = FileEnd {
        crc: 1,
        status: FileStatus::Ok,
    };
    assert_eq!(fe.encode().len() as u64, FILE_END_LEN);
    let se = StreamEnd {
        entries: 1,
        bytes: 2,
    };
    assert_eq!(
        (RECORD_HEADER_LEN + se.encode().len()) as u64,
        STREAM_END_RECORD
    );
}
