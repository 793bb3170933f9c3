//! The compressed form of a small object in the store: when an object is stored as a zstd
//! frame, and the bounded codec of such a frame. `objects` owns the files; this module owns
//! only the bytes.
//!
//! The rule: an object of more than one 4 KiB block ([`MIN_LEN`]) up to [`MAX_LEN`] bytes (the
//! inputs a capture holds in memory to hash) is stored as one zstd frame at level 3 (the packs'
//! level) when that saves at least an eighth of its bytes; any other object is stored raw. So
//! large objects stay raw and a mount reads them at any offset with one `pread`, while a
//! compressed one is decoded whole into at most
//! [`MAX_LEN`] bytes. The id stays the blake3 of the uncompressed bytes (as git names its
//! zlib-deflated objects), so a compressed object is checked by decoding it
//! (`zeroclaw-bundle cat <snapshot>:<path> | b3sum`, or `verify`).
//!
//! A frame the store reads is bounded before any allocation: its stored size is at most
//! `compress_bound(MAX_LEN)`, its header must declare its content size (at most [`MAX_LEN`]),
//! it must be exactly one frame, and it must decode to exactly the declared size. Anything
//! else is damage, reported as such (never a panic, never an unbounded buffer).

use std::cell::RefCell;

use crate::pack_format::ZSTD_LEVEL;

/// Largest object stored compressed (the capture's in-memory hashing bound, 256 KiB).
pub(crate) const MAX_LEN: usize = 256 * 1024;
/// Smallest object stored compressed: one byte more than a 4 KiB filesystem block. An object
/// of one block or less occupies one block whatever its form, so compressing it saves no disk
/// and costs CPU: on the bench corpus, its 4,720 files of up to 4 KiB (10.6 MiB) took 18.4 MiB
/// of blocks raw and 18.4 MiB compressed.
pub(crate) const MIN_LEN: usize = 4096 + 1;
/// Largest frame a reader accepts (zstd's worst case for [`MAX_LEN`] bytes).
pub(crate) fn max_frame_len() -> usize {
    zstd::zstd_safe::compress_bound(MAX_LEN)
}

thread_local! {
    /// One compression context per thread, reused for every object: creating one per object
    /// costs more than compressing a small file (see `pack_writer`).
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    /// One decompression context per thread.
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Whether an object of `len` bytes may be stored compressed at all.
pub(crate) fn candidate(len: usize) -> bool {
    (MIN_LEN..=MAX_LEN).contains(&len)
}

/// Whether a frame of `frame_len` bytes for `len` bytes of content saves enough to be stored
/// instead of the raw bytes (at least an eighth).
pub(crate) fn worth(len: usize, frame_len: usize) -> bool {
    frame_len <= len - len / 8
}

/// The frame to store for `bytes`, or `None` when they are to be stored raw (out of the
/// size range, or not compressible enough). Deterministic for one zstd version: the same
/// bytes give the same frame, which is what `pack` writes for them too.
pub(crate) fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    if !candidate(bytes.len()) {
        return None;
    }
    let frame = COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let z = match slot.as_mut() {
            Some(z) => z,
            None => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?),
        };
        z.compress(bytes).ok()
    })?;
    worth(bytes.len(), frame.len()).then_some(frame)
}

/// The content size a frame's header declares; `None` when there is no such declaration or
/// it exceeds [`MAX_LEN`].
pub(crate) fn declared_len(head: &[u8]) -> Option<usize> {
    match zstd::zstd_safe::get_frame_content_size(head) {
        Ok(Some(n)) if n <= MAX_LEN as u64 => usize::try_from(n).ok(),
        _ => None,
    }
}

/// Whether `frame` is a frame the store may keep as object of `len` bytes: exactly one frame
/// whose header declares `len`, within the bounds, and worth keeping (see [`worth`]). The
/// caller has checked that it decodes to the object's bytes (an import landing a pack's frame).
pub(crate) fn storable(frame: &[u8], len: usize) -> bool {
    candidate(len)
        && worth(len, frame.len())
        && declared_len(frame) == Some(len)
        && zstd::zstd_safe::find_frame_compressed_size(frame) == Ok(frame.len())
}

