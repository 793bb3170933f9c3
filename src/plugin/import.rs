//! What importing an Agent Plugin writes into a ZeroClaw install, decided here and carried
//! out by `crate::import` (the same merge, `--expect` pinning, signatures, ZeroClaw's loader
//! and `validate()`, staged publish, backup and atomic `config.toml` write as an agent
//! import). The whole plugin tree goes to `shared/plugins/<alias>/`; the config fragment is:
//!
//! - `[skill_bundles.<alias>]` with `directory = "shared/plugins/<alias>/skills"`;
//! - one `[[mcp.servers]]` per server the spec, containment and ZeroClaw accept, with
//!   `${PLUGIN_ROOT}` expanded to the installed plugin root and a `./` command made absolute
//!   there (ZeroClaw runs what is configured; the plugin's placeholders mean nothing to it);
//! - `[mcp_bundles.<alias>]` granting those servers.
//!
//! No agent: an agent reaches the plugin only when `--attach AGENT` adds `<alias>` to its
//! `skill_bundles` and `mcp_bundles` (and the import's confirmation shows the grants). A
//! server ZeroClaw cannot run as the spec means it is refused and named: one that uses
//! `${PLUGIN_DATA}` (ZeroClaw gives a server no plugin data directory) or a `cwd` other than
//! the plugin root (ZeroClaw sets no working directory for a server).

use std::collections::BTreeSet;
use std::path::Path;

use agent_plugins::{Anchors, Command, Cwd, McpServer, ServerEntry, Template};
use toml::{Table, Value};
use zeroclaw_bundle_store::{ObjectId, Store};

use super::review::check_tree;

/// Where an imported plugin's tree goes, below the install root.
pub(crate) const PLUGINS_DIR: &str = "shared/plugins";

/// An Agent Plugin translated for an install.
pub(crate) struct PluginFragment {
    /// The plugin's `name`.
    pub name: String,
    /// The local alias of its skill bundle and MCP bundle (free in both kinds).
    pub alias: String,
    /// The config fragment (see the module doc).
    pub fragment: String,
    /// Dotted fragment paths left `""` (an `env` or header value to fill).
    pub required_secrets: Vec<String>,
    /// Components not imported, each `where: why`.
    pub refused: Vec<String>,
    /// The manifest's `version`, as written.
    pub version: Option<String>,
}

/// Translates the plugin in tree `root` for the install at `install_root`, whose config
/// already uses `taken` skill-bundle and MCP-bundle aliases. `Err`: the spec rejects the
/// whole plugin (its words).
pub(crate) fn translate(
    store: &Store,
    root: &ObjectId,
    install_root: &Path,
    taken: &BTreeSet<String>,
) -> Result<PluginFragment, String> {
    let checked = check_tree(store, root)?;
    let name = checked.plugin.manifest.name.to_string();
    // The skill bundle's alias where `export-plugin` wrote it (this tool's extension), so a
    // round trip keeps it; else the plugin name, `.` as `_`.
    let base: String = checked
        .plugin
        .manifest
        .extensions
        .namespace(super::EXTENSION)
        .and_then(|ns| ns.get("skill_bundle"))
        .and_then(serde_json::Value::as_str)
        .filter(|a| zeroclaw_config::agent_bundle::is_safe_path_component(a) && !a.contains('.'))
        .map(str::to_string)
        .unwrap_or_else(|| {
            name.chars()
                .map(|c| if c == '.' { '_' } else { c })
                .collect()
        });
    let alias = if taken.contains(&base) {
        crate::import::merge::fresh_alias(&base, taken)
    } else {
        base
    };
    translate_checked(checked, name, alias, install_root)
}

/// [`translate`] under the alias `alias` an earlier import of the plugin chose (an update in
/// place translates both versions under it, so their fragments name the same entries).
pub(crate) fn translate_as(
    store: &Store,
    root: &ObjectId,
    install_root: &Path,
    alias: &str,
) -> Result<PluginFragment, String> {
    let checked = check_tree(store, root)?;
    let name = checked.plugin.manifest.name.to_string();
    translate_checked(checked, name, alias.to_string(), install_root)
}

/// The skill bundle alias of the plugin record `record_alias` (`plugin.<alias>`, as
/// [`RECORD_PREFIX`] makes them), or None for an agent's record.
pub(crate) fn record_skill_alias(record_alias: &str) -> Option<&str> {
    record_alias.strip_prefix(RECORD_PREFIX)
}

