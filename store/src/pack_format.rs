//! The pack file format: its constants, the index entry ([`PackEntry`]) and the byte codec of
//! the index and the trailer. The reader (`pack`) and the writer's blob pipeline
//! (`pack_writer`) both build on this module, which depends on no other pack module.
//!
//! Format version 1, all integers little-endian:
//!
//! ```text
//! header   "ZCBPACK\0" | version u32 = 1 | flags u32 (bit 0: trees only, a digest pack)
//!          | root snapshot id [32] | base snapshot id [32] (zeros: not incremental)
//! objects  the snapshot record, then every tree, then (unless trees only) every blob; each
//!          object once; each stored raw or as one zstd frame (`pack_writer` says
//!          when a blob is compressed)
//! sigs     optional: "ZCBSIGS\0" | count u32 | per signature: length u32 | bytes
//! index    count u64, then per object sorted by id: id [32] | offset u64 | stored length u64
//!          | length u64 | flags u8 (bit 0: zstd)
//! trailer  index offset u64 | blake3 of every byte before the trailer [32] | "ZCBPEND\0"
//! ```
//!
//! An object's id is the blake3 of its uncompressed bytes, as in the store. A pack written
//! with a base (`--since`) leaves out every object the base snapshot reaches.
//!
//! **A tree-rooted pack** is the one exception to "the root is a snapshot record": a store's
//! tree index (see the store's `index` module) is a trees-only pack whose root field names a
//! tree and which holds that tree and every tree it reaches, and no record. It is the same
//! format (a reader checks only that the root is one of its objects); it never leaves its
//! store, and a reader that wants a snapshot from it (`mount`, `unpack` of such a file) finds
//! its root is no record and refuses it.
//!
//! **The signature section** (the root snapshot's signatures, opaque bytes: see the store's
//! `signatures` module) fills the gap between the end of the last object and the index. It
//! needs no new version or flag: a reader that predates it checks only that every object lies
//! inside the object area and never overlaps another, so it reads, verifies (the trailer hash
//! covers the section) and unpacks such a pack as it always did, ignoring the section; and a
//! pack without signatures is byte for byte what such a writer wrote. A reader that knows the
//! section finds it as that gap and refuses a gap that is not exactly one well-formed section.

use crate::id::ObjectId;

pub(crate) const MAGIC: &[u8; 8] = b"ZCBPACK\0";
pub(crate) const END: &[u8; 8] = b"ZCBPEND\0";
/// The pack format this crate writes and reads.
pub const PACK_VERSION: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 8 + 4 + 4 + 32 + 32;
pub(crate) const ENTRY_LEN: u64 = 32 + 8 + 8 + 8 + 1;
pub(crate) const TRAILER_LEN: u64 = 8 + 32 + 8;
pub(crate) const FLAG_TREES_ONLY: u32 = 1;
/// The start of the signature section.
pub(crate) const SIGS_MAGIC: &[u8; 8] = b"ZCBSIGS\0";
pub(crate) const FLAG_ZSTD: u8 = 1;
/// Largest zstd window a streaming read accepts (2^23 = 8 MiB): the writer's level 3 uses at
/// most 2^21, and a hostile frame that asks for zstd's default limit (128 MiB) would make
/// every streaming reader allocate that much.
pub(crate) const STREAM_WINDOW_LOG: u32 = 23;
/// zstd level for blobs: level 3 is zstd's default and keeps `pack` near `tar` speed.
pub(crate) const ZSTD_LEVEL: i32 = 3;

/// One index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackEntry {
    /// Object id (blake3 of the uncompressed bytes).
    pub id: ObjectId,
    /// Where its stored bytes start.
    pub offset: u64,
    /// Stored (possibly compressed) length.
    pub stored_len: u64,
    /// Uncompressed length.
    pub len: u64,
    /// Stored with zstd.
    pub zstd: bool,
}

