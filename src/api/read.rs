//! The read verbs over every form the grammar names: `ls`, `cat` and `show` of a snapshot of
//! the store, of a pack file (read in place, no store needed) or of a remote (read in place).
//! One resolver ([`crate::source`]) opens the snapshot; [`OpenedSnapshot`] reads it.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use zeroclaw_bundle_store::{
    escape_name, limits::check_expansion, resolve_path, EntryKind, ObjectId, ObjectSource,
    Snapshot, SnapshotKind, Store, TreeEntry,
};

use super::error::{Error, Verb};
use super::{Bundles, Result};
use crate::sign::{AllowedSigners, Checked};
use crate::source::{classify, Opened, Reference, Takes, Target};

/// Which read verb opens a snapshot: what each accepts (`ls` and `cat` take `:PATH`, `show`
/// does not) and how its errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadVerb {
    /// `ls SNAPSHOT[:PATH]`.
    Ls,
    /// `cat SNAPSHOT:PATH`.
    Cat,
    /// `show SNAPSHOT`.
    Show,
}

impl ReadVerb {
    fn takes(self) -> Takes {
        match self {
            ReadVerb::Ls => Takes::LS,
            ReadVerb::Cat => Takes::CAT,
            ReadVerb::Show => Takes::SHOW,
        }
    }
}

/// A snapshot opened where it is (a pack is not unpacked, a remote snapshot not pulled), with
/// the path inside it the reference named (`SNAPSHOT:PATH`; empty for the root).
pub struct OpenedSnapshot {
    opened: Opened,
    path: Vec<u8>,
}

/// One row of [`OpenedSnapshot::ls`]: an entry and its path from the snapshot's root (raw
/// bytes; `--json` carries it as `path`, or as `display` when it is not UTF-8).
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// The path (bytes, `/`-separated).
    #[serde(flatten, serialize_with = "super::json::name_or_display")]
    pub path: Vec<u8>,
    /// `file`, `exec` or `dir`.
    pub kind: EntryKind,
    /// The mode, in octal (`0644`).
    pub mode: String,
    /// The size in bytes (of a file; 0 for a directory).
    pub size: u64,
    /// The object id.
    pub object: ObjectId,
}

/// The verified bytes of a file of a snapshot ([`OpenedSnapshot::open_file`]).
pub struct FileBytes<'a> {
    reader: Box<dyn std::io::Read + 'a>,
    size: u64,
}

impl FileBytes<'_> {
    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl std::io::Read for FileBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reader.read(buf)
    }
}

/// What `show` says of a snapshot: its record, its id, when it was made, and every signature
/// checked against the allowed signers given.
#[derive(Debug, Clone, Serialize)]
pub struct ShownSnapshot {
    /// The snapshot's record.
    #[serde(flatten)]
    pub record: Snapshot,
    /// Its id.
    pub snapshot: ObjectId,
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// Each signature it carries, with its verdict.
    pub signatures: Vec<Checked>,
}

impl Bundles {
    /// Opens the snapshot `reference` names for `verb`, where it is: a snapshot of the store at
    /// `store` (a full id, an id prefix, a name, `agent/ALIAS`), a pack file, or a remote ref
    /// (`REMOTE/REF`); each with `:PATH` where the verb takes one. A pack file needs no store
    /// (an update pack reads its base from the store when there is one); every other form
    /// fails with [`crate::ErrorKind::NoStore`] when there is none. Nothing is created.
    pub fn open_snapshot_at(
        store: &Path,
        reference: &OsStr,
        verb: ReadVerb,
    ) -> Result<OpenedSnapshot> {
        let fail = |e: anyhow::Error| Error::new(Verb::Read, reference.to_string_lossy(), e);
        let parsed = classify(store, reference, verb.takes()).map_err(|e| fail(e.into()))?;
        let held = match parsed.target {
            Target::Pack { .. } => Bundles::open_existing(store)?,
            _ => Some(Bundles::open(store)?),
        };
        let handle = held.as_ref().map(|b| &b.store);
        open_parsed(handle, &parsed, verb).map_err(fail)
    }

    /// [`Bundles::open_snapshot_at`] with this store.
    pub fn open_snapshot(&self, reference: &OsStr, verb: ReadVerb) -> Result<OpenedSnapshot> {
        let fail = |e: anyhow::Error| Error::new(Verb::Read, reference.to_string_lossy(), e);
        let parsed =
            classify(self.store.root(), reference, verb.takes()).map_err(|e| fail(e.into()))?;
        open_parsed(Some(&self.store), &parsed, verb).map_err(fail)
    }
}

