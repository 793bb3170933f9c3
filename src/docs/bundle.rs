//! # What an export guarantees
//!
//! Bundle format 1, as ZeroClaw 0.8.7 defines it for `zeroclaw agents export`. The closure is
//! computed by ZeroClaw's own code, so the bundle means to ZeroClaw exactly what its own export
//! means; an oracle test (`tests/cli/oracle.rs`) runs ZeroClaw's planner with the I/O rules of its
//! `agents export` beside our `export` on every fixture and fails on any difference not listed
//! under "Stricter on purpose".
//!
//! - **Versions.** Supported: ZeroClaw 0.8.7, config `schema_version` 1, 2 and 3. A config without
//!   `schema_version` (v1) or at v2 is migrated in memory by ZeroClaw's own migration
//!   (`migration::migrate_to_current_salvaged`, as its loader does) and exports; the install is
//!   never written (ZeroClaw's loader creates directories and moves a pre-v3 `<install>/workspace`
//!   into `agents/default/workspace`; we only read). For agent `default` of such an install, the
//!   export reads the entries that move would carry over (ZeroClaw's own dispatch table: not
//!   `sessions`, `state`, `plugins`, `devices.db`, `memory` or `skills`) from where they still
//!   are. A `schema_version` newer than 3 is refused by name. A section ZeroClaw's
//!   loader skips as invalid (for example a provider entry with `auth_mode = "oauth"`, where the
//!   schema's variants are `api_key` and `o_auth`) is skipped here too and named in the report;
//!   fallback edges to it are `dropped` as `source_missing`, as ZeroClaw records them.
//!   `provenance.zeroclaw_version` is the ZeroClaw version whose schema computed the closure
//!   (`0.8.7`), `exported_at` RFC 3339 with `+00:00`.
//! - **The next ZeroClaw release** is supported by bumping the pinned `zeroclaw-config` (see
//!   [`super::testing`]).
//! - **Secrets.** Every field ZeroClaw's schema marks `#[secret]` in a table the closure carries is
//!   blanked by ZeroClaw's own masking, whatever it holds (plain text, `enc:`/`enc2:` ciphertext,
//!   an `op://` reference), and listed in `required_secrets`. Ciphertext left anywhere else fails
//!   the export, naming the field.
//! - **Meaning.** The fragment is ZeroClaw's: typed defaults, pruning and key order are its
//!   planner's. The `default` risk profile carries ZeroClaw's built-in auto-approved tools, as its
//!   loader restores them.
//! - **What it asks of the importer.** Risk flags for every capability: autonomy, filesystem
//!   escape, sandbox and approval bypasses, environment passthrough, delegation, MCP stdio servers
//!   (the command line verbatim), carried skills.
//! - **Never travels.** `workspace/memory` and `MEMORY_SNAPSHOT.md`; symlinks, sockets, FIFOs,
//!   devices and hard-linked files are skipped and counted; an entry swapped for a symlink while
//!   being read fails the export.
//! - **Modes.** Every file keeps its permission bits, as in ZeroClaw's own export: a `0600` key
//!   is published `0600` whatever the umask. Setuid, setgid and sticky bits never travel;
//!   directories are 0755 (see [`zeroclaw_bundle_store::docs::objects`]).
//! - **Stands alone.** The rendered `config.toml` must load as ZeroClaw's `Config` and pass its
//!   `validate()` on its own; the destination is replaced in one atomic step or left exactly as it
//!   was.
//! - **The report** lists every capability the importing operator is asked to grant, every
//!   scrubbed credential with its `zeroclaw config set` line, and everything that could not travel.
//!
//! **Stricter on purpose** (the only differences the oracle accepts):
//!
//! - **Credential-name scrub.** Any non-empty string under a key named like a credential is blanked
//!   and listed in `required_secrets`, with the rule that matched in the report. The rules
//!   (on the key's own name, lowercased with camelCase humps and `-` read as `_`, so `apiKey`,
//!   `x-api-key` and `accessToken` count; tried in this order): `token`; `*_token`; `*secret*`;
//!   `*password*` or `*passwd*`; `api_key` or `*_api_key`; `*private_key*`; `bearer*`;
//!   `authorization`; `*credential*`; `cookie` or `*_cookie`; and the name of any field
//!   ZeroClaw's schema marks `#[secret]` in some struct (read from the schema:
//!   `Config::secret_field_terminals()`, so a gemini `oauth_client_id` pasted under another
//!   family is scrubbed). ZeroClaw 0.8.7 itself
//!   carries, for example, a token under a provider's `provider_extra` table verbatim.
//! - **Process flags.** `process_spawn` and `env_passthrough` flags for providers that start a host
//!   process (`grok_cli`, `gemini_cli`, `kilocli`, edge TTS: the binary, its arguments, working
//!   directory and passed-through variables), after ZeroClaw's own flags.
//! - **Setuid, setgid and sticky bits** are never carried (ZeroClaw copies them).
//! - **What it points out.** Values that look like credentials and travel as written (a token in a
//!   URL query, URL userinfo, a bearer token in `args`, a private-key header, a well-known token
//!   prefix, a high-entropy token), by config path or `file:line`, never the value; personal
//!   files (`USER.md`, `MEMORY.md`) that travel.
//! - **`--exclude GLOB`** (repeatable, bundle paths such as `workspace/USER.md` or
//!   `workspace/**/*.log`) leaves entries out and lists them in the manifest's `dropped`; a
//!   pattern that matches nothing fails the export, since a typo would let the file travel.
//! - **The headers** of `config.toml` and `zeroclaw-agent.toml` say that the name scrub ran; the
//!   TOML below them is ZeroClaw's, byte for byte.
//! - **Environment overrides** (`ZEROCLAW_<path>`) are not applied: a bundle describes the
//!   install's file, not the exporting shell.
//!
//! Two exports of an unchanged agent differ only in the manifest's `provenance.exported_at`,
//! which `diff` does not count as a change unless asked ([`super::diff`]).
//!