/// The index as written: the count, then each entry.
pub(crate) fn encode_index(index: &[PackEntry]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(8 + index.len() * ENTRY_LEN as usize);
    buf.extend_from_slice(&(index.len() as u64).to_le_bytes());
    for e in index {
        buf.extend_from_slice(e.id.as_bytes());
        buf.extend_from_slice(&e.offset.to_le_bytes());
        buf.extend_from_slice(&e.stored_len.to_le_bytes());
        buf.extend_from_slice(&e.len.to_le_bytes());
        buf.push(if e.zstd { FLAG_ZSTD } else { 0 });
    }
    buf
}

/// One index entry from its `ENTRY_LEN` bytes, and its raw flags byte.
pub(crate) fn decode_entry(chunk: &[u8]) -> (PackEntry, u8) {
    let u = |r: std::ops::Range<usize>| u64::from_le_bytes(chunk[r].try_into().expect("8 bytes"));
    let flags = chunk[56];
    let entry = PackEntry {
        id: ObjectId::from_bytes(chunk[..32].try_into().expect("32 bytes")),
        offset: u(32..40),
        stored_len: u(40..48),
        len: u(48..56),
        zstd: flags & FLAG_ZSTD != 0,
    };
    (entry, flags)
}

/// The trailer: where the index starts, the hash of every byte before the trailer, the end
/// magic.
pub(crate) fn encode_trailer(index_offset: u64, digest: &ObjectId) -> Vec<u8> {
    let mut trailer = Vec::with_capacity(TRAILER_LEN as usize);
    trailer.extend_from_slice(&index_offset.to_le_bytes());
    trailer.extend_from_slice(digest.as_bytes());
    trailer.extend_from_slice(END);
    trailer
}

/// The signature section carrying `signatures` (empty when there are none: no section).
pub(crate) fn encode_signatures(signatures: &[Vec<u8>]) -> Vec<u8> {
    if signatures.is_empty() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    buf.extend_from_slice(SIGS_MAGIC);
    buf.extend_from_slice(&(signatures.len() as u32).to_le_bytes());
    for s in signatures {
        buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
        buf.extend_from_slice(s);
    }
    buf
}

/// Decodes a signature section (the whole gap between the objects and the index): at most
/// [`crate::limits::MAX_SIGNATURES`] signatures of at most [`crate::limits::MAX_SIGNATURE_BYTES`] each, filling
/// the gap exactly. The error says what is wrong with it.
pub(crate) fn decode_signatures(section: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let rest = section
        .strip_prefix(SIGS_MAGIC.as_slice())
        .ok_or("holds bytes between its objects and its index that are not a signature section")?;
    let (count, mut rest) = rest
        .split_first_chunk::<4>()
        .ok_or("has a truncated signature section")?;
    let count = u32::from_le_bytes(*count) as usize;
    if count > crate::limits::MAX_SIGNATURES {
        return Err(format!(
            "claims {count} signatures; a snapshot carries at most {}",
            crate::limits::MAX_SIGNATURES
        ));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let (len, after) = rest
            .split_first_chunk::<4>()
            .ok_or("has a truncated signature section")?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > after.len() {
            return Err(format!("has a truncated signature section (signature {i})"));
        }
        let (sig, after) = after.split_at(len);
        crate::limits::check_signature_size(sig)
            .map_err(|why| format!("carries a signature that {why}"))?;
        out.push(sig.to_vec());
        rest = after;
    }
    if !rest.is_empty() {
        return Err(format!(
            "has {} bytes after its signature section",
            rest.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_section_round_trips_and_refuses_damage() {
        assert!(encode_signatures(&[]).is_empty());
        let sigs = vec![b"one".to_vec(), b"two two".to_vec()];
        let bytes = encode_signatures(&sigs);
        assert_eq!(decode_signatures(&bytes).unwrap(), sigs);
        assert!(decode_signatures(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_signatures(&longer).is_err());
        assert!(decode_signatures(b"garbage!garbage").is_err());
        let mut many = SIGS_MAGIC.to_vec();
        many.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_signatures(&many).is_err());
        assert!(decode_signatures(&encode_signatures(&[Vec::new()])).is_err());
    }
}
