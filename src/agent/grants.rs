//! The one grant model: what a bundle's config lets its agent do that an operator must accept.
//! It is the union of ZeroClaw's planner flags (the manifest's `risk_flags`, recomputed from
//! the bundle's own `config.toml` so an edited config cannot hide one) and the rules of our
//! semantic diff, which ZeroClaw's manifest format has no flag for: an auto-approved tool, an
//! allowed command, any widened allowlist or narrowed denylist of a risk profile, an endpoint a
//! provider or MCP server sends the agent's requests to, a provider the requests fall back to,
//! an MCP server (and a bundle of them gaining one), a knowledge source the agent reads, a
//! variable set in an MCP server's environment, a risk profile's `sandbox_backend = "none"`.
//!
//! [`key_grant`] is the single rule table: the semantic diff (`compare`) marks a changed key
//! with it, and [`bundle_grants`] lists what a bundle grants on its own by applying it to every
//! key of the bundle's config against nothing. Export, review, import and diff all go through
//! these two, so a grant one of them shows and another does not is a defect.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::error::AgentError;
use super::flags::config_flags;
use super::manifest::{Manifest, RiskFlag, RiskKind};
use super::value::{element_name, join_path, Node, Table};

/// What kind of capability a grant is: one of ZeroClaw's planner's kinds (the manifest's
/// `risk_flags`), or one of ours. Serialized as its wire string (`process_spawn`,
/// `auto_approve`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantKind {
    /// A kind ZeroClaw's planner flags.
    Flag(RiskKind),
    /// A risk profile's `auto_approve` runs tools without asking.
    AutoApprove,
    /// A risk profile's `allowed_commands` lets the agent run commands.
    AllowedCommands,
    /// Another allowlist of a risk profile gains entries, or is removed so ZeroClaw's
    /// default applies.
    WidenedAllowlist,
    /// A denylist of a risk profile loses entries, or is removed.
    NarrowedDenylist,
    /// A provider or MCP server sends the agent's requests to this endpoint.
    Endpoint,
    /// A provider's requests fall back to another provider.
    FallbackProvider,
    /// An MCP server the agent can reach.
    McpServer,
    /// A bundle of MCP servers an agent loads gains a server.
    McpBundleServers,
    /// A knowledge bundle reads these host paths or URLs.
    KnowledgeSource,
    /// An MCP server's process runs with an environment variable the config sets
    /// (`NODE_OPTIONS`, `LD_PRELOAD`, `PATH` change what the shown command runs).
    ProcessEnv,
}

impl GrantKind {
    /// The wire string (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            GrantKind::Flag(kind) => kind.as_str(),
            GrantKind::AutoApprove => "auto_approve",
            GrantKind::AllowedCommands => "allowed_commands",
            GrantKind::WidenedAllowlist => "widened_allowlist",
            GrantKind::NarrowedDenylist => "narrowed_denylist",
            GrantKind::Endpoint => "endpoint",
            GrantKind::FallbackProvider => "fallback_provider",
            GrantKind::McpServer => "mcp_server",
            GrantKind::McpBundleServers => "mcp_bundle_servers",
            GrantKind::KnowledgeSource => "knowledge_source",
            GrantKind::ProcessEnv => "process_env",
        }
    }
}

impl Serialize for GrantKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One capability a bundle grants, as export, review and import list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// What kind of capability.
    pub kind: GrantKind,
    /// The dotted config path that grants it.
    pub path: String,
    /// The sentence for the operator, as written: a printer names a credential-looking word in
    /// it instead of printing it (as the CLI's `shown_detail` does).
    pub detail: String,
    /// Listed in the manifest. `false` for a planner flag: `config.toml` grants it and the
    /// manifest does not list it (edited after export); always `false` for a `rule` grant.
    pub listed: bool,
    /// Listed in the manifest, but the bundle's `config.toml` does not grant it (edited after
    /// export). Never set for `carried_skills`, which describes content, not config.
    pub stale: bool,
    /// Found by zeroclaw-bundle's own rules: ZeroClaw's manifest format has no flag for it.
    pub rule: bool,
}

