//! The content part of `diff -p`: a unified text diff of one changed file, capped. A file is
//! text when its first 8 KiB hold no NUL byte and all of it is UTF-8; anything else, and any
//! file larger than the cap on either side, is named instead of printed. [`patch`] reads a
//! change's two files from its two [`Side`]s and masks secret values in TOML files, so the
//! caller only prints what it gets.

use similar::TextDiff;

use crate::agent::{mask_manifest_secrets, mask_secrets};
use crate::diff::side::Side;
use crate::diff::{Change, EntryInfo, Status};

/// The side's cap on what it holds, which is what `-p` shows (the command layer reads it here).
pub use crate::diff::side::CONTENT_CAP;

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

/// What `-p` shows below one change's name-status line.
#[derive(Debug, PartialEq, Eq)]
pub enum Patch {
    /// Side `side` (`A` or `B`) holds no file contents (a digest pack or a remote snapshot).
    NotHeld {
        /// `A` or `B`.
        side: char,
    },
    /// The content diff.
    Shown(Shown),
}

/// The patch of one change between sides `a` and `b`: `None` for a change that has none (a
/// kind change, a mode change, a rename). A TOML file (a bundle's or an install's config)
/// shows no secret value: the agent section says "(set, not shown)", and the patch must not
/// print it a line later.
pub fn patch(a: &Side, b: &Side, c: &Change) -> Option<Patch> {
    if !matches!(c.status, Status::A | Status::D | Status::M) {
        return None;
    }
    let a_lacks = c.old.is_some() && !a.holds_contents();
    let b_lacks = c.new.is_some() && !b.holds_contents();
    if a_lacks || b_lacks {
        let side = if a_lacks { 'A' } else { 'B' };
        return Some(Patch::NotHeld { side });
    }
    let read = |side: &Side, e: Option<&EntryInfo>| -> Option<Option<Vec<u8>>> {
        let e = e?;
        if e.kind == "dir" {
            return None;
        }
        Some(
            side.tree_side()
                .bytes(&e.id, e.size, CONTENT_CAP)
                .ok()
                .flatten(),
        )
    };
    let old = read(a, c.old.as_ref());
    let new = read(b, c.new.as_ref());
    let too_large = matches!(old, Some(None)) || matches!(new, Some(None));
    // A manifest's `required_secrets` lists config paths, not values: shown as written.
    let manifest = std::path::Path::new(&c.path)
        .file_name()
        .is_some_and(|n| n == crate::agent::MANIFEST_FILE);
    let mask = |bytes: Option<Vec<u8>>| match bytes {
        Some(b) if c.path.ends_with(".toml") => match String::from_utf8(b) {
            Ok(text) if manifest => Some(mask_manifest_secrets(&text).into_bytes()),
            Ok(text) => Some(mask_secrets(&text, &[]).into_bytes()),
            Err(e) => Some(e.into_bytes()),
        },
        other => other,
    };
    Some(Patch::Shown(if too_large {
        Shown::TooLarge
    } else {
        unified(
            &c.path,
            mask(old.flatten()).as_deref(),
            mask(new.flatten()).as_deref(),
        )
    }))
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
