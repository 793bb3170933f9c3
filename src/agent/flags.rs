//! Risk flags computed from the source config (SPEC §3, reference §5): what the importing
//! operator is asked to grant. Flags follow the *effective* policy: level `full` turns workspace
//! confinement off even when `workspace_only` is set. The `carried_skills` flags are not made
//! here; they depend on what the capture actually carried and are added when rendering.

use super::manifest::{RiskFlag, RiskKind};
use super::value::{Node, Table};

/// Rows 2-10 of reference §5: the agent's risk profile (when it exists) and its workspace grant.
pub(crate) fn policy_flags(config: &Table, alias: &str, agent: &Table) -> Vec<RiskFlag> {
    let mut flags = Vec::new();
    let profile_name = agent
        .get("risk_profile")
        .and_then(Node::as_str)
        .map(str::trim)
        .unwrap_or("");
    let profile = if profile_name.is_empty() {
        None
    } else {
        config
            .lookup(&["risk_profiles", profile_name])
            .and_then(Node::as_table)
    };
    if let Some(profile) = profile {
        let at = |field: &str| format!("risk_profiles.{profile_name}.{field}");
        let flag_bool = |field: &str, default: bool| {
            profile
                .get(field)
                .and_then(Node::as_bool)
                .unwrap_or(default)
        };
        let full = profile.get("level").and_then(Node::as_str) == Some("full");
        if full {
            flags.push(RiskFlag::new(
                RiskKind::FullAutonomy,
                at("level"),
                "the agent acts autonomously within policy bounds — no per-operation approval prompt",
            ));
        }
        let workspace_only = flag_bool("workspace_only", true);
        if full && workspace_only {
            flags.push(RiskFlag::new(
                RiskKind::FilesystemEscape,
                at("level"),
                "full autonomy turns workspace confinement off, so filesystem access is not \
                 confined to the workspace even though `workspace_only` is set",
            ));
        } else if !workspace_only {
            flags.push(RiskFlag::new(
                RiskKind::FilesystemEscape,
                at("workspace_only"),
                "filesystem access is not confined to the workspace",
            ));
        }
        if profile.get("sandbox_enabled").and_then(Node::as_bool) == Some(false) {
            flags.push(RiskFlag::new(
                RiskKind::SandboxDisabled,
                at("sandbox_enabled"),
                "shell execution runs unsandboxed on the host",
            ));
        }
        if !flag_bool("block_high_risk_commands", true) {
            flags.push(RiskFlag::new(
                RiskKind::ApprovalBypass,
                at("block_high_risk_commands"),
                "high-risk shell commands are not blocked",
            ));
        }
        if !flag_bool("require_approval_for_medium_risk", true) {
            flags.push(RiskFlag::new(
                RiskKind::ApprovalBypass,
                at("require_approval_for_medium_risk"),
                "medium-risk operations run without an approval prompt",
            ));
        }
        let passthrough = strings(profile.get("shell_env_passthrough"));
        if !passthrough.is_empty() {
            flags.push(RiskFlag::new(
                RiskKind::EnvPassthrough,
                at("shell_env_passthrough"),
                format!(
                    "host environment variables are forwarded into shell subprocesses: {}",
                    passthrough.join(", ")
                ),
            ));
        }
        // `allowed_path` and `allowed_paths` are serde aliases of `allowed_roots`.
        for field in ["allowed_roots", "allowed_paths", "allowed_path"] {
            let roots = strings(profile.get(field));
            if !roots.is_empty() {
                flags.push(RiskFlag::new(
                    RiskKind::ExtraFilesystemRoots,
                    at(field),
                    format!(
                        "extra filesystem roots are granted beyond the workspace: {}",
                        roots.join(", ")
                    ),
                ));
            }
        }
        if profile
            .lookup(&["delegation_policy", "mode"])
            .and_then(Node::as_str)
            == Some("allow")
        {
            flags.push(RiskFlag::new(
                RiskKind::DelegationEnabled,
                at("delegation_policy.mode"),
                "the agent may initiate delegation to other agents on the target install",
            ));
        }
    }
    if agent
        .lookup(&["workspace", "unrestricted_filesystem"])
        .and_then(Node::as_bool)
        == Some(true)
    {
        flags.push(RiskFlag::new(
            RiskKind::FilesystemEscape,
            format!("agents.{alias}.workspace.unrestricted_filesystem"),
            "the agent can read and write anywhere the host filesystem permits",
        ));
    }
    flags
}

