//! The expansion record beside a tree index: `<store>/trees/<root>.expansion` says what root
//! tree `<root>` expands to (depth, entries and file bytes, as [`crate::limits`] counts them).
//! It is written with the index, so a mount of a store snapshot reads one small file instead
//! of walking every tree before it answers: on the 19,830-file corpus that walk read the whole
//! 1.4 MB index and took a fifth of a cold mount.
//!
//! **What it is trusted for.** The figures are a function of the root id alone (trees are
//! content-addressed), so a record never goes stale. It is the store's own note, as the
//! catalog (which names snapshots) and `trust.toml` (whose signatures count) are: whoever can
//! write the store can change what it says, as they can change those. Nothing from outside is
//! taken on its word: a pack file's and a remote snapshot's trees are always walked before
//! they are mounted, and an import walks what it receives before anything enters the store.
//! Accidental damage (a torn or flipped file, a record under another root's name) fails its
//! checksum or its root line, and the reader walks instead; so does a record of figures past
//! today's limits (the walk then refuses the tree, naming the limit).
//!
//! **Lifecycle.** Written after its index, to `tmp/` and renamed, not fsynced: a record lost
//! to a crash only costs the next mount the walk. Only from a walk that read every tree, so
//! its figures are whole, and never for a tree past the limits. `gc` removes it with its
//! index, `verify` reports one that disagrees with the trees, and `reindex` writes a missing
//! one and replaces a bad one.
//!
//! The format, text with LF line ends:
//!
//! ```text
//! zeroclaw-bundle expansion 1
//! root <64 hex digits>
//! depth <n>
//! entries <n>
//! bytes <n>
//! check <blake3 of every line above, LFs included, in hex>
//! ```

use std::fs;
use std::path::PathBuf;

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::limits::{complete_expansion, within_limits, Expansion};
use crate::source::ObjectSource;

use super::{Index, TREES_DIR};

/// The file name suffix of a record, after the root's id.
pub(crate) const SUFFIX: &str = ".expansion";
const FIRST_LINE: &str = "zeroclaw-bundle expansion 1";
/// Longer than any record (six short lines); a larger file is not one.
const MAX_LEN: u64 = 512;

/// What [`Index::read_expansion_record`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordState {
    /// No record (an index written by an older build, or none at all).
    Missing,
    /// A whole record of this root.
    Found(Expansion),
    /// Something that is not a whole record of this root; the sentence says why.
    Bad(String),
}

/// The record's bytes.
pub(crate) fn encode(root: &ObjectId, expansion: &Expansion) -> String {
    let body = format!(
        "{FIRST_LINE}\nroot {}\ndepth {}\nentries {}\nbytes {}\n",
        root.to_hex(),
        expansion.depth,
        expansion.entries,
        expansion.bytes
    );
    let check = blake3::hash(body.as_bytes()).to_hex();
    format!("{body}check {check}\n")
}

/// Decodes a record that must be of `root`; the error says what is wrong with it.
pub(crate) fn decode(bytes: &[u8], root: &ObjectId) -> Result<Expansion, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not text".to_string())?;
    let Some((body, check_line)) = text
        .strip_suffix('\n')
        .and_then(|t| t.rsplit_once('\n'))
        .map(|(body, last)| (&text[..body.len() + 1], last))
    else {
        return Err("it is not a whole record".into());
    };
    let check = check_line
        .strip_prefix("check ")
        .ok_or("its last line is not its checksum")?;
    if blake3::hash(body.as_bytes()).to_hex().as_str() != check {
        return Err("its checksum does not match (damaged)".into());
    }
    let lines: Vec<&str> = body.lines().collect();
    let [first, root_line, depth, entries, bytes] = lines[..] else {
        return Err(format!("it has {} lines, not 6", lines.len() + 1));
    };
    if first != FIRST_LINE {
        return Err("it is not an expansion record of this format".into());
    }
    let field = |line: &'_ str, name: &str| -> Result<String, String> {
        line.strip_prefix(name)
            .and_then(|l| l.strip_prefix(' '))
            .map(str::to_string)
            .ok_or_else(|| format!("it has no {name} line where one belongs"))
    };
    let named = field(root_line, "root")?;
    if named != root.to_hex().as_str() {
        return Err(format!(
            "it is the record of root {}",
            named.get(..12).unwrap_or(&named)
        ));
    }
    let number = |line: &str, name: &str| -> Result<u64, String> {
        field(line, name)?
            .parse::<u64>()
            .map_err(|_| format!("its {name} is not a number"))
    };
    let expansion = Expansion {
        depth: number(depth, "depth")?,
        entries: number(entries, "entries")?,
        bytes: number(bytes, "bytes")?,
    };
    // One spelling only (no CR, sign or leading zero): what `encode` writes.
    if encode(root, &expansion) != text {
        return Err("it is not written as this build writes a record".into());
    }
    Ok(expansion)
}

