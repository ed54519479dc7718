//! Expanding a compressed block (FORMAT.md 4.2, format version 2): its zstd frame back
//! into the payload, so that a block reads the same whether or not it was compressed.
//!
//! Bytes from tape are hostile: the output is never larger than the payload length the
//! header states, and that length is never larger than a block's payload can be, so a
//! frame that claims or expands to more fails instead of allocating.

use crate::{BlockHeader, FormatError, Result, BLOCK_HEADER_LEN, MAX_BLOCK_SIZE};

/// Writes a block opened with [`BlockHeader::open`] into `out` as it reads when stored
/// as it is: its 64 header bytes, then its payload of `header.payload_len` bytes, so
/// that `header.payload(out)` is the payload. A compressed block's frame must expand to
/// exactly that many bytes; a block stored as it is is copied without padding.
///
/// Fails with [`FormatError::CompressedPayloadTooLong`] for a payload length no block
/// can have, [`FormatError::BadFrame`] for a frame that is damaged or expands to more
/// than the header says, [`FormatError::ExpandedLength`] for one that expands to less,
/// and [`FormatError::NoZstd`] in a build without the `zstd` feature.
pub fn expand_block(header: &BlockHeader, block: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if header.encrypted {
        return Err(FormatError::NoKey);
    }
    let payload_len = header.payload_len as usize;
    if header.compressed && payload_len > MAX_BLOCK_SIZE - BLOCK_HEADER_LEN {
        return Err(FormatError::CompressedPayloadTooLong(header.payload_len));
    }
    let head = block
        .get(..BLOCK_HEADER_LEN)
        .ok_or(FormatError::Truncated("block"))?;
    out.clear();
    out.extend_from_slice(head);
    if !header.compressed {
        let payload = block
            .get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload_len)
            .ok_or(FormatError::PayloadTooLong(header.payload_len))?;
        out.extend_from_slice(payload);
        return Ok(());
    }
    out.resize(BLOCK_HEADER_LEN + payload_len, 0);
    let got = decompress(&block[BLOCK_HEADER_LEN..], &mut out[BLOCK_HEADER_LEN..])?;
    if got != payload_len {
        out.truncate(BLOCK_HEADER_LEN + got);
        return Err(FormatError::ExpandedLength {
            got,
            want: payload_len,
        });
    }
    Ok(())
}

/// Expands `frame` into `dst`; zstd fails rather than write past its end.
#[cfg(feature = "zstd")]
fn decompress(frame: &[u8], dst: &mut [u8]) -> Result<usize> {
    zstd::zstd_safe::decompress(dst, frame)
        .map_err(|code| FormatError::BadFrame(zstd::zstd_safe::get_error_name(code)))
}

#[cfg(not(feature = "zstd"))]
fn decompress(_frame: &[u8], _dst: &mut [u8]) -> Result<usize> {
    Err(FormatError::NoZstd)
}

#[cfg(all(test, not(feature = "zstd")))]
mod tests_without_zstd {
    use super::*;

    #[test]
    fn compressed_blocks_are_refused_and_stored_ones_still_read() {
        let mut h = BlockHeader {
            volume: [0; 16],
            lbn: 0,
            job_tag: 0,
            stream: 1,
            payload_len: 10,
            stream_offset: 0,
            first_record: crate::NO_RECORD,
            compressed: true,
            encrypted: false,
        };
        let block = vec![0u8; BLOCK_HEADER_LEN + 20];
        let mut out = Vec::new();
        assert_eq!(expand_block(&h, &block, &mut out), Err(FormatError::NoZstd));
        h.compressed = false;
        expand_block(&h, &block, &mut out).unwrap();
        assert_eq!(out.len(), BLOCK_HEADER_LEN + 10);
    }
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use super::*;
    use crate::{Event, Kind, PackedBlock, RecordDecoder, StreamPacker};
    use proptest::prelude::*;

    const BLOCK: usize = 64 * 1024;

    /// Compresses a packed block's payload as a writer does and seals it.
    fn compress(b: &mut PackedBlock) {
        let p = b.header.payload_len as usize;
        let frame = zstd::bulk::compress(&b.buf[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + p], 1)
            .expect("zstd compresses");
        b.buf.truncate(BLOCK_HEADER_LEN);
        b.buf.extend_from_slice(&frame);
        b.changed();
        b.header.compressed = true;
        b.seal([7; 16], 9);
    }