/// Decodes a stored frame into its content, within the bounds the module doc lists; the
/// error says what is wrong with it.
pub(crate) fn decompress(frame: &[u8]) -> Result<Vec<u8>, String> {
    if frame.len() > max_frame_len() {
        return Err(format!(
            "its frame is {} bytes, more than any object of at most {MAX_LEN} bytes needs",
            frame.len()
        ));
    }
    let len = declared_len(frame).ok_or_else(|| {
        format!("its frame header does not declare a content size of at most {MAX_LEN} bytes")
    })?;
    match zstd::zstd_safe::find_frame_compressed_size(frame) {
        Ok(n) if n == frame.len() => {}
        Ok(n) => {
            return Err(format!(
                "{} bytes follow its frame",
                frame.len().saturating_sub(n)
            ))
        }
        Err(code) => return Err(zstd::zstd_safe::get_error_name(code).to_string()),
    }
    let mut out = vec![0u8; len];
    let n = DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let z = match slot.as_mut() {
            Some(z) => z,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?),
        };
        z.decompress_to_buffer(frame, &mut out[..])
            .map_err(|e| e.to_string())
    })?;
    if n != len {
        return Err(format!(
            "it decodes to {n} bytes where its header declares {len}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn text(len: usize) -> Vec<u8> {
        b"the quick brown fox jumps over the lazy dog\n"
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect()
    }

    /// Incompressible test bytes (xorshift), the same for the same `seed`.
    pub(crate) fn random_seeded(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    fn random(len: usize) -> Vec<u8> {
        random_seeded(len, 0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn only_compressible_objects_within_the_range_are_compressed() {
        assert!(compress(&text(MIN_LEN - 1)).is_none(), "too small");
        assert!(compress(&text(MAX_LEN + 1)).is_none(), "too large");
        assert!(compress(&random(4096)).is_none(), "incompressible");
        assert!(compress(&vec![b'a'; MIN_LEN - 1]).is_none(), "one block");
        for bytes in [vec![b'a'; MIN_LEN], text(40_000), text(MAX_LEN)] {
            let len = bytes.len();
            let frame = compress(&bytes).expect("text compresses");
            assert!(worth(len, frame.len()));
            assert!(storable(&frame, len));
            assert_eq!(decompress(&frame).unwrap(), bytes);
            assert_eq!(declared_len(&frame), Some(len));
        }
    }

    #[test]
    fn a_damaged_or_hostile_frame_is_refused_not_trusted() {
        let bytes = text(10_000);
        let frame = compress(&bytes).unwrap();
        // Truncated.
        assert!(decompress(&frame[..frame.len() - 1]).is_err());
        // Trailing bytes (a second frame).
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        assert!(decompress(&two).is_err());
        assert!(!storable(&two, bytes.len()));
        // A frame declaring more than the bound is refused before decoding.
        let big = zstd::bulk::compress(&text(MAX_LEN + 1), ZSTD_LEVEL).unwrap();
        let err = decompress(&big).unwrap_err();
        assert!(err.contains("content size"), "{err}");
        // A frame without a declared size.
        let mut e = zstd::stream::Encoder::new(Vec::new(), ZSTD_LEVEL).unwrap();
        e.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut e, &bytes).unwrap();
        let no_size = e.finish().unwrap();
        assert!(decompress(&no_size).is_err());
        assert!(!storable(&no_size, bytes.len()));
        // Garbage.
        assert!(decompress(&random(500)).is_err());
        // A frame that saves too little is not kept (nor made by `compress`).
        let mostly_random = [random(1000), text(100)].concat();
        let poor = zstd::bulk::compress(&mostly_random, ZSTD_LEVEL).unwrap();
        assert!(poor.len() < mostly_random.len());
        assert!(!storable(&poor, mostly_random.len()));
        assert!(compress(&mostly_random).is_none());
    }
}
