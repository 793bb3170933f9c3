//! Agent Plugins (agent-plugins.org, spec 1.0.0, the version the `agent-plugins` crate
//! validates): a skill bundle and the MCP servers its agents reach, in the directory format
//! other agent clients install. This module owns every plugin rule of the library; the CLI
//! only parses and prints.
//!
//! - `store_source`: the spec's own loader (`agent_plugins::Loading`, sans-IO) answered from
//!   a tree in the store, so what is validated is exactly what a publish writes.
//! - `mcp`: ZeroClaw's `mcp.servers` entries as `mcp.json` server entries (and what cannot be
//!   expressed there).
//! - `export`: `export-plugin`: plan through ZeroClaw's planner (the same scrub as `export`),
//!   capture the skill bundle, render `plugin.json` and `mcp.json`, validate with the spec's
//!   loader, then the staged publish of `export`.
//!
//! Invariant: nothing reaches the destination that the spec's loader did not load without a
//! single diagnostic.

mod export;
mod fragment;
mod import;
mod mcp;
mod review;
mod store_source;

pub use export::{LeftOut, PluginExportJob, PluginExported, PluginServer};
pub use fragment::config_of;
pub use import::VersionChange;
pub(crate) use import::{
    plugin_of_bundle_alias, record_bundle_alias, record_skill_alias, refused_note, translate,
    translate_as, PluginFragment, PLUGINS_DIR, RECORD_PREFIX,
};
pub(crate) use review::plugin_name;
pub use review::{is_plugin, review_tree, PluginReview};
pub use store_source::validate_tree;

/// The manifest's file name at the plugin root (spec §5.1); also the publish marker.
pub const MANIFEST_FILE: &str = "plugin.json";
/// The MCP component's file name at the plugin root (spec §7.2).
pub const MCP_FILE: &str = "mcp.json";
/// The skills component's directory at the plugin root (spec §7.1).
pub const SKILLS_DIR: &str = "skills";
/// The extension namespace this tool writes its own data under in `plugin.json` (§8).
pub const EXTENSION: &str = "org.zeroclaw.bundle";
