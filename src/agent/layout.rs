//! Fixed names of bundle format 1 (reference §1) and the workspace filter: which workspace
//! entries a bundle never carries. These are wire facts shared by the planner, the capture and
//! the publish; nothing here touches the filesystem.

/// The only bundle format this crate writes.
pub const BUNDLE_FORMAT_VERSION: i64 = 1;
/// The manifest, written last.
pub const MANIFEST_FILE: &str = "zeroclaw-agent.toml";
/// The config closure.
pub const CONFIG_FILE: &str = "config.toml";
/// The agent's workspace tree inside a bundle.
pub const WORKSPACE_DIR: &str = "workspace";
/// Carried skill bundles live under `skills/<alias>/`.
pub const SKILLS_DIR: &str = "skills";
/// The memory store at the workspace root: never carried in format 1.
#[cfg(test)]
pub const WORKSPACE_MEMORY_DIR: &str = "memory";
/// The memory snapshot at the workspace root: never carried.
#[cfg(test)]
pub const MEMORY_SNAPSHOT_FILE: &str = "MEMORY_SNAPSHOT.md";

/// Whether the workspace entry at `rel` (relative to the workspace root, `/`-separated) travels.
///
/// A first component `memory` (file or directory, and everything below it) and a root-level
/// `MEMORY_SNAPSHOT.md` stay behind. Matching is exact and case-sensitive, and only at the root:
/// `notes/memory/x` and `notes/MEMORY_SNAPSHOT.md` travel.
/// The rule is ZeroClaw's own (`agent_bundle::workspace_entry_included`).
pub fn workspace_entry_included(rel: &str) -> bool {
    zeroclaw_config::agent_bundle::workspace_entry_included(std::path::Path::new(
        rel.trim_start_matches('/'),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // reference §12.2 case 11
    #[test]
    fn workspace_filter_leaves_memory_behind() {
        for rel in [
            "memory",
            "memory/brain.db",
            "memory/brain.db-wal",
            "memory/brain.db-shm",
            "MEMORY_SNAPSHOT.md",
        ] {
            assert!(!workspace_entry_included(rel), "{rel} must not travel");
        }
        for rel in [
            "IDENTITY.md",
            "notes/memory/scratch.md",
            "notes/MEMORY_SNAPSHOT.md",
            "Memory",
            "memory.md",
            "skills/memory",
        ] {
            assert!(workspace_entry_included(rel), "{rel} must travel");
        }
    }
}
