//! The zeroclaw-bundle store: content-addressed objects named by their blake3, tree and
//! snapshot objects, and a rebuildable catalog.
//!
//! **A handle and five rooms.** [`Store`] is the handle: it opens or creates a store
//! directory, owns its `STORE` marker and its `lock` ([`Store::write_lock`]), and hands out
//! five rooms, each a small value borrowing the handle's shared state and owning its own files:
//! [`Store::objects`] ([`ObjectDir`]: blobs, trees and snapshot records, loose, compressed or
//! packed, and a reader over them; `objects/`, `tmp/`), [`Store::index`] ([`Index`]: the tree
//! index of each snapshot's root and the record of what it expands to; `trees/`),
//! [`Store::catalog`] ([`Catalog`]: the commit, snapshots and names, the stat caches of
//! captures, destination records, verdicts and signatures; `catalog/`, `dircache/`, `destcache/`,
//! `signatures/`), [`Store::packs`] ([`Packs`]: a snapshot written out as a pack, packs
//! unpacked and imported; no directory of its own) and [`Store::maintenance`]
//! ([`Maintenance`]: verify, gc, reindex, forget and the leases of mounts; `leases/`). A room
//! reaches a lower one directly (packs and maintenance use the catalog, index and objects;
//! the catalog uses the index and objects; the index uses the objects), never through the
//! handle or this crate root. The formats every room shares (trees, snapshot records, the pack
//! codec, limits) sit below them all.
//!
//! Layout of a store directory:
//!
//! ```text
//! <store>/STORE              format marker and version
//! <store>/objects/ab/cdef..  immutable objects, named by the blake3 of their exact bytes
//! <store>/objects/ab/cdef...zst  a small object stored as one zstd frame (format 3), named
//!                            by the blake3 of its uncompressed bytes
//! <store>/objects/packs/<digest>.pack  the small objects of a capture, packed (format 4;
//!                            see `packed`)
//! <store>/tmp/               temp files of writers in progress, staging dirs of imports
//! <store>/catalog/           sled: snapshot index, names (rebuildable)
//! <store>/trees/<root>.pack  the tree index of every snapshot whose root tree is <root>: a
//!                            trees-only pack rooted at that tree (a derived cache); an older
//!                            build's per-snapshot index is `trees/<snapshot>.pack`
//! <store>/trees/<root>.expansion  what tree <root> expands to (depth, entries, bytes),
//!                            written with its index, so a mount need not walk every tree
//! <store>/dircache/<hash>    the stat cache of each captured source and each directory
//!                            `diff` hashed (outside sled)
//! <store>/destcache/<hash>   the destination record of each checkout or export directory
//!                            (outside sled)
//! <store>/leases/            leases of mounts that are not a lock on their record: a file per
//!                            mount, and records forgotten while mounted (see `lease`)
//! <store>/signatures/<id>/   opaque signatures of snapshot <id>, each named by its blake3
//!                            (outside the objects: signing never changes an id)
//! <store>/lock               the store lock (flock): writers shared, gc and reindex exclusive
//! ```
//!
//! **The crash invariant.** A capture writes in this order: blobs, then trees (each object
//! to `tmp/` and renamed into place), then [`ObjectDir::sync`] makes them durable, then the
//! snapshot record (an object), synced again, and only then the catalog entry, flushed. A
//! crash at any point leaves at most unreferenced objects (which `gc` removes), never a
//! record or catalog entry that points at missing data. [`Catalog::commit_snapshot`] is the one
//! place that enforces the order; `verify` checks its result.
//! Last, the commit writes the tree index of the snapshot's root tree unless that root has one
//! (see [`SnapshotSource`]): a cache derived from committed objects, whose absence is never an
//! error, so it comes after the catalog entry and a failure to write it does not fail the
//! commit.
//!
//! **gc and writers.** A capture decides early that it needs no new object for a file (the
//! stat cache names its blob, or an object of that hash and length already exists) and
//! commits the record that references it much later. A gc that marks in between sees the
//! reused object unreachable and, if old enough, deletes it: the capture then commits a
//! snapshot that misses data. With a short grace, gc also sweeps a record written after its
//! mark while the catalog entry is added anyway. Two designs close this:
//!
//! - git freshens an object's mtime whenever a writer reuses it, so the grace period covers
//!   it. That stays a race (gc may have listed the object's age just before the touch) and it
//!   protects nothing at `--grace 0`; it also makes every no-op capture touch every object.
//! - restic takes an exclusive lock for prune and shared locks for backups.
//!
//! We take restic's: a `flock(2)` on `<store>/lock` ([`Store::write_lock`]). A capture holds
//! it shared from before it loads the stat cache until its catalog entry is flushed
//! ([`Catalog::commit_snapshot`] and the CLI's capture require the guard, so a writer cannot
//! forget it); `forget` and a mount registering its lease hold it shared too; `gc` and
//! `reindex` hold it exclusive for their whole run, so two gcs serialize and a catalog can
//! never list a record gc removed. Captures run concurrently with each other; gc waits for
//! running captures and captures wait for a running gc (bounded, then
//! [`StoreError::StoreBusy`]). The kernel drops a dead process's lock, so a SIGKILL leaves no
//! stale lock. The grace period remains as a second line for writers that do not take the
//! lock (an older binary, a library user writing raw objects).
//!
//! Nothing here knows what an agent is; sled and blake3 types stay private. The store's
//! layout, formats, packs and tree index are described at length in [`docs`].
//!
//! ```
//! use zeroclaw_bundle_store::{Store, Tree, TreeEntry};
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_or_create(&dir.path().join("store")).unwrap();
//! let (blob, len) = store.objects().write_from(&mut &b"hello"[..]).unwrap();
//! let tree = Tree::from_entries(vec![TreeEntry::file(b"hello.txt".to_vec(), 0o600, len, blob)])
//!     .unwrap();
//! let root = store.objects().write_tree(&tree).unwrap();
//! assert_eq!(store.objects().read_tree(&root).unwrap(), tree);
//! ```
#![deny(missing_docs)]

