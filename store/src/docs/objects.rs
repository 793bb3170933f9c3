//! # Objects
//!
//! Objects are blobs (whole files), trees (a canonical, versioned encoding of one directory:
//! sorted names, kind file / exec-file / dir, permission bits, size, id; nothing host-specific),
//! and snapshot records. An object's id is the blake3 of its uncompressed bytes. Tree sizes are
//! bounded by `i64::MAX` and `verify` checks each one against its blob or subtree.
//!
//! ## File modes (tree format 2)
//!
//! Each regular file's entry records its permission bits (`st_mode & 0o777`, from the fstat of
//! the opened fd), and a publish (`checkout`, `export`) creates the file with exactly those bits
//! whatever the umask (`fchmod` on the new fd when the umask would strip any), as ZeroClaw's own
//! `agents export` does: a `0600` `.env` stays `0600`. Setuid, setgid and sticky are never
//! recorded, so never published (a bundle must not hand whoever publishes it a setuid file).
//! Directory modes do not travel (ZeroClaw does not keep them either): every directory is
//! 0755. A file is `exec-file` exactly when its mode has an execute bit, so the kind and the
//! mode always agree; decoding refuses a mode beyond 0o777, one that disagrees with its kind,
//! and a directory mode other than 0o755. A chmod changes a file's tree entry, so its tree id
//! and the snapshot; the stat cache never supplies a mode (a cache hit takes it from the walk's
//! own no-follow stat, and the cache key includes the ctime a chmod moves).
//!
//! Trees written before modes were recorded (tree format 1) are still read everywhere (stores,
//! packs, remotes, tree indexes) with the mode their kind implies: file 0644, exec-file 0755,
//! which is what older builds published. A decoded tree keeps its format, so a pack or push
//! copies a format-1 tree under its own id; every new tree is format 2, so a re-capture of
//! unchanged content gets a new root id yet diffs equal to the old snapshot.
//!
//! ## Compressed objects (store format 3)
//!
//! An object of more than 4 KiB and at most 256 KiB is stored as one zstd frame (level 3, its
//! content size in the frame header) at `objects/ab/<62 hex>.zst` when that saves at least an
//! eighth of its bytes; every other object stays raw at `objects/ab/<62 hex>`. So large files
//! are still read in place at any offset (a mount's read is one `pread`), and an object of one
//! 4 KiB block or less, which occupies one block either way, costs no CPU. Readers decode a
//! compressed object whole into memory (at most 256 KiB; the frame is bounded before it is
//! read and must declare its size), and a frame that does not decode is reported like a
//! corrupt object. `pack` puts a stored frame into the pack as it is, and `unpack` and `pull`
//! land a pack's frame as it is.
//!
//! To check an object by hand: a raw one with `b3sum objects/ab/<62 hex>`, a compressed one
//! with `zstd -dc objects/ab/<62 hex>.zst | b3sum`, any file with
//! `zeroclaw-bundle cat SNAPSHOT:PATH | b3sum`; `zeroclaw-bundle verify` rehashes every object
//! wherever it is stored.
//!
//! ## Packed objects (store format 4)
//!
//! A capture (`snapshot`, `export`) appends every object of at most 256 KiB it stores (raw, or
//! one zstd frame under the rule above) to one pack file instead of a file each, as git and
//! restic do: most objects of an agent's workspace are that small, and a file each costs a 4 KiB
//! block at least, an inode, a create and a rename, and a restore opens every one again. The
//! pack has the format of a travel pack ([`super::packs`]) with an objects-only flag instead of
//! a snapshot; it is written in `tmp/`, fsynced, and only then renamed to
//! `objects/packs/<that digest>.pack`, before the commit's `syncfs` and the record, so a pack in
//! `packs/` is always whole. Readers keep each pack's index on disk and 4 bytes of each id in
//! memory; a lookup is a binary search and one 57-byte read whose full id must match. An index
//! that is not sorted or points outside its pack makes the pack ignored with one notice, and
//! `verify` names it.
//!
//! `gc` rewrites a pack without its unreachable objects (or deletes it when none is left); an
//! `unpack` or `pull` that lands an object a pack holds damaged drops it from the pack. Every
//! capture writes a pack of its own, so `gc` merges the small ones as
//! `git repack --geometric=2` does: of the packs under half the roll-over size, the largest
//! that each hold at least twice the next smaller stay, and the rest become one pack, their
//! objects in the order they were written (a checkout reads a pack in that order). The number
//! of packs grows with the logarithm of the store, not with the number of captures; the merged
//! pack is whole before the old ones go (a crash between leaves objects in two packs, merged at
//! the next gc). A snapshot record is read loose first, so a mount or `list` loads no pack index
//! to read one. An import (`unpack`, `pull`) packs the small objects it lands the same way,
//! in a pack of its own renamed into `packs/` once everything it carried verified; an object
//! it replaces because the store holds it damaged is landed as a file instead.
//!
//! ## Older stores
//!
//! A store of an older format is read as it is; its marker is raised to this build's version
//! when this build opens it (left as is when the store is not writable), so an older build then
//! refuses it ("has format version 5; ... upgrade zeroclaw-bundle") instead of reporting
//! compressed or packed objects missing, or meeting trees it cannot read (its `gc` would not
//! see what they reach).
