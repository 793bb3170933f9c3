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
//!   reads patches (`content.rs`); the binary's `cmd/diff.rs` only parses and prints.
//! - `src/statmatch.rs` is the one stat-match and racy-timestamp rule of capture and publish.
//! - `src/progress.rs` is the `Progress` trait the library reports to; the terminal bar
//!   (indicatif) is the binary's `cmd::TermProgress`, so nothing in the library draws.
//! - `store/` owns objects, trees, records, packs and the catalog (the only sled user, with
//!   typed `SourceKey`/`DestKey` keys and a format version); `mount/` is a thin FUSE adapter.
//! - `src/bin/zeroclaw-bundle/` is the binary, the library's first client, built with the
//!   default `cli` feature (clap, indicatif, signal-hook): `cli.rs` parses, `cmd/<verb>.rs`
//!   calls the library and prints, `cmd/entry.rs` is the one place errors are printed and exit
//!   codes picked, `interrupt.rs` maps SIGINT/SIGTERM onto the library's cancel token. A
//!   program that links the library with `default-features = false` builds none of it.
//! - `src/api/` is the public API ([`super::library`]); `src/docs/` holds these chapters; every
//!   other module is private to the crate.
//! - The release profile aborts on a panic and strips symbols, so a cold start reads a smaller
//!   binary; every store writer is already safe against a process that dies at any point (temp
//!   files are swept by `gc`, staged publishes by `recover`).
