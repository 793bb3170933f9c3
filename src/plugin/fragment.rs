//! What an Agent Plugin's `mcp.json` means to ZeroClaw: its servers as a `[[mcp.servers]]`
//! config fragment, so the one grant model (`crate::agent::grants`) and the semantic diff read
//! a plugin exactly as they read an agent bundle's config. `streamable-http` is ZeroClaw's
//! `http`; arguments and environment values are kept as written (placeholders unexpanded);
//! ZeroClaw has no `cwd`, so a server's working directory is shown, not configured.

use agent_plugins::{McpServer, ServerEntry};
use toml::{Table, Value};

/// The `[[mcp.servers]]` fragment of `servers`, each named `prefix` + its name.
pub(crate) fn servers_fragment(
    servers: &[ServerEntry],
    prefix: &str,
) -> Result<String, toml::ser::Error> {
    let servers: Vec<Value> = servers
        .iter()
        .map(|entry| {
            let mut t = Table::new();
            t.insert("name".into(), format!("{prefix}{}", entry.name).into());
            match &entry.server {
                McpServer::Stdio(s) => {
                    t.insert("transport".into(), "stdio".into());
                    t.insert("command".into(), s.command.as_str().into());
                    if !s.args.is_empty() {
                        let args: Vec<Value> = s.args.iter().map(|a| a.as_raw().into()).collect();
                        t.insert("args".into(), Value::Array(args));
                    }
                    if !s.env.is_empty() {
                        let env: Table = s
                            .env
                            .iter()
                            .map(|(k, v)| (k.clone(), v.as_raw().into()))
                            .collect();
                        t.insert("env".into(), Value::Table(env));
                    }
                }
                McpServer::StreamableHttp(r) | McpServer::Sse(r) => {
                    let kind = match &entry.server {
                        McpServer::Sse(_) => "sse",
                        _ => "http",
                    };
                    t.insert("transport".into(), kind.into());
                    t.insert("url".into(), r.url.as_str().into());
                    if !r.headers.is_empty() {
                        let headers: Table = r
                            .headers
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone().into()))
                            .collect();
                        t.insert("headers".into(), Value::Table(headers));
                    }
                }
                _ => {}
            }
            Value::Table(t)
        })
        .collect();
    if servers.is_empty() {
        return Ok(String::new());
    }
    let mut mcp_table = Table::new();
    mcp_table.insert("servers".into(), Value::Array(servers));
    let mut root = Table::new();
    root.insert("mcp".into(), Value::Table(mcp_table));
    toml::to_string(&root)
}

/// What an Agent Plugin's servers mean to ZeroClaw, from its `plugin.json` and `mcp.json`
/// bytes (as the semantic diff holds them): the fragment of the servers the spec accepts.
/// `None` when the manifest is rejected (then it is no plugin to compare).
pub fn config_of(manifest: &[u8], mcp: Option<&[u8]>) -> Option<String> {
    let (manifest, _) = agent_plugins::Manifest::parse(manifest).ok()?;
    let servers = match mcp.map(|b| agent_plugins::McpConfig::parse(b, manifest.spec)) {
        Some(Ok((config, _))) => config.servers,
        _ => Vec::new(),
    };
    servers_fragment(&servers, "").ok()
}
