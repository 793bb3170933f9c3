//! zeroclaw-bundle: portable ZeroClaw agents. This crate is the library behind the
//! `zeroclaw-bundle` binary, and what zeroclaw itself can link.
//!
//! The data flow, one library entry per verb:
//! 1. [`agent::plan_export`] reads an install and plans an agent's bundle (closure, scrub,
//!    manifest, which trees to read and the keep rule for them).
//! 2. [`capture`] walks those trees through descriptor-verified opens into the store;
//!    [`export::capture_agent`] and [`export::capture_dir`] both end in one `commit`
//!    (snapshot record, catalog entry, stat cache).
//! 3. [`publish::check`] resolves and admits a destination once; [`publish::publish_snapshot`]
//!    stages the snapshot there and swaps it in atomically (`checkout`, and `export` = 2 + 3).
//! 4. `mount`, [`diff`], `pack`, [`remote`], `verify`, `gc` read the store by snapshot id.
//!
//! Capture and publish report to [`progress::Progress`]; the terminal bar lives in [`cmd`].
//!
//! Module owners:
//! - `agent`: the install layout, config closure, manifest, risk flags, portable names;
//! - `capture`: the descriptor-verified walker (into the store, or hash-only for `diff`);
//!   `export`: agent and directory capture and their commit; `publish`: destination check,
//!   staged publish, reuse and recovery; `statmatch`: the stat-match and racy rule of both;
//!   `diff`: the Merkle-pruned tree diff; `credentials`: the credential-looking value detector;
//!   `provenance`: what an import recorded about the agent it created;
//!   `remote`: remote stores;
//! - `sys`: every rustix call of this crate; `hooks`: test-only race seams; `workers`: the I/O
//!   worker pool; `clock`: timestamps; `cancel`: the cancellation token the caller passes in;
//!   `progress`: the progress trait (which carries the token);
//! - `cli`: argument parsing; `cmd`: one file per subcommand, and the terminal adapters;
//!   `interrupt`: the binary's SIGINT/SIGTERM mapping onto the command's token.

pub mod agent;
pub mod cancel;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod credentials;
pub mod diff;
pub mod export;
pub mod hooks;
pub mod interrupt;
pub mod progress;
pub mod provenance;
pub mod publish;
pub mod remote;
pub mod sign;
pub mod statmatch;
pub mod sys;
pub mod workers;
