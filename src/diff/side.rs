//! The sides of a diff: what a side argument names, resolved into something the walk can read.
//! A side is an existing directory (hashed in memory by the capture's descriptor-verified
//! reader, writing nothing to the store but its stat cache), an existing file (a pack or a
//! digest pack, checked whole before it is compared), a remote ref (`NAME/SNAPSHOT[:PATH]`:
//! its record and trees, never a blob), else a snapshot of the store (`SNAPSHOT[:PATH]`).
//!
//! Nothing here prints: what the command layer says about a side (its label, its `--json`
//! description, the entries a directory capture skipped, the reads it cost) is handed back as
//! data on [`Side`]. Errors are typed ([`SideError`]) and keep the words the CLI has always
//! printed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zeroclaw_bundle_store::limits::check_expansion;
use zeroclaw_bundle_store::{
    resolve_path, unescape_name, EntryKind, ObjectId, ObjectSource, PackOverStore, PackReader,
    Skipped, SnapshotSource, SourceKey, Store, StoreError, TreeEntry, TreeSourceStats,
};

use crate::capture::{
    keep_everything, root, Capture, CaptureError, CaptureStats, KeepBytes, MemoryObjects,
    RootError, Sink,
};
use crate::diff::content::CONTENT_CAP;
use crate::diff::{MemorySide, Root, SourceSide, TreeSide};
use crate::progress::Progress;
use crate::remote::{parse_remote_ref, Remote, RemoteError, RemoteSpec, RemoteView};

/// Bundle files above this are not read for the semantic section.
pub const BUNDLE_FILE_CAP: u64 = 4 << 20;

/// Why a side could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    /// A side spelled as a path names nothing.
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    /// A side spelled as a path is a symlink to nothing.
    #[error("{} is a symlink to a path that does not exist", .0.display())]
    DanglingSymlink(PathBuf),
    /// A side spelled as a path could not be looked at.
    #[error("could not read {}", path.display())]
    Stat {
        /// The path.
        path: PathBuf,
        /// What `lstat` said.
        #[source]
        source: std::io::Error,
    },
    /// Neither a file, a directory nor a remote ref, and no snapshot of this store; the
    /// reference's first component (`name`) could have been meant as a remote.
    #[error(
        "{arg} is not a file or directory, and {name:?} is not a configured remote (`remote list`), \
         so it was read as a snapshot of this store"
    )]
    NotRemote {
        /// The side argument as given.
        arg: String,
        /// What would have been the remote's name.
        name: String,
        /// Why the snapshot lookup failed.
        #[source]
        source: Box<StoreError>,
    },
    /// Neither a file nor a directory, and no snapshot of this store.
    #[error("{arg} is not a file or directory, so it was read as a snapshot")]
    NotSnapshot {
        /// The side argument as given.
        arg: String,
        /// Why the snapshot lookup failed.
        #[source]
        source: Box<StoreError>,
    },
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
    /// A stored snapshot: trees from its tree index (one file), blobs from the objects.
    Store(SnapshotSource),
    /// A pack, over this store when it is an update whose base the store holds.
    Pack(PackOverStore),
    Memory(Arc<MemoryObjects>),
    /// A remote snapshot: trees only (its file contents are never fetched by a diff).
    Remote(Box<RemoteView>),
}

impl Side {
    /// The argument the side was resolved from, as given (lossy).
    pub fn arg(&self) -> &str {
        &self.arg
    }

