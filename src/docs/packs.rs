//! # Packs: a snapshot as one file
//!
//! `pack SNAPSHOT --out FILE` writes a snapshot and every object it reaches into one file that
//! proves its own integrity (`--out -` writes it to stdout). `--since BASE` leaves out every
//! object the base reaches (an update, for a host that has the base); `--trees-only` writes a
//! digest (the record and its trees) that the other side can diff against without the file
//! contents. A pack carries the bytes of its files, so a pack of a snapshot holding a file
//! others may not read (a `0600` key) is created `0600`; otherwise 0666 less the umask. A
//! snapshot's signatures travel in its pack ([`super::signatures`]). The format, the reader's
//! checks and the writer are in [`zeroclaw_bundle_store::docs::packs`].
//!
//! `unpack FILE|-` imports exactly the objects its snapshot reaches that the store lacks (as
//! `pull` does): anything else a pack lists (an extra snapshot record, an unused blob) is never
//! written, and a snapshot past the store's expansion limits (depth 256, 10,000,000 entries,
//! 1 TiB) is refused naming the pack. The whole pack is verified before anything becomes
//! visible: every object is hashed and staged under `<store>/tmp/`, and only when the trailer
//! and every object passed are the objects moved into place and the record and catalog entry
//! written. A failure at any object removes the staging directory, so nothing is imported; a
//! kill leaves at most that directory, which `gc` removes. An update pack whose base is missing
//! is refused naming the base, before anything is staged. A store the unpack creates is made
//! beside its path and moved there only once the unpack succeeded: a failed unpack leaves no
//! store behind (nor the directories above it; an empty directory stays empty). `unpack`
//! reports how many objects the pack lists, how many it read, and how many the store already
//! held.
//!
//! A received snapshot never takes over a name this store uses: one whose `--name` already
//! names another local snapshot is refused, and so is one whose creation time lies more than a
//! day ahead (it would stay `agent/<alias>` over every later export). `agent/<alias>` names the
//! newest snapshot of that agent, received or local, so a received agent that is newer than the
//! local one becomes `agent/<alias>` (`show` names the host each came from).
//!
//! `mount FILE MNT` and `diff FILE ...` read a pack in place, after checking its trailer (one
//! sequential read: a damaged pack is refused, as `unpack` refuses it). An update pack reads
//! what it does not carry from this store when the store holds its base, so an update is
//! reviewed before it is unpacked; without the base, `mount` refuses it naming the base (unpack
//! or pull that snapshot first), and `diff --exit-on-new-grants` refuses to judge it. A digest
//! pack compares by content id.
