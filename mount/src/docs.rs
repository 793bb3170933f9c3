//! # How a mount behaves
//!
//! Long-form documentation (text only, shown by `cargo doc` beside the code). The crate
//! documentation has the shape of the code; this chapter says what an operator sees and why.
//!
//! ## Requirements and readiness
//!
//! `zeroclaw-bundle mount` needs `/dev/fuse` and `fusermount3` (the `fuse3` package). It
//! reports the mount (and `mount --daemon` returns) once the mount is in place and its daemon
//! has answered the kernel's FUSE handshake: a request through it from then on waits for the
//! daemon, it never fails. Two mounts of one directory started at once make one mount; the
//! others are refused as already mounted (the check and the mount hold a lock on the
//! directory). A lock another program keeps on the directory delays a mount by a second at
//! most. A mountpoint inside the store (however spelled) is refused: the mount would hide the
//! store's own files.
//!
//! ## Read-only, twice over
//!
//! Mounts are read-only with `nosuid,nodev,noexec,default_permissions`. Files show exactly the
//! mode a checkout writes (a `0600` key shows `0600`), directories 0755, all owned by the
//! mounting user. Every write answers EROFS, twice over: the kernel's `ro` refuses write opens
//! and changes before the daemon hears of them, and the daemon refuses them itself (every file
//! open reaches it and is checked: `tests/fuse/readonly.rs` checks this on a mount without
//! `ro`, and after root remounts it `rw`, which FUSE allows). Opens are therefore never
//! answered ENOSYS (which would let the kernel open files on its own): after a remount `rw` a
//! write open would then succeed without the daemon's check, and a shared writable `mmap`
//! would change what every reader of the mount sees.
//!
//! ## What it serves
//!
//! Each file and directory carries the extended attribute `user.zeroclaw.blake3` with its
//! object id ([`crate::XATTR_BLAKE3`]); the mount's root carries `user.zeroclaw.signatures`
//! ([`crate::XATTR_SIGNATURES`]: who signed the snapshot). The `user.` namespace is the only
//! one: any other name answers EOPNOTSUPP, as on a kernel filesystem with only a `user.`
//! handler, so `ls -l` stops asking for ACLs and security labels after the first entry.
//! Entries and attributes never expire and the page cache is kept across opens, so a warm
//! `find` over the mount costs what it costs on a plain directory. Flushes are answered ENOSYS
//! once and the kernel stops sending them (nothing is ever dirty). Each object is checked
//! against its blake3 on first read (a passed-through file's on first open, see below); a
//! damaged one answers EIO. A file of up to 256 KiB is read, checked and handed to the
//! kernel's page cache at its first open, so reading it then asks the server nothing more
//! (a cold `tar` of a 10,000-file tree makes a third fewer requests).
//!
//! ## Reads at the speed of the disk (FUSE passthrough)
//!
//! On Linux 6.9 and later, a mount whose server runs as root lets the kernel read a large file
//! straight from the store's object file, with no round trip to the server per read and no
//! second copy of the bytes in the page cache. It applies to a file of more than 256 KiB
//! whose object is stored as one raw file (`objects/<2 hex>/<62 hex>`, which the store writes
//! once, makes read-only and never writes again), and only after that object hashed to its
//! id: the server checks it on the file's first open, as it checks every object on first read,
//! and a damaged one fails the open with EIO and is never handed to the kernel. Smaller files
//! (which the store may keep compressed or packed), a pack file's mount and a remote
//! snapshot's mount are read through the server, as before (a small file's bytes handed over
//! at its first open); so is every file when the
//! kernel does not offer passthrough, when the server lacks `CAP_SYS_ADMIN` (a mount by a user
//! other than root), when the kernel refuses a backing file (a store on overlayfs, say: the
//! mount then stops trying), or with `--no-passthrough`
//! ([`crate::MountOptions::passthrough`]), which is there for comparison.
//!
//! Which path a mount takes is on its root: `getfattr -n user.zeroclaw.passthrough MOUNT`
//! prints `on`, or `off: REASON` ([`crate::XATTR_PASSTHROUGH`], [`crate::Passthrough`]);
//! `zeroclaw-bundle -v mount` prints the same as it mounts.
//!
//! Listing a directory does not hint its files' contents to the page cache until a file of the
//! mount has been opened: the first file read in a directory (or opened, when it is passed
//! through) hints that file and its later siblings, so a `find` reads metadata only while a
//! `tar` over the mount reads ahead.
//!
//! ## Leases and unmounting
//!
//! While mounted, a lease keeps `gc` from deleting anything the mount serves, and the catalog
//! is not held: the lease is a shared `flock` on the snapshot's record (see
//! [`zeroclaw_bundle_store::docs::layout`]). A server that ends after its mount was unmounted
//! never unmounts a newer mount of the same directory: fuser's own teardown, which unmounts by
//! path once more and can take a dead connection for a live one, is bypassed
//! (`tests/fuse/lifecycle.rs`). [`crate::unmount`] only touches mounts whose source is
//! `zeroclaw-bundle`.
