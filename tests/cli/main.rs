//! Integration tests: the real `zeroclaw-bundle` binary against temp dirs. One binary, one
//! module per area; each module says which failures it pins.

mod binaries;
mod capture_depth;
mod capture_races;
mod crash_campaign;
mod diff;
mod export;
mod file_modes;
mod full_disk;
mod help_text;
mod hostile_records;
mod hostile_trees;
mod import;
mod json_schema;
mod mount;
mod operator_gates;
mod oracle;
mod pack;
mod printed;
mod remote;
mod remote_fleet;
mod remote_read;
mod remote_s3;
mod review;
mod sign;
mod store_cli;
mod store_in_tree;
mod store_overlap;
mod store_races;
mod tree_index;
mod util;
mod ux;
mod ux_ops;
mod zeroclaw_real;
