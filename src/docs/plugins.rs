//! # Agent Plugins
//!
//! An Agent Plugin (agent-plugins.org, spec 1.0.0: the version the `agent-plugins` crate, which
//! this tool loads and validates every plugin with, implements) is a directory with a
//! `plugin.json`, skills under `skills/<name>/SKILL.md`, and an optional `mcp.json` of MCP
//! servers. This tool writes one from a ZeroClaw skill bundle, and reviews, diffs, snapshots,
//! mounts and imports one wherever it takes a bundle directory.
//!
//! ## `export-plugin SKILL_BUNDLE --out DIR [--install DIR] [--name NAME]`
//!
//! - Skills: the skill bundle's directory, with its `include`/`exclude` filter, each skill
//!   with its own files and modes, under `skills/`.
//! - `mcp.json`: the MCP servers the agents that attach the bundle reach, planned by ZeroClaw's
//!   own planner exactly as `export` plans an agent, so every `env` and `headers` value (and
//!   any credential-named key) is scrubbed to `""`; the report lists each
//!   (`mcp.servers.<name>.env.<KEY>`), and `plugin.json` records them under the
//!   `org.zeroclaw.bundle` extension. A server the spec cannot carry (an absolute host
//!   command, a plain `http` URL to another host) is left out and named with the spec's reason.
//!   ZeroClaw-only fields (`tool_timeout_secs`, `max_response_bytes`, `pinned_resources`,
//!   `tls_ca_cert_path`) ride in the same extension.
//! - `plugin.json`: the name (`--name`, else the alias lowercased with `_` as `-`; it must
//!   pass the spec's grammar), a description, and the extension.
//! - The tree is loaded by the spec's loader before anything is written: one diagnostic (a
//!   skill without frontmatter, a skill directory whose name the spec refuses) and nothing is
//!   published. Then the credential scan, one snapshot, and `export`'s staged publish;
//!   `--force` replaces only a plugin this tool wrote.
//!
//! ## `review` and `diff` of a plugin
//!
//! A snapshot whose root holds `plugin.json` and no agent manifest is read as a plugin: the
//! spec's loader over the captured snapshot, then containment (a capture never follows a
//! symlink, so a `./` command or `./` working directory that is not in the snapshot, a
//! symlink out of the root for one, refuses its server; a `SKILL.md` symlinked anywhere
//! leaves its skill without one). `review` shows every server (a `stdio` server as the full
//! command line it starts and where, an `http`/`sse` server as its URL, the credentials each
//! asks for), the grants of the one grant model over what its servers mean to ZeroClaw, and
//! every refused component at the spec's narrowest boundary: the whole plugin (a bad manifest,
//! an unknown `$schema`, a bad name), the MCP component, one server, one skill. `diff` of two
//! plugins compares those servers key by key and marks a new server or a changed command or
//! arguments with `!`.
//!
//! ## `import PLUGIN --install DIR [--attach AGENT] [--expect ID]`
//!
//! The plugin tree goes to `shared/plugins/<alias>/`; `config.toml` gains
//! `[skill_bundles.<alias>]` (its `directory` is the plugin's `skills/`), one
//! `[[mcp.servers]]` per server with `${PLUGIN_ROOT}` expanded and a `./` command made
//! absolute there, and `[mcp_bundles.<alias>]` granting them. The alias is the one
//! `export-plugin` recorded, else the plugin name (`.` as `_`), suffixed when taken. The merge is
//! an agent import's: a server named like a local one becomes `<name>_imported`, the local one
//! untouched; ZeroClaw's loader and `validate()` must accept the result; `--expect` pins the
//! content id `review` ends with; secrets, backup, provenance and the atomic write are the same.
//! No agent reaches the plugin unless `--attach AGENT` adds it to that agent's `skill_bundles`
//! and `mcp_bundles` (the confirmation shows the grants). A server ZeroClaw cannot run as the
//! spec means it is refused and named: one that uses `${PLUGIN_DATA}` (ZeroClaw gives a server
//! no data directory) or sets a `cwd` (ZeroClaw sets none).
