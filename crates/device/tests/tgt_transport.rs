//! The SCSI transports against a real tgt virtual tape library on loopback.
//!
//! These tests need tgt (tgtd, tgtadm, tgtimg), libiscsi and root: without them
//! each says so and passes, or fails under `TAPELOOM_TEST_REQUIRE_ALL=1`
//! (`tapeloom_testkit::need`).
use std::time::Duration;
use tapeloom_device::scsi::{open_transport, CmdOutcome, DataDir, ScsiTransport};
use tapeloom_testkit::need::need;
use tapeloom_testkit::tgt::{TgtLibrary, TgtOptions};

const T: Duration = Duration::from_secs(30);
const GOOD: u8 = 0x00;
const CHECK: u8 = 0x02;

fn start(dir: &std::path::Path) -> Option<TgtLibrary> {
    TgtLibrary::start_for_test(&TgtOptions::new(dir))
}

fn open(url: &str) -> Box<dyn ScsiTransport> {
    open_transport(url).unwrap_or_else(|e| panic!("{e}"))
}

fn run(t: &mut dyn ScsiTransport, cdb: &[u8], data: DataDir<'_>) -> CmdOutcome {
    t.execute(cdb, data, T)
        .unwrap_or_else(|e| panic!("{cdb:02x?}: {e}"))
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn key(o: &CmdOutcome) -> u8 {
    o.sense.get(2).map_or(0xff, |b| b & 0x0f)
}

fn asc(o: &CmdOutcome) -> (u8, u8) {
    (
        o.sense.get(12).copied().unwrap_or(0xff),
        o.sense.get(13).copied().unwrap_or(0xff),
    )
}

fn inquiry(t: &mut dyn ScsiTransport) -> Vec<u8> {
    let mut buf = vec![0u8; 96];
    let o = run(t, &[0x12, 0, 0, 0, 96, 0], DataDir::In(&mut buf));
    assert_eq!(o.status, GOOD, "{o:?}");
    buf.truncate(96 - o.residual);
    buf
}

/// TEST UNIT READY until it is not a UNIT ATTENTION (at most a few times).
fn tur(t: &mut dyn ScsiTransport) -> CmdOutcome {
    let mut o = run(t, &[0; 6], DataDir::None);
    for _ in 0..3 {
        if o.status == CHECK && key(&o) == 0x06 {
            o = run(t, &[0; 6], DataDir::None);
        }
    }
    o
}

/// READ ELEMENT STATUS of one element type (0 = all), VOLTAG, optionally DVCID.
fn read_element_status(t: &mut dyn ScsiTransport, element_type: u8, dvcid: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let cdb = [
        0xB8,
        0x10 | element_type,
        0,
        0,
        0xff,
        0xff,
        u8::from(dvcid),
        0,
        0x10,
        0x00,
        0,
        0,
    ];
    let o = run(t, &cdb, DataDir::In(&mut buf));
    assert_eq!(o.status, GOOD, "{o:?}");
    buf.truncate(4096 - o.residual);
    buf
}

/// One element descriptor: address, full, volume tag (trimmed), raw bytes.
#[derive(Debug)]
struct Element {
    element_type: u8,
    address: u16,
    full: bool,
    voltag: String,
    raw: Vec<u8>,
}

/// Parses element status pages. tgt sends 8 bytes fewer than the report it
/// describes, so the last descriptor may be cut short; it is kept as far as it goes.
fn parse_elements(data: &[u8]) -> Vec<Element> {
    let mut out = Vec::new();
    let total = data.get(5..8).map_or(0, |b| {
        usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2])
    });
    let end = (8 + total).min(data.len());
    let mut p = 8;
    while p + 8 <= end {
        let page = &data[p..p + 8];
        let element_type = page[0];
        let pvoltag = page[1] & 0x80 != 0;
        let dlen = usize::from(u16::from_be_bytes([page[2], page[3]]));
        let bytes = usize::from(page[5]) << 16 | usize::from(page[6]) << 8 | usize::from(page[7]);
        if dlen < 12 {
            break;
        }
        let mut d = p + 8;
        let page_end = (d + bytes).min(end);
        while d + 12 <= page_end {
            let raw = &data[d..(d + dlen).min(page_end)];
            let voltag = if pvoltag && raw.len() >= 44 {
                String::from_utf8_lossy(&raw[12..44]).trim().to_string()
            } else {
                String::new()
            };
            out.push(Element {
                element_type,
                address: u16::from_be_bytes([raw[0], raw[1]]),
                full: raw[2] & 1 != 0,
                voltag,
                raw: raw.to_vec(),
            });
            d += dlen;
        }
        p += 8 + bytes;
    }
    out
}

