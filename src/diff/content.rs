//! The content part of `diff -p`: a unified text diff of one changed file, capped. A file is
//! text when its first 8 KiB hold no NUL byte and all of it is UTF-8; anything else, and any
//! file larger than the cap on either side, is named instead of printed.

use similar::TextDiff;

/// Files larger than this (on either side) are named, not printed.
pub const CONTENT_CAP: u64 = 256 * 1024;

/// What `-p` shows for one file.
#[derive(Debug, PartialEq, Eq)]
pub enum Shown {
    /// A unified diff (with `--- a/` and `+++ b/` headers).
    Text(String),
    /// Binary on at least one side.
    Binary,
    /// Over [`CONTENT_CAP`] on at least one side, or its bytes are not held by that side.
    TooLarge,
}

/// Whether `bytes` are shown as text.
pub fn is_text(bytes: &[u8]) -> bool {
    !bytes[..bytes.len().min(8192)].contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// The unified diff of `old` (absent for an added file) and `new` (absent for a deleted one).
pub fn unified(path: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> Shown {
    let (o, n) = (old.unwrap_or_default(), new.unwrap_or_default());
    if !is_text(o) || !is_text(n) {
        return Shown::Binary;
    }
    let (o, n) = (
        std::str::from_utf8(o).unwrap_or_default(),
        std::str::from_utf8(n).unwrap_or_default(),
    );
    let a = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    let b = if new.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".to_string()
    };
    let diff = TextDiff::from_lines(o, n);
    let mut out = diff.unified_diff();
    out.context_radius(3).header(&a, &b);
    Shown::Text(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_binary_and_headers() {
        let Shown::Text(t) = unified("n.md", Some(b"a\nb\n"), Some(b"a\nc\n")) else {
            panic!("text")
        };
        assert!(t.starts_with("--- a/n.md\n+++ b/n.md\n"), "{t}");
        assert!(t.contains("-b\n+c\n"), "{t}");
        let Shown::Text(t) = unified("new.md", None, Some(b"x\n")) else {
            panic!("text")
        };
        assert!(t.starts_with("--- /dev/null\n+++ b/new.md\n"), "{t}");
        assert_eq!(unified("b", Some(b"\0\x01"), Some(b"x")), Shown::Binary);
        assert_eq!(
            unified("b", Some(b"ok"), Some(&[0xff, 0xfe])),
            Shown::Binary
        );
    }
}
