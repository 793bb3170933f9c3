//! ZeroClaw's `mcp.servers` entries as `mcp.json` server entries (spec §7.2.1). ZeroClaw's
//! `stdio`, `http` and `sse` transports map to `stdio`, `streamable-http` and `sse`. What the
//! spec cannot express travels in the manifest's extension (`tool_timeout_secs`,
//! `max_response_bytes`, `pinned_resources`, `tls_ca_cert_path`); a server the spec refuses
//! (an absolute host command, a plain `http` URL to another host, ...) is left out and named
//! with the spec's own reason, checked by the spec's own parser.

use agent_plugins::{McpConfig, SpecVersion, MCP_SCHEMA_1_0_0};
use serde_json::{json, Map, Value};
use zeroclaw_config::schema::{McpServerConfig, McpTransport};

/// One server rendered for `mcp.json`, with its ZeroClaw-only fields.
pub(super) struct Rendered {
    /// The `mcpServers` member.
    pub entry: Value,
    /// The fields only ZeroClaw knows, for the manifest's extension (empty when none is set).
    pub zeroclaw_only: Map<String, Value>,
}

/// Renders `server` as an `mcp.json` server entry, or says why the spec cannot carry it.
pub(super) fn render(server: &McpServerConfig) -> Result<Rendered, String> {
    let sorted = |m: &std::collections::HashMap<String, String>| -> Map<String, Value> {
        let mut pairs: Vec<_> = m.iter().collect();
        pairs.sort();
        pairs
            .into_iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect()
    };
    let mut entry = Map::new();
    match server.transport {
        McpTransport::Stdio => {
            entry.insert("type".into(), json!("stdio"));
            entry.insert("command".into(), json!(server.command));
            if !server.args.is_empty() {
                entry.insert("args".into(), json!(server.args));
            }
            if !server.env.is_empty() {
                entry.insert("env".into(), Value::Object(sorted(&server.env)));
            }
        }
        McpTransport::Http | McpTransport::Sse => {
            let kind = match server.transport {
                McpTransport::Sse => "sse",
                _ => "streamable-http",
            };
            entry.insert("type".into(), json!(kind));
            entry.insert("url".into(), json!(server.url.clone().unwrap_or_default()));
            if !server.headers.is_empty() {
                entry.insert("headers".into(), Value::Object(sorted(&server.headers)));
            }
        }
    }
    let entry = Value::Object(entry);
    check(&server.name, &entry)?;
    let mut zeroclaw_only = Map::new();
    if let Some(t) = server.tool_timeout_secs {
        zeroclaw_only.insert("tool_timeout_secs".into(), json!(t));
    }
    if let Some(b) = server.max_response_bytes {
        zeroclaw_only.insert("max_response_bytes".into(), json!(b));
    }
    if !server.pinned_resources.is_empty() {
        zeroclaw_only.insert("pinned_resources".into(), json!(server.pinned_resources));
    }
    if let Some(p) = &server.tls_ca_cert_path {
        zeroclaw_only.insert("tls_ca_cert_path".into(), json!(p));
    }
    Ok(Rendered {
        entry,
        zeroclaw_only,
    })
}

/// The spec parser's verdict on one entry, alone in an `mcp.json`.
fn check(name: &str, entry: &Value) -> Result<(), String> {
    let doc = json!({ "$schema": MCP_SCHEMA_1_0_0, "mcpServers": { name: entry } });
    let bytes = serde_json::to_vec(&doc).map_err(|e| e.to_string())?;
    match McpConfig::parse(&bytes, SpecVersion::V1_0_0) {
        Ok((_, diagnostics)) if diagnostics.is_empty() => Ok(()),
        Ok((_, diagnostics)) => Err(diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
            .join("; ")),
        Err(reason) => Err(reason.to_string()),
    }
}

/// The whole `mcp.json` document for `servers` (name, entry), in the order given.
pub(super) fn document(servers: &[(String, Value)]) -> Value {
    let members: Map<String, Value> = servers.iter().cloned().collect();
    json!({ "$schema": MCP_SCHEMA_1_0_0, "mcpServers": members })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &str) -> McpServerConfig {
        McpServerConfig {
            name: "gh".into(),
            command: command.into(),
            args: vec!["-y".into(), "server-github".into()],
            ..Default::default()
        }
    }

    #[test]
    fn bare_and_plugin_relative_commands_travel() {
        for command in ["npx", "./bin/server"] {
            let r = render(&stdio(command)).expect(command);
            assert_eq!(r.entry["command"], command);
            assert_eq!(r.entry["type"], "stdio");
        }
    }

    #[test]
    fn host_paths_and_escapes_are_left_out_with_the_spec_reason() {
        for command in ["/usr/local/bin/server", "../bin/server", "bin/server"] {
            let why = render(&stdio(command)).err().expect(command);
            assert!(why.contains("command"), "{command}: {why}");
        }
    }

    #[test]
    fn plain_http_travels_only_to_loopback() {
        let mut s = McpServerConfig {
            name: "web".into(),
            transport: McpTransport::Http,
            url: Some("http://search.example.com/mcp".into()),
            ..Default::default()
        };
        assert!(render(&s).is_err());
        s.url = Some("https://search.example.com/mcp".into());
        let r = render(&s).expect("https");
        assert_eq!(r.entry["type"], "streamable-http");
    }
}