fn move_medium(t: &mut dyn ScsiTransport, from: u16, to: u16) -> CmdOutcome {
    let [f0, f1] = from.to_be_bytes();
    let [t0, t1] = to.to_be_bytes();
    run(
        t,
        &[0xA5, 0, 0, 0, f0, f1, t0, t1, 0, 0, 0, 0],
        DataDir::None,
    )
}

fn write6(t: &mut dyn ScsiTransport, data: &[u8]) -> CmdOutcome {
    let n = data.len();
    run(
        t,
        &[0x0A, 0, (n >> 16) as u8, (n >> 8) as u8, n as u8, 0],
        DataDir::Out(data),
    )
}

fn read6(t: &mut dyn ScsiTransport, buf: &mut [u8]) -> CmdOutcome {
    let n = buf.len();
    run(
        t,
        &[0x08, 0, (n >> 16) as u8, (n >> 8) as u8, n as u8, 0],
        DataDir::In(buf),
    )
}

fn rewind(t: &mut dyn ScsiTransport) -> CmdOutcome {
    run(t, &[0x01, 0, 0, 0, 0, 0], DataDir::None)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// The first tape's slot and the drive element addresses, from the changer.
fn slot_of(changer: &mut dyn ScsiTransport, barcode: &str) -> u16 {
    let els = parse_elements(&read_element_status(changer, 2, false));
    els.iter()
        .find(|e| e.voltag == barcode)
        .unwrap_or_else(|| panic!("{barcode} not in a slot: {els:?}"))
        .address
}

#[test]
fn inquiry_identifies_the_changer_and_the_drives() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = start(dir.path()) else {
        return;
    };
    let mut changer = open(&lib.changer_url);
    assert_eq!(changer.address(), lib.changer_url);
    let inq = inquiry(changer.as_mut());
    assert!(inq.len() >= 36, "{}", hex(&inq));
    assert_eq!(inq[0] & 0x1f, 0x08, "changer: {}", hex(&inq));
    assert_eq!(&inq[8..16], b"IET     ", "{}", hex(&inq));
    for url in &lib.drive_urls {
        let mut drive = open(url);
        let inq = inquiry(drive.as_mut());
        assert_eq!(inq[0] & 0x1f, 0x01, "drive {url}: {}", hex(&inq));
        assert_eq!(&inq[8..16], b"IET     ", "{}", hex(&inq));
        assert_eq!(&inq[16..28], b"VIRTUAL-TAPE", "{}", hex(&inq));
    }
}

#[test]
fn load_write_rewind_read_through_the_changer() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = start(dir.path()) else {
        return;
    };
    let mut changer = open(&lib.changer_url);
    let mut drive = open(&lib.drive_urls[0]);

    // Empty drive: NOT READY, MEDIUM NOT PRESENT.
    let o = tur(drive.as_mut());
    assert_eq!(o.status, CHECK, "{o:?}");
    assert_eq!(key(&o), 0x02, "sense {}", hex(&o.sense));
    assert_eq!(asc(&o).0, 0x3A, "sense {}", hex(&o.sense));

    // The barcodes are in the storage elements.
    let data = read_element_status(changer.as_mut(), 2, false);
    let text = String::from_utf8_lossy(&data);
    for b in &lib.barcodes {
        assert!(text.contains(b.as_str()), "{b} missing from {}", hex(&data));
    }
    let slots = parse_elements(&data);
    assert_eq!(slots.len(), 3, "{slots:?}");
    assert!(
        slots.iter().all(|s| s.full && s.element_type == 2),
        "{slots:?}"
    );

    // Load the first tape into drive element 1.
    let first = slot_of(changer.as_mut(), &lib.barcodes[0]);
    let o = move_medium(changer.as_mut(), first, 1);
    assert_eq!(o.status, GOOD, "MOVE MEDIUM: {o:?}");
    let drives = parse_elements(&read_element_status(changer.as_mut(), 4, false));
    let d1 = drives
        .iter()
        .find(|e| e.address == 1)
        .expect("drive element 1");
    assert!(d1.full && d1.voltag == lib.barcodes[0], "{d1:?}");

    let o = tur(drive.as_mut());
    assert_eq!(o.status, GOOD, "TEST UNIT READY after load: {o:?}");

    let block = pattern(65536, 7);
    let o = write6(drive.as_mut(), &block);
    assert_eq!(o.status, GOOD, "WRITE: {o:?}");
    let o = rewind(drive.as_mut());
    assert_eq!(o.status, GOOD, "REWIND: {o:?}");
    let mut buf = vec![0u8; 65536];
    let o = read6(drive.as_mut(), &mut buf);
    assert_eq!(o.status, GOOD, "READ: {o:?}");
    assert_eq!(o.residual, 0);
    assert!(buf == block, "the block read back differs");

    let o = read6(drive.as_mut(), &mut buf);
    assert_eq!(o.status, CHECK, "READ at end of data: {o:?}");
    assert_eq!(key(&o), 0x08, "BLANK CHECK expected: {}", hex(&o.sense));
    assert_eq!(o.residual, 65536, "nothing was read at end of data");
}