impl Grant {
    /// The grant of risk flag `f`; `listed`: the manifest lists it; `stale`: see the field.
    pub fn of_flag(f: &RiskFlag, listed: bool, stale: bool) -> Grant {
        Grant {
            kind: GrantKind::Flag(f.kind),
            path: f.path.clone(),
            detail: f.detail.clone(),
            listed,
            stale,
            rule: false,
        }
    }
}

/// Risk-profile lists whose new entries widen what the agent may do.
pub(crate) const ALLOW_LISTS: &[&str] = &[
    "allowed_commands",
    "allowed_roots",
    "allowed_paths",
    "allowed_path",
    "allowed_tools",
    "auto_approve",
    "shell_env_passthrough",
];

/// Fields of a provider or MCP server that say where the agent's requests go: a changed one
/// sends the agent's prompts, tools' data and credentials to another host.
pub(crate) const ENDPOINT_FIELDS: &[&str] =
    &["base_url", "api_url", "endpoint", "url", "uri", "host"];

/// Risk-profile lists whose removed entries widen what the agent may do.
pub(crate) const DENY_LISTS: &[&str] = &["forbidden_paths", "always_ask", "excluded_tools"];

/// The grant rule of one config key (a dotted path, as the semantic diff's leaves name keys):
/// whether its change from `old` to `new` (`None`: absent) grants the agent something, as
/// (kind, sentence). `new_server`: the key belongs to an MCP server the old side did not have.
/// Later rules win where two apply (a new server's endpoint reads as the new server).
pub(crate) fn key_grant(
    key: &str,
    old: Option<&Node>,
    new: Option<&Node>,
    new_server: bool,
) -> Option<(GrantKind, String)> {
    let field = key.rsplit('.').next().unwrap_or("");
    [
        endpoint_grant(key, field, old, new),
        command_grant(key, field, old, new),
        new_server_grant(key, new, new_server),
        process_env_grant(key, old, new),
        sandbox_grant(key, field, old, new),
        gained_entries_grant(key, field, old, new),
        risk_list_grant(key, field, old, new),
    ]
    .into_iter()
    .flatten()
    .last()
}

/// A provider's or MCP server's endpoint set or changed: the agent's requests go elsewhere.
fn endpoint_grant(
    key: &str,
    field: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    if !((key.starts_with("providers.") || key.starts_with("mcp.servers."))
        && ENDPOINT_FIELDS.contains(&field))
    {
        return None;
    }
    let n = new?;
    Some((
        GrantKind::Endpoint,
        match old {
            Some(_) => "the agent's requests go to a different endpoint".to_string(),
            None => format!("the agent's requests go to {}", plain(n)),
        },
    ))
}

/// An MCP server's `command` or `args` changed: the agent starts another process than the
/// one the operator accepted. (A new server is [`new_server_grant`]'s; ZeroClaw's planner
/// flags the process of an agent bundle's server too, but an Agent Plugin's servers have no
/// agent to plan, so this rule is what marks them.)
fn command_grant(
    key: &str,
    field: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    let server = key
        .strip_prefix("mcp.servers.")
        .and_then(|r| r.split('.').next())?;
    if !matches!(field, "command" | "args") || key != format!("mcp.servers.{server}.{field}") {
        return None;
    }
    let (Some(_), Some(_)) = (old, new) else {
        return None;
    };
    Some((
        GrantKind::Flag(RiskKind::ProcessSpawn),
        format!("MCP server `{server}` starts a different process ({field} changed)"),
    ))
}

/// A key of an MCP server the old side did not have: the new server.
fn new_server_grant(
    key: &str,
    new: Option<&Node>,
    new_server: bool,
) -> Option<(GrantKind, String)> {
    let server = key
        .strip_prefix("mcp.servers.")
        .and_then(|r| r.split('.').next())?;
    (new_server && new.is_some())
        .then(|| (GrantKind::McpServer, format!("new MCP server `{server}`")))
}

/// A variable set in a server's environment (an export blanks every one, so a bundle's
/// non-blank value was written by hand): it changes what the shown command runs. Named,
/// never its value (a secret field). A changed value that was already set is not a grant.
fn process_env_grant(
    key: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    let (server, var) = key
        .strip_prefix("mcp.servers.")
        .and_then(|r| r.split_once(".env."))?;
    let set = |n: Option<&Node>| n.is_some_and(|n| !plain(n).is_empty());
    (set(new) && !set(old)).then(|| {
        (
            GrantKind::ProcessEnv,
            format!(
                "the process of MCP server `{server}` runs with {var} set by the config \
                 (it can change what the command runs; value not shown)"
            ),
        )
    })
}

