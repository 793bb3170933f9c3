//! The closure gate (SPEC §5, reference §4.9, §10): the rendered `config.toml` is parsed back and
//! must pass, on its own as on an install with nothing else in it, the reference checks ZeroClaw's
//! `Config::validate` runs. A reference the source satisfied but the fragment cannot (a provider,
//! profile or bundle that was never configured) fails the export naming the field, instead of
//! writing a bundle that fails on arrival. The gate also re-checks the scrub on the parsed text:
//! no secret field may hold anything and no ciphertext may remain.
//!
//! Not re-implemented (the exact rules are not documented): the set of known provider families,
//! the provider `temperature` range and pricing keys. Fallback problems are warnings in ZeroClaw,
//! not errors, so they are not checked here.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::error::AgentError;
use super::schema;
use super::value::{element_name, Node, Table};

type Check = Result<(), (String, String)>;

/// Parse `text` and run the checks; the first failure becomes `ClosureInvalid` for `alias`.
pub(crate) fn check(alias: &str, text: &str) -> Result<(), AgentError> {
    let fail = |field: String, problem: String| AgentError::ClosureInvalid {
        alias: alias.to_string(),
        field,
        problem,
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        fail(
            "config.toml".into(),
            format!("does not parse back: {}", e.message()),
        )
    })?;
    let root = Table::from_toml_edit(doc.as_table());
    check_fragment(&root).map_err(|(field, problem)| fail(field, problem))
}

fn check_fragment(root: &Table) -> Check {
    check_scrubbed(root)?;
    let agents = root
        .table_at(&["agents"])?
        .ok_or_else(|| ("agents".to_string(), "is missing".to_string()))?;
    if agents.is_empty() {
        return Err(("agents".into(), "holds no agent".into()));
    }
    let mut aliases: Vec<&str> = agents.keys().collect();
    aliases.sort_unstable();
    for alias in aliases {
        let field = format!("agents.{alias}");
        let agent = agents
            .get(alias)
            .and_then(Node::as_table)
            .ok_or_else(|| (field.clone(), "must be a table".to_string()))?;
        check_agent(root, &field, agent)?;
    }
    check_runtime_profiles(root)?;
    check_risk_profiles(root)?;
    check_skill_bundles(root)?;
    check_mcp_servers(root)?;
    check_model_providers(root)
}

fn check_agent(root: &Table, field: &str, agent: &Table) -> Check {
    let at = |key: &str| format!("{field}.{key}");
    for removed in ["channels", "delegates", "cron_jobs", "a2a"] {
        if agent.get(removed).is_some_and(Node::is_non_empty) {
            return Err((
                at(removed),
                "names host state a bundle must not carry".into(),
            ));
        }
    }
    let model_provider = agent.opt_str("model_provider", field)?.unwrap_or("");
    if model_provider.trim().is_empty() {
        return Err((at("model_provider"), "is required and empty".into()));
    }
    check_provider_ref(root, &at("model_provider"), model_provider, "models")?;
    for (key, section) in [
        ("classifier_provider", "models"),
        ("summary_provider", "models"),
        ("tts_provider", "tts"),
        ("transcription_provider", "transcription"),
    ] {
        let value = agent.opt_str(key, field)?.unwrap_or("");
        if !value.trim().is_empty() {
            check_provider_ref(root, &at(key), value, section)?;
        }
    }
    for section in ["skill_bundles", "knowledge_bundles", "mcp_bundles"] {
        let Some(list) = agent.get(section) else {
            continue;
        };
        let items = list
            .as_array()
            .ok_or_else(|| (at(section), "must be an array of strings".to_string()))?;
        for (i, item) in items.iter().enumerate() {
            let name = item
                .as_str()
                .ok_or_else(|| {
                    (
                        format!("{}[{i}]", at(section)),
                        "must be a string".to_string(),
                    )
                })?
                .trim();
            if !name.is_empty()
                && root
                    .lookup(&[section, name])
                    .and_then(Node::as_table)
                    .is_none()
            {
                return Err((
                    format!("{}[{i}]", at(section)),
                    format!("= {name:?} but {section}.{name} is not configured"),
                ));
            }
        }
    }
    let enabled = agent.get("enabled").and_then(Node::as_bool).unwrap_or(true);
    for (key, section) in [
        ("risk_profile", "risk_profiles"),
        ("runtime_profile", "runtime_profiles"),
    ] {
        let value = agent.opt_str(key, field)?.unwrap_or("").trim();
        if value.is_empty() {
            if key == "risk_profile" && enabled {
                return Err((at(key), "is required for an enabled agent and empty".into()));
            }
            continue;
        }
        if root
            .lookup(&[section, value])
            .and_then(Node::as_table)
            .is_none()
        {
            return Err((
                at(key),
                format!("= {value:?} but {section}.{value} is not configured"),
            ));
        }
    }
    Ok(())
}