/// The prefix of a plugin import's provenance record alias (an agent alias has no dot, so
/// the two never meet).
pub(crate) const RECORD_PREFIX: &str = "plugin.";

/// The bundle alias a plugin import's provenance record carries for plugin `name`.
pub(crate) fn record_bundle_alias(name: &str) -> String {
    format!("{BUNDLE_ALIAS_PREFIX}{name}")
}

/// The plugin name in a plugin record's bundle alias ([`record_bundle_alias`]), or None.
pub(crate) fn plugin_of_bundle_alias(bundle_alias: &str) -> Option<&str> {
    bundle_alias.strip_prefix(BUNDLE_ALIAS_PREFIX)
}

const BUNDLE_ALIAS_PREFIX: &str = "plugin:";

fn translate_checked(
    checked: super::review::Checked,
    name: String,
    alias: String,
    install_root: &Path,
) -> Result<PluginFragment, String> {
    let plugin_root = install_root.join(PLUGINS_DIR).join(&alias);
    // ZeroClaw has no plugin data directory: a `${PLUGIN_DATA}` refuses its server (below),
    // so this anchor is never written into the config.
    let anchors = Anchors::new(&plugin_root, install_root.join("data/plugins").join(&alias));
    let version = checked.plugin.manifest.version.clone();
    let mut refused = checked.refused;
    let mut servers = Vec::new();
    let mut secrets = Vec::new();
    // What `export-plugin` kept of a ZeroClaw server beyond the spec (this tool's extension).
    let extra = checked
        .plugin
        .manifest
        .extensions
        .namespace(super::EXTENSION)
        .and_then(|ns| ns.get("servers"))
        .and_then(serde_json::Value::as_object);
    for entry in &checked.servers {
        match server_table(entry, &plugin_root, &anchors) {
            Ok((mut table, blank)) => {
                if let Some(fields) = extra.and_then(|e| e.get(&entry.name)) {
                    zeroclaw_only(fields, &mut table);
                }
                secrets.extend(
                    blank
                        .into_iter()
                        .map(|k| format!("mcp.servers.{}.{k}", entry.name)),
                );
                servers.push(Value::Table(table));
            }
            Err(why) => refused.push(format!("mcp.json#{}: {why}", entry.name)),
        }
    }
    let mut doc = Table::new();
    let mut bundle = Table::new();
    bundle.insert(
        "directory".into(),
        format!("{PLUGINS_DIR}/{alias}/skills").into(),
    );
    let mut skill_bundles = Table::new();
    skill_bundles.insert(alias.clone(), Value::Table(bundle));
    doc.insert("skill_bundles".into(), Value::Table(skill_bundles));
    if !servers.is_empty() {
        let names: Vec<Value> = servers
            .iter()
            .filter_map(|s| s.get("name").cloned())
            .collect();
        let mut mcp_bundle = Table::new();
        mcp_bundle.insert("servers".into(), Value::Array(names));
        let mut mcp_bundles = Table::new();
        mcp_bundles.insert(alias.clone(), Value::Table(mcp_bundle));
        doc.insert("mcp_bundles".into(), Value::Table(mcp_bundles));
        let mut mcp = Table::new();
        mcp.insert("servers".into(), Value::Array(servers));
        doc.insert("mcp".into(), Value::Table(mcp));
    }
    let fragment =
        toml::to_string(&doc).map_err(|e| format!("could not render its config: {e}"))?;
    Ok(PluginFragment {
        name,
        alias,
        fragment,
        required_secrets: secrets,
        refused,
        version,
    })
}

/// The note an import or update shows for component `refused` (`where: why`), which it does
/// not import.
pub(crate) fn refused_note(refused: &str) -> String {
    format!("not imported (refused by the Agent Plugins spec or ZeroClaw): {refused}")
}

/// A plugin's `version` before and after an update that goes back to an older one (by
/// SemVer), as [`crate::UpdatePlan`] names it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionChange {
    /// The version imported before (the update's base).
    pub imported: String,
    /// The version the update brings.
    pub incoming: String,
}