/// The flags a bundle's own `config.toml` grants, computed the way an export computes them
/// (policy of the root agent's profile, every carried MCP server, subprocess providers): what
/// an import would actually run, whatever the manifest says. The `carried_skills` flags are
/// not here; they describe carried content, not config.
pub(crate) fn config_flags(config: &Table, root_agent: &str) -> Vec<RiskFlag> {
    let mut flags = match config
        .lookup(&["agents", root_agent])
        .and_then(Node::as_table)
    {
        Some(agent) => policy_flags(config, root_agent, agent),
        None => Vec::new(),
    };
    let servers: Vec<(String, Table)> = config
        .lookup(&["mcp", "servers"])
        .and_then(Node::as_array)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(i, node)| {
            let server = node.as_table()?;
            Some((super::value::element_name(i, node), server.clone()))
        })
        .collect();
    flags.extend(server_flags(&servers));
    flags.extend(provider_flags(config));
    flags
}

/// Rows 11-12 of reference §5, per granted server in grant order. stdio command lines are
/// repeated verbatim: the operator must see what will run.
pub(crate) fn server_flags(servers: &[(String, Table)]) -> Vec<RiskFlag> {
    let mut flags = Vec::new();
    for (name, server) in servers {
        let transport = server
            .get("transport")
            .and_then(Node::as_str)
            .unwrap_or("stdio");
        if transport == "stdio" {
            let command = server.get("command").and_then(Node::as_str).unwrap_or("");
            let args = strings(server.get("args"));
            let mut line = shown(command);
            if !args.is_empty() {
                line.push(' ');
                line.push_str(&shown_all(&args));
            }
            flags.push(RiskFlag::new(
                RiskKind::ProcessSpawn,
                format!("mcp.servers.{name}.command"),
                format!("starts a local process on the target host: {line}"),
            ));
        }
        let pinned = strings(server.get("pinned_resources"));
        if !pinned.is_empty() {
            flags.push(RiskFlag::new(
                RiskKind::UntrustedStartupContext,
                format!("mcp.servers.{name}.pinned_resources"),
                format!(
                    "server-controlled text is read into the system prompt at startup: {}",
                    pinned.join(", ")
                ),
            ));
        }
    }
    flags
}

/// Provider entries of the closure whose family runs a host process (the schema module's
/// `SUBPROCESS_PROVIDERS`): a `process_spawn` flag naming the binary, its arguments and its
/// working directory, and an `env_passthrough` flag naming the host variables it receives. Like
/// a stdio MCP server, such a provider runs with the target host's environment.
pub(crate) fn provider_flags(closure: &Table) -> Vec<RiskFlag> {
    let mut flags = Vec::new();
    for (section, family, default_binary) in super::schema::SUBPROCESS_PROVIDERS {
        let Some(entries) = closure
            .lookup(&["providers", section, family])
            .and_then(Node::as_table)
        else {
            continue;
        };
        for (alias, entry) in entries.iter() {
            let Some(entry) = entry.as_table() else {
                continue;
            };
            let at = format!("providers.{section}.{family}.{alias}");
            let binary = entry
                .get("binary_path")
                .and_then(Node::as_str)
                .filter(|b| !b.trim().is_empty());
            let mut line = match binary {
                Some(b) => shown(b),
                None => format!("{default_binary} (looked up on PATH)"),
            };
            let args = strings(entry.get("extra_args"));
            if !args.is_empty() {
                line.push(' ');
                line.push_str(&shown_all(&args));
            }
            if let Some(dir) = entry
                .get("working_directory")
                .and_then(Node::as_str)
                .filter(|d| !d.is_empty())
            {
                line.push_str(&format!(", in {dir}"));
            }
            flags.push(RiskFlag::new(
                RiskKind::ProcessSpawn,
                if binary.is_some() {
                    format!("{at}.binary_path")
                } else {
                    at.clone()
                },
                format!("the provider starts a local process on the target host: {line}"),
            ));
            let passthrough = strings(entry.get("env_passthrough"));
            if !passthrough.is_empty() {
                flags.push(RiskFlag::new(
                    RiskKind::EnvPassthrough,
                    format!("{at}.env_passthrough"),
                    format!(
                        "host environment variables are forwarded into the provider process: {}",
                        passthrough.join(", ")
                    ),
                ));
            }
        }
    }
    flags
}

/// A command-line word as a flag shows it: verbatim (the operator must see what will run),
/// except a word that looks like a credential, which is named, not repeated, so a report or a
/// log never prints it (it is in `config.toml` as written).
fn shown(word: &str) -> String {
    match crate::credentials::detect(word) {
        Some(reason) => format!("<{reason}: not shown>"),
        None => word.to_string(),
    }
}

fn shown_all(words: &[String]) -> String {
    words.iter().map(|w| shown(w)).collect::<Vec<_>>().join(" ")
}

/// The string elements of an array (anything else reads as empty).
pub(crate) fn strings(node: Option<&Node>) -> Vec<String> {
    node.and_then(Node::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Node::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