/// A dotted `family.alias` reference that must exist under `providers.<section>`.
fn check_provider_ref(root: &Table, field: &str, value: &str, section: &str) -> Check {
    let value = value.trim();
    let Some((family, name)) = value
        .split_once('.')
        .filter(|(f, n)| !f.is_empty() && !n.is_empty())
    else {
        return Err((
            field.into(),
            format!("= {value:?} is not a dotted `<family>.<alias>` reference"),
        ));
    };
    if root
        .lookup(&["providers", section, family, name])
        .and_then(Node::as_table)
        .is_none()
    {
        return Err((
            field.into(),
            format!("= {value:?} but [providers.{section}.{family}.{name}] is not configured"),
        ));
    }
    Ok(())
}

fn check_runtime_profiles(root: &Table) -> Check {
    let Some(profiles) = root.get("runtime_profiles") else {
        return Ok(());
    };
    let profiles = profiles.as_table().ok_or_else(|| {
        (
            "runtime_profiles".to_string(),
            "must be a table".to_string(),
        )
    })?;
    for (name, profile) in profiles.iter() {
        let field = format!("runtime_profiles.{name}.context_compression");
        let Some(cc) = profile
            .as_table()
            .and_then(|p| p.get("context_compression"))
        else {
            continue;
        };
        let cc = cc
            .as_table()
            .ok_or_else(|| (field.clone(), "must be a table".to_string()))?;
        let value = cc.opt_str("summary_provider", &field)?.unwrap_or("");
        if !value.trim().is_empty() {
            check_provider_ref(root, &format!("{field}.summary_provider"), value, "models")?;
        }
    }
    Ok(())
}