impl VersionChange {
    /// The change of an update from a plugin at `imported` to one at `incoming` (their
    /// manifests' `version`) when it goes back: both are SemVer and `incoming` is the lower
    /// (`1.3.0` to `1.2.0`, `1.0.0` to `1.0.0-rc.1`). `None` when it goes forward, stays, or
    /// either is missing or not SemVer (nothing can be said of its order).
    pub(crate) fn backwards(imported: Option<&str>, incoming: Option<&str>) -> Option<Self> {
        let (imported, incoming) = (imported?, incoming?);
        let older = semver::Version::parse(incoming.trim()).ok()?
            < semver::Version::parse(imported.trim()).ok()?;
        older.then(|| VersionChange {
            imported: imported.to_string(),
            incoming: incoming.to_string(),
        })
    }
}

impl std::fmt::Display for VersionChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a downgrade: version {} is older than version {}, imported before",
            self.incoming, self.imported
        )
    }
}

/// The ZeroClaw-only fields `export-plugin` keeps in the manifest's extension, back on their
/// server. `tls_ca_cert_path` is not taken: a path of the exporting host means nothing here.
fn zeroclaw_only(fields: &serde_json::Value, table: &mut Table) {
    for key in ["tool_timeout_secs", "max_response_bytes"] {
        if let Some(n) = fields.get(key).and_then(serde_json::Value::as_u64) {
            if let Ok(n) = i64::try_from(n) {
                table.insert(key.into(), n.into());
            }
        }
    }
    if let Some(list) = fields
        .get("pinned_resources")
        .and_then(serde_json::Value::as_array)
    {
        let uris: Vec<Value> = list
            .iter()
            .filter_map(|v| v.as_str().map(|s| s.to_string().into()))
            .collect();
        table.insert("pinned_resources".into(), Value::Array(uris));
    }
}

/// One server as ZeroClaw configures it, with the `env`/`headers` keys left blank; or why
/// ZeroClaw cannot run it as the spec means it.
fn server_table(
    entry: &ServerEntry,
    plugin_root: &Path,
    anchors: &Anchors,
) -> Result<(Table, Vec<String>), String> {
    let uses_data = |t: &Template| t.as_raw().contains("${PLUGIN_DATA}");
    let mut t = Table::new();
    let mut blank = Vec::new();
    t.insert("name".into(), entry.name.clone().into());
    match &entry.server {
        McpServer::Stdio(s) => {
            if s.args.iter().any(uses_data) || s.env.iter().any(|(_, v)| uses_data(v)) {
                return Err(
                    "uses ${PLUGIN_DATA}, and ZeroClaw gives an MCP server no plugin data \
                     directory"
                        .to_string(),
                );
            }
            match &s.cwd {
                Cwd::PluginRoot => {}
                other => {
                    return Err(format!(
                        "sets cwd {other:?}, and ZeroClaw starts an MCP server without a working \
                         directory of its own"
                    ))
                }
            }
            let command = match &s.command {
                Command::Bare(name) => name.clone(),
                Command::Bundled(path) => path.resolve(plugin_root).to_string_lossy().into_owned(),
            };
            t.insert("transport".into(), "stdio".into());
            t.insert("command".into(), command.into());
            let args: Vec<Value> = s.args.iter().map(|a| a.expand(anchors).into()).collect();
            if !args.is_empty() {
                t.insert("args".into(), Value::Array(args));
            }
            if !s.env.is_empty() {
                let mut env = Table::new();
                for (k, v) in &s.env {
                    let value = v.expand(anchors);
                    if value.is_empty() {
                        blank.push(format!("env.{k}"));
                    }
                    env.insert(k.clone(), value.into());
                }
                t.insert("env".into(), Value::Table(env));
            }
        }
        McpServer::StreamableHttp(r) | McpServer::Sse(r) => {
            let kind = if matches!(entry.server, McpServer::Sse(_)) {
                "sse"
            } else {
                "http"
            };
            t.insert("transport".into(), kind.into());
            t.insert("url".into(), r.url.as_str().into());
            if !r.headers.is_empty() {
                let mut headers = Table::new();
                for (k, v) in &r.headers {
                    if v.is_empty() {
                        blank.push(format!("headers.{k}"));
                    }
                    headers.insert(k.clone(), v.clone().into());
                }
                t.insert("headers".into(), Value::Table(headers));
            }
        }
        _ => return Err("a transport ZeroClaw does not know".to_string()),
    }
    Ok((t, blank))
}