#[test]
fn two_libraries_run_at_once() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let Some(mut a) = start(d1.path()) else {
        return;
    };
    let Some(b) = start(d2.path()) else {
        return;
    };
    assert_ne!(a.portal, b.portal);
    let mut ca = open(&a.changer_url);
    let mut cb = open(&b.changer_url);
    assert_eq!(inquiry(ca.as_mut())[0] & 0x1f, 0x08);
    assert_eq!(inquiry(cb.as_mut())[0] & 0x1f, 0x08);
    // Moving a tape in one library leaves the other alone.
    let slot = slot_of(ca.as_mut(), &a.barcodes[1]);
    assert_eq!(move_medium(ca.as_mut(), slot, 2).status, GOOD);
    let els = parse_elements(&read_element_status(cb.as_mut(), 4, false));
    assert!(els.iter().all(|e| !e.full), "{els:?}");
    drop(ca);
    a.stop().unwrap();
    a.stop().unwrap();
    assert!(open_transport(&a.changer_url).is_err());
    assert_eq!(inquiry(cb.as_mut())[0] & 0x1f, 0x08);
}

#[test]
fn a_command_on_a_stopped_library_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut lib) = start(dir.path()) else {
        return;
    };
    let mut changer = open(&lib.changer_url);
    assert_eq!(inquiry(changer.as_mut())[0] & 0x1f, 0x08);
    lib.stop().unwrap();
    let mut buf = [0u8; 96];
    let e = changer
        .execute(
            &[0x12, 0, 0, 0, 96, 0],
            DataDir::In(&mut buf),
            Duration::from_secs(3),
        )
        .expect_err("the target is gone");
    let msg = e.to_string();
    assert!(msg.starts_with(&lib.changer_url), "{msg}");
}

#[test]
fn bad_addresses_give_one_line_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = start(dir.path()) else {
        return;
    };
    let wrong_lun = format!("iscsi://{}/{}/9", lib.portal, lib.target);
    let wrong_target = format!("iscsi://{}/iqn.2026-11.org.tapeloom:nothing/1", lib.portal);
    let malformed = format!("iscsi://{}/{}", lib.portal, lib.target);
    for url in [wrong_lun, wrong_target, malformed] {
        let Err(e) = open_transport(&url) else {
            panic!("{url} opened");
        };
        let msg = e.to_string();
        eprintln!("{msg}");
        assert!(msg.starts_with(&url) && !msg.contains('\n'), "{msg}");
    }
}

