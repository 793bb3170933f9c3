//! The sides of a diff: what a side argument names ([`crate::source`], the one grammar),
//! resolved into something the walk can read. A side is an existing directory (hashed in memory by the capture's descriptor-verified
//! reader, writing nothing to the store but its stat cache), an existing file (a pack or a
//! digest pack, checked whole before it is compared), a remote ref (`NAME/SNAPSHOT[:PATH]`:
//! its record and trees, never a blob), else a snapshot of the store (`SNAPSHOT[:PATH]`).
//!
//! Nothing here prints: what the command layer says about a side (its label, its `--json`
//! description, the entries a directory capture skipped, the reads it cost) is handed back as
//! data on [`Side`]. Errors are typed ([`SideError`]) and keep the words the CLI has always
//! printed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zeroclaw_bundle_store::limits::check_expansion;
use zeroclaw_bundle_store::{
    resolve_path, EntryKind, ObjectId, ObjectSource, Skipped, SourceKey, Store, StoreError,
    TreeEntry, TreeSourceStats,
};

use crate::capture::{
    keep_everything, root, Capture, CaptureError, CaptureStats, KeepBytes, MemoryObjects,
    RootError, Sink,
};
use crate::diff::{MemorySide, Root, SourceSide, TreeSide};
use crate::progress::Progress;
use crate::remote::RemoteError;
use crate::source::{self, classify, Held, OpenError, Opened, ReferenceError, Takes, Target};

/// Bundle files above this are not read for the semantic section.
pub const BUNDLE_FILE_CAP: u64 = 4 << 20;

/// Files larger than this (on either side) are not held for `-p`: they are named, not printed.
pub const CONTENT_CAP: u64 = 256 * 1024;