/// ZeroClaw's planner flags `sandbox_enabled = false` only; `sandbox_backend = "none"`
/// (matched as ZeroClaw parses it, case-insensitively) runs the shell unsandboxed as well.
fn sandbox_grant(
    key: &str,
    field: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    if !(key.starts_with("risk_profiles.") && field == "sandbox_backend") {
        return None;
    }
    let none = |n: Option<&Node>| n.is_some_and(|n| plain(n).eq_ignore_ascii_case("none"));
    (none(new) && !none(old)).then(|| {
        (
            GrantKind::Flag(RiskKind::SandboxDisabled),
            "shell execution runs unsandboxed on the host (sandbox_backend = \"none\")".to_string(),
        )
    })
}

/// A list that reaches further when it gains an entry: an MCP bundle's servers (a bundle an
/// agent loads that gains a server starts that server), a provider's fallbacks, a knowledge
/// bundle's sources.
fn gained_entries_grant(
    key: &str,
    field: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    let gained = || -> Vec<String> {
        let before = strings(old);
        strings(new)
            .into_iter()
            .filter(|v| !before.contains(v))
            .collect()
    };
    let mut out = None;
    if key.starts_with("mcp_bundles.") && field == "servers" {
        let gained = gained();
        if !gained.is_empty() {
            let verb = if old.is_some() { "gains" } else { "grants" };
            out = Some((
                GrantKind::McpBundleServers,
                format!("the MCP bundle {verb} {}", gained.join(", ")),
            ));
        }
    }
    if key.starts_with("providers.") && field == "fallback" {
        let gained = gained();
        if !gained.is_empty() {
            out = Some((
                GrantKind::FallbackProvider,
                format!(
                    "the agent's requests may fall back to provider {}",
                    gained.join(", ")
                ),
            ));
        }
    }
    if key.starts_with("knowledge_bundles.") && field == "sources" {
        let gained = gained();
        if !gained.is_empty() {
            out = Some((
                GrantKind::KnowledgeSource,
                format!("the agent reads {}", gained.join(", ")),
            ));
        }
    }
    out
}

/// A risk profile's allowlist widened or denylist narrowed. An absent list is ZeroClaw's
/// default for it, not an empty one: a profile that drops `forbidden_paths` or sets
/// `auto_approve` is read against what ZeroClaw would apply.
fn risk_list_grant(
    key: &str,
    field: &str,
    old: Option<&Node>,
    new: Option<&Node>,
) -> Option<(GrantKind, String)> {
    if !(key.starts_with("risk_profiles.")
        && (ALLOW_LISTS.contains(&field) || DENY_LISTS.contains(&field)))
    {
        return None;
    }
    let side = |node: Option<&Node>| match node {
        Some(n) => strings(Some(n)),
        None => risk_profile_default(field),
    };
    let (before, after) = (side(old), side(new));
    let gone = old.is_some() && new.is_none();
    if field == "allowed_tools" {
        allowed_tools_grant(&before, &after, gone)
    } else if ALLOW_LISTS.contains(&field) {
        allowlist_grant(field, &before, &after, old.is_none(), gone)
    } else {
        denylist_grant(&before, &after, gone)
    }
}

/// `change`, said as the effect of the list being gone when it is (`gone`).
fn gone_note(gone: bool, what: &str, change: &str) -> String {
    if gone {
        format!("the {what} is gone (ZeroClaw's default applies): {change}")
    } else {
        change.to_string()
    }
}