#[test]
fn more_drives_than_tapes() {
    if !need(TgtLibrary::available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = TgtOptions {
        drives: 3,
        tapes: 1,
        tape_mb: 16,
        barcode_prefix: "ABC".into(),
        dir: dir.path().to_path_buf(),
    };
    let lib = TgtLibrary::start(&opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lib.barcodes, vec!["ABC001L6".to_string()]);
    assert!(dir.path().join("ABC001L6").is_file());
    let mut changer = open(&lib.changer_url);
    assert!(lib.changer_url.ends_with("/4"), "{}", lib.changer_url);
    let drives = parse_elements(&read_element_status(changer.as_mut(), 4, false));
    assert_eq!(
        drives.iter().map(|e| e.address).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let slot = slot_of(changer.as_mut(), "ABC001L6");
    assert_eq!(slot, 5);
    assert_eq!(move_medium(changer.as_mut(), slot, 3).status, GOOD);
    let mut d3 = open(&lib.drive_urls[2]);
    assert_eq!(tur(d3.as_mut()).status, GOOD);
}

#[test]
fn a_command_times_out_and_the_next_one_logs_in_again() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = start(dir.path()) else {
        return;
    };
    let mut changer = open(&lib.changer_url);
    assert_eq!(inquiry(changer.as_mut())[0] & 0x1f, 0x08);
    let pid = lib.pid().expect("tgtd runs").to_string();
    let signal = |sig: &str| {
        let st = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(st.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let t0 = std::time::Instant::now();
    let mut buf = [0u8; 96];
    let r = changer.execute(
        &[0x12, 0, 0, 0, 96, 0],
        DataDir::In(&mut buf),
        Duration::from_secs(2),
    );
    let took = t0.elapsed();
    signal("-CONT");
    let msg = r.expect_err("a stopped tgtd cannot answer").to_string();
    eprintln!("after {took:?}: {msg}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert!(
        msg.starts_with(&lib.changer_url) && msg.contains("12h"),
        "{msg}"
    );
    // The session was closed; the next command logs in again.
    let o = run(changer.as_mut(), &[0; 6], DataDir::None);
    eprintln!(
        "TUR after the new login: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!(inquiry(changer.as_mut())[0] & 0x1f, 0x08);
}

/// What tgt does in the corner cases a tape driver must handle. Prints the raw
/// bytes (run with --nocapture to see them) and checks the behaviour documented in
/// the tgt module.
#[test]
fn tgt_quirks() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = start(dir.path()) else {
        return;
    };
    let mut changer = open(&lib.changer_url);
    let mut drive = open(&lib.drive_urls[0]);
    let mut drive2 = open(&lib.drive_urls[1]);

    let o = tur(drive.as_mut());
    eprintln!(
        "TUR empty drive: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!((o.status, key(&o), asc(&o)), (CHECK, 0x02, (0x3A, 0x00)));

    // MODE SENSE(6), element address assignment page.
    let mut page = vec![0u8; 255];
    let o = run(
        changer.as_mut(),
        &[0x1A, 0x08, 0x1D, 0, 255, 0],
        DataDir::In(&mut page),
    );
    page.truncate(255 - o.residual);
    eprintln!(
        "MODE SENSE 1Dh: status {:02x} data {}",
        o.status,
        hex(&page)
    );
    assert_eq!(o.status, GOOD);
    assert_eq!(&page[4..6], &[0x1D, 0x12]);
    // MTE 3 (1), storage 4 (3), import/export 0 (0), data transfer 1 (2).
    assert_eq!(&page[6..14], &[0, 3, 0, 1, 0, 4, 0, 3]);
    assert_eq!(&page[18..22], &[0, 1, 0, 2]);

    // One element type per command: the report is 8 bytes shorter than it says.
    for (t, name) in [(1u8, "transport"), (2, "storage"), (4, "drives")] {
        let d = read_element_status(changer.as_mut(), t, false);
        eprintln!(
            "READ ELEMENT STATUS {name} VOLTAG ({} bytes): {}",
            d.len(),
            hex(&d)
        );
        let claimed = usize::from(d[5]) << 16 | usize::from(d[6]) << 8 | usize::from(d[7]);
        let bytes = usize::from(d[13]) << 16 | usize::from(d[14]) << 8 | usize::from(d[15]);
        assert_eq!(claimed, 8 + bytes, "byte count in the header");
        assert_eq!(
            d.len(),
            8 + bytes,
            "8 + page header 8 + descriptors, 8 bytes short"
        );
    }
    // All element types at once: the pages overlap; unusable.
    let all = read_element_status(changer.as_mut(), 0, false);
    eprintln!(
        "READ ELEMENT STATUS all VOLTAG ({} bytes): {}",
        all.len(),
        hex(&all)
    );
    // Drives with DVCID: identifiers, and the INQUIRY serial numbers to match.
    let dv = read_element_status(changer.as_mut(), 4, true);
    eprintln!("READ ELEMENT STATUS drives VOLTAG+DVCID: {}", hex(&dv));
    let dv_els = parse_elements(&dv);
    for (e, url) in dv_els.iter().zip(&lib.drive_urls) {
        eprintln!(
            "  drive {} ({} bytes) raw {}",
            e.address,
            e.raw.len(),
            hex(&e.raw)
        );
        let mut t = open(url);
        let mut vpd = vec![0u8; 64];
        let o = run(
            t.as_mut(),
            &[0x12, 1, 0x80, 0, 64, 0],
            DataDir::In(&mut vpd),
        );
        vpd.truncate(64 - o.residual);
        eprintln!("  VPD 80h of {url}: {}", hex(&vpd));
        let serial = String::from_utf8_lossy(&vpd[4..])
            .trim_matches(['\0', ' '])
            .to_string();
        let ident = String::from_utf8_lossy(&e.raw).into_owned();
        if e.raw.len() == 86 {
            assert!(
                ident.contains(&format!("VIRTUAL-TAPE    {serial}")),
                "{serial:?} in {}",
                hex(&e.raw)
            );
        } else {
            // The last descriptor lacks its final 8 bytes.
            assert_eq!(e.raw.len(), 78, "{}", hex(&e.raw));
            assert!(ident.contains("VIRTUAL-TAPE"), "{}", hex(&e.raw));
        }
    }

    // Load tape 1 into drive 1; first command after the load.
    let s1 = slot_of(changer.as_mut(), &lib.barcodes[0]);
    assert_eq!(move_medium(changer.as_mut(), s1, 1).status, GOOD);
    let o = run(drive.as_mut(), &[0; 6], DataDir::None);
    eprintln!(
        "first TUR after MOVE MEDIUM: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    let o = tur(drive.as_mut());
    assert_eq!(o.status, GOOD);

    // READ BLOCK LIMITS.
    let mut lim = [0u8; 6];
    let o = run(
        drive.as_mut(),
        &[0x05, 0, 0, 0, 0, 0],
        DataDir::In(&mut lim),
    );
    eprintln!(
        "READ BLOCK LIMITS: status {:02x} data {}",
        o.status,
        hex(&lim)
    );

    // READ POSITION at BOT, short and long form.
    let read_pos = |t: &mut dyn ScsiTransport, sa: u8, len: usize| {
        let mut b = vec![0u8; len];
        let o = run(
            t,
            &[0x34, sa, 0, 0, 0, 0, 0, 0, len as u8, 0],
            DataDir::In(&mut b),
        );
        (o, b)
    };
    let (o, b) = read_pos(drive.as_mut(), 0, 20);
    eprintln!(
        "READ POSITION sa 0 at BOT: status {:02x} resid {} data {}",
        o.status,
        o.residual,
        hex(&b)
    );
    let (o, b) = read_pos(drive.as_mut(), 6, 32);
    eprintln!(
        "READ POSITION sa 6 at BOT: status {:02x} resid {} data {}",
        o.status,
        o.residual,
        hex(&b)
    );

    // Write 64 KiB, a filemark, a 1000-byte block.
    let block = pattern(65536, 3);
    assert_eq!(write6(drive.as_mut(), &block).status, GOOD);
    let (o, b0) = read_pos(drive.as_mut(), 0, 20);
    eprintln!(
        "READ POSITION sa 0 after 1 block: status {:02x} data {}",
        o.status,
        hex(&b0)
    );
    let (o, b6) = read_pos(drive.as_mut(), 6, 32);
    eprintln!(
        "READ POSITION sa 6 after 1 block: status {:02x} data {}",
        o.status,
        hex(&b6)
    );
    assert!(
        b0[0] == 20 && b0[1..].iter().all(|&x| x == 0),
        "READ POSITION is a stub"
    );
    assert!(
        b6[0] == 32 && b6[1..].iter().all(|&x| x == 0),
        "READ POSITION is a stub"
    );
    let o = run(drive.as_mut(), &[0x10, 0, 0, 0, 1, 0], DataDir::None);
    assert_eq!(o.status, GOOD, "WRITE FILEMARKS {o:?}");
    let small = pattern(1000, 9);
    assert_eq!(write6(drive.as_mut(), &small).status, GOOD);
    assert_eq!(rewind(drive.as_mut()).status, GOOD);

    // Short read: 128 KiB asked, 64 KiB block.
    let mut big = vec![0u8; 131072];
    let o = read6(drive.as_mut(), &mut big);
    eprintln!(
        "READ 128 KiB of a 64 KiB block: status {:02x} resid {} sense {}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(o.status, CHECK);
    assert_eq!(o.sense[2] & 0x20, 0x20, "ILI");
    assert_eq!(&o.sense[3..7], &65536u32.to_be_bytes(), "INFORMATION");
    assert_eq!(o.residual, 65536);
    assert!(
        big[..65536] == block[..],
        "the data of a short read arrives"
    );
    // Filemark: tgt sends a full data phase of stale bytes.
    big.fill(0xEE);
    let o = read6(drive.as_mut(), &mut big[..65536]);
    let stale = big[..65536].iter().any(|&b| b != 0xEE);
    eprintln!(
        "READ at filemark: status {:02x} resid {} sense {} buffer overwritten: {stale}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(o.status, CHECK);
    assert_eq!(o.sense[2] & 0x80, 0x80, "FILEMARK");
    assert_eq!(asc(&o), (0x00, 0x01));
    assert_eq!(o.residual, 65536);
    // 1000-byte block into 64 KiB.
    let o = read6(drive.as_mut(), &mut big[..65536]);
    eprintln!(
        "READ 64 KiB of a 1000-byte block: status {:02x} resid {} sense {}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(o.status, CHECK);
    assert_eq!(&o.sense[3..7], &64536u32.to_be_bytes(), "INFORMATION");
    assert_eq!(o.residual, 64536, "residual from INFORMATION, not tgt's");
    assert!(big[..1000] == small[..]);
    // End of data.
    big.fill(0xEE);
    let o = read6(drive.as_mut(), &mut big[..65536]);
    let stale = big[..65536].iter().any(|&b| b != 0xEE);
    eprintln!(
        "READ at end of data: status {:02x} resid {} sense {} buffer overwritten: {stale}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(
        o.sense[..3],
        [0x70, 0x00, 0x48],
        "BLANK CHECK + EOM, VALID clear"
    );
    // Block longer than the buffer.
    assert_eq!(rewind(drive.as_mut()).status, GOOD);
    let mut half = vec![0xEEu8; 32768];
    let o = read6(drive.as_mut(), &mut half);
    let touched = half.iter().any(|&b| b != 0xEE);
    eprintln!(
        "READ 32 KiB of a 64 KiB block: status {:02x} resid {} sense {} data transferred: {touched}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(&o.sense[3..7], &(-32768i32).to_be_bytes(), "INFORMATION");
    assert!(!touched, "tgt transfers nothing of an overlength block");
    let o = read6(drive.as_mut(), &mut big[..65536]);
    eprintln!(
        "next READ 64 KiB: status {:02x} resid {} sense {}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(
        o.sense[2] & 0x80,
        0x80,
        "the overlength block was passed: filemark next"
    );
    // SILI on the 1000-byte block.
    let o = run(
        drive.as_mut(),
        &[0x08, 0x02, 0x01, 0x00, 0x00, 0],
        DataDir::In(&mut big[..65536]),
    );
    eprintln!(
        "READ SILI 64 KiB of a 1000-byte block: status {:02x} resid {} sense {}",
        o.status,
        o.residual,
        hex(&o.sense)
    );
    assert_eq!(o.status, CHECK, "SILI is ignored");

    // LOAD/UNLOAD variants.
    for b4 in [0x00u8, 0x01, 0x02, 0x01, 0x00, 0x03] {
        let o = run(drive.as_mut(), &[0x1B, 0, 0, 0, b4, 0], DataDir::None);
        let t = run(drive.as_mut(), &[0; 6], DataDir::None);
        eprintln!(
            "LOAD/UNLOAD byte4={b4:02x}: status {:02x} sense {} -> TUR status {:02x} sense {}",
            o.status,
            hex(&o.sense),
            t.status,
            hex(&t.sense)
        );
    }
    let els = parse_elements(&read_element_status(changer.as_mut(), 4, false));
    eprintln!(
        "drive elements after LOAD/UNLOAD: {:?}",
        els.iter()
            .map(|e| (e.address, e.full, e.voltag.clone()))
            .collect::<Vec<_>>()
    );
    let mut first = vec![0u8; 65536];
    let o = read6(drive.as_mut(), &mut first);
    eprintln!(
        "READ after LOAD (0x03): status {:02x} resid {} sense {} first block: {}",
        o.status,
        o.residual,
        hex(&o.sense),
        first == block
    );
    assert_eq!(rewind(drive.as_mut()).status, GOOD);
    let o = read6(drive.as_mut(), &mut first);
    eprintln!(
        "READ after LOAD and REWIND: status {:02x} first block: {}",
        o.status,
        first == block
    );

    // MOVE MEDIUM from a loaded, ready drive: refused while removal is prevented,
    // done without unloading otherwise.
    let o = run(drive.as_mut(), &[0x1E, 0, 0, 0, 1, 0], DataDir::None);
    eprintln!(
        "PREVENT MEDIUM REMOVAL on drive 1: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!(tur(drive.as_mut()).status, GOOD);
    let o = move_medium(changer.as_mut(), 1, s1);
    eprintln!(
        "MOVE MEDIUM prevented drive 1 -> slot {s1}: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!((key(&o), asc(&o)), (0x05, (0x53, 0x02)));
    let o = run(drive.as_mut(), &[0x1E, 0, 0, 0, 0, 0], DataDir::None);
    eprintln!(
        "ALLOW MEDIUM REMOVAL on drive 1: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!(tur(drive.as_mut()).status, GOOD);
    let o = move_medium(changer.as_mut(), 1, s1);
    eprintln!(
        "MOVE MEDIUM loaded drive 1 -> slot {s1}: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!(o.status, GOOD);
    let t = run(drive.as_mut(), &[0; 6], DataDir::None);
    eprintln!(
        "  then TUR drive 1: status {:02x} sense {}",
        t.status,
        hex(&t.sense)
    );
    let st = read_element_status(changer.as_mut(), 2, false);
    for e in parse_elements(&st) {
        eprintln!(
            "  slot {} full {} tag {:?} raw {}",
            e.address,
            e.full,
            e.voltag,
            hex(&e.raw[..12])
        );
    }
    // MOVE MEDIUM to a full element and from an empty one.
    let s2 = slot_of(changer.as_mut(), &lib.barcodes[1]);
    let o = move_medium(changer.as_mut(), s1, s2);
    eprintln!(
        "MOVE MEDIUM slot -> full slot: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!((key(&o), asc(&o)), (0x05, (0x3B, 0x0D)));
    let o = move_medium(changer.as_mut(), 2, s1);
    eprintln!(
        "MOVE MEDIUM from empty drive 2: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!((key(&o), asc(&o)), (0x05, (0x3B, 0x0E)));

    // Fill tape 2 in drive 2 with 256 KiB blocks past its size.
    assert_eq!(move_medium(changer.as_mut(), s2, 2).status, GOOD);
    assert_eq!(tur(drive2.as_mut()).status, GOOD);
    let blk = pattern(262144, 1);
    let mut n = 0u32;
    let mut first_warning = None;
    let mut last = String::new();
    loop {
        let o = write6(drive2.as_mut(), &blk);
        n += 1;
        if o.status != GOOD {
            last = format!(
                "status {:02x} resid {} sense {}",
                o.status,
                o.residual,
                hex(&o.sense)
            );
            first_warning.get_or_insert((n, last.clone()));
        }
        if (o.status != GOOD && key(&o) != 0x00) || n >= 400 {
            break;
        }
    }
    eprintln!("writing 256 KiB blocks to a 64 MB tape: {n} writes; first non-GOOD: {first_warning:?}; last: {last}");
    let size = std::fs::metadata(dir.path().join(&lib.barcodes[1]))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!("  tape image size now {size} bytes");
    let o = run(drive2.as_mut(), &[0x10, 0, 0, 0, 1, 0], DataDir::None);
    eprintln!(
        "WRITE FILEMARKS after that: status {:02x} sense {}",
        o.status,
        hex(&o.sense)
    );
    assert_eq!(rewind(drive2.as_mut()).status, GOOD);
    let mut count = 0u32;
    let mut rb = vec![0u8; 262144];
    loop {
        let o = read6(drive2.as_mut(), &mut rb);
        if o.status != GOOD {
            eprintln!(
                "  read back {count} blocks, then status {:02x} sense {}",
                o.status,
                hex(&o.sense)
            );
            break;
        }
        count += 1;
    }
}
