//! What an Agent Plugin asks an operator to accept, read from a snapshot of the store (what
//! `review` captured): its manifest, its skills, every MCP server (a `stdio` server as the
//! full command line it starts and where, an `http`/`sse` server as its URL, the credentials
//! each asks for), the grants the one grant model finds in what its servers mean to ZeroClaw
//! (`fragment`), and every component the spec refuses, at the narrowest boundary, named.
//!
//! Containment (§4.1) on top of the spec's lexical checks: a capture never records a symlink,
//! so a `./` command or `./` working directory that is not a file or directory of the
//! snapshot (a symlink out of the root, or nothing) refuses its server, and a `SKILL.md`
//! symlinked anywhere leaves its skill without one (the spec's loader skips it, named).

use agent_plugins::{Command, Cwd, LoadedPlugin, McpOutcome, McpServer, ServerEntry};
use anyhow::Result;
use serde::Serialize;
use zeroclaw_bundle_store::{escape_name, resolve_path, ObjectId, Store};

use super::fragment::servers_fragment;
use super::store_source::load_tree;
use super::{PluginServer, MANIFEST_FILE};
use crate::agent::{fragment_grants, shown_detail, Grant};

/// An Agent Plugin's statements, as `review` shows them.
#[derive(Clone, Debug, Serialize)]
pub struct PluginReview {
    /// The manifest's `name` (empty when the plugin is rejected).
    pub name: String,
    /// The manifest's `version`.
    pub version: Option<String>,
    /// The manifest's `description`.
    pub description: Option<String>,
    /// Why the whole plugin is refused (a bad manifest, an unknown `$schema`, a bad name):
    /// nothing of it may be used.
    pub rejected: Option<String>,
    /// Skills the spec loads, by name.
    pub skills: Vec<String>,
    /// MCP servers the spec (and containment) accepts.
    pub servers: Vec<PluginServer>,
    /// The grants of those servers (the one grant model), details with credential-looking
    /// words named, not printed.
    pub grants: Vec<Grant>,
    /// Components refused at the narrowest boundary: `where: why` (a skill, a server, the
    /// whole MCP component, an ignored manifest field).
    pub refused: Vec<String>,
}

/// A plugin loaded from a snapshot tree, with our containment applied.
pub(crate) struct Checked {
    pub plugin: LoadedPlugin,
    /// Servers that passed the spec and containment.
    pub servers: Vec<ServerEntry>,
    pub refused: Vec<String>,
}

/// Whether tree `root` has a `plugin.json` at its top (a candidate Agent Plugin).
pub fn is_plugin(store: &Store, root: &ObjectId) -> bool {
    resolve_path(
        &store.objects().reader(),
        root,
        MANIFEST_FILE.as_bytes(),
        "plugin",
    )
    .is_ok_and(|e| e.kind.is_file())
}

/// The `name` of the plugin in tree `root`, once the spec's loader and containment accept it
/// (`Err`: the spec's rejection, its words).
pub(crate) fn plugin_name(store: &Store, root: &ObjectId) -> Result<String, String> {
    Ok(check_tree(store, root)?.plugin.manifest.name.to_string())
}

/// Loads the plugin in tree `root`: the spec's loader, then containment. `Err` is the
/// spec's rejection of the whole plugin (its words).
pub(crate) fn check_tree(store: &Store, root: &ObjectId) -> Result<Checked, String> {
    let plugin = load_tree(store, root).map_err(|r| {
        let name = match &r {
            agent_plugins::Rejection::Manifest(m) if m.to_string().contains("name") => {
                manifest_name(store, root)
                    .map(|n| format!(" (name {n:?})"))
                    .unwrap_or_default()
            }
            _ => String::new(),
        };
        format!("{MANIFEST_FILE}: {r}{name}")
    })?;
    let mut refused: Vec<String> = plugin.diagnostics.iter().map(ToString::to_string).collect();
    // A directory under `skills/` the loader passed over without a word (no `SKILL.md`: a
    // symlinked one is never carried) is named too: it is not imported.
    if let Ok(skills) = resolve_path(&store.objects().reader(), root, b"skills", "plugin") {
        if !skills.kind.is_file() {
            if let Ok(tree) = store.objects().read_tree(&skills.id) {
                for e in tree.entries() {
                    let dir = escape_name(&e.name);
                    if !plugin.skills.iter().any(|s| s.directory == dir)
                        && !refused
                            .iter()
                            .any(|r| r.contains(&format!("skills/{dir}/")))
                    {
                        refused.push(format!(
                            "skill-skipped (§7.1) at skills/{dir}/: no SKILL.md in the plugin \
                             (a symlinked one is never carried), so not a skill"
                        ));
                    }
                }
            }
        }
    }
    let mut servers = Vec::new();
    if let McpOutcome::Configured(mcp) = &plugin.mcp {
        for entry in &mcp.servers {
            match contained(store, root, entry) {
                Ok(()) => servers.push(entry.clone()),
                Err(why) => refused.push(format!(
                    "server-skipped (§4.1) at mcp.json#{}: {why}",
                    entry.name
                )),
            }
        }
    }
    Ok(Checked {
        plugin,
        servers,
        refused,
    })
}