/// `allowed_tools`: empty means unrestricted (ZeroClaw's schema), so emptying the list widens
/// it to every tool, and entries added to a non-empty one widen it.
fn allowed_tools_grant(
    before: &[String],
    after: &[String],
    gone: bool,
) -> Option<(GrantKind, String)> {
    let gained: Vec<&String> = after.iter().filter(|v| !before.contains(v)).collect();
    if after.is_empty() && !before.is_empty() {
        Some((
            GrantKind::WidenedAllowlist,
            gone_note(
                gone,
                "allowlist",
                "every tool may be called (an empty list is unrestricted)",
            ),
        ))
    } else if !before.is_empty() && !gained.is_empty() {
        Some((
            GrantKind::WidenedAllowlist,
            gone_note(
                gone,
                "allowlist",
                &format!(
                    "widens the allowlist: adds {}",
                    gained
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        ))
    } else {
        None
    }
}

/// Any other allowlist (`auto_approve`, `allowed_commands`, `shell_env_passthrough`, ...)
/// that gains an entry; `old_absent`: the old side has no list, so it is ZeroClaw's default.
fn allowlist_grant(
    field: &str,
    before: &[String],
    after: &[String],
    old_absent: bool,
    gone: bool,
) -> Option<(GrantKind, String)> {
    let kind = match field {
        "auto_approve" => GrantKind::AutoApprove,
        "allowed_commands" => GrantKind::AllowedCommands,
        "shell_env_passthrough" => GrantKind::Flag(RiskKind::EnvPassthrough),
        _ => GrantKind::WidenedAllowlist,
    };
    let gained: Vec<&String> = after.iter().filter(|v| !before.contains(v)).collect();
    if gained.is_empty() {
        return None;
    }
    let what = match kind {
        GrantKind::AutoApprove => "runs without asking:",
        GrantKind::AllowedCommands => "may run:",
        GrantKind::Flag(RiskKind::EnvPassthrough) => "passes host variables:",
        _ => "widens the allowlist: adds",
    };
    let list = gained
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    // Against ZeroClaw's default when the other side has no list at all.
    let beyond = if old_absent && !before.is_empty() {
        " (beyond ZeroClaw's default)"
    } else {
        ""
    };
    Some((
        kind,
        gone_note(gone, "allowlist", &format!("{what} {list}{beyond}")),
    ))
}

/// A denylist (`forbidden_paths`, `always_ask`, `excluded_tools`) that loses an entry.
fn denylist_grant(before: &[String], after: &[String], gone: bool) -> Option<(GrantKind, String)> {
    let lost: Vec<&String> = before.iter().filter(|v| !after.contains(v)).collect();
    if lost.is_empty() {
        return None;
    }
    let list = lost
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    Some((
        GrantKind::NarrowedDenylist,
        gone_note(
            gone,
            "denylist",
            &format!("narrows the denylist: removes {list}"),
        ),
    ))
}

/// What a bundle grants: its manifest's risk flags, checked against the flags its own
/// `config.toml` yields when ZeroClaw's planner reads it (a grant the config makes and the
/// manifest hides is listed too, unlisted; a listed flag the config does not make is stale),
/// then every grant [`key_grant`] finds in the config on its own (`rule`). A config ZeroClaw
/// cannot load is an error (a review must not show fewer grants than an import makes).
pub fn bundle_grants(manifest: &Manifest, config_text: &str) -> Result<Vec<Grant>, AgentError> {
    let doc: toml_edit::DocumentMut =
        config_text
            .parse()
            .map_err(|e: toml_edit::TomlError| AgentError::InvalidManifest {
                field: "config.toml".to_string(),
                problem: format!("is not valid TOML: {}", e.message().trim()),
            })?;
    let table = Table::from_toml_edit(doc.as_table());
    let made = config_flags(config_text, &table, &manifest.root_agent)?;
    let made_keys = keyed(&made);
    let listed_keys = keyed(&manifest.risk_flags);
    let mut out: Vec<Grant> = manifest
        .risk_flags
        .iter()
        .map(|f| {
            let stale =
                f.kind != RiskKind::CarriedSkills && made_keys.get(&flag_key(f)) != Some(&f.detail);
            Grant::of_flag(f, true, stale)
        })
        .collect();
    for f in &made {
        if listed_keys.get(&flag_key(f)) != Some(&f.detail) {
            out.push(Grant::of_flag(f, false, false));
        }
    }
    // A rule grant where the planner already flags the same kind at the same path says
    // nothing new (`shell_env_passthrough` is both).
    let rules: Vec<Grant> = config_grants(&table)
        .into_iter()
        .filter(|r| !out.iter().any(|g| g.kind == r.kind && g.path == r.path))
        .collect();
    out.extend(rules);
    Ok(out)
}

/// The grants of a config fragment that has no agent (what an Agent Plugin's `mcp.json` means
/// to ZeroClaw, `crate::plugin`): [`config_grants`] of its keys. Not valid TOML is an error.
pub(crate) fn fragment_grants(config_text: &str) -> Result<Vec<Grant>, AgentError> {
    let doc: toml_edit::DocumentMut =
        config_text
            .parse()
            .map_err(|e: toml_edit::TomlError| AgentError::InvalidManifest {
                field: "mcp.json as config".to_string(),
                problem: format!("is not valid TOML: {}", e.message().trim()),
            })?;
    Ok(config_grants(&Table::from_toml_edit(doc.as_table())))
}

/// The grants [`key_grant`] finds in a config on its own (every key against nothing), one per
/// kind and path: an MCP server is one grant at `mcp.servers.<name>` saying how it runs.
pub(crate) fn config_grants(config: &Table) -> Vec<Grant> {
    change_grants_of(&BTreeMap::new(), &leaves(config))
}

/// The grants of the change from config fragment `old_text` to `new_text` (an update of an
/// Agent Plugin): [`key_grant`] of every key that differs, so a server added or a command
/// changed is a grant and a server or list entry removed is none. Not valid TOML is an error.
pub(crate) fn fragment_change_grants(
    old_text: &str,
    new_text: &str,
) -> Result<Vec<Grant>, AgentError> {
    let parse = |text: &str| -> Result<BTreeMap<String, Node>, AgentError> {
        let doc: toml_edit::DocumentMut =
            text.parse()
                .map_err(|e: toml_edit::TomlError| AgentError::InvalidManifest {
                    field: "mcp.json as config".to_string(),
                    problem: format!("is not valid TOML: {}", e.message().trim()),
                })?;
        Ok(leaves(&Table::from_toml_edit(doc.as_table())))
    };
    Ok(change_grants_of(&parse(old_text)?, &parse(new_text)?))
}

/// [`key_grant`] of every key whose value differs between the leaves `old` and `new`, one
/// grant per kind and path (an MCP server's at `mcp.servers.<name>`, saying how it runs).
fn change_grants_of(old: &BTreeMap<String, Node>, new: &BTreeMap<String, Node>) -> Vec<Grant> {
    let server_of = |key: &str| {
        key.strip_prefix("mcp.servers.")
            .and_then(|r| r.split('.').next())
            .map(str::to_string)
    };
    let old_servers: BTreeSet<String> = old.keys().filter_map(|k| server_of(k)).collect();
    let leaves = new;
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out: Vec<Grant> = Vec::new();
    for key in keys {
        let (before, after) = (old.get(key), new.get(key));
        if before == after {
            continue;
        }
        let server = server_of(key);
        let new_server = server.as_ref().is_some_and(|s| !old_servers.contains(s));
        let server = server.as_deref();
        let Some((kind, detail)) = key_grant(key, before, after, new_server) else {
            continue;
        };
        let (path, detail) = match (kind, server) {
            (GrantKind::McpServer, Some(name)) => {
                let at = format!("mcp.servers.{name}");
                let how = server_line(leaves, &at);
                (at, format!("MCP server `{name}`: {how}"))
            }
            _ => (key.clone(), detail),
        };
        if out.iter().any(|g| g.kind == kind && g.path == path) {
            continue;
        }
        out.push(Grant {
            kind,
            path,
            detail,
            listed: false,
            stale: false,
            rule: true,
        });
    }
    out
}

/// How an MCP server at `at` runs, from its keys: `stdio: CMD ARGS` or `http: URL`.
fn server_line(leaves: &BTreeMap<String, Node>, at: &str) -> String {
    let get = |field: &str| leaves.get(&format!("{at}.{field}"));
    // ZeroClaw's transport decides, stdio when absent: a `url` beside a stdio transport is
    // never used, the command is.
    let transport = get("transport").map(plain);
    if let Some(t) = transport.as_deref().filter(|t| *t != "stdio") {
        let url = get("url").map(plain).unwrap_or_else(|| "no url set".into());
        return format!("{t} {url}");
    }
    let mut line = get("command").map(plain).unwrap_or_default();
    for arg in strings(get("args")) {
        line.push(' ');
        line.push_str(&arg);
    }
    if line.is_empty() {
        "no command or url set".to_string()
    } else {
        format!("stdio: starts {line}")
    }
}

/// A flag's identity in the comparisons: `kind at path`.
pub(crate) fn flag_key(f: &RiskFlag) -> String {
    format!("{} at {}", f.kind.as_str(), f.path)
}

/// Risk flags keyed `kind at path`, with their detail.
pub(crate) type Flags = BTreeMap<String, String>;

pub(crate) fn keyed<'f>(flags: impl IntoIterator<Item = &'f RiskFlag>) -> Flags {
    flags
        .into_iter()
        .map(|f| (flag_key(f), f.detail.clone()))
        .collect()
}

/// Every leaf of a config as (dotted path -> value). Arrays of tables are named by their
/// elements' `name`; arrays of plain values are one leaf.
pub(crate) fn leaves(root: &Table) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    fn walk(prefix: &str, node: &Node, out: &mut BTreeMap<String, Node>) {
        match node {
            Node::Table(t) if !t.is_empty() => {
                for (k, v) in t.iter() {
                    walk(&join_path(prefix, k), v, out);
                }
            }
            Node::Array(items)
                if !items.is_empty() && items.iter().all(|n| n.as_table().is_some()) =>
            {
                for (i, item) in items.iter().enumerate() {
                    walk(&join_path(prefix, &element_name(i, item)), item, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.clone());
            }
        }
    }
    for (k, v) in root.iter() {
        walk(k, v, &mut out);
    }
    out
}

/// The items of a list value as text (a plain string as itself).
pub(crate) fn strings(node: Option<&Node>) -> Vec<String> {
    node.and_then(Node::as_array)
        .map(|items| items.iter().map(plain).collect())
        .unwrap_or_default()
}

/// ZeroClaw's default of list field `field` of a risk profile (`RiskProfileConfig::default()`),
/// empty for a field it does not have.
fn risk_profile_default(field: &str) -> Vec<String> {
    static DEFAULTS: std::sync::OnceLock<toml::Table> = std::sync::OnceLock::new();
    let defaults = DEFAULTS.get_or_init(|| {
        toml::Table::try_from(zeroclaw_config::schema::RiskProfileConfig::default())
            .unwrap_or_default()
    });
    defaults
        .get(field)
        .and_then(toml::Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A value as text: a string as itself, anything else as TOML-like text.
fn plain(node: &Node) -> String {
    match node {
        Node::Str(s) => s.clone(),
        other => super::value::inline_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[mcp_bundles.p]
servers = ["probe", "web"]

[[mcp.servers]]
name = "probe"
command = "node"
args = ["probe.mjs"]

[[mcp.servers]]
name = "web"
transport = "http"
url = "https://web.example.com/mcp"
"#;

    fn paths(old: &str, new: &str) -> Vec<String> {
        fragment_change_grants(old, new)
            .expect("grants")
            .into_iter()
            .map(|g| format!("{} {}", g.kind.as_str(), g.path))
            .collect()
    }

    #[test]
    fn a_change_grants_what_it_adds_and_nothing_for_what_it_removes() {
        assert!(paths(BASE, BASE).is_empty(), "no change, no grant");
        let removed = BASE.replace("[\"probe\", \"web\"]", "[\"web\"]").replace(
            "[[mcp.servers]]\nname = \"probe\"\ncommand = \"node\"\nargs = [\"probe.mjs\"]\n",
            "",
        );
        assert!(
            paths(BASE, &removed).is_empty(),
            "{:?}",
            paths(BASE, &removed)
        );
        let added = BASE.replace("[\"probe\", \"web\"]", "[\"probe\", \"web\", \"x\"]")
            + "\n[[mcp.servers]]\nname = \"x\"\ncommand = \"sh\"\n";
        assert_eq!(
            paths(BASE, &added),
            [
                "mcp_server mcp.servers.x",
                "mcp_bundle_servers mcp_bundles.p.servers"
            ]
        );
        let moved = BASE.replace(
            "https://web.example.com/mcp",
            "https://evil.example.com/mcp",
        );
        assert_eq!(paths(BASE, &moved), ["endpoint mcp.servers.web.url"]);
        let command = BASE.replace("command = \"node\"", "command = \"python3\"");
        assert_eq!(
            paths(BASE, &command).len(),
            1,
            "{:?}",
            paths(BASE, &command)
        );
    }
}
