//! The reference table: `<store>/catalog/refs`, a copy of the catalog's names and of each
//! agent's newest snapshot in one small file, so that a reader that only needs to know which
//! snapshot `NAME` or `agent/ALIAS` names (a mount's start, `cat`, `ls`) answers without
//! opening sled, whose open is most of a cold mount's start (about 8 ms of it warm, tens of
//! milliseconds cold). ostree keeps its refs as small files for the same reason.
//!
//! **Never ahead of the catalog, never behind it.** The table is the catalog's to keep, in
//! [`CatalogSession`](super::CatalogSession), the only code that changes names:
//! - before a session first changes the snapshot list or the names, it removes the table and
//!   fsyncs the catalog directory ([`invalidate`]), so no crash can leave an old table beside a
//!   newer catalog;
//! - when the session closes, after sled's flush, it writes the table afresh from sled
//!   ([`write`]): to a temporary file, renamed into place. A session that finds the table
//!   missing (a crash, an older build's store) writes it too.
//!
//! sled locks the catalog against every other process while a session is open, so no reader
//! session can write a table between a writer's removal and its close. A reader that read the
//! table just before a writer removed it answers as if it had asked before that writer ran.
//!
//! **Checked, and only a shortcut.** The file's first line carries a blake3 digest of the rest;
//! a torn, truncated, edited or foreign file is ignored. A name the table does not hold, a
//! table that is absent or unreadable, goes to the catalog, which answers (and words the
//! error); the caller also requires the answer to be a stored snapshot record with a tree index
//! (`Index::is_indexed_snapshot`), as an id answered without the catalog must be.
//!
//! A store version 4 build knows nothing of the table and would change names without removing
//! it: the store's marker is version 5 from this build on, which such a build refuses.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::id::ObjectId;

/// The table's file name, inside the catalog directory (set aside with it when the catalog is
/// found broken).
pub(crate) const REFS_FILE: &str = "refs";
/// The first line's head; the digest of the rest follows it.
const HEAD: &str = "zeroclaw-bundle refs 1 ";
/// The largest table read (a name is at most a few hundred bytes; a store with 100,000 names
/// still fits).
const MOST_BYTES: u64 = 64 << 20;

/// What the table holds: every name, and the newest snapshot of every agent (hex ids).
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct RefTable {
    pub names: BTreeMap<String, String>,
    pub agents: BTreeMap<String, String>,
}

impl RefTable {
    /// The snapshot `reference` names by the table: a name first (as the catalog resolves),
    /// then `agent/ALIAS`. None when the table does not hold it.
    pub(crate) fn resolve(&self, reference: &str) -> Option<ObjectId> {
        let hex = self.names.get(reference).or_else(|| {
            reference
                .strip_prefix("agent/")
                .and_then(|alias| self.agents.get(alias))
        })?;
        ObjectId::from_full_ref(hex)
    }
}

/// The table's path in the catalog directory `catalog`.
pub(crate) fn path(catalog: &Path) -> PathBuf {
    catalog.join(REFS_FILE)
}

/// Reads the table of the catalog directory `catalog`; None when it is absent, unreadable,
/// or fails its digest.
pub(crate) fn read(catalog: &Path) -> Option<RefTable> {
    let bytes = crate::sys::read_regular(&path(catalog), MOST_BYTES).ok()??;
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let (head, body) = (&bytes[..newline], &bytes[newline + 1..]);
    let digest = std::str::from_utf8(head).ok()?.strip_prefix(HEAD)?;
    if digest != blake3::hash(body).to_hex().as_str() {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// Removes the table of `catalog` and makes the removal durable. Returns whether there was
/// one. Called before the catalog's snapshot list or names change.
pub(crate) fn invalidate(catalog: &Path) -> io::Result<bool> {
    match fs::remove_file(path(catalog)) {
        Ok(()) => {
            File::open(catalog)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `table` as the table of `catalog`: a temporary file in the same directory, written
/// whole, renamed over the old one. Not fsynced: a table torn by a crash fails its digest and
/// is read as absent.
pub(crate) fn write(catalog: &Path, table: &RefTable) -> io::Result<()> {
    let body = serde_json::to_vec(table).map_err(io::Error::other)?;
    let tmp = catalog.join(format!("{REFS_FILE}.tmp-{}", crate::sys::random_token()));
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(format!("{HEAD}{}\n", blake3::hash(&body).to_hex()).as_bytes())?;
        file.write_all(&body)?;
        fs::rename(&tmp, path(catalog))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> RefTable {
        let id = ObjectId::from_bytes([7; 32]).to_hex();
        RefTable {
            names: [("s1".to_string(), id.clone())].into(),
            agents: [("coder".to_string(), id)].into(),
        }
    }

    #[test]
    fn a_written_table_reads_back_and_resolves_names_before_agents() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &table()).unwrap();
        let read = read(dir.path()).unwrap();
        assert_eq!(read, table());
        let id = ObjectId::from_bytes([7; 32]);
        assert_eq!(read.resolve("s1"), Some(id));
        assert_eq!(read.resolve("agent/coder"), Some(id));
        assert_eq!(read.resolve("agent/other"), None);
        assert_eq!(read.resolve("s2"), None);
        // No temporary file is left.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_torn_edited_or_foreign_table_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &table()).unwrap();
        let good = fs::read(path(dir.path())).unwrap();
        for bad in [
            good[..good.len() - 3].to_vec(),
            String::from_utf8(good.clone())
                .unwrap()
                .replace("s1", "s9")
                .into_bytes(),
            b"{\"names\":{}}".to_vec(),
            Vec::new(),
        ] {
            fs::write(path(dir.path()), &bad).unwrap();
            assert_eq!(read(dir.path()), None, "{}", String::from_utf8_lossy(&bad));
        }
    }

    #[test]
    fn invalidate_removes_the_table_and_says_whether_there_was_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!invalidate(dir.path()).unwrap());
        write(dir.path(), &table()).unwrap();
        assert!(invalidate(dir.path()).unwrap());
        assert_eq!(read(dir.path()), None);
    }
}
