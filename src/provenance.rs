//! Import provenance: which bundle an install's agent came from, so a later `review` of an
//! update can diff it against what was imported, and an operator can see where an agent came
//! from.
//!
//! ZeroClaw's `config.toml` must never carry keys its loader would not write, so provenance
//! lives outside it, in a directory this tool owns inside the install:
//! `<install>/.zeroclaw-bundle/imports/<local-alias>.toml`, one small TOML file per imported
//! agent. `import` writes it last-but-one (after the files, before `config.toml`), atomically
//! (staged, fsynced, renamed), owner-only; `review` reads it. A missing directory or file means
//! "never imported by this tool". A file that does not parse is an error naming its path: a
//! review must not silently skip the update diff.
//!
//! The snapshot a provenance record names is the merge base of the agent's next update, so
//! the store must keep it: each write also leaves a hold in the store
//! (`<store>/holds/<key>.toml`: install, agent, snapshot), and `forget` refuses a snapshot
//! whose holder's provenance still names it ([`holders`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use zeroclaw_bundle_store::ObjectId;

use crate::publish::{publish_file, FileError, FileRequest};

/// The directory (inside the install) holding one provenance file per imported agent.
pub const DIR: &str = ".zeroclaw-bundle/imports";

/// A provenance file above this is refused, never read whole (one is a few hundred bytes).
const RECORD_CAP: u64 = 1 << 20;

/// What one import recorded about the agent it created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The agent's alias in this install (after `--as` and namespacing).
    pub alias: String,
    /// The agent's alias inside the bundle (its manifest's `agent.alias`): how a later review
    /// of another version of the same bundle finds this record.
    pub bundle_alias: String,
    /// The snapshot imported (the content id the operator reviewed).
    pub snapshot: ObjectId,
    /// What was given to `import` (a directory, a snapshot ref, a pack, a remote ref), as text.
    pub source: String,
    /// When, RFC 3339 UTC.
    pub imported_at: String,
    /// This tool's version that imported it.
    pub tool_version: String,
    /// Entries of the bundle renamed on import, `KIND.OLD` -> local alias (namespaced or
    /// `--map`ped), in name order; empty when every alias was kept.
    #[serde(default)]
    pub renamed: BTreeMap<String, String>,
    /// Every entry of the bundle that landed, `KIND.OLD` (the bundle's dotted path) -> its
    /// local alias and whether this import added it (`owned`: added or namespaced) or used a
    /// local entry (reused or `--map`ped): what an update merges, and in which names. Empty in
    /// a record written before updates existed.
    #[serde(default)]
    pub entries: BTreeMap<String, EntryFate>,
}

/// Where one entry of an imported bundle landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryFate {
    /// Its alias in the install.
    pub local: String,
    /// Added by the import (its own entry, which an update merges); `false` for a local entry
    /// the import reused or was mapped to (left as the install has it).
    pub owned: bool,
}

