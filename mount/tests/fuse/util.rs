//! Test environment: builds a store from an in-code tree spec, mounts it in a guard that
//! unmounts on drop (and never deletes a mountpoint that is still mounted), and walks a
//! mounted tree into a comparable map.
//!
//! A test that cannot mount (no FUSE here) skips with a printed reason, except under `CI`,
//! where it fails.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};
use tempfile::TempDir;
use zeroclaw_bundle_mount::{mount, MountError, MountHandle, MountOptions, XATTR_BLAKE3};

use zeroclaw_bundle_store::{
    Blob, EntryKind, ObjectId, ObjectSource, Store, StoreError, StoreReader, Tree, TreeEntry,
    TreeView,
};

/// A tree to store, described in code.
pub enum Spec {
    File(Vec<u8>),
    Exec(Vec<u8>),
    /// A file with these permission bits.
    Mode(u32, Vec<u8>),
    Dir(Vec<(Vec<u8>, Spec)>),
}

pub fn file(name: impl AsRef<[u8]>, data: impl Into<Vec<u8>>) -> (Vec<u8>, Spec) {
    (name.as_ref().to_vec(), Spec::File(data.into()))
}

pub fn exec(name: impl AsRef<[u8]>, data: impl Into<Vec<u8>>) -> (Vec<u8>, Spec) {
    (name.as_ref().to_vec(), Spec::Exec(data.into()))
}

/// A file whose tree entry records `mode`.
pub fn moded(name: impl AsRef<[u8]>, mode: u32, data: impl Into<Vec<u8>>) -> (Vec<u8>, Spec) {
    (name.as_ref().to_vec(), Spec::Mode(mode, data.into()))
}

pub fn dir(name: impl AsRef<[u8]>, entries: Vec<(Vec<u8>, Spec)>) -> (Vec<u8>, Spec) {
    (name.as_ref().to_vec(), Spec::Dir(entries))
}

/// What one path looks like, in the store or through the mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// 'f' file, 'd' directory.
    pub kind: char,
    /// Permission bits.
    pub perm: u32,
    /// st_size (directories: file bytes beneath).
    pub size: u64,
    /// File bytes (None for directories).
    pub data: Option<Vec<u8>>,
    /// The object id (from the store, or the mount's xattr).
    pub id: String,
}

pub struct Env {
    /// Holds the store (removed on drop).
    _dir: TempDir,
    pub store: Store,
}

impl Env {
    pub fn new() -> Env {
        Env::new_in(&std::env::temp_dir())
    }

    /// An environment whose temp dir is inside `parent`.
    pub fn new_in(parent: &Path) -> Env {
        let dir = tempfile::tempdir_in(parent).expect("temp dir");
        let store = Store::open_or_create(&dir.path().join("store")).expect("store");
        Env { _dir: dir, store }
    }

    /// Stores a root directory spec; returns its tree id and what each path should look like
    /// (keyed by relative path bytes; the root is the empty path).
    pub fn build(&self, root: Vec<(Vec<u8>, Spec)>) -> (ObjectId, BTreeMap<Vec<u8>, Seen>) {
        let mut expected = BTreeMap::new();
        let root = self.write(&Spec::Dir(root), b"", b"", &mut expected);
        (root.id, expected)
    }

    /// Writes the spec's blobs and trees, recording each path (a file shows its recorded
    /// mode, a directory 0755); returns its entry named `name`.
    fn write(
        &self,
        spec: &Spec,
        name: &[u8],
        path: &[u8],
        out: &mut BTreeMap<Vec<u8>, Seen>,
    ) -> TreeEntry {
        let (entry, perm, data) = match spec {
            Spec::File(data) | Spec::Exec(data) | Spec::Mode(_, data) => {
                let id = self.store.objects().write_bytes(data).expect("write blob");
                let mode = match spec {
                    Spec::Exec(_) => 0o755,
                    Spec::Mode(mode, _) => *mode,
                    _ => 0o644,
                };
                let entry = TreeEntry::file(name.to_vec(), mode, data.len() as u64, id);
                (entry, mode, Some(data.clone()))
            }
            Spec::Dir(children) => {
                let entries = children
                    .iter()
                    .map(|(name, child)| {
                        let mut p = path.to_vec();
                        if !p.is_empty() {
                            p.push(b'/');
                        }
                        p.extend_from_slice(name);
                        self.write(child, name, &p, out)
                    })
                    .collect();
                let tree = Tree::from_entries(entries).expect("valid tree");
                let id = self.store.objects().write_tree(&tree).expect("write tree");
                (
                    TreeEntry::dir(name.to_vec(), tree.total_size(), id),
                    0o755,
                    None,
                )
            }
        };
        let seen = Seen {
            kind: if entry.kind == EntryKind::Dir {
                'd'
            } else {
                'f'
            },
            perm,
            size: entry.size,
            data,
            id: entry.id.to_hex(),
        };
        out.insert(path.to_vec(), seen);
        entry
    }

    /// Mounts `root`; None (after printing why) when this host cannot mount, outside CI.
    pub fn mount(&self, root: ObjectId, opts: &MountOptions) -> Option<Mounted> {
        self.mount_source(Arc::new(self.store.objects().reader()), root, opts)
    }

    /// Mounts `root` read through `source` (a wrapper around the store's reader, say).
    pub fn mount_source(
        &self,
        source: Arc<dyn ObjectSource>,
        root: ObjectId,
        opts: &MountOptions,
    ) -> Option<Mounted> {
        let mnt = tempfile::tempdir().expect("mountpoint dir");
        match mount(source, root, mnt.path(), opts) {
            Ok(handle) => Some(Mounted {
                path: handle.mountpoint().to_path_buf(),
                handle: Some(handle),
                dir: Some(mnt),
            }),
            Err(e @ (MountError::FuseUnavailable { .. } | MountError::Mount { .. })) => {
                skip_or_fail(&e.to_string());
                None
            }
            Err(e) => panic!("mount failed: {e}"),
        }
    }
}