fn check_risk_profiles(root: &Table) -> Check {
    let Some(profiles) = root.get("risk_profiles").and_then(Node::as_table) else {
        return Ok(());
    };
    for (name, profile) in profiles.iter() {
        let field = format!("risk_profiles.{name}.shell_env_passthrough");
        let Some(list) = profile
            .as_table()
            .and_then(|p| p.get("shell_env_passthrough"))
        else {
            continue;
        };
        let items = list
            .as_array()
            .ok_or_else(|| (field.clone(), "must be an array".to_string()))?;
        for (i, item) in items.iter().enumerate() {
            let ok = item.as_str().is_some_and(|v| {
                let mut chars = v.chars();
                chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            if !ok {
                return Err((
                    format!("{field}[{i}]"),
                    "is not an environment variable name".into(),
                ));
            }
        }
    }
    Ok(())
}

/// Every bundle directory resolves inside `<install>/shared/` (the fragment's install root is
/// `.`), and no two bundles share one.
fn check_skill_bundles(root: &Table) -> Check {
    let Some(bundles) = root.get("skill_bundles").and_then(Node::as_table) else {
        return Ok(());
    };
    let mut seen: HashMap<PathBuf, String> = HashMap::new();
    for (name, bundle) in bundles.iter() {
        let field = format!("skill_bundles.{name}.directory");
        let bundle = bundle.as_table().ok_or_else(|| {
            (
                format!("skill_bundles.{name}"),
                "must be a table".to_string(),
            )
        })?;
        let directory = bundle
            .opt_str("directory", &format!("skill_bundles.{name}"))?
            .filter(|d| !d.trim().is_empty());
        let resolved = match directory {
            Some(d) => PathBuf::from(d),
            None => Path::new("shared").join("skills").join(name),
        };
        let normalized = inside_shared(&resolved).ok_or_else(|| {
            (
                field.clone(),
                format!(
                    "resolves to {} outside the install's shared/ directory",
                    resolved.display()
                ),
            )
        })?;
        if let Some(other) = seen.insert(normalized, name.to_string()) {
            return Err((
                field,
                format!("resolves to the same directory as skill_bundles.{other}"),
            ));
        }
    }
    Ok(())
}

fn inside_shared(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(c) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    out.starts_with("shared").then_some(out)
}

fn check_mcp_servers(root: &Table) -> Check {
    let Some(mcp) = root.get("mcp") else {
        return Ok(());
    };
    let Some(servers) = mcp.as_table().and_then(|m| m.get("servers")) else {
        return Ok(());
    };
    let servers = servers.as_array().ok_or_else(|| {
        (
            "mcp.servers".to_string(),
            "must be an array of tables".to_string(),
        )
    })?;
    let mut names: HashMap<String, String> = HashMap::new();
    for (index, server) in servers.iter().enumerate() {
        let field = format!("mcp.servers.{}", element_name(index, server));
        let server = server
            .as_table()
            .ok_or_else(|| (field.clone(), "must be a table".to_string()))?;
        let name = server.opt_str("name", &field)?.unwrap_or("");
        if name.trim().is_empty() {
            return Err((format!("{field}.name"), "is empty".into()));
        }
        if let Some(previous) = names.insert(name.to_lowercase(), name.to_string()) {
            return Err((
                format!("{field}.name"),
                format!("duplicates server {previous:?}"),
            ));
        }
        if let Some(timeout) = server.get("tool_timeout_secs") {
            if !matches!(timeout, Node::Int(t) if (1..=600).contains(t)) {
                return Err((
                    format!("{field}.tool_timeout_secs"),
                    "must be between 1 and 600".into(),
                ));
            }
        }
        let transport = server.opt_str("transport", &field)?.unwrap_or("stdio");
        let url = server.opt_str("url", &field)?.unwrap_or("");
        match transport {
            "stdio" => {
                if server
                    .opt_str("command", &field)?
                    .unwrap_or("")
                    .trim()
                    .is_empty()
                {
                    return Err((
                        format!("{field}.command"),
                        "is required for a stdio server".into(),
                    ));
                }
            }
            "http" | "sse" => {
                if !is_http_url(url) {
                    return Err((
                        format!("{field}.url"),
                        format!("= {url:?} is not an http(s) URL"),
                    ));
                }
            }
            other => {
                return Err((
                    format!("{field}.transport"),
                    format!("= {other:?} is not stdio, http or sse"),
                ))
            }
        }
        if let Some(ca) = server.opt_str("tls_ca_cert_path", &field)? {
            if !Path::new(ca).is_absolute() {
                return Err((
                    format!("{field}.tls_ca_cert_path"),
                    "must be an absolute path".into(),
                ));
            }
            if !url.starts_with("https://") {
                return Err((
                    format!("{field}.tls_ca_cert_path"),
                    "requires an https url".into(),
                ));
            }
        }
    }
    Ok(())
}

fn check_model_providers(root: &Table) -> Check {
    let Some(families) = root
        .lookup(&["providers", "models"])
        .and_then(Node::as_table)
    else {
        return Ok(());
    };
    for (family, entries) in families.iter() {
        let Some(entries) = entries.as_table() else {
            continue;
        };
        for (name, entry) in entries.iter() {
            let field = format!("providers.models.{family}.{name}");
            let Some(entry) = entry.as_table() else {
                return Err((field, "must be a table".into()));
            };
            for key in ["uri", "api_url"] {
                if let Some(uri) = entry.opt_str(key, &field)? {
                    if !is_http_url(uri) {
                        return Err((
                            format!("{field}.{key}"),
                            format!("= {uri:?} is not an http(s) URL"),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The scrub, checked again on what will be written: secret fields empty, no ciphertext.
fn check_scrubbed(root: &Table) -> Check {
    let mut copy = root.clone();
    let leaked = schema::scrub_secrets(&mut copy).required;
    if let Some(path) = leaked.into_iter().next() {
        return Err((path, "holds a secret after scrubbing".into()));
    }
    if let Some(path) = schema::find_ciphertext(root) {
        return Err((path, "holds encrypted config ciphertext".into()));
    }
    Ok(())
}

fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !url.chars().any(char::is_whitespace)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(is_http_url("https://search.example.com/mcp"));
        assert!(is_http_url("http://localhost:8080"));
        assert!(!is_http_url("ftp://x"));
        assert!(!is_http_url("https://"));
        assert!(!is_http_url("https://a b"));
    }

    #[test]
    fn shared_containment() {
        assert!(inside_shared(Path::new("shared/skills/x")).is_some());
        assert!(inside_shared(Path::new("./shared/skills/pool/../x")).is_some());
        assert!(inside_shared(Path::new("shared/skills/../../outside")).is_none());
        assert!(inside_shared(Path::new("/srv/shared")).is_none());
        assert!(inside_shared(Path::new("agents/a/workspace")).is_none());
    }
}
