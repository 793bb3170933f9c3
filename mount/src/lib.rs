//! zeroclaw-bundle-mount: a read-only FUSE view of one snapshot tree, served from anything
//! that implements [`ObjectSource`] (the store's objects, later a pack file).
//!
//! The view is built on fuser's low-level (inode) API: inode numbers are assigned to tree
//! entries on first sight and stay fixed for the life of the mount; trees live in a bounded
//! LRU as their verified encodings; file reads are positioned reads on the object; each blob is verified against
//! its blake3 id on first open (damage answers EIO); every write answers EROFS. Each file
//! and directory carries the extended attribute `user.zeroclaw.blake3`, its object id.
//! Where the kernel allows it (Linux 6.9+, a server with `CAP_SYS_ADMIN`), an open of a large
//! file whose object is a whole raw file of the store is passed through: the object is
//! verified, then the kernel reads its file directly ([`Passthrough`]; the root's
//! `user.zeroclaw.passthrough` says `on`, or `off: REASON`).
//!
//! Mount options are always `ro,nosuid,nodev,noatime,default_permissions`, plus `noexec`
//! unless [`MountOptions::allow_exec`], and `allow_other` only when asked. A file shows the
//! permission bits its tree entry records, exactly as a checkout writes them (a `0600` key
//! stays unreadable to others, `allow_other` or not; writes are refused by `ro` and the daemon,
//! not by mode bits), directories 0755, all owned by the mounting user. The mount shows in the
//! mount table as source `zeroclaw-bundle[:label]`; [`unmount`] only touches such mounts.
//!
//! This crate knows nothing of the CLI: `zeroclaw-bundle mount` resolves a snapshot, takes
//! a store lease, calls [`mount`], and waits ([`MountHandle::wait`]) while its signal
//! handler calls [`Unmounter::unmount`]; `zeroclaw-bundle umount` calls [`unmount`]. What an
//! operator sees of a mount, and why, is in [`docs`].
//!
//! ```
//! use std::sync::Arc;
//! use zeroclaw_bundle_mount::{check_mountpoint, mount, MountError, MountOptions};
//! use zeroclaw_bundle_store::{Store, Tree, TreeEntry};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_or_create(&dir.path().join("store")).unwrap();
//! let (blob, len) = store.objects().write_from(&mut &b"hello\n"[..]).unwrap();
//! let tree = Tree::from_entries(vec![TreeEntry::file(b"hello.txt".to_vec(), 0o600, len, blob)])
//!     .unwrap();
//! let root = store.objects().write_tree(&tree).unwrap();
//!
//! let mnt = dir.path().join("mnt");
//! std::fs::create_dir(&mnt).unwrap();
//! if let Err(e @ MountError::FuseUnavailable { .. }) = check_mountpoint(&mnt) {
//!     eprintln!("skipping the example: {e}");
//! #   assert!(std::env::var_os("CI").is_none(), "CI must be able to mount: {e}");
//!     return;
//! }
//! let source = Arc::new(store.objects().reader());
//! let mut handle = mount(source, root, &mnt, &MountOptions::default()).unwrap();
//! assert_eq!(std::fs::read(mnt.join("hello.txt")).unwrap(), b"hello\n");
//! handle.unmount().unwrap();
//! ```
#![deny(missing_docs)]

mod cache;
pub mod docs;
mod error;
mod fs;
mod inodes;
mod mountpoint;
mod passthrough;
mod session;
mod sys;

pub use error::MountError;
pub use fs::{XATTR_BLAKE3, XATTR_SIGNATURES};
pub use mountpoint::{check_mountpoint, unmount};
pub use passthrough::{Passthrough, XATTR_PASSTHROUGH};
pub use session::{mount, MountHandle, MountOptions, Unmounter};
pub use zeroclaw_bundle_store::ObjectSource;

pub use sys::FSNAME;
