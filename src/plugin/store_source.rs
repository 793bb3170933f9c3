//! The spec's loader answered from a tree in the store: `agent_plugins::Source` over a
//! snapshot tree. Trees in the store hold regular files and directories only (a capture
//! never records a symlink), so every path is confined to the root (§4.1) by construction.

use agent_plugins::{DirEntry, FileKind, LoadedPlugin, PackagePath, Source};
use anyhow::{bail, Result};
use zeroclaw_bundle_store::{escape_name, resolve_path, ObjectId, Store, StoreError, TreeEntry};

/// How large a file the loader may ask to read from the store (a manifest, `mcp.json`, a
/// `SKILL.md`): a bound on memory, far above any real one.
const MAX_READ: u64 = 4 << 20;

/// Reads a plugin out of tree `root` of `store`.
struct TreeSource<'a> {
    store: &'a Store,
    root: ObjectId,
}

impl TreeSource<'_> {
    fn entry(&self, path: &PackagePath) -> Result<Option<TreeEntry>, StoreError> {
        match resolve_path(
            &self.store.objects().reader(),
            &self.root,
            path.as_str().as_bytes(),
            "plugin",
        ) {
            Ok(e) => Ok(Some(e)),
            Err(StoreError::NoSuchPath { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Source for TreeSource<'_> {
    type Error = String;

    fn kind(&mut self, path: &PackagePath) -> Result<Option<FileKind>, String> {
        Ok(self.entry(path).map_err(|e| e.to_string())?.map(|e| {
            if e.kind.is_file() {
                FileKind::File
            } else {
                FileKind::Directory
            }
        }))
    }

    fn confined(&mut self, _path: &PackagePath) -> Result<bool, String> {
        Ok(true)
    }

    fn read(&mut self, path: &PackagePath) -> Result<Vec<u8>, String> {
        let entry = self
            .entry(path)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{path} is not in the tree"))?;
        if entry.size > MAX_READ {
            return Err(format!(
                "{path} is {} bytes, over the {MAX_READ}-byte limit for a plugin file",
                entry.size
            ));
        }
        self.store
            .objects()
            .read_verified(&entry.id)
            .map_err(|e| e.to_string())
    }

    fn list(&mut self, path: &PackagePath) -> Result<Vec<DirEntry>, String> {
        let entry = self
            .entry(path)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{path} is not in the tree"))?;
        let tree = self
            .store
            .objects()
            .read_tree(&entry.id)
            .map_err(|e| e.to_string())?;
        Ok(tree
            .entries()
            .iter()
            .filter_map(|e| {
                let name = String::from_utf8(e.name.clone()).ok()?;
                let kind = if e.kind.is_file() {
                    FileKind::File
                } else {
                    FileKind::Directory
                };
                Some(DirEntry::new(name, kind))
            })
            .collect())
    }
}

/// Loads the plugin in tree `root` with the spec's loader and requires a clean result: the
/// manifest accepted and not one diagnostic (a skipped skill, a skipped server, a disabled
/// `mcp.json`, an ignored field). Each problem is named by the spec rule and its place.
pub fn validate_tree(store: &Store, root: &ObjectId) -> Result<LoadedPlugin> {
    let mut source = TreeSource { store, root: *root };
    let loaded = match agent_plugins::load(&mut source) {
        Ok(loaded) => loaded,
        Err(rejection) => {
            bail!("the plugin does not load under the Agent Plugins spec: {rejection}")
        }
    };
    if !loaded.diagnostics.is_empty() {
        let listed: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        bail!(
            "the plugin would not load cleanly under the Agent Plugins spec:\n  {}",
            listed.join("\n  ")
        );
    }
    // Skill directories the loader ignores (no `SKILL.md`) would travel unannounced.
    let skills = resolve_path(&store.objects().reader(), root, b"skills", "plugin");
    if let Some(skills) = skills.ok().filter(|e| !e.kind.is_file()) {
        for e in store.objects().read_tree(&skills.id)?.entries() {
            let name = escape_name(&e.name);
            if !loaded.skills.iter().any(|s| s.directory == name) {
                bail!(
                    "skills/{name} is not a skill the Agent Plugins spec loads (a skill is a \
                     directory holding SKILL.md)"
                );
            }
        }
    }
    Ok(loaded)
}
