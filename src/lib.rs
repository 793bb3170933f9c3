//! zeroclaw-bundle: portable ZeroClaw agents (library side of the CLI).

pub mod agent;