    /// The side's trees and small files, for the walk.
    pub fn tree_side(&self) -> Box<dyn TreeSide + '_> {
        match &self.source {
            SideSource::Store(r) => Box::new(SourceSide(r)),
            SideSource::Pack(p) => Box::new(SourceSide(p)),
            SideSource::Memory(m) => Box::new(MemorySide(m)),
            SideSource::Remote(r) => Box::new(SourceSide(r.as_ref())),
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
            SideSource::Store(r) => r,
            SideSource::Pack(p) => p,
            SideSource::Remote(r) => r.as_ref(),
            SideSource::Memory(_) => return Ok(()),
        };
        check_expansion(source, &self.root.entry.id, label)?;
        Ok(())
    }

    /// Whether the side holds file contents (a digest pack and a remote side hold ids only).
    pub fn holds_contents(&self) -> bool {
        match &self.source {
            SideSource::Pack(p) => !p.pack().trees_only,
            SideSource::Remote(_) => false,
            SideSource::Store(_) | SideSource::Memory(_) => true,
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

    /// The signatures carried with the side's snapshot (opaque bytes; see `sign`): the
    /// store's for a stored snapshot, the pack's section, the remote's; `None` for a
    /// directory, which is no snapshot. A `SNAP:PATH` side is the snapshot's too.
    pub fn signatures(&self, store: &Store) -> Result<Option<SideSignatures>, SideError> {
        Ok(match (&self.kind, &self.source) {
            (SideKind::Snapshot { id, .. }, _) => Some((
                *id,
                store.signatures(id)?.into_iter().map(|s| s.bytes).collect(),
            )),
            (SideKind::Pack { snapshot, .. }, SideSource::Pack(p)) => {
                Some((*snapshot, p.pack().signatures()?))
            }
            (SideKind::Remote { snapshot, .. }, SideSource::Remote(r)) => {
                Some((*snapshot, r.remote().signatures(snapshot)?))
            }
            _ => None,
        })
    }

    /// What reading the side cost so far: `None` for a pack or a directory.
    pub fn stats(&self) -> Option<SideStats> {
        match &self.source {
            SideSource::Store(source) => Some(SideStats::Snapshot(source.stats())),
            SideSource::Remote(r) => Some(SideStats::Remote {
                name: r.remote().name().to_string(),
                traffic: r.remote().traffic(),
            }),
            _ => None,
        }
    }
}

/// Refuses a side spelled as a path (`/x`, `./x`, `../x`, `.`, `..`, `~/x`) that does not exist:
/// it can only have meant a path, so "not a snapshot" or "no remote named `.`" would mislead.
pub fn refuse_missing_path(arg: &OsStr) -> Result<(), SideError> {
    let bytes = arg.as_encoded_bytes();
    let path_like = [&b"/"[..], b"./", b"../", b"~/"]
        .iter()
        .any(|p| bytes.starts_with(p))
        || bytes == b"."
        || bytes == b"..";
    if !path_like {
        return Ok(());
    }
    let path = Path::new(arg);
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() && !path.exists() => {
            Err(SideError::DanglingSymlink(path.to_path_buf()))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(SideError::Missing(path.to_path_buf()))
        }
        Err(source) => Err(SideError::Stat {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether every side names an existing path (a directory or a pack): such a diff needs no
/// store of its own, and runs in a [`scratch_store`] when there is none.
pub fn paths_only(args: &[&OsStr]) -> bool {
    args.iter().all(|s| Path::new(s).exists())
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

/// Splits `SNAPSHOT[:PATH]` into the reference and the raw path bytes. A UTF-8 path may spell
/// non-UTF-8 bytes as `\xNN` (how `ls` shows them). A `.` component is dropped (`snap:./d/f`
/// is `snap:d/f`): no tree holds an entry named `.`.
pub fn split_target(target: &OsStr) -> (String, Vec<u8>) {
    let bytes = target.as_bytes();
    match bytes.iter().position(|b| *b == b':') {
        Some(i) => {
            let reference = String::from_utf8_lossy(&bytes[..i]).into_owned();
            let path = &bytes[i + 1..];
            let path = match std::str::from_utf8(path) {
                Ok(text) => unescape_name(text),
                Err(_) => path.to_vec(),
            };
            let path = if path.split(|b| *b == b'/').any(|c| c == b".") {
                let kept: Vec<&[u8]> = path.split(|b| *b == b'/').filter(|c| *c != b".").collect();
                kept.join(&b'/')
            } else {
                path
            };
            (reference, path)
        }
        None => (String::from_utf8_lossy(bytes).into_owned(), Vec::new()),
    }
}

/// Resolves a side argument: an existing directory (hashed with `progress`; with `contents`,
/// every small file's bytes are kept for `-p`, else only top-level bundle files), an existing
/// file (a pack, or a digest pack), a remote ref, else `SNAPSHOT[:PATH]` of `store`.
pub fn resolve_side(
    store: &Store,
    arg: &OsStr,
    contents: bool,
    progress: &dyn Progress,
) -> Result<Side, SideError> {
    let path = Path::new(arg);
    if path.is_dir() {
        return capture_dir(store, arg, path, contents, progress);
    }
    if path.is_file() {
        let pack = PackReader::open(path)?;
        // The whole pack is checked first, as `unpack` checks it: a damaged pack is refused,
        // never compared (an object the walk prunes would otherwise go unread).
        pack.check_trailer()?;
        let snapshot = pack.snapshot()?;
        // An incremental pack reads what it does not carry from this store, when the store
        // holds its base (an update diffed before it is unpacked).
        let pack = PackOverStore::new(pack, Some(store));
        let label = format!("{} ({})", pack.pack().root.short(12), path.display());
        let entry = TreeEntry::dir(Vec::new(), snapshot.bytes(), snapshot.root);
        return Ok(Side {
            label,
            kind: SideKind::Pack {
                path: path.to_path_buf(),
                snapshot: pack.pack().root,
            },
            capture: None,
            arg: arg.to_string_lossy().into_owned(),
            root: Root { entry },
            source: SideSource::Pack(pack),
            whole: true,
            expands: Some(format!("pack {}", path.display())),
        });
    }
    let (reference, sub) = split_target(arg);
    if let Some((spec, snap)) = parse_remote_ref(store.root(), &reference)? {
        return remote_side(store, arg, spec, &snap, &sub);
    }
    // A full id names its record directly: no catalog session (what a script comparing two
    // known snapshots passes, and what the other host sent). Anything else is resolved by
    // the catalog.
    let direct = reference
        .parse::<ObjectId>()
        .ok()
        .filter(|id| store.read_snapshot(id).is_ok());
    let id = match direct {
        Some(id) => Ok(id),
        None => store.resolve(&reference),
    }
    .map_err(|source| {
        let source = Box::new(source);
        let arg = arg.to_string_lossy().into_owned();
        match reference.split_once('/') {
            Some((name, _)) if name != "agent" => SideError::NotRemote {
                arg,
                name: name.to_string(),
                source,
            },
            _ => SideError::NotSnapshot { arg, source },
        }
    })?;
    let snapshot = store.read_snapshot(&id)?;
    let reader = store.snapshot_source(&id);
    let entry = if sub.is_empty() {
        TreeEntry::dir(Vec::new(), snapshot.bytes(), snapshot.root)
    } else {
        resolve_path(&reader, &snapshot.root, &sub, &reference)?
    };
    let label = if sub.is_empty() {
        id.short(12)
    } else {
        format!("{}:{}", id.short(12), String::from_utf8_lossy(&sub))
    };
    Ok(Side {
        label,
        whole: sub.is_empty() || sub.iter().all(|b| *b == b'/'),
        kind: SideKind::Snapshot { id, path: sub },
        capture: None,
        arg: arg.to_string_lossy().into_owned(),
        root: Root { entry },
        source: SideSource::Store(reader),
        expands: Some(format!("snapshot {}", id.short(12))),
    })
}

/// A remote snapshot ref (`NAME/SNAPSHOT[:PATH]`): its record and trees pack, never a blob.
fn remote_side(
    store: &Store,
    arg: &OsStr,
    spec: RemoteSpec,
    snap: &str,
    sub: &[u8],
) -> Result<Side, SideError> {
    let remote = Remote::open(&spec, false)?;
    let id = remote.resolve(snap)?;
    let view = RemoteView::open(remote, id, store.objects().tmp_dir(), false)?;
    let label = format!("{}/{}", spec.name, id.short(12));
    let root = view.snapshot().root;
    let entry = if sub.is_empty() {
        TreeEntry::dir(Vec::new(), view.snapshot().bytes(), root)
    } else {
        resolve_path(&view, &root, sub, &label)?
    };
    let expands = Some(format!("remote snapshot {label}"));
    let label = if sub.is_empty() {
        label
    } else {
        format!("{label}:{}", String::from_utf8_lossy(sub))
    };
    Ok(Side {
        label,
        kind: SideKind::Remote {
            remote: spec.name,
            snapshot: id,
            path: sub.to_vec(),
        },
        capture: None,
        arg: arg.to_string_lossy().into_owned(),
        root: Root { entry },
        source: SideSource::Remote(Box::new(view)),
        whole: sub.is_empty() || sub.iter().all(|b| *b == b'/'),
        expands,
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
    let fd = root::open_configured(&abs)?.ok_or_else(|| SideError::Missing(abs.clone()))?;
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
    let _ = store.update_source_cache(&update);
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