    /// A sealed compressed block whose header says `payload_len` and whose frame holds
    /// `content`.
    fn forged(content: &[u8], payload_len: u32) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK_HEADER_LEN];
        b.extend_from_slice(&zstd::bulk::compress(content, 1).unwrap());
        let h = BlockHeader {
            volume: [7; 16],
            lbn: 9,
            job_tag: 1,
            stream: 1,
            payload_len,
            stream_offset: 0,
            first_record: crate::NO_RECORD,
            compressed: true,
            encrypted: false,
        };
        h.seal(&mut b);
        b
    }

    fn records(payload: &[u8]) -> Vec<(Kind, Vec<u8>)> {
        let mut out = Vec::new();
        RecordDecoder::new()
            .feed::<FormatError>(payload, &mut |ev| {
                if let Event::Record { kind, body } = ev {
                    out.push((kind, body.to_vec()));
                }
                Ok(())
            })
            .unwrap();
        out
    }

    proptest! {
        #[test]
        fn compressed_blocks_expand_to_what_was_packed(
            bodies in proptest::collection::vec(
                (0u8..4, 1usize..3000).prop_map(|(b, n)| vec![b; n]),
                1..12,
            )
        ) {
            let mut p = StreamPacker::new(3, 1, BLOCK);
            for body in &bodies {
                p.record(Kind::StreamEnd, body);
            }
            p.finish_block();
            let mut got = Vec::new();
            for mut b in p.ready.drain(..) {
                let plain = b.buf[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + b.header.payload_len as usize].to_vec();
                compress(&mut b);
                prop_assert!(b.buf.len() < BLOCK);
                let h = BlockHeader::open(&b.buf).unwrap();
                prop_assert!(h.compressed);
                let mut out = Vec::new();
                expand_block(&h, &b.buf, &mut out).unwrap();
                prop_assert_eq!(h.payload(&out), &plain[..]);
                prop_assert_eq!(&out[..BLOCK_HEADER_LEN], &b.buf[..BLOCK_HEADER_LEN]);
                got.extend_from_slice(h.payload(&out));
            }
            let want: Vec<(Kind, Vec<u8>)> =
                bodies.into_iter().map(|b| (Kind::StreamEnd, b)).collect();
            prop_assert_eq!(records(&got), want);
        }

        #[test]
        fn hostile_frames_fail_and_never_panic(
            frame in proptest::collection::vec(any::<u8>(), 0..2000),
            payload_len in 0u32..70_000,
        ) {
            let mut b = vec![0u8; BLOCK_HEADER_LEN];
            b.extend_from_slice(&frame);
            let h = BlockHeader {
                volume: [0; 16],
                lbn: 0,
                job_tag: 0,
                stream: 1,
                payload_len,
                stream_offset: 0,
                first_record: crate::NO_RECORD,
                compressed: true,
            encrypted: false,
            };
            let mut out = Vec::new();
            if expand_block(&h, &b, &mut out).is_ok() {
                prop_assert_eq!(out.len(), BLOCK_HEADER_LEN + payload_len as usize);
            }
            prop_assert!(out.len() <= BLOCK_HEADER_LEN + payload_len as usize);
        }
    }

    #[test]
    fn a_stored_block_is_copied_without_its_padding() {
        let mut p = StreamPacker::new(3, 1, BLOCK);
        p.record(Kind::StreamEnd, &[5; 100]);
        p.finish_block();
        let mut b = p.ready.remove(0);
        b.seal([7; 16], 9);
        let h = BlockHeader::open(&b.buf).unwrap();
        let mut out = vec![1, 2, 3];
        expand_block(&h, &b.buf, &mut out).unwrap();
        assert_eq!(out, &b.buf[..BLOCK_HEADER_LEN + h.payload_len as usize]);
    }

    #[test]
    fn damaged_frames_are_format_errors() {
        let data = vec![3u8; 10_000];
        let good = forged(&data, 10_000);
        let h = BlockHeader::open(&good).unwrap();
        let mut out = Vec::new();
        expand_block(&h, &good, &mut out).unwrap();
        assert_eq!(h.payload(&out), &data[..]);
        // Not a frame at all.
        let mut bad = good[..BLOCK_HEADER_LEN].to_vec();
        bad.extend_from_slice(b"these bytes are not a zstd frame");
        let e = expand_block(&h, &bad, &mut out).unwrap_err();
        assert!(matches!(e, FormatError::BadFrame(_)), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("compressed block payload does not expand ("),
            "{e}"
        );
        // Cut short.
        let e = expand_block(&h, &good[..good.len() - 3], &mut out).unwrap_err();
        assert!(matches!(e, FormatError::BadFrame(_)), "{e:?}");
        // No frame: nothing expands.
        let e = expand_block(&h, &good[..BLOCK_HEADER_LEN], &mut out).unwrap_err();
        assert!(
            matches!(
                e,
                FormatError::ExpandedLength {
                    got: 0,
                    want: 10_000
                }
            ),
            "{e:?}"
        );
        assert!(matches!(
            expand_block(&h, &good[..10], &mut out),
            Err(FormatError::Truncated("block"))
        ));
    }

    #[test]
    fn a_frame_that_expands_to_less_than_the_header_says_is_refused() {
        let block = forged(&[3u8; 10_000], 10_001);
        let h = BlockHeader::open(&block).unwrap();
        let mut out = Vec::new();
        let e = expand_block(&h, &block, &mut out).unwrap_err();
        assert_eq!(
            e,
            FormatError::ExpandedLength {
                got: 10_000,
                want: 10_001
            }
        );
        assert_eq!(
            e.to_string(),
            "compressed block payload expands to 10000 bytes, not 10001"
        );
    }

    #[test]
    fn a_frame_that_expands_past_the_header_allocates_no_more_than_it_says() {
        // A few hundred bytes of frame that would expand to more than any block.
        let bomb = vec![0u8; MAX_BLOCK_SIZE * 2];
        let block = forged(&bomb, 4096);
        assert!(block.len() < 4096);
        let h = BlockHeader::open(&block).unwrap();
        let mut out = Vec::new();
        let e = expand_block(&h, &block, &mut out).unwrap_err();
        assert!(matches!(e, FormatError::BadFrame(_)), "{e:?}");
        assert!(
            out.capacity() <= 2 * (BLOCK_HEADER_LEN + 4096),
            "{}",
            out.capacity()
        );
    }

    #[test]
    fn a_payload_length_no_block_can_have_is_refused_before_anything_is_allocated() {
        let block = forged(&[1u8; 100], 100);
        let mut h = BlockHeader::open(&block).unwrap();
        // `open` refuses such a header; one built by hand is refused here too.
        h.payload_len = u32::MAX;
        let mut out = Vec::new();
        assert_eq!(
            expand_block(&h, &block, &mut out),
            Err(FormatError::CompressedPayloadTooLong(u32::MAX))
        );
        assert_eq!(out.capacity(), 0);
    }
}
