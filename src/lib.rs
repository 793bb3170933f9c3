//! zeroclaw-bundle: portable ZeroClaw agents. This crate is the library behind the
//! `zeroclaw-bundle` binary, and what ZeroClaw itself links for `zeroclaw bundle ...`.
//!
//! The public API is small: a store handle, [`Bundles`], with one method per verb (snapshot
//! an agent or a directory, export, checkout, list/show/ls/cat, diff, mount, pack/unpack,
//! push/pull, verify, gc); typed errors ([`Error`]: the verb, its target, an [`ErrorKind`], the
//! cause chain); a [`Progress`] trait the long verbs report to; and a [`Cancel`] token that
//! reaches them through it. The library installs no signal handlers and reads no global
//! state: the binary maps SIGINT/SIGTERM onto the token.
//!
//! ```
//! use zeroclaw_bundle::{Bundles, Replace, Silent};
//! # let dir = tempfile::tempdir()?;
//! # let install = dir.path().join("install");
//! # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
//! # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
//! # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
//! let bundles = Bundles::create(dir.path().join("store"))?;
//! let first = bundles.snapshot_agent(&install, "coder", &Default::default(), &Silent)?;
//! std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "more notes\n")?;
//! let out = dir.path().join("coder-bundle");
//! let exported = bundles.export(&install, "coder", &out, Replace::Nothing, &Default::default(), &Silent)?;
//! let diff = bundles.diff(first.id.to_hex().as_ref(), out.as_os_str(), Default::default(), &Silent)?;
//! assert_eq!(diff.changes().next().unwrap().path, "workspace/NOTES.md");
//! assert_ne!(first.id, exported.snapshot.id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Inside, one module per noun (all crate-private):
//! - `agent`: the install layout, config closure, manifest, risk flags, portable names (an
//!   adapter over ZeroClaw's own `zeroclaw-config`);
//! - `capture`: the descriptor-verified walker; `export`: agent and directory capture and their
//!   commit; `publish`: destination check, staged publish, reuse and recovery; `statmatch`: the
//!   stat-match and racy rule of both; `diff`: the Merkle-pruned tree diff and the semantic
//!   section; `credentials`: the credential-looking value detector; `credential_keys`: the
//!   credential-name rule both it and `agent` read; `provenance`: what an import recorded
//!   about the agent it created; `remote`: remote stores; `review`: what an operator must
//!   accept before import; `import`: the config merge and staged files of an import; `sign`:
//!   SSH signatures of snapshots (sshsig) and who is trusted;
//! - `sys`: every rustix call of this crate; `hooks`: test-only race seams; `workers`: the I/O
//!   worker pool; `clock`: timestamps; `words`: how counts and sizes read; `cancel`: the
//!   token; `progress`: the progress trait;
//! - `api`: the facade above. `cli` and `cmd` are the binary's command layer (argument parsing,
//!   one file per subcommand that calls the library and prints, the terminal adapters) and
//!   `interrupt` its SIGINT/SIGTERM mapping: public only because the binary is another crate
//!   target, hidden from the docs, not an API.
//!
//! The long-form documentation (how each verb behaves, the bundle and JSON formats, remotes,
//! signatures, the design and what each guarantee rests on) is in [`docs`].

mod agent;
mod api;
mod cancel;
mod capture;
mod clock;
mod credential_keys;
mod credential_scan;
mod credentials;
mod crypt;
mod diff;
pub mod docs;
mod export;
mod hooks;
mod import;
mod plugin;
mod progress;
mod provenance;
mod publish;
mod remote;
mod review;
mod sign;
mod source;
mod statmatch;
mod sync;
mod sys;
pub mod words;
mod workers;

pub use api::*;

/// The remote's index and record parsers, for the cargo-fuzz targets in `tests/fuzz` only.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::remote::{check_record, parse_index, IndexParser};
}
