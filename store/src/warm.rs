//! Warming the page cache for a mount another process is starting: [`warm_for_mount`].
//!
//! `mount --daemon` serves from a new process (a fresh `exec`: the workspace forbids
//! `unsafe`, so no `fork`). From a cold cache that process waited on the disk some twenty
//! times in a row before its mount answered: the store's marker, the snapshot record, the
//! expansion record, the tree index's first page, the lock, each a directory
//! lookup and a read of its own (the lease is a lock on the record: see `lease`). The
//! process that started it has nothing to do meanwhile, so it reads the same files first,
//! and the server then finds them in memory. What this gains is the overlap of the server's
//! start (its `exec`, loader and setup) with the disk, not reads side by side: the benchmark
//! VM's disk served 16 cold reads from 16 threads no faster than from one, and a warm-up of
//! five threads (one per chain of reads) was no faster than two. One chain, record first,
//! on the thread that waits for the server, is faster still: it starts a thread's start
//! sooner, and after its first lookup the store's root directory and its first inodes (the
//! marker and the lock sit next to the root: see `Store::open_or_create`) are in memory. Nor did
//! asking for a tree index's end ahead (`posix_fadvise`) help, as a larger read queued before
//! the small ones the server waits on.
//!
//! Read-only by construction: no store is opened (an open may raise an older store's marker),
//! nothing is locked, created, written or listed, and every error is ignored. A directory is
//! warmed by looking up a name it does not hold ([`WARM_PROBE_NAME`]): the lookup reads the
//! directory's blocks, which the server's lookup of another name there reads again. The
//! marker and the expansion record are read only as regular files, not through a symlink; the record and the index are read as the server reads them.
//! The server does the real reads, checks and refusals; whatever this reads is only a hint to
//! the page cache.

use std::fs;
use std::path::Path;

use crate::catalog::Catalog;
use crate::id::ObjectId;
use crate::index::Index;
use crate::inner::Inner;

/// The most this reads of one small file (the marker, an expansion record).
const SMALL: u64 = 4096;

/// A name no store directory holds (a lease is `PID-TOKEN`, an index or record a hex id):
/// looked up to read a directory's blocks without opening or listing it.
pub const WARM_PROBE_NAME: &str = ".zeroclaw-bundle-warm";

/// Reads, and drops, what a mount of `snapshot` from the store at `root` reads before it
/// answers (see the module doc). Returns when done; never fails.
pub fn warm_for_mount(root: &Path, snapshot: &ObjectId) {
    // The store as paths only: no marker is read or raised, nothing is created.
    let inner = Inner::at(root);
    let index = Index::new(&inner);
    // The record, then what it names: the root's expansion record and tree index. Their
    // lookups read the store's root directory and its first inodes, where the marker and
    // the lock sit (next to the root: see `Store::open_or_create`), so these come cheap after.
    if let Ok(snap) = inner.objects().read_snapshot(snapshot) {
        read_small(&index.expansion_record_path(&snap.root));
        // The index's first page (its header and the root tree): what a mount reads first.
        index.read_index_head(snapshot, &snap.root);
    }
    // The store's own files, which do not depend on the record.
    read_small(&root.join(crate::handle::MARKER));
    for path in [
        Catalog::new(&inner).signatures_dir(snapshot),
        root.join(crate::lock::LOCK_FILE),
    ] {
        let _ = fs::symlink_metadata(path);
    }
}

/// [`warm_for_mount`] of the snapshot `reference` names when the store answers it without
/// the catalog ([`Catalog::resolve_without_catalog`], itself read-only: the reference table, a
/// directory listing and the candidates' records); anything else is left to the server (the
/// catalog is the server's to open).
pub fn warm_for_mount_ref(root: &Path, reference: &str) {
    let id = match ObjectId::from_full_ref(reference) {
        Some(id) => id,
        None => match Catalog::new(&Inner::at(root)).resolve_without_catalog(reference) {
            Some(id) => id,
            None => return,
        },
    };
    warm_for_mount(root, &id);
}

/// Reads up to [`SMALL`] bytes of `path` when it is a regular file (not through a symlink,
/// without blocking on a FIFO).
fn read_small(path: &Path) {
    let _ = crate::sys::read_regular(path, SMALL);
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    use super::*;
    use crate::handle::Store;
    use crate::snapshot::Snapshot;
    use crate::tree::{EntryKind, Tree, TreeEntry};

    /// Every path under `dir` (itself included) with its inode, size and change time: what
    /// any write, creation or removal under it would change.
    fn state(dir: &Path) -> Vec<(PathBuf, u64, u64, i64, i64)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(path) = stack.pop() {
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                for entry in fs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
            }
            out.push((
                path,
                meta.ino(),
                meta.len(),
                meta.ctime(),
                meta.ctime_nsec(),
            ));
        }
        out.sort();
        out
    }

    #[test]
    fn warming_reads_a_store_and_changes_nothing_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = Store::open_or_create(&root).unwrap();
        let text = b"warm";
        let file = TreeEntry {
            name: b"f.txt".to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: text.len() as u64,
            id: store.objects().write_bytes(text).unwrap(),
        };
        let tree = store
            .objects()
            .write_tree(&Tree::from_entries(vec![file]).unwrap())
            .unwrap();
        let lock = store.write_lock().unwrap();
        let id = store
            .catalog()
            .commit_snapshot(&lock, &Snapshot::for_test(tree, "warm"), None)
            .unwrap();
        drop(lock);
        assert!(store.index().recorded_expansion(&tree).is_some());
        // The lock file and the lease directory are what a mount creates: absent here, they
        // must stay absent.
        let _ = fs::remove_file(root.join(crate::lock::LOCK_FILE));
        let _ = fs::remove_dir_all(store.maintenance().leases_dir());
        let before = state(dir.path());
        warm_for_mount(&root, &id);
        warm_for_mount(&root, &tree);
        warm_for_mount_ref(&root, &id.to_hex()[..12]);
        warm_for_mount_ref(&root, "a-name");
        assert_eq!(state(dir.path()), before);

        // No store there: none is made.
        let missing = dir.path().join("missing");
        warm_for_mount(&missing, &id);
        assert!(!missing.exists());
        assert_eq!(state(dir.path()), before);
    }
}
