//! # Architecture
//!
//! Three crates; the arrows are the only dependencies (`mount` never sees the CLI, `store` never
//! knows what an agent is):
//!
//! ```text
//! zeroclaw-bundle (src/)  ──>  zeroclaw-bundle-mount (mount/)  ──>  zeroclaw-bundle-store (store/)
//!         └─────────────────────────────────────────────────────────────────^
//! ```
//!
//! One path for every verb, each a library function the CLI, the tests and later features call:
//!
//! ```text
//! agent::plan_export ─> capture (keep predicate) ─┐
//!                                                 ├─> export::commit ─> store: objects, record, catalog
//! snapshot --dir: export::capture_dir ───────────┘            │
//!                                                              v
//! checkout / export: publish::check (resolve + admit once) ─> publish::publish_snapshot ─> staged swap
//! mount / diff / pack / verify / gc read the store (or a pack) by snapshot id
//! ```
//!
//! - `src/agent/` knows what a ZeroClaw install is: an adapter around ZeroClaw's own
//!   `zeroclaw-config` 0.8.7 (load and migrate, plan the closure, render and validate), our
//!   stricter layers (name scrub, process flags, credential-looking values), the semantic
//!   comparison of two bundles, and the "memory stays behind" rule (a keep predicate handed to
//!   capture).
//! - `src/capture/` is the descriptor-verified walker; it takes a keep predicate and knows no
//!   agent. `src/export.rs` holds `capture_loaded`, `capture_dir` and the one `commit` they share.
//! - `src/publish/` owns the destination: `check` resolves and admits it once (an `Admitted`),
//!   `publish_snapshot` publishes a stored snapshot there and keeps the destination record; what
//!   marks a bundle (its manifest) comes from the caller, so publish knows no agent.
//!   `publish::file` is the one staged single-file writer (`pack --out`).
//! - `src/diff/` resolves both sides (`side.rs`: snapshot, `SNAP:PATH`, directory captured on the
//!   fly, pack, remote ref), runs the comparison with its semantic section (`compare.rs`) and
//!   reads patches (`content.rs`); `src/cmd/diff.rs` only parses and prints.
//! - `src/statmatch.rs` is the one stat-match and racy-timestamp rule of capture and publish.
//! - `src/progress.rs` is the `Progress` trait the library reports to; the terminal bar
//!   (indicatif) is `cmd::TermProgress`, so nothing below `src/cmd/` draws.
//! - `store/` owns objects, trees, records, packs and the catalog (the only sled user, with
//!   typed `SourceKey`/`DestKey` keys and a format version); `mount/` is a thin FUSE adapter.
//! - `src/cmd/<verb>.rs` parses nothing and computes little: it calls the library, prints, and
//!   adds CLI hints to library errors (`cmd::hint`).
//! - `src/cmd/entry.rs` is both binaries' entry (parse, run, the one place errors are printed
//!   and exit codes picked) and the front's hand-over: `src/front.rs` (`zeroclaw-bundle`) runs
//!   `mount`/`umount`, `src/main.rs` (`zeroclaw-bundle-full`) everything. The front must not
//!   reach the agent or remote code: a mount of a remote ref reaches it only through a function
//!   the full binary passes in (`cmd::mount::run` against `run_front`), and
//!   `tests/cli/binaries.rs` reads the front's symbol table to hold that.
//! - `src/api/` is the public API ([`super::library`]); `src/docs/` holds these chapters; every
//!   other module is private to the crate.
//! - The release profile aborts on a panic and strips symbols, so a cold start reads a smaller
//!   binary; every store writer is already safe against a process that dies at any point (temp
//!   files are swept by `gc`, staged publishes by `recover`).
