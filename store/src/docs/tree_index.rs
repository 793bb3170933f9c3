//! # The tree index and the expansion record
//!
//! ## Tree index
//!
//! Every commit (snapshot, export, unpack, pull) ends by writing the trees-only pack of the
//! snapshot's root tree to `trees/<root-tree-id>.pack` (to `tmp/`, fsynced, renamed, the
//! directory fsynced), after the catalog entry, unless that root has one already: snapshots
//! with the same root (every no-op capture) share one index, so a no-op writes none. The record
//! is not in it (one small object, read from the objects). It is derived from committed
//! objects, so a crash or a full disk before it costs only the index, and a failure to write it
//! is a notice, not a failed commit.
//!
//! `diff`, `mount`, `ls`, `checkout` and `pack` read a snapshot's trees from it: one file read
//! whole (up to 64 MiB, about 800,000 entries; larger ones by positioned reads), so a cold diff
//! of two snapshots reads two files instead of one object per tree, and a mount's listings cost
//! no object reads. A mount reads one page first: the header and the root tree right after it
//! (where the writer puts it), hashed against the root id; the rest is read at the first lookup
//! below the root, or whole shortly after the mount answers.
//!
//! It is never trusted: the trailer is checked when it is read, every tree it hands out is
//! hashed against its id, and one that does not open, is rooted elsewhere or fails a read is
//! dropped with one `notice:` line on stderr, the trees then coming from the objects (same
//! answers). A missing index is silently the objects. An older build's per-snapshot index
//! (`trees/<snapshot-id>.pack`, rooted at the record) is still read when the root has none, and
//! `reindex` converts it; an older build reading a store this one wrote finds no index under
//! its name and reads the objects. `verify` checks each snapshot's index against the objects
//! (it must verify and hold exactly every tree the snapshot reaches), `reindex` writes missing
//! and bad ones, and `gc` removes those no kept snapshot or live mount uses.
//!
//! ## Expansion record
//!
//! Beside each index, `trees/<root-tree-id>.expansion` (six text lines: root, depth, entries,
//! file bytes, a blake3 checksum) records what the root tree expands to, computed with the index
//! from a walk that read every tree, and written only when that is within the expansion limits
//! ([`crate::limits`]). A mount of a store snapshot that has one does not walk every tree
//! before it answers: it reads the root tree and the index's entry table, answers, then reads
//! the index whole in the background.
//!
//! The record is the store's own word, like the catalog and `trust.toml`: whoever can write the
//! store can change what it says. Nothing from outside is taken on its word: a pack file or
//! remote snapshot is always walked before it is mounted, and `unpack`/`pull` walk what they
//! receive before it enters the store. A damaged record (checksum, root line) or one past
//! today's limits is ignored (the mount walks), `verify` reports a record that disagrees with
//! the trees, `reindex` writes missing ones and replaces bad ones, and `gc` removes one with its
//! index.