/// Opens a classified reference: a snapshot of the store that does not exist is said as
/// every verb says it, before anything else.
fn open_parsed(
    store: Option<&Store>,
    reference: &Reference,
    verb: ReadVerb,
) -> anyhow::Result<OpenedSnapshot> {
    let path = reference.path().to_vec();
    if let (Target::Stored { .. }, Some(store)) = (&reference.target, store) {
        reference.stored_id(store)?;
    }
    if verb == ReadVerb::Cat && path.is_empty() {
        anyhow::bail!("`cat` needs SNAPSHOT:PATH (a file inside the snapshot)");
    }
    let opened = crate::source::open(store, reference, verb == ReadVerb::Cat)?;
    Ok(OpenedSnapshot { opened, path })
}

impl OpenedSnapshot {
    /// The snapshot's id.
    pub fn id(&self) -> ObjectId {
        self.opened.id
    }

    /// Its record.
    pub fn record(&self) -> &Snapshot {
        &self.opened.snapshot
    }

    /// What messages call it: a short id, `REMOTE/id`, `id (PACK)`.
    pub fn label(&self) -> &str {
        &self.opened.label
    }

    /// The path inside the snapshot the reference named (empty for the root).
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    fn entry(&self) -> Result<TreeEntry> {
        let source = self.opened.source();
        resolve_path(
            source,
            &self.opened.snapshot.root,
            &self.path,
            &self.opened.label,
        )
        .map_err(|e| self.fail(e.into()))
    }

    fn fail(&self, e: anyhow::Error) -> Error {
        Error::new(Verb::Read, self.opened.label.clone(), e)
    }

    /// The directory at the named path, in name order (with `recursive`, every entry below
    /// it, depth first; a tree that would expand past the store's limits is refused before
    /// anything is listed); for a file, that one entry.
    pub fn ls(&self, recursive: bool) -> Result<Vec<Listed>> {
        let entry = self.entry()?;
        if entry.kind != EntryKind::Dir {
            return Ok(vec![listed(&entry, self.path.clone())]);
        }
        let source = self.opened.source();
        if recursive {
            check_expansion(
                source,
                &entry.id,
                &format!("snapshot {}", self.opened.label),
            )
            .map_err(|e| self.fail(e.into()))?;
        }
        let mut rows = Vec::new();
        list_dir(source, &entry.id, trimmed(&self.path), recursive, &mut rows)
            .map_err(|e| self.fail(e.into()))?;
        Ok(rows)
    }

    /// The bytes of the file at the named path, checked against its id whole before this
    /// returns (a damaged file fails here, before a byte is handed out) and again as they are
    /// read. Reading it fails only when the storage under it does.
    pub fn open_file(&self) -> Result<FileBytes<'_>> {
        let entry = self.entry()?;
        let shown = escape_name(&self.path);
        if !entry.kind.is_file() {
            return Err(self.fail(anyhow::anyhow!(
                "{shown} is a directory in snapshot {}",
                self.opened.label
            )));
        }
        let read_fail = |e: anyhow::Error| self.fail(e.context(format!("could not read {shown}")));
        let blob = self
            .opened
            .source()
            .blob_of_size(&entry.id, entry.size)
            .map_err(|e| read_fail(e.into()))?;
        blob.verify(&entry.id).map_err(|e| read_fail(e.into()))?;
        Ok(FileBytes {
            reader: Box::new(blob.verifying_reader(entry.id)),
            size: entry.size,
        })
    }

    /// Writes the bytes of the file at the named path to `out` ([`OpenedSnapshot::open_file`]
    /// then a copy); returns the byte count.
    pub fn cat(&self, out: &mut dyn Write) -> Result<u64> {
        let mut file = self.open_file()?;
        std::io::copy(&mut file, out).map_err(|e| {
            self.fail(anyhow::Error::new(e).context(format!(
                "could not copy {} of snapshot {}",
                escape_name(&self.path),
                self.opened.label
            )))
        })
    }

    /// The snapshot's record, and each signature it carries (the store's, the pack's, the
    /// remote's) checked against `allowed` (`None`: every signer is an unknown key).
    pub fn show(&self, allowed: Option<&AllowedSigners>) -> Result<ShownSnapshot> {
        let sigs = self.opened.signatures().map_err(|e| self.fail(e.into()))?;
        let record = self.opened.snapshot.clone();
        Ok(ShownSnapshot {
            snapshot: self.opened.id,
            created: crate::clock::rfc3339_utc(record.created_unix_ns),
            signatures: crate::sign::check_all(&self.opened.id, &sigs, allowed),
            record,
        })
    }
}