/// Why a side could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    /// The argument names nothing a diff reads (the grammar's words: [`ReferenceError`]).
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The snapshot it names could not be opened where it is.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The temporary store a diff of directories and packs hashes in could not be created.
    #[error("could not create a scratch store for the diff")]
    Scratch(#[source] std::io::Error),
    /// The store (or a pack) failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A remote failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// A directory's root could not be opened.
    #[error(transparent)]
    Root(#[from] RootError),
    /// A directory could not be hashed.
    #[error(transparent)]
    Capture(#[from] CaptureError),
}

/// What a side is, for a caller that describes it (`--json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideKind {
    /// A snapshot of the store, or the subtree at `path` of one (`path` empty: the whole).
    Snapshot {
        /// The snapshot.
        id: ObjectId,
        /// Raw path bytes of the subtree (empty for the whole snapshot).
        path: Vec<u8>,
    },
    /// A pack file (or a digest pack).
    Pack {
        /// The file as given.
        path: PathBuf,
        /// The snapshot it carries.
        snapshot: ObjectId,
    },
    /// A directory hashed on the fly.
    Directory {
        /// Its absolute path.
        path: PathBuf,
    },
    /// A snapshot of a remote store, or a subtree of one.
    Remote {
        /// The remote's name.
        remote: String,
        /// The snapshot.
        snapshot: ObjectId,
        /// Raw path bytes of the subtree (empty for the whole snapshot).
        path: Vec<u8>,
    },
}

/// What hashing a directory side did, for the caller to report.
#[derive(Debug, Clone)]
pub struct DirCapture {
    /// The directory (absolute).
    pub path: PathBuf,
    /// Files hashed and files answered by the stat cache.
    pub stats: CaptureStats,
    /// Entries the reader refused to follow (symlinks, special files, hard links): not
    /// compared.
    pub skipped: Vec<Skipped>,
}

/// What reading a side cost, for `--verbose`.
#[derive(Debug, Clone)]
pub enum SideStats {
    /// A stored snapshot: trees from its tree index or from tree objects.
    Snapshot(TreeSourceStats),
    /// A remote snapshot: the remote's name and its traffic, described.
    Remote {
        /// The remote's name.
        name: String,
        /// Requests and bytes, as one line.
        traffic: String,
    },
}

/// A side's snapshot and the signatures carried with it (opaque bytes).
pub type SideSignatures = (ObjectId, Vec<Vec<u8>>);

/// One resolved side of a diff.
pub struct Side {
    /// The short form text output uses (a short id, `id:path`, a path, `remote/id`).
    pub label: String,
    /// The compared entry (a directory entry for a whole tree).
    pub root: Root,
    /// What the side is.
    pub kind: SideKind,
    /// For a directory side: what its capture did.
    pub capture: Option<DirCapture>,
    /// The argument as given (what errors about the side name).
    arg: String,
    source: SideSource,
    /// Whether the side is a whole tree (not `SNAP:PATH` with a path), so bundle files sit at
    /// its root.
    whole: bool,
    /// What an expansion check names (a side read from trees someone else wrote); `None` for
    /// a directory, which was walked for real.
    expands: Option<String>,
}

enum SideSource {
    /// A snapshot opened where it is: the store's (trees from its tree index), a pack's (over
    /// this store when it is an update whose base the store holds), a remote's (trees only:
    /// its file contents are never fetched by a diff).
    Opened(Box<Opened>),
    /// A directory hashed in memory.
    Memory(Arc<MemoryObjects>),
}

impl Side {
    /// The argument the side was resolved from, as given (lossy).
    pub fn arg(&self) -> &str {
        &self.arg
    }

    /// The side's trees and small files, for the walk.
    pub fn tree_side(&self) -> Box<dyn TreeSide + '_> {
        match &self.source {
            SideSource::Opened(o) => Box::new(SourceSide(o.source())),
            SideSource::Memory(m) => Box::new(MemorySide(m)),
        }
    }

    /// Checks that the side's tree expands within the limits before the walk expands it (a
    /// shared-subtree bomb would otherwise list more paths than exist), see
    /// [`check_expansion`].
    pub fn check_expansion(&self) -> Result<(), StoreError> {
        let Some(label) = &self.expands else {
            return Ok(());
        };
        if self.root.entry.kind != EntryKind::Dir {
            return Ok(());
        }
        let source: &dyn ObjectSource = match &self.source {
            SideSource::Opened(o) => o.source(),
            SideSource::Memory(_) => return Ok(()),
        };
        check_expansion(source, &self.root.entry.id, label)?;
        Ok(())
    }

    /// Whether the side holds file contents (a digest pack and a remote side hold ids only).
    pub fn holds_contents(&self) -> bool {
        match &self.source {
            SideSource::Opened(o) => match &o.held {
                Held::Pack(p) => !p.pack().trees_only,
                Held::Remote(_) => false,
                Held::Store(_) => true,
            },
            SideSource::Memory(_) => true,
        }
    }

    /// A top-level file of this side: `None` when there is no such file (or the side is a
    /// subtree), `Some(None)` when the side names it but does not hold its bytes (a digest
    /// pack, or a file over [`BUNDLE_FILE_CAP`]).
    pub fn top_file(&self, name: &str) -> Result<Option<Option<Vec<u8>>>, StoreError> {
        if !self.whole || self.root.entry.kind != EntryKind::Dir {
            return Ok(None);
        }
        let side = self.tree_side();
        let tree = side.tree(&self.root.entry.id)?;
        let Some(e) = tree.get(name.as_bytes()).filter(|e| e.kind.is_file()) else {
            return Ok(None);
        };
        Ok(Some(side.bytes(&e.id, e.size, BUNDLE_FILE_CAP)?))
    }

    /// Several top-level files of this side, as [`Side::top_file`] reads each, from one read
    /// of the root tree.
    pub fn top_files<const N: usize>(
        &self,
        names: [&str; N],
    ) -> Result<[Option<Option<Vec<u8>>>; N], StoreError> {
        let mut out: [Option<Option<Vec<u8>>>; N] = std::array::from_fn(|_| None);
        if !self.whole || self.root.entry.kind != EntryKind::Dir {
            return Ok(out);
        }
        let side = self.tree_side();
        let tree = side.tree(&self.root.entry.id)?;
        for (slot, name) in out.iter_mut().zip(names) {
            if let Some(e) = tree.get(name.as_bytes()).filter(|e| e.kind.is_file()) {
                *slot = Some(side.bytes(&e.id, e.size, BUNDLE_FILE_CAP)?);
            }
        }
        Ok(out)
    }

    /// The signatures carried with the side's snapshot (opaque bytes; see `sign`): the
    /// store's for a stored snapshot, the pack's section, the remote's; `None` for a
    /// directory, which is no snapshot. A `SNAP:PATH` side is the snapshot's too.
    pub fn signatures(&self) -> Result<Option<SideSignatures>, SideError> {
        Ok(match &self.source {
            SideSource::Opened(o) => Some((o.id, o.signatures()?)),
            SideSource::Memory(_) => None,
        })
    }

    /// What reading the side cost so far: `None` for a pack or a directory.
    pub fn stats(&self) -> Option<SideStats> {
        let SideSource::Opened(o) = &self.source else {
            return None;
        };
        match &o.held {
            Held::Store(source) => Some(SideStats::Snapshot(source.stats())),
            Held::Remote(r) => Some(SideStats::Remote {
                name: r.remote().name().to_string(),
                traffic: r.remote().traffic(),
            }),
            Held::Pack(_) => None,
        }
    }
}

/// Refuses a side spelled as a path that does not exist ([`crate::source`]'s first step),
/// before a store is needed.
pub fn refuse_missing_path(arg: &OsStr) -> Result<(), SideError> {
    Ok(crate::source::refuse_missing_path(arg)?)
}

/// Whether every side names an existing path (a directory or a pack): such a diff needs no
/// store of its own, and runs in a [`scratch_store`] when there is none.
pub fn paths_only(args: &[&OsStr]) -> bool {
    args.iter().all(|s| crate::source::names_a_path(s))
}

