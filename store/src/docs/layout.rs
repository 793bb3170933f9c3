//! # Store layout
//!
//! ```text
//! <store>/STORE              format marker and version, 5 (a newer version is refused with a
//!                            clear error; 1 to 4 are read and raised to 5)
//! <store>/objects/ab/cdef..  immutable objects named by the blake3 of their bytes (`b3sum` verifies any)
//! <store>/objects/ab/cdef...zst  a small object stored as one zstd frame, named by the blake3 of
//!                            its uncompressed bytes
//! <store>/objects/packs/<digest>.pack  the small objects of a capture, packed into one file
//! <store>/tmp/               writers' temp files and staging directories
//! <store>/catalog/           sled, format 2: snapshot index, names (and an older version's
//!                            stat caches and destination records); rebuildable with `reindex`
//! <store>/catalog.no-caches  empty: the catalog holds no stat cache or destination record, so a
//!                            first capture or publish does not open it to look (a hint)
//! <store>/destcache/<hash>   the destination record of each checkout or export directory (the
//!                            stat of each file it wrote, so the next one there reuses it; a file
//!                            per destination, outside sled, checksummed; gc drops the ones whose
//!                            directory is gone)
//! <store>/trees/<root>.pack  the tree index of every snapshot with root tree <root> (a derived
//!                            cache); `trees/<snapshot-id>.pack` from older builds
//! <store>/trees/<root>.expansion  what tree <root> expands to (depth, entries, bytes)
//! <store>/dircache/<hash>    stat cache of each captured source and each directory `diff` read (a
//!                            file per source, outside sled, checksummed; only saves work)
//! <store>/dircache/verdicts-<rules>  what export's credential scan found in each file it read, by
//!                            blob id, under a digest of the scan's rules (an unchanged file is not
//!                            read again; other rules read none of it)
//! <store>/leases/            lease files of mounts whose record is not a loose file, and records
//!                            forgotten while mounted
//! <store>/remotes.toml       configured remotes (`remote add`)
//! <store>/signatures/<id>/   signatures of snapshot <id>, each named by its blake3
//! <store>/trust.toml         allowed_signers file and require_signed (`trust`)
//! <store>/lock               flock: captures, forget and leases shared; gc and reindex exclusive
//! ```
//!
//! A new store is created owner-only (0700), with `trees/`, the marker (staged, renamed in
//! last) and the lock made before the 256 object directories, so the files a mount looks up
//! first sit together in the inode table.
//!
//! ## Write order
//!
//! Blobs, trees, `syncfs`, the snapshot record, `syncfs`, the catalog entry
//! ([`crate::Catalog::commit_snapshot`] is the one place that enforces it): a crash leaves at most
//! unreferenced objects, which `gc` removes. Every object is written to `tmp/`, made read-only
//! and renamed into place; "already exists" is success (dedup). Last, the commit writes the
//! tree index of the snapshot's root unless it has one ([`super::tree_index`]): a derived
//! cache, so a failure to write it is a notice, not a failed commit. Incremental captures reuse
//! blobs of files whose (dev, ino, size, mtime, ctime) are unchanged, except entries modified
//! within 2 s of the capture's start (the racy rule).
//!
//! ## The store lock
//!
//! `gc` and writers never interleave: a capture holds the store lock shared from before it
//! reuses any object until its catalog entry is written, and `gc`/`reindex` hold it exclusive,
//! so gc cannot delete what a capture is reusing and two gcs run one after the other (each
//! waits up to 30 min, `ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS`, then fails saying the store is busy).
//! The [crate documentation](crate) says why this is restic's design and not git's. The
//! kernel drops a dead process's lock, so a SIGKILL leaves no stale lock. sled locks its directory, so each
//! command opens the catalog only for the moment it needs it; a second process waits (up to
//! 20 s, the same variable) and then fails with a clear message.
//!
//! A mount's lease is a shared `flock` on its snapshot's record, which the mount has open
//! anyway: taking it writes nothing (a mount works on a full disk) and the kernel drops it when
//! the mount's process ends. `gc` keeps every record it finds locked and what it reaches;
//! `forget` of a snapshot being served moves its record to `leases/` with the lock still on it,
//! and the first `gc` after the unmount removes it and the data only it reached. A record that
//! is only packed or compressed gets a lease file in `leases/` instead (what older builds'
//! `gc` knows). A `leases/` that is not a real directory (a symlink, a file) is refused by `gc`
//! and `forget`, naming it, and never followed.
//!
//! ## The catalog
//!
//! A catalog that cannot be used (a torn log after a full disk or a crash) is moved aside as
//! `catalog.broken-<time>-<token>` with a one-line notice and rebuilt from the snapshot records;
//! `reindex` never needs the old one. Records are validated when read (name grammar, agent
//! alias, labels, creation time 1970 to 2262); `reindex` leaves invalid ones out and says so,
//! and keeps a name used twice on the newest record. A record found among the objects is not
//! trusted for being there (a file's bytes can be a record): `reindex` lists, and `gc` keeps as
//! roots, exactly the records the catalog lists plus each other valid one that passes
//! `unpack`'s received-record rules (not the content of a file in a snapshot, not dated more
//! than a day ahead, not named like a snapshot the catalog lists); the rest are reported and
//! are not roots.