impl Index<'_> {
    /// Where the expansion record of root tree `root` lives (it may be absent).
    pub fn expansion_record_path(&self, root: &ObjectId) -> PathBuf {
        self.root()
            .join(TREES_DIR)
            .join(format!("{}{SUFFIX}", root.to_hex()))
    }

    /// The record of root tree `root`, read without following a symlink or blocking on
    /// anything but a regular file.
    pub fn read_expansion_record(&self, root: &ObjectId) -> RecordState {
        let path = self.expansion_record_path(root);
        let bytes = match crate::sys::read_regular(&path, MAX_LEN + 1) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return RecordState::Bad("it is not a regular file".into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return RecordState::Missing,
            Err(e) => return RecordState::Bad(format!("it cannot be read: {e}")),
        };
        if bytes.len() as u64 > MAX_LEN {
            return RecordState::Bad(format!("it is longer than {MAX_LEN} bytes"));
        }
        match decode(&bytes, root) {
            Ok(expansion) => RecordState::Found(expansion),
            Err(why) => RecordState::Bad(why),
        }
    }

    /// What root tree `root` expands to, when the store recorded it and the figures are
    /// within the limits: a reader may then skip its own walk (see the module doc). `None`
    /// for a missing or damaged record: the reader walks.
    pub fn recorded_expansion(&self, root: &ObjectId) -> Option<Expansion> {
        match self.read_expansion_record(root) {
            RecordState::Found(expansion) if within_limits(&expansion) => Some(expansion),
            _ => None,
        }
    }

    /// Walks every tree of root `root` through `trees` and records what it expands to (a
    /// tree past the limits, or one that cannot be read, gets no record: the error says
    /// why). Written to `tmp/` and renamed into place; a failure leaves no temp file.
    pub(crate) fn write_expansion_record(
        &self,
        root: &ObjectId,
        trees: &dyn ObjectSource,
    ) -> Result<Expansion, StoreError> {
        let expansion = complete_expansion(trees, root, &format!("tree {}", root.short(12)))?;
        let tmp = self.objects().tmp_dir().join(format!(
            "expansion-{}-{}",
            std::process::id(),
            crate::sys::random_token()
        ));
        let dest = self.expansion_record_path(root);
        let written = fs::write(&tmp, encode(root, &expansion))
            .map_err(|e| StoreError::io("write", &tmp, e))
            .and_then(|()| {
                fs::rename(&tmp, &dest).map_err(|e| StoreError::io("rename into", &dest, e))
            });
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written.map(|()| expansion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes([byte; 32])
    }

    const SAMPLE: Expansion = Expansion {
        depth: 7,
        entries: 19_859,
        bytes: 629_145_600,
    };

    #[test]
    fn a_record_decodes_to_what_was_encoded_and_only_for_its_root() {
        let text = encode(&id(1), &SAMPLE);
        assert_eq!(decode(text.as_bytes(), &id(1)), Ok(SAMPLE));
        let other = decode(text.as_bytes(), &id(2)).unwrap_err();
        assert!(other.contains("record of root 010101010101"), "{other}");
    }

    #[test]
    fn every_damaged_byte_and_every_cut_is_refused() {
        let text = encode(&id(1), &SAMPLE).into_bytes();
        for i in 0..text.len() {
            for flip in [0x01u8, 0x20, 0x80] {
                let mut bad = text.clone();
                bad[i] ^= flip;
                assert!(
                    decode(&bad, &id(1)).is_err(),
                    "byte {i} flipped by {flip:#x} was accepted"
                );
            }
            assert!(
                decode(&text[..i], &id(1)).is_err(),
                "cut at {i} was accepted"
            );
        }
        let mut longer = text.clone();
        longer.extend_from_slice(b"more\n");
        assert!(decode(&longer, &id(1)).is_err());
    }

    #[test]
    fn a_rehashed_record_with_a_changed_field_layout_is_refused() {
        // A record whose checksum was recomputed over a body that is not of this format.
        let forge = |body: &str| {
            let check = blake3::hash(body.as_bytes()).to_hex();
            format!("{body}check {check}\n")
        };
        let root = id(1).to_hex();
        for body in [
            format!("zeroclaw-bundle expansion 2\nroot {root}\ndepth 1\nentries 1\nbytes 1\n"),
            format!("zeroclaw-bundle expansion 1\nroot {root}\nentries 1\ndepth 1\nbytes 1\n"),
            format!("zeroclaw-bundle expansion 1\nroot {root}\ndepth -1\nentries 1\nbytes 1\n"),
            format!("zeroclaw-bundle expansion 1\nroot {root}\ndepth 1\nentries 1\n"),
            format!("zeroclaw-bundle expansion 1\nroot {root}\ndepth 1\nentries 1\nbytes 1\nx 1\n"),
            format!(
                "zeroclaw-bundle expansion 1\r\nroot {root}\r\ndepth 1\r\nentries 1\r\nbytes 1\r\n"
            ),
            format!("zeroclaw-bundle expansion 1\nroot {root}\ndepth 01\nentries 1\nbytes 1\n"),
            format!("zeroclaw-bundle expansion 1\nroot {root}\ndepth +1\nentries 1\nbytes 1\n"),
        ] {
            assert!(decode(forge(&body).as_bytes(), &id(1)).is_err(), "{body}");
        }
    }
}
