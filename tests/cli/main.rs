//! Integration tests: the real `zeroclaw-bundle` binary against temp dirs. One binary, one
//! module per area; each module says which failures it pins.

mod capture_races;
mod crash_campaign;
mod export;
mod hostile_trees;
mod mount;
mod store_cli;
mod store_overlap;
mod util;