/// `path` without leading and trailing slashes: the prefix of the rows below it.
fn trimmed(path: &[u8]) -> &[u8] {
    let start = path.iter().position(|b| *b != b'/').unwrap_or(path.len());
    let end = path
        .iter()
        .rposition(|b| *b != b'/')
        .map_or(start, |i| i + 1);
    &path[start..end.max(start)]
}

fn listed(entry: &TreeEntry, path: Vec<u8>) -> Listed {
    Listed {
        path,
        kind: entry.kind,
        mode: entry.mode_octal(),
        size: entry.size,
        object: entry.id,
    }
}

fn list_dir(
    source: &dyn ObjectSource,
    tree: &ObjectId,
    prefix: &[u8],
    recursive: bool,
    rows: &mut Vec<Listed>,
) -> std::result::Result<(), zeroclaw_bundle_store::StoreError> {
    let tree = source.tree(tree)?;
    for e in tree.entries() {
        let mut p = prefix.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(&e.name);
        rows.push(listed(e, p.clone()));
        if recursive && e.kind == EntryKind::Dir {
            list_dir(source, &e.id, &p, true, rows)?;
        }
    }
    Ok(())
}

/// One row of [`Bundles::list_entries`]: what the catalog holds of a snapshot, whether it is
/// the one `agent/<alias>` names, and (when asked) who signed it.
#[derive(Debug, Clone, Serialize)]
pub struct ListEntry {
    /// Its id.
    pub snapshot: ObjectId,
    /// When it was made (RFC 3339, UTC).
    pub created: String,
    /// The same, ns since the epoch.
    pub created_unix_ns: i128,
    /// Plain tree or agent bundle.
    pub kind: SnapshotKind,
    /// Where it came from.
    pub source: String,
    /// The agent alias, for an agent bundle.
    pub agent: Option<String>,
    /// Its name, if named.
    pub name: Option<String>,
    /// Regular files carried.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Its root tree.
    pub root: ObjectId,
    /// True on the agent's newest snapshot: the one `agent/<alias>` names.
    pub agent_latest: bool,
    /// Each signature with its verdict, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures: Option<Vec<Checked>>,
}

impl ListEntry {
    /// Who signed it, in one line (`unsigned`, or each verdict); `None` when not asked for.
    pub fn signed_by(&self) -> Option<String> {
        self.signatures.as_deref().map(crate::sign::summary)
    }
}

impl Bundles {
    /// Every snapshot in the store, oldest first (by creation time, then id), each marked
    /// when it is its agent's newest; with `signatures`, each one's signatures checked
    /// against `allowed` (`None`: every signer an unknown key).
    pub fn list_entries(
        &self,
        signatures: bool,
        allowed: Option<&AllowedSigners>,
    ) -> Result<Vec<ListEntry>> {
        let snaps = self.list()?;
        // `agent/<alias>` resolves to the agent's newest snapshot: the last of the list.
        let mut newest: std::collections::HashMap<&str, ObjectId> = Default::default();
        for s in &snaps {
            if let Some(a) = &s.agent {
                newest.insert(a.as_str(), s.id);
            }
        }
        let mut rows = Vec::with_capacity(snaps.len());
        for s in &snaps {
            let checked = match signatures {
                true => Some(
                    crate::sign::check_stored(&self.store, &s.id, allowed)
                        .map_err(|e| Error::new(Verb::Read, s.id.to_hex().to_string(), e.into()))?,
                ),
                false => None,
            };
            rows.push(ListEntry {
                snapshot: s.id,
                created: crate::clock::rfc3339_utc(s.created_unix_ns),
                created_unix_ns: s.created_unix_ns,
                kind: s.kind,
                source: s.source.clone(),
                agent: s.agent.clone(),
                name: s.name.clone(),
                files: s.files,
                bytes: s.bytes,
                root: s.root,
                agent_latest: s
                    .agent
                    .as_deref()
                    .is_some_and(|a| newest.get(a) == Some(&s.id)),
                signatures: checked,
            });
        }
        Ok(rows)
    }
}
