//! zeroclaw-bundle: portable ZeroClaw agents. This crate is the library behind the
//! `zeroclaw-bundle` binary, and what zeroclaw itself can link: descriptor-verified capture of
//! trees into the store, the agent's config closure and manifest, staged publish.
//!
//! Module owners: `agent` (install layout, config closure, manifest, names), `sys` (every rustix call), `hooks` (test-only race seams), `capture` (the
//! descriptor-verified walker), `publish` (staged publish and recovery), `cmd` (one file per
//! subcommand), `cli` (argument parsing), `clock` (timestamps), `workers` (the I/O worker pool).

pub mod agent;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod export;
pub mod hooks;
pub mod publish;
pub mod sys;
pub mod workers;