// The handle and the state its rooms share.
mod handle;
pub mod heap;
mod inner;

// The five rooms.
mod catalog;
mod index;
mod maintenance;
mod objects;
mod packs;

// What every room shares: formats, codecs, limits and system calls.
pub mod docs;
mod error;
mod escape;
mod id;
pub mod limits;
mod lock;
mod pack;
mod pack_format;
mod pack_writer;
mod snapshot;
mod source;
mod sys;
mod tree;
mod tree_view;
mod warm;

pub use handle::{Store, STORE_VERSION};
pub use lock::WriteLock;

pub use catalog::{
    Catalog, CatalogSession, DestCache, DestKey, DestRecord, SnapshotSummary, SourceKey,
    SourceStatCache, StatCache, StatCacheUpdate, StatEntry, StoredSignature, Verdicts,
};
pub use index::{Index, IndexState, RecordState, SnapshotSource, TreeSourceStats};
pub use maintenance::{
    Forgotten, GcReport, Lease, Maintenance, ReindexReport, VerifyProblem, VerifyReport,
};
pub use objects::{Blob, ListedObject, ObjectDir, StoreReader, VerifyingReader};
pub use packs::{ImportWatch, NoWatch, Packs, UnpackReport};

pub use error::{DecodeError, ModeProblem, StoreError};
pub use escape::{
    c1_alternative, escape_message, escape_name, escape_text, is_hidden, unescape_name,
};
pub use id::{IdHasher, ObjectId};
pub use pack::{
    decode_pack_object, read_pack_layout, PackLayout, PackOptions, PackOverStore, PackReader,
    PackStats,
};
pub use pack_format::{PackEntry, PACK_VERSION};
pub use snapshot::{
    name_problem, validate_name, CaptureReport, Skipped, Snapshot, SnapshotKind, Tally,
    RECORD_PREFIX,
};
pub use source::{resolve_path, ObjectSource};
pub use sys::random_token;
pub use tree::{
    invalid_name_reason, EntryKind, Tree, TreeEntry, TreeEntryRef, TreeShape, DIR_MODE, MAX_SIZE,
    MODE_BITS,
};
pub use tree_view::TreeView;
pub use warm::{warm_for_mount, warm_for_mount_ref, WARM_PROBE_NAME};
