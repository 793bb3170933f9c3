//! The spec's loader answered from a tree in the store: `agent_plugins::Source` over a
//! snapshot tree. Trees in the store hold regular files and directories only (a capture
//! never records a symlink), so every path is confined to the root (§4.1) by construction.

use agent_plugins::{DirEntry, FileKind, LoadedPlugin, PackagePath, Rejection, Source};
use anyhow::{bail, Result};
use std::collections::HashMap;

use zeroclaw_bundle_store::{
    escape_name, resolve_path, ObjectId, Store, StoreError, Tree, TreeEntry,
};

/// How large a file the loader may ask to read from the store (a manifest, `mcp.json`, a
/// `SKILL.md`): a bound on memory, far above any real one.
const MAX_READ: u64 = 4 << 20;

/// Reads a plugin out of tree `root` of `store`. Decoded trees are kept (the loader asks
/// three questions of each of `skills/`'s entries; a plugin with 10,000 skills must not decode
/// `skills/` 30,000 times).
struct TreeSource<'a> {
    store: &'a Store,
    root: ObjectId,
    trees: HashMap<ObjectId, Tree>,
}

impl TreeSource<'_> {
    fn entry(&mut self, path: &PackagePath) -> Result<Option<TreeEntry>, StoreError> {
        let mut current = TreeEntry::dir(Vec::new(), 0, self.root);
        for part in path
            .as_str()
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
        {
            if current.kind.is_file() {
                return Ok(None);
            }
            let tree = match self.trees.entry(current.id) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(self.store.objects().read_tree(&current.id)?)
                }
            };
            match tree.get(part.as_bytes()) {
                Some(e) => current = e.clone(),
                None => return Ok(None),
            }
        }
        Ok(Some(current))
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
        self.trees.insert(entry.id, tree.clone());
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

/// Loads the plugin in tree `root` with the spec's loader: its verdict, diagnostics and all.
pub(crate) fn load_tree(store: &Store, root: &ObjectId) -> Result<LoadedPlugin, Rejection> {
    agent_plugins::load(&mut TreeSource {
        store,
        root: *root,
        trees: HashMap::new(),
    })
}

/// Loads the plugin in tree `root` with the spec's loader and requires a clean result: the
/// manifest accepted and not one diagnostic (a skipped skill, a skipped server, a disabled
/// `mcp.json`, an ignored field). Each problem is named by the spec rule and its place.
pub fn validate_tree(store: &Store, root: &ObjectId) -> Result<LoadedPlugin> {
    let loaded = match load_tree(store, root) {
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