/// A store in a new temporary directory, for a diff of directories and packs when there is no
/// store (a diff creates none: a typo in `--store` must not leave one). The store must be
/// dropped before the directory, which removes it.
pub fn scratch_store() -> Result<(tempfile::TempDir, Store), SideError> {
    let dir = tempfile::Builder::new()
        .prefix("zeroclaw-bundle-diff-")
        .tempdir()
        .map_err(SideError::Scratch)?;
    let store = Store::open_or_create(&dir.path().join("store"))?;
    Ok((dir, store))
}

/// Resolves a side argument, classified by [`crate::source::classify`]: an existing directory
/// (hashed with `progress`; with `contents`, every small file's bytes are kept for `-p`, else
/// only top-level bundle files), an existing file (a pack, or a digest pack, checked whole
/// first), a remote ref (`NAME/SNAPSHOT[:PATH]`: its record and trees, never a blob), else
/// `SNAPSHOT[:PATH]` of `store`.
pub fn resolve_side(
    store: &Store,
    arg: &OsStr,
    contents: bool,
    progress: &dyn Progress,
) -> Result<Side, SideError> {
    let reference = classify(store.root(), arg, Takes::DIFF)?;
    let named = match &reference.target {
        Target::Dir(path) => return capture_dir(store, arg, path, contents, progress),
        Target::Stored { reference, .. } => Some(reference.clone()),
        Target::Pack { .. } | Target::Remote { .. } => None,
    };
    let sub = reference.path().to_vec();
    let opened = source::open(Some(store), &reference, false)?;
    let (id, root) = (opened.id, opened.snapshot.root);
    let (kind, expands) = match (&opened.held, &reference.target) {
        (Held::Pack(_), Target::Pack { file, .. }) => (
            SideKind::Pack {
                path: file.clone(),
                snapshot: id,
            },
            format!("pack {}", file.display()),
        ),
        (Held::Remote(r), _) => (
            SideKind::Remote {
                remote: r.remote().name().to_string(),
                snapshot: id,
                path: sub.clone(),
            },
            format!("remote snapshot {}", opened.label),
        ),
        _ => (
            SideKind::Snapshot {
                id,
                path: sub.clone(),
            },
            format!("snapshot {}", id.short(12)),
        ),
    };
    let entry = if sub.is_empty() {
        TreeEntry::dir(Vec::new(), opened.snapshot.bytes(), root)
    } else {
        // A stored snapshot's missing path is said with the reference as given.
        let shown = named.as_deref().unwrap_or(&opened.label);
        resolve_path(opened.source(), &root, &sub, shown)?
    };
    let label = if sub.is_empty() {
        opened.label.clone()
    } else {
        format!("{}:{}", opened.label, String::from_utf8_lossy(&sub))
    };
    Ok(Side {
        label,
        whole: sub.is_empty() || sub.iter().all(|b| *b == b'/'),
        kind,
        capture: None,
        arg: arg.to_string_lossy().into_owned(),
        root: Root { entry },
        source: SideSource::Opened(Box::new(opened)),
        expands: Some(expands),
    })
}

/// Hashes a directory with the capture's reader, writing nothing to the store. Its stat
/// cache lives under a `diff:` key of its own, so a second diff of the same directory is a stat
/// walk, and a snapshot's cache never names an object this capture did not write.
fn capture_dir(
    store: &Store,
    arg: &OsStr,
    dir: &Path,
    contents: bool,
    progress: &dyn Progress,
) -> Result<Side, SideError> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let fd = root::open_configured(&abs)?.ok_or_else(|| ReferenceError::Missing(abs.clone()))?;
    let objects = Arc::new(MemoryObjects::default());
    let keep = if contents {
        KeepBytes::Every(CONTENT_CAP)
    } else {
        KeepBytes::TopLevel(BUNDLE_FILE_CAP)
    };
    // Nothing is written to the objects, but the capture API takes the store's shared lock
    // for the stat cache it keeps.
    let lock = store.write_lock()?;
    progress.begin("hashing", None);
    let mut capture = Capture::begin(store, &lock, SourceKey::Diff(abs.clone()), progress)?
        .with_sink(Sink::Memory(Arc::clone(&objects), keep));
    let walked = capture.walk(fd, ".", &keep_everything)?;
    let stats = capture.stats();
    let (report, update) = capture.finish();
    // Only an optimisation: a failure to record it never fails the diff, and an unchanged
    // cache costs no catalog write.
    let _ = store.catalog().update_source_cache(&update);
    let entry = TreeEntry::dir(Vec::new(), walked.size, walked.id);
    Ok(Side {
        label: abs.display().to_string(),
        kind: SideKind::Directory { path: abs.clone() },
        capture: Some(DirCapture {
            path: abs,
            stats,
            skipped: report.skipped,
        }),
        arg: arg.to_string_lossy().into_owned(),
        root: Root { entry },
        source: SideSource::Memory(objects),
        whole: true,
        expands: None,
    })
}
