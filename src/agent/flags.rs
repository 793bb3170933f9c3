//! Risk flags beyond ZeroClaw's own: `process_spawn` and `env_passthrough` for provider
//! families that start a host process, and the flags a bundle's `config.toml` grants when read
//! back (ZeroClaw's planner on the loaded fragment, plus ours), for the semantic diff.

use super::error::AgentError;
use super::manifest::{RiskFlag, RiskKind};
use super::value::{Node, Table};

/// The flags a bundle's own `config.toml` grants, computed the way an export computes them:
/// the fragment is loaded by ZeroClaw's `Config` and planned by ZeroClaw's planner for its root
/// agent (policy of the agent's profile, every granted MCP server), plus our subprocess-provider
/// flags: what an import would actually run, whatever the manifest says. The `carried_skills`
/// flags are not here; they describe carried content, not config. A fragment ZeroClaw cannot
/// load is an error (a grants check must never pass what it could not read).
/// `text` is the fragment as written and `config` the same, parsed.
pub(crate) fn config_flags(
    text: &str,
    config: &Table,
    root_agent: &str,
) -> Result<Vec<RiskFlag>, AgentError> {
    let typed: zeroclaw_config::schema::Config =
        toml::from_str(text).map_err(|e| AgentError::InvalidField {
            field: "config.toml".to_string(),
            problem: format!(
                "does not load under ZeroClaw {}'s schema, so its grants cannot be computed: {}",
                super::schema::ZEROCLAW_VERSION,
                e.to_string().replace('\n', " ")
            ),
        })?;
    let mut flags: Vec<RiskFlag> = if typed.agents.contains_key(root_agent) {
        zeroclaw_config::agent_bundle::plan_export(&typed, root_agent)
            .map_err(super::bridge::from_zeroclaw)?
            .risk_flags
            .iter()
            .filter(|f| f.kind != zeroclaw_config::agent_bundle::RiskKind::CarriedSkills)
            .map(super::bridge::flag_from)
            .collect()
    } else {
        Vec::new()
    };
    flags.extend(provider_flags(config));
    Ok(flags)
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
        Some(reason) => not_shown(reason),
        None => word.to_string(),
    }
}

/// What a report prints in place of a hidden word.
fn not_shown(what: impl std::fmt::Display) -> String {
    format!("<{what}: not shown>")
}

/// A flag's detail as a report shows it: each word that looks like a credential is named,
/// not printed, so a credential in a stdio server's command line (which ZeroClaw's manifest
/// repeats verbatim) never reaches a terminal or a log. A word is hidden when it looks like a
/// credential on its own or together with the word before it (`Bearer <token>`: ZeroClaw
/// joins a server's arguments with spaces, so an argument `Authorization: Bearer <token>`
/// arrives as three words). A word after a flag named like a credential (`--token X`,
/// `--api-key X`) is hidden too, and so is the value of `--password=X`.
pub fn shown_detail(detail: &str) -> String {
    let words: Vec<&str> = detail.split(' ').collect();
    words
        .iter()
        .enumerate()
        .map(|(i, word)| {
            let previous = i.checked_sub(1).map(|p| words[p]);
            if let Some((flag, value)) = word.split_once('=') {
                if let Some(rule) = credential_flag(flag).filter(|_| !value.is_empty()) {
                    return format!("{flag}={}", not_shown(format!("value of a {rule}")));
                }
            }
            let reason = crate::credentials::detect(word).or_else(|| {
                previous.and_then(|p| crate::credentials::detect(&format!("{p} {word}")))
            });
            if let Some(reason) = reason {
                return not_shown(reason);
            }
            match previous
                .and_then(credential_flag)
                .filter(|_| !word.is_empty() && !word.starts_with('-'))
            {
                Some(rule) => not_shown(format!("value of a {rule}")),
                None => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--token`, `--api-key`, `-password`: a command-line flag whose name is credential-like, by
/// the credential-name rule it matches.
fn credential_flag(word: &str) -> Option<&'static str> {
    let name = word.strip_prefix('-')?.trim_start_matches('-');
    (!name.is_empty())
        .then(|| crate::credential_keys::credential_key_rule(name))
        .flatten()
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

#[cfg(test)]
mod tests {
    use super::shown_detail;

    #[test]
    fn credential_words_and_flag_values_are_named_not_printed() {
        for (detail, hidden) in [
            ("starts npx --token SECRET-A24 run", "SECRET-A24"),
            ("starts curl --api-key=SECRET-B24", "SECRET-B24"),
            (
                "starts curl -H Authorization: Bearer SECRET-C24",
                "SECRET-C24",
            ),
            ("starts tool --password hunter2-SECRET", "hunter2-SECRET"),
        ] {
            let shown = shown_detail(detail);
            assert!(!shown.contains(hidden), "{detail} -> {shown}");
            assert!(shown.starts_with("starts "), "{shown}");
        }
        // Ordinary words and flags stay.
        assert_eq!(
            shown_detail("starts npx -y @modelcontextprotocol/server-github --port 8080"),
            "starts npx -y @modelcontextprotocol/server-github --port 8080"
        );
    }
}