/// Outside CI: print why and skip. Under CI: fail.
/// Damages the stored object `id` (hex) in place: its last byte flipped, so it no longer
/// hashes to its id.
pub fn corrupt(env: &Env, id: &str) {
    let path = env
        .store
        .objects()
        .path_of(&id.parse::<ObjectId>().unwrap());
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&path, bytes).unwrap();
}

pub fn skip_or_fail(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("cannot mount (CI is set, so this fails): {why}");
    }
    eprintln!("SKIPPED: cannot mount here: {why}");
}

/// A live mount that unmounts on drop; its directory is removed only once it is unmounted.
pub struct Mounted {
    pub handle: Option<MountHandle>,
    pub path: PathBuf,
    dir: Option<TempDir>,
}

impl Mounted {
    pub fn handle(&mut self) -> &mut MountHandle {
        self.handle.as_mut().expect("still mounted")
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        drop(self.handle.take());
        if is_mounted(&self.path) {
            // Never delete through a live mount: leak the directory and say so.
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("leaving {} behind: still mounted", kept.display());
            }
        }
    }
}

/// True when the mount table lists `path` as a mount point.
pub fn is_mounted(path: &Path) -> bool {
    mounts_at(path) > 0
}

/// How many mounts the mount table lists at `path` (more than one: stacked).
pub fn mounts_at(path: &Path) -> usize {
    let text = String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").expect("read mountinfo"))
        .into_owned();
    let want = path.as_os_str().as_bytes();
    text.lines()
        .filter(|l| l.split(' ').nth(4).map(str::as_bytes) == Some(want))
        .count()
}

/// The mount's per-mount and super options from mountinfo.
pub fn mount_options(path: &Path) -> (String, String, String) {
    let text = String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").expect("read mountinfo"))
        .into_owned();
    let want = path.as_os_str().as_bytes();
    let line = text
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4).map(str::as_bytes) == Some(want))
        .expect("mounted");
    let fields: Vec<&str> = line.split(' ').collect();
    let dash = fields.iter().position(|f| *f == "-").expect("separator");
    (
        fields[5].to_string(),
        fields[dash + 1].to_string(),
        format!("{} {}", fields[dash + 2], fields[dash + 3]),
    )
}

pub fn xattr_id(path: &Path) -> String {
    let mut buf = [0u8; 128];
    let n = rustix::fs::getxattr(path, XATTR_BLAKE3, &mut buf[..])
        .unwrap_or_else(|e| panic!("getxattr {}: {e}", path.display()));
    String::from_utf8(buf[..n].to_vec()).expect("hex")
}

/// Walks a mounted tree into the same shape as [`Env::build`]'s expectation.
pub fn walk(root: &Path) -> BTreeMap<Vec<u8>, Seen> {
    let mut out = BTreeMap::new();
    walk_into(root, b"", &mut out);
    out
}

fn walk_into(path: &Path, rel: &[u8], out: &mut BTreeMap<Vec<u8>, Seen>) {
    let meta = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("stat {path:?}: {e}"));
    let perm = meta.mode() & 0o7777;
    let id = xattr_id(path);
    if meta.is_dir() {
        for entry in fs::read_dir(path).unwrap_or_else(|e| panic!("list {path:?}: {e}")) {
            let entry = entry.expect("dir entry");
            let name = entry.file_name();
            let mut p = rel.to_vec();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name.as_bytes());
            walk_into(&entry.path(), &p, out);
        }
        out.insert(
            rel.to_vec(),
            Seen {
                kind: 'd',
                perm,
                size: meta.len(),
                data: None,
                id,
            },
        );
    } else {
        assert!(meta.is_file(), "{path:?} is neither file nor dir");
        let data = fs::read(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
        out.insert(
            rel.to_vec(),
            Seen {
                kind: 'f',
                perm,
                size: meta.len(),
                data: Some(data),
                id,
            },
        );
    }
}

/// The raw errno of an io result that must have failed.
pub fn errno_of<T: std::fmt::Debug>(what: &str, r: std::io::Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("{what} succeeded ({v:?}) but should have failed"),
        Err(e) => e
            .raw_os_error()
            .unwrap_or_else(|| panic!("{what}: {e} has no errno")),
    }
}

/// The store's reader, counting the mount's reads (views) of one tree.
pub struct CountingSource {
    inner: StoreReader,
    watched: ObjectId,
    reads: AtomicU64,
}

impl CountingSource {
    /// How many times the watched tree was read so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }
}

impl ObjectSource for CountingSource {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.inner.tree(id)
    }
    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        if *id == self.watched {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.tree_view(id)
    }
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.inner.blob(id)
    }
    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        self.inner.blob_of_size(id, size)
    }
}

/// Mounts `root` with a one-tree cache, through a source that counts the reads of tree
/// `watched` (hex); `None` where FUSE is unavailable outside CI.
pub fn mount_counting(
    env: &Env,
    root: ObjectId,
    watched: &str,
) -> Option<(Mounted, Arc<CountingSource>)> {
    let source = Arc::new(CountingSource {
        inner: env.store.objects().reader(),
        watched: watched.parse().unwrap(),
        reads: AtomicU64::new(0),
    });
    let opts = MountOptions {
        tree_cache_entries: 1,
        ..MountOptions::default()
    };
    let m = env.mount_source(source.clone(), root, &opts)?;
    Some((m, source))
}
