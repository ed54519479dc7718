//! The limits of a request's head, checked before its body is read: the S3
//! front end refuses a request over one at once, with S3's error code, so that
//! nothing is allocated or written for it.
//!
//! The limits are AWS's where AWS has one: an object or a part of at most
//! 5 GiB in one request, user metadata of at most 2 KiB. A request's headers
//! may be at most 16 KiB (AWS allows 8 KiB in a PUT, so clients stay well
//! under it). A body that is read whole, the XML of CompleteMultipartUpload,
//! DeleteObjects, RestoreObject or CreateBucket, may be at most 8 MiB: the
//! largest such documents S3 allows (1,000 keys of 1,024 bytes to delete, even
//! with every character escaped; 10,000 parts with their checksums) fit in it.

use super::Refused;

/// The largest object or part one request may send.
pub const MAX_OBJECT_BYTES: u64 = 5 << 30;

/// The largest user metadata: the bytes of each `x-amz-meta-` name (without
/// the prefix) and its value.
pub const MAX_METADATA_BYTES: usize = 2 << 10;

/// The largest head: every header's name and value, with a colon, a space and
/// a line end each.
pub const MAX_HEADER_BYTES: usize = 16 << 10;

/// The largest body that is read whole (an XML document).
pub const MAX_XML_BYTES: u64 = 8 << 20;

/// What the limits look at in a request's head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Head {
    /// Whether the body is an object's data, streamed to the S3 stage
    /// (PutObject, UploadPart); otherwise it is read whole.
    pub upload: bool,
    /// The bytes of its headers.
    pub header_bytes: usize,
    /// The bytes of its user metadata.
    pub metadata_bytes: usize,
    /// Its body's length, where the head gives it: the decoded length of an
    /// `aws-chunked` body, else `Content-Length`.
    pub length: Option<u64>,
}

/// Checks `head` against the limits.
pub fn check(head: &Head) -> Result<(), Refused> {
    if head.header_bytes > MAX_HEADER_BYTES {
        return Err(Refused::HeadersTooLarge {
            bytes: head.header_bytes,
        });
    }
    if head.metadata_bytes > MAX_METADATA_BYTES {
        return Err(Refused::MetadataTooLarge {
            bytes: head.metadata_bytes,
        });
    }
    match head.length {
        Some(size) if head.upload && size > MAX_OBJECT_BYTES => {
            Err(Refused::EntityTooLarge { size })
        }
        Some(size) if !head.upload && size > MAX_XML_BYTES => {
            Err(Refused::MessageTooLarge { size })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(head: Head) -> Option<&'static str> {
        check(&head).err().map(|r| r.code())
    }

    #[test]
    fn each_limit_refuses_one_byte_over_it_with_s3s_code() {
        let upload = |length| Head {
            upload: true,
            length: Some(length),
            ..Head::default()
        };
        assert_eq!(code(upload(MAX_OBJECT_BYTES)), None);
        assert_eq!(code(upload(MAX_OBJECT_BYTES + 1)), Some("EntityTooLarge"));
        let xml = |length| Head {
            length: Some(length),
            ..Head::default()
        };
        assert_eq!(code(xml(MAX_XML_BYTES)), None);
        assert_eq!(
            code(xml(MAX_XML_BYTES + 1)),
            Some("MaxMessageLengthExceeded")
        );
        // An upload's body may be far larger than an XML document's.
        assert_eq!(code(upload(MAX_XML_BYTES + 1)), None);
        let meta = |metadata_bytes| Head {
            metadata_bytes,
            ..Head::default()
        };
        assert_eq!(code(meta(MAX_METADATA_BYTES)), None);
        assert_eq!(code(meta(MAX_METADATA_BYTES + 1)), Some("MetadataTooLarge"));
        let headers = |header_bytes| Head {
            header_bytes,
            ..Head::default()
        };
        assert_eq!(code(headers(MAX_HEADER_BYTES)), None);
        assert_eq!(
            code(headers(MAX_HEADER_BYTES + 1)),
            Some("RequestHeaderSectionTooLarge")
        );
        // No length (a chunked body): the limit is kept as the body is read.
        assert_eq!(code(Head::default()), None);
    }

    #[test]
    fn the_message_names_the_size_and_the_limit() {
        let e = check(&Head {
            length: Some(9 << 20),
            ..Head::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the request's body is 9437184 bytes: at most 8388608 are read"
        );
    }
}
