//! The properties every fuzzer checks, shared by the cargo-fuzz targets (`fuzz_targets/`)
//! and the stable seeded-mutation harness (`store/tests/fuzz_decoders.rs`). Each takes
//! arbitrary bytes, panics only when a property breaks (a decoder panicking counts), and
//! returns whether the input was accepted (so a harness can report how deep it got).

use std::path::Path;

use zeroclaw_bundle_store::{
    decode_pack_object, escape_name, read_pack_layout, unescape_name, EntryKind, Snapshot, Tree,
    DIR_MODE, MAX_SIZE, MODE_BITS,
};

/// Tree decoder: never panics; what decodes is canonical (re-encodes to the same bytes, so
/// one tree has one id), its sizes are within the documented bound, and every mode is
/// permission bits only (no setuid, setgid, sticky), 0o755 on a directory, and agrees with
/// its file kind.
pub fn tree_decode(data: &[u8]) -> bool {
    let decoded = Tree::decode(data);
    let accepted = decoded.is_ok();
    if let Ok(tree) = decoded {
        assert_eq!(tree.encode(), data, "a decoded tree must be canonical");
        assert!(tree.total_size() <= MAX_SIZE);
        for e in tree.entries() {
            // Display names never carry a control character to a terminal.
            assert!(!e.display_name().chars().any(char::is_control));
            assert_eq!(e.mode & !MODE_BITS, 0, "mode {:o}", e.mode);
            if e.kind == EntryKind::Dir {
                assert_eq!(e.mode, DIR_MODE);
            } else {
                assert_eq!(EntryKind::of_file_mode(e.mode), e.kind, "mode {:o}", e.mode);
            }
        }
    }
    accepted
}

/// Record decoder: never panics; what decodes validates and round-trips.
pub fn record_decode(data: &[u8]) -> bool {
    let decoded = Snapshot::decode(data);
    let accepted = decoded.is_ok();
    if let Ok(snap) = decoded {
        snap.validate().expect("decode validates");
        assert_eq!(Snapshot::decode(&snap.encode()).as_ref(), Ok(&snap));
    }
    accepted
}

/// Name escaper and unescaper: any text unescapes without panicking; any bytes escape to
/// text with no control character that unescapes back to exactly those bytes.
pub fn unescape(data: &[u8]) -> bool {
    let escaped = escape_name(data);
    assert!(!escaped.chars().any(char::is_control), "{escaped:?}");
    assert_eq!(unescape_name(&escaped), data, "{escaped:?}");
    if let Ok(text) = std::str::from_utf8(data) {
        let raw = unescape_name(text);
        // Unescaping then escaping is stable from there on.
        assert_eq!(unescape_name(&escape_name(&raw)), raw);
    }
    true
}

/// Counts what a decoder hands out.
struct Counting(u64);

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Pack reader: the layout check never panics and never asks for bytes outside the file
/// (a slice out of range panics here); every entry it accepts lies inside the object area;
/// decoding an entry never hands out more than one byte past its declared length (the
/// decompression cap), and what decodes is exactly that length.
pub fn pack_read(data: &[u8]) -> bool {
    let path = Path::new("fuzz.zcpack");
    let size = data.len() as u64;
    let layout = read_pack_layout(path, size, &mut |offset, len| {
        let start = usize::try_from(offset).expect("an offset inside the file");
        Ok(data[start..start + len].to_vec())
    });
    let Ok(layout) = layout else {
        return false;
    };
    let mut all_decode = true;
    for e in &layout.entries {
        let end = e.offset.checked_add(e.stored_len).expect("no overflow");
        assert!(end <= layout.index_offset && layout.index_offset <= size);
        let stored = &data[e.offset as usize..end as usize];
        let mut out = Counting(0);
        let decoded = decode_pack_object(path, e, &mut &stored[..], &mut out);
        assert!(
            out.0 <= e.len.saturating_add(1),
            "decoded {} bytes of an object declared {}",
            out.0,
            e.len
        );
        match decoded {
            Ok(()) => assert_eq!(out.0, e.len),
            Err(err) => {
                assert!(err.to_string().contains("fuzz.zcpack"), "{err}");
                all_decode = false;
            }
        }
    }
    all_decode
}
