//! # Reliability: what each guarantee rests on, and the test that holds it
//!
//! - **Crash consistency.** The store's write order (objects, `syncfs`, record, `syncfs`,
//!   catalog entry; [`zeroclaw_bundle_store::docs::layout`]) and the `RENAME_EXCHANGE`
//!   publish. `tests/cli/crash_campaign.rs` SIGKILLs `snapshot`, `export --force`,
//!   `gc --grace 0` and `reindex` at seeded random points (24 kills by default, hundreds with
//!   `ZCB_LONG=1`), then checks `verify`, every listed snapshot, and that the destination is
//!   the whole old or the whole new bundle (`recover` finishes a publish a kill cut in half).
//!   An `update` or `rollback` writes an intent journal before it changes the agent
//!   (`crate::import::journal`); `tests/cli/update_recover.rs` SIGKILLs both at each step
//!   (before the intent, before and during the workspace publish, before provenance, before
//!   `config.toml`, after it), then `recover --install`: the agent is exactly as before or
//!   exactly as after, byte for byte, and ZeroClaw loads the config.
//!   `tests/cli/pack.rs` kills `unpack` at random points: the store verifies, lists nothing that
//!   misses objects, and `gc --grace 0` leaves `tmp/` empty.
//! - **gc against writers.** The store lock ([`zeroclaw_bundle_store::docs::layout`]).
//!   `tests/cli/store_races.rs` pauses a capture at the seam between reusing an object and
//!   committing the record while gc runs, and runs 8 writers beside 2 `gc --grace 0` for
//!   several rounds (`ZCB_LONG=1`: many more): nothing lost, nothing listed that is gone.
//! - **Full disk.** `tests/cli/full_disk.rs` mounts a 6 MiB tmpfs (as root; it fails under `CI`
//!   when it cannot) and fills it to many levels: every write fails with "No space left on
//!   device" naming the path, at the object, tree, record, catalog and staging stages; a
//!   catalog broken by it is set aside and rebuilt; the next run after freeing space works
//!   without repair.
//! - **Destinations.** `--out` overlapping a source or the store (either way, through symlinks
//!   or bind mounts, compared by identity) is refused before anything happens
//!   (`tests/cli/store_overlap.rs`). A failure injected at each step of staging and swap leaves
//!   the old bundle byte for byte; a destination swapped at the seam right before the rename is
//!   refused.
//! - **Hostile trees.** Expansion limits in one place (`store/src/limits.rs`: depth 256, 10
//!   million entries, 1 TiB), checked over tree objects before `checkout`, `ls -r`, `mount` and
//!   `diff` walk anything (a store mount takes the store's expansion record instead when there
//!   is one): a 20,000-deep chain and a 2^40-path diamond are refused in under a second, naming
//!   the snapshot (`tests/cli/hostile_trees.rs`).
//! - **Hostile records and packs.** Decoders validate every field and bound every size; every
//!   printed name, error and note goes through one escaper (`tests/cli/ux.rs`,
//!   `tests/cli/diff.rs`). Every truncation and every single-byte flip of a small pack, and
//!   lying offsets, lengths, counts, orders, duplicates and a decompression bomb, are refused
//!   naming the pack (`store/src/pack.rs` tests).
//! - **Fuzzing.** `scripts/fuzz.sh [SECONDS]` runs the `cargo fuzz` targets in `tests/fuzz/`
//!   (tree and record decoders, the pack reader, the name unescaper, the remote's index and
//!   record parsers) on nightly, else a seeded mutation harness on stable (20k inputs per
//!   decoder in every test run).
//! - **Secrets.** `tests/cli/zeroclaw_real.rs` exports installs built from ZeroClaw's own
//!   configs (`tests/zeroclaw/`, from ZeroClaw's repository and the `zeroclaw-config` 0.8.7
//!   crate) with a distinct secret in every schema secret field, and scans every bundle file,
//!   every store file (objects and catalog), stdout and stderr. `src/agent/closure_fuzz.rs`
//!   mutates those configs (2,000 per test run) and checks the closure never panics, never
//!   renders a planted secret, and re-parses.
//! - **Read-only mount.** The kernel's `ro` option refuses write opens and every namespace,
//!   attribute and xattr change before the daemon hears of them; the daemon refuses the same
//!   itself, tested on a real mount without `ro` ([`zeroclaw_bundle_mount::docs`]).
//! - **Memory at scale.** The goal is a peak under 64 MiB for a capture, a no-op capture and a
//!   checkout of 300,000 files, 100,000 of them in one directory (`scripts/scale.sh` measures
//!   it; no assertions). What keeps it there: the stat-cache records a capture adds (and a
//!   checkout's destination record) are collected up to 1 MiB, then spilled to an unnamed
//!   `O_TMPFILE` under `<store>/tmp/` and read back in pieces; a source's stat cache is a file
//!   under `<store>/dircache/` read and written in 64 KiB pieces, not a sled value (sled keeps
//!   whatever is inserted into it in memory for the session); the tree index of a new snapshot
//!   is written reading its parent's index tree by tree; at most 256 files per directory are in
//!   flight; a capture drops the loaded stat cache once it is written; a checkout reads trees
//!   from the tree index one by one. The no-op capture of the huge layout is the one at the
//!   bound: the loaded cache and the 100,000-entry directory's entries are held together.
