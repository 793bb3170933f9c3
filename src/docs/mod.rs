//! Long-form documentation: the reference behind the README. Each chapter is a module that
//! holds only text, so `cargo doc` shows it beside the API it describes (clap's `_tutorial`
//! modules are the model). The README covers installing and everyday use; these chapters say
//! exactly how each verb behaves, what the formats are, and what each guarantee rests on.
//!
//! - [`cli`]: references, where the store and the install are, output, exit codes, publishing
//!   to a directory, interrupts.
//! - [`json`]: the `--json` vocabulary, command by command.
//! - [`bundle`]: what an export guarantees: bundle format 1, the closure, secrets, and where
//!   this tool is stricter than ZeroClaw's own export.
//! - [`diff`]: sides, output formats, the semantic section and new grants.
//! - [`review_import`]: what `review` shows, and how `import` merges, writes and recovers.
//! - [`plugins`]: Agent Plugins: `export-plugin`, and a plugin reviewed, diffed and imported.
//! - [`packs`]: carrying a snapshot as one file.
//! - [`remotes`]: remote stores: credentials, layout, push and pull, remote refs, remote gc.
//! - [`signatures`]: signed snapshots and the trust policy.
//! - [`encryption`]: encrypted packs and remotes (age recipients, identities, what a bucket
//!   still shows, changing recipients).
//! - [`library`]: linking this crate (how `zeroclaw bundle` is meant to work).
//! - [`architecture`]: the crates and the one path every verb takes.
//! - [`reliability`]: what each guarantee rests on and which test holds it.
//! - [`testing`]: running the tests, fuzzing, benchmarks, the next ZeroClaw release.
//!
//! The store's layout and formats (objects, trees, packs, the tree index) are documented in
//! [`zeroclaw_bundle_store::docs`]; the read-only FUSE mount in
//! [`zeroclaw_bundle_mount::docs`].

pub mod architecture;
pub mod bundle;
pub mod cli;
pub mod diff;
pub mod encryption;
pub mod json;
pub mod library;
pub mod packs;
pub mod plugins;
pub mod reliability;
pub mod remotes;
pub mod review_import;
pub mod signatures;
pub mod testing;