/// The manifest's `name` as written, to name it when the spec refuses it.
fn manifest_name(store: &Store, root: &ObjectId) -> Option<String> {
    let e = resolve_path(
        &store.objects().reader(),
        root,
        MANIFEST_FILE.as_bytes(),
        "plugin",
    )
    .ok()?;
    if e.size > 1 << 20 {
        return None;
    }
    let bytes = store.objects().read_verified(&e.id).ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    doc.get("name")?.as_str().map(str::to_string)
}

/// A `./` command must be a file of the plugin, a `./` working directory one of its
/// directories: anything else resolves outside the root or to nothing.
fn contained(store: &Store, root: &ObjectId, entry: &ServerEntry) -> Result<(), String> {
    let McpServer::Stdio(s) = &entry.server else {
        return Ok(());
    };
    let find = |rel: &str| {
        resolve_path(
            &store.objects().reader(),
            root,
            rel.trim_start_matches("./").as_bytes(),
            "plugin",
        )
        .ok()
    };
    if let Command::Bundled(path) = &s.command {
        if !find(path.as_str()).is_some_and(|e| e.kind.is_file()) {
            return Err(format!(
                "command {} is not a file inside the plugin (a symlink out of the root is \
                 never carried)",
                path.as_str()
            ));
        }
    }
    if let Cwd::Relative(path) = &s.cwd {
        if find(path.as_str()).is_none_or(|e| e.kind.is_file()) {
            return Err(format!(
                "cwd {} is not a directory inside the plugin (a symlink out of the root is \
                 never carried)",
                path.as_str()
            ));
        }
    }
    Ok(())
}

/// The review of the plugin in tree `root`.
pub fn review_tree(store: &Store, root: &ObjectId) -> Result<PluginReview> {
    let checked = match check_tree(store, root) {
        Ok(c) => c,
        Err(rejected) => {
            return Ok(PluginReview {
                name: String::new(),
                version: None,
                description: None,
                rejected: Some(rejected),
                skills: Vec::new(),
                servers: Vec::new(),
                grants: Vec::new(),
                refused: Vec::new(),
            })
        }
    };
    let m = &checked.plugin.manifest;
    let mut grants = fragment_grants(&servers_fragment(&checked.servers, "")?)?;
    for g in &mut grants {
        g.detail = shown_detail(&g.detail);
    }
    Ok(PluginReview {
        name: m.name.to_string(),
        version: m.version.clone(),
        description: m.description.clone(),
        rejected: None,
        skills: checked
            .plugin
            .skills
            .iter()
            .map(|s| s.meta.name.clone())
            .collect(),
        servers: checked.servers.iter().map(shown).collect(),
        grants,
        refused: checked.refused,
    })
}

/// A server as the operator sees it: what it starts (full command line, working directory)
/// or connects to, and the credentials it asks for.
fn shown(entry: &ServerEntry) -> PluginServer {
    let quote = |s: &str| crate::publish::shell_quote(std::path::Path::new(s));
    let asks =
        |k: &str, v: &str| v.is_empty() || crate::credential_keys::credential_key_rule(k).is_some();
    match &entry.server {
        McpServer::Stdio(s) => {
            let mut line = quote(s.command.as_str());
            for a in &s.args {
                line.push(' ');
                line.push_str(&quote(a.as_raw()));
            }
            let cwd = match &s.cwd {
                Cwd::PluginRoot => "${PLUGIN_ROOT}".to_string(),
                Cwd::Relative(p) => p.as_str().to_string(),
                Cwd::RootAnchored(p) => format!("${{PLUGIN_ROOT}}/{p}"),
                Cwd::DataAnchored(p) if p.is_empty() => "${PLUGIN_DATA}".to_string(),
                Cwd::DataAnchored(p) => format!("${{PLUGIN_DATA}}/{p}"),
            };
            PluginServer {
                name: entry.name.clone(),
                transport: "stdio".into(),
                target: format!("{line} (in {cwd})"),
                secrets: s
                    .env
                    .iter()
                    .filter(|(k, v)| asks(k, v.as_raw()))
                    .map(|(k, _)| format!("env.{k}"))
                    .collect(),
            }
        }
        McpServer::StreamableHttp(r) | McpServer::Sse(r) => PluginServer {
            name: entry.name.clone(),
            transport: entry.server.transport().to_string(),
            target: r.url.as_str().to_string(),
            secrets: r
                .headers
                .iter()
                .filter(|(k, v)| asks(k, v))
                .map(|(k, _)| format!("headers.{k}"))
                .collect(),
        },
        _ => PluginServer {
            name: entry.name.clone(),
            transport: entry.server.transport().to_string(),
            target: String::new(),
            secrets: Vec::new(),
        },
    }
}
