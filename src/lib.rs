//! zeroclaw-bundle: portable ZeroClaw agents. This crate is the library behind the
//! `zeroclaw-bundle` binary, and what zeroclaw itself can link: descriptor-verified capture of
//! trees into the store, the agent's config closure and manifest, staged publish.
//!
//! Module owners:
//! - `agent`: the install layout, config closure, manifest, risk flags, portable names;
//! - `capture`: the descriptor-verified walker (into the store, or hash-only for `diff`);
//!   `diff`: the Merkle-pruned tree diff; `credentials`: the credential-looking value detector; `export`: agent capture and export (one path
//!   from install to bundle); `publish`: staged publish, reuse and recovery;
//! - `sys`: every rustix call of this crate; `hooks`: test-only race seams; `workers`: the I/O
//!   worker pool; `clock`: timestamps; `interrupt`: SIGINT/SIGTERM as a request to stop;
//! - `cli`: argument parsing; `cmd`: one file per subcommand.

pub mod agent;
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
pub mod publish;
pub mod remote;
pub mod statmatch;
pub mod sys;
pub mod workers;
