//! The properties every fuzzer checks, shared by the cargo-fuzz targets (`fuzz_targets/`)
//! and the stable seeded-mutation harness (`store/tests/fuzz_decoders.rs`). Each takes
//! arbitrary bytes, panics only when a property breaks (a decoder panicking counts), and
//! returns whether the input was accepted (so a harness can report how deep it got).

use zeroclaw_bundle_store::{
    escape_name, unescape_name, EntryKind, Snapshot, Tree, DIR_MODE, MAX_SIZE, MODE_BITS,
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