/// Why provenance could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    /// A provenance file or its directory could not be read.
    #[error("could not read import provenance {}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A provenance file is not what `import` writes.
    #[error("import provenance {path} is not valid: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Its directory could not be created.
    #[error("could not create {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file could not be published.
    #[error(transparent)]
    Write(#[from] FileError),
    /// The store's hold of the snapshot could not be written.
    #[error("could not write the store's hold {} (it keeps the snapshot the agent was imported from)", path.display())]
    Hold {
        /// The hold file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// The provenance file of local agent `alias` in the install rooted at `install_root` (the
/// directory of its `config.toml`).
pub fn path(install_root: &Path, alias: &str) -> PathBuf {
    install_root.join(DIR).join(format!("{alias}.toml"))
}

/// The provenance of local agent `alias`, or `None` when this tool never imported it.
pub fn read(install_root: &Path, alias: &str) -> Result<Option<Provenance>, ProvenanceError> {
    read_file(&path(install_root, alias))
}

/// Every provenance record of the install, in alias order.
pub fn read_all(install_root: &Path) -> Result<Vec<Provenance>, ProvenanceError> {
    let mut out = Vec::new();
    for file in files_in(&install_root.join(DIR))? {
        if file.extension().is_some_and(|e| e == "toml") {
            out.extend(read_file(&file)?);
        }
    }
    out.sort_by(|a, b| a.alias.cmp(&b.alias));
    Ok(out)
}

/// The records whose bundle alias is `bundle_alias`: earlier imports of a bundle of that agent.
pub fn imports_of(
    install_root: &Path,
    bundle_alias: &str,
) -> Result<Vec<Provenance>, ProvenanceError> {
    let mut all = read_all(install_root)?;
    all.retain(|p| p.bundle_alias == bundle_alias);
    Ok(all)
}

/// Writes `record` at [`path`]`(install_root, &record.alias)`, atomically and owner-only,
/// replacing an earlier record of that alias.
pub fn write(
    install_root: &Path,
    store: &Path,
    record: &Provenance,
) -> Result<(), ProvenanceError> {
    let file = path(install_root, &record.alias);
    let dir = file.parent().expect("the provenance path has a directory");
    fs::create_dir_all(dir).map_err(|source| ProvenanceError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    hold(install_root, store, record)?;
    let text = toml::to_string(record).expect("a provenance record always serializes");
    let req = FileRequest {
        dest: &file,
        force: true,
        store,
        noun: "import provenance",
        cancel: None,
        private: true,
        keep: None,
    };
    publish_file(&req, |out: &mut dyn Write| out.write_all(text.as_bytes()))?;
    Ok(())
}

/// The directory of a store that holds its holds: one small file per imported agent, naming
/// the snapshot its provenance names (the merge base of its next update), so that `forget`
/// can refuse to drop it (see [`holders`]). The store cannot see installs; the hold is how it
/// learns which of its snapshots an install still needs.
pub const HOLDS_DIR: &str = "holds";

/// One hold: install `install`'s agent `alias` was imported from `snapshot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hold {
    snapshot: ObjectId,
    install: PathBuf,
    alias: String,
}

/// An agent whose provenance names a snapshot: the install, the agent, its provenance file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The install root.
    pub install: PathBuf,
    /// The local agent.
    pub alias: String,
    /// Its provenance file.
    pub file: PathBuf,
}

/// Writes (replaces) the hold of `record`'s agent in `store`, before its provenance is written:
/// a kill between the two leaves a hold the provenance does not back, which [`holders`]
/// drops as stale.
fn hold(install_root: &Path, store: &Path, record: &Provenance) -> Result<(), ProvenanceError> {
    let install = std::path::absolute(install_root).unwrap_or_else(|_| install_root.into());
    let dir = store.join(HOLDS_DIR);
    fs::create_dir_all(&dir).map_err(|source| ProvenanceError::CreateDir {
        path: dir.clone(),
        source,
    })?;
    let mut key = install.as_os_str().as_encoded_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(record.alias.as_bytes());
    let file = dir.join(format!("{}.toml", ObjectId::of(&key).short(32)));
    let hold = Hold {
        snapshot: record.snapshot,
        install,
        alias: record.alias.clone(),
    };
    let text = toml::to_string(&hold).expect("a hold always serializes");
    // Inside the store, so not through `publish_file` (which refuses the store): staged
    // beside, synced, renamed over.
    let write_err = |source: io::Error| ProvenanceError::Hold {
        path: file.clone(),
        source,
    };
    let mut staged = tempfile::NamedTempFile::new_in(&dir).map_err(write_err)?;
    staged.write_all(text.as_bytes()).map_err(write_err)?;
    staged.as_file().sync_all().map_err(write_err)?;
    staged.persist(&file).map_err(|e| write_err(e.error))?;
    crate::sys::open_dir_path(&dir)
        .and_then(|fd| crate::sys::fsync(&fd))
        .map_err(write_err)
}

/// The agents of any install whose provenance still names snapshot `id`, by the holds of
/// `store`. A hold whose provenance no longer names `id` (the agent was updated since, its
/// record removed, the install gone) is stale and removed; one that cannot be read is kept
/// and skipped (a store's holds never block more than what they name).
pub fn holders(store: &Path, id: &ObjectId) -> Result<Vec<Holder>, ProvenanceError> {
    let mut out = Vec::new();
    for hold_file in files_in(&store.join(HOLDS_DIR))? {
        let Ok(text) = crate::sys::read_small_text(&hold_file, RECORD_CAP, "a store hold") else {
            continue;
        };
        let Ok(hold) = toml::from_str::<Hold>(&text) else {
            continue;
        };
        if hold.snapshot != *id {
            continue;
        }
        let file = path(&hold.install, &hold.alias);
        let holds = match read_file(&file) {
            Ok(Some(record)) => record.snapshot == *id,
            // Unreadable now (permissions, a half-written disk): it may still name `id`.
            Err(ProvenanceError::Read { .. }) => true,
            _ => false,
        };
        if holds {
            out.push(Holder {
                install: hold.install,
                alias: hold.alias,
                file,
            });
        } else {
            // Best effort: a stale hold only costs a read at the next forget.
            let _ = fs::remove_file(&hold_file);
        }
    }
    out.sort_by(|a, b| (&a.install, &a.alias).cmp(&(&b.install, &b.alias)));
    Ok(out)
}

/// The entries of directory `dir` (none when it does not exist).
fn files_in(dir: &Path) -> Result<Vec<PathBuf>, ProvenanceError> {
    let read_err = |source| ProvenanceError::Read {
        path: dir.to_path_buf(),
        source,
    };
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()).map_err(read_err))
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(read_err(source)),
    }
}

fn read_file(file: &Path) -> Result<Option<Provenance>, ProvenanceError> {
    let text = match crate::sys::read_small_text(file, RECORD_CAP, "an import provenance file") {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ProvenanceError::Read {
                path: file.to_path_buf(),
                source,
            })
        }
    };
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| ProvenanceError::Parse {
            path: file.to_path_buf(),
            message: e.message().to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_is_found_by_its_bundle_alias() {
        let install = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        assert_eq!(read(install.path(), "coder").unwrap(), None);
        assert!(read_all(install.path()).unwrap().is_empty());
        let record = Provenance {
            alias: "coder_imported".into(),
            bundle_alias: "coder".into(),
            snapshot: ObjectId::of(b"snapshot"),
            source: "/tmp/coder-bundle".into(),
            imported_at: "2026-12-01T15:00:00+00:00".into(),
            tool_version: "0.1.0".into(),
            renamed: BTreeMap::from([("agents.coder".into(), "coder_imported".into())]),
            entries: BTreeMap::from([(
                "agents.coder".into(),
                EntryFate {
                    local: "coder_imported".into(),
                    owned: true,
                },
            )]),
        };
        write(install.path(), store.path(), &record).unwrap();
        assert_eq!(
            read(install.path(), "coder_imported").unwrap(),
            Some(record.clone())
        );
        assert_eq!(imports_of(install.path(), "coder").unwrap(), vec![record]);
        assert!(imports_of(install.path(), "other").unwrap().is_empty());
    }

    #[test]
    fn a_damaged_record_is_an_error_naming_its_path() {
        let install = tempfile::tempdir().unwrap();
        let file = path(install.path(), "coder");
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, "alias = 3\n").unwrap();
        let err = read(install.path(), "coder").unwrap_err().to_string();
        assert!(err.contains("coder.toml"), "{err}");
    }
}
