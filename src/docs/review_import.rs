//! # Review and import
//!
//! ## Review
//!
//! `zeroclaw-bundle review <BUNDLE-DIR|SNAPSHOT|PACK|NAME/SNAPSHOT> [--install DIR]` shows, on one
//! screen, everything an operator must accept before importing a bundle:
//!
//! - what it is (agent, format, export time), its files and bytes by part (manifest, config,
//!   workspace, each skill bundle with its skills), and entries a directory capture did not follow;
//! - the capability grants, from the one grant model export, review, import and diff share
//!   (`GrantKind`): ZeroClaw's own risk flags (the manifest's, checked against what the bundle's
//!   own `config.toml` grants when ZeroClaw's planner reads it: a grant the manifest does not list
//!   is marked `!`), plus our rules for what ZeroClaw's manifest has no flag for: a risk profile's
//!   `auto_approve` and `allowed_commands`, any other allowlist widened or denylist narrowed, the
//!   endpoint a provider or MCP server sends requests to, fallback providers, MCP servers (and an
//!   MCP bundle gaining one), and knowledge sources (host paths or URLs the agent reads);
//! - the secrets to fill (`zeroclaw config set ...` lines), what could not travel, the skill
//!   bundles carried;
//! - credential-looking files and values, each by path, line and reason and never by value: `.env`
//!   assignments, private keys (`*.pem`, `*.key`, `id_*`, a `PRIVATE KEY` header anywhere),
//!   `.git/config` remotes with a password in the URL, `.git-credentials`, cloud credential files
//!   (`.aws/credentials`, gcloud, Azure, Docker, kube), `.netrc` passwords, tokens in URLs,
//!   bearer values, well-known token prefixes and long high-entropy tokens in any text file. Files
//!   over 1 MiB are named as not scanned, binary files get only the name rules;
//! - executable files, scripts in skills (executable, `#!`, or a script extension), and personal
//!   files (`workspace/USER.md`, `workspace/MEMORY.md`);
//! - when the install (`--install`, else the one ZeroClaw would use) holds an agent imported from an
//!   earlier version of this bundle (`<install>/.zeroclaw-bundle/imports/`), the semantic diff
//!   against what was imported, new grants marked `!` (against a fresh capture of the local agent
//!   when the imported snapshot is no longer in the store);
//! - who signed it (`Signed: signed by alice@example.com (SHA256:...)`, `unsigned`, or `signed by an
//!   unknown key`), checked against `--allowed-signers FILE` or the store's `trust` setting;
//! - last, the content id and the command that mounts what was reviewed read-only.
//!
//! The source becomes a snapshot of the store first (a directory is captured as `snapshot --dir`
//! captures it, a pack is unpacked, a remote ref pulled) and the review reads that snapshot only.
//! The content id is the snapshot's root tree: the same bundle reviewed as a directory, a snapshot
//! or a pack has the same one, and it is what `import --expect` pins. `-q` prints only the content
//! id; `--json` one document. Exit 0 whenever the review was produced, whatever it found.
//!
//! ```text
//! zeroclaw-bundle review ./researcher-bundle --install ~/.zeroclaw
//! zeroclaw-bundle mount <snapshot> /mnt/review      # the line the review ends with
//! ```
//!
//! ## Import
//!
//! `zeroclaw-bundle import SOURCE [--install DIR]` puts an agent bundle into a ZeroClaw install,
//! the half of portability ZeroClaw 0.8.7 does not have. SOURCE is a bundle directory, a snapshot,
//! a pack file or a remote ref; it is captured into the store first and everything is imported
//! from that snapshot, never re-read from the directory. `--expect ID` (the content id, the
//! bundle's root tree, as `import --dry-run` and `review` print it; a prefix of 16+ hex digits is
//! enough: a shorter one is refused, since content can be made to match it) refuses anything
//! else, so what was reviewed is what is imported even if the directory changed since. Only a
//! content id pins: a ref such as `agent/researcher` is refused (the source becomes that ref
//! when it is captured, so it would match itself), and so is a snapshot id. Without `--expect`,
//! a terminal is shown the grants, the credentials to fill and the content id and asked y/N; a
//! pipe needs `--expect` or `--yes`. With `--require-signed` (or the store's
//! `trust --require-signed true`), a pack's or a remote's signatures are checked before it is
//! unpacked or pulled, a stored snapshot's own, and a bundle directory (which carries none) is
//! refused before it is captured ([`super::signatures`]).
//!
//! - **Config merge** (toml_edit on the install's `config.toml` text: comments, formatting, CRLF
//!   line endings and the order of untouched tables stay). An entry is never overwritten: an
//!   incoming agent, risk or
//!   runtime profile, skill, knowledge or MCP bundle, provider or MCP server whose alias is taken
//!   by a *different* local entry is namespaced (`<alias>_imported`, `_imported_2`, ...) with every
//!   reference in the fragment rewritten; an *identical* one (as ZeroClaw's `Config` means it,
//!   secrets set aside; for a skill bundle, its content too) is reused; `--map KIND.OLD=NEW`
//!   points references at an existing local entry instead (KIND: `provider`, `tts_provider`,
//!   `transcription_provider`, `risk_profile`, `runtime_profile`, `skill_bundle`,
//!   `knowledge_bundle`, `mcp_bundle`, `mcp_server`). `--as ALIAS` names the agent. The merged
//!   text must load under ZeroClaw's own loader (no section skipped), keep the install's
//!   `schema_version` and pass ZeroClaw's `validate()` before anything is written; a reference
//!   that resolves to nothing fails the import and is named. An entry of the bundle's config
//!   that lies outside the agent's closure (nothing the agent references reaches it, so
//!   ZeroClaw's exporter never writes it) is refused, naming it: imported, a local agent naming
//!   it would start using it.
//! - **Files, then config, last**: `workspace/` goes to the agent's workspace
//!   (`agents/<alias>/workspace`) and each `skills/<alias>/` to the skill bundle's directory
//!   (`shared/skills/<alias>`), each through the staged publish (modes as recorded). A skill
//!   directory must lie inside `shared` once symlinks are followed (a linked `shared/skills` is
//!   fine), without `..`, and never be `shared` or `shared/skills` itself. A directory that is
//!   already there is never replaced unless you say so: `--force` replaces one holding exactly
//!   the tree being imported, anything else needs `--replace PATH` (its files are deleted). Then
//!   the provenance record (`.zeroclaw-bundle/imports/<alias>.toml`, read by `review`), a
//!   timestamped backup `config.toml.<UTC time>.bak`, and `config.toml` itself: staged, fsynced,
//!   renamed, with the mode and owner it had (a `config.toml` that is a symlink is written
//!   through; the link stays, the backup goes in the install). A failure before that last rename
//!   removes what the import created; `config.toml` is unchanged. A killed import leaves at most
//!   a staging directory (`zeroclaw-bundle recover <dir>` removes it) or published trees no
//!   config names: run the same import again with `--force`. Two imports into one install at
//!   once: the second fails at once (an exclusive lock on the install directory), and
//!   `config.toml` is compared with what was planned just before it is replaced.
//! - **Secrets**: the bundle carries none. On a terminal each required secret is asked for
//!   (hidden input, Enter skips) and stored encrypted with the install's key the way ZeroClaw
//!   stores it (`enc2:`, its `SecretStore`); with `secrets.encrypt = false` it is written as plain
//!   text, as ZeroClaw does, and the prompt and the closing report say so with the file's mode;
//!   otherwise the `zeroclaw config set <path>` lines to run are printed (with namespaced
//!   paths). An entry
//!   reused or mapped keeps its own credentials.
//! - `--dry-run` prints the whole plan (entries added, namespaced, reused, mapped; the config as a
//!   unified diff; files and where they go; the backup path; grants; secrets) and writes nothing.
//!   `--json` prints the plan (or the result) as one document.
//!
//! A round trip (export from X, import into Y, fill the secrets, export from Y) gives a bundle
//! `diff` finds equal to the first but for one dropped entry: the first export forced
//! `delegate_same_risk_profile = false` and listed that; the imported agent has nothing left to
//! drop. ZeroClaw's planner computes the same closure on both installs.
//!
//! ## Update in place, rollback and sync
//!
//! A bundle of an agent this install imported before (its provenance record names the
//! bundle's agent) is that agent's *update*, not a second agent: `import` routes it there
//! (`ImportPlan::update`), as `update SOURCE` does. `--update ALIAS` names the agent; `--as
//! NEW` imports beside it instead; an agent made by hand has no record and its namesake is
//! imported beside it, namespaced. The same bundle again is "up to date" and writes nothing.
//!
//! - **Three ways** (`crate::sync`): the base is the snapshot last imported, the local side a
//!   capture of the agent as it is, the incoming side the new bundle. Per workspace path and per
//!   config key of the entries the first import added (in the install's names: `--as`,
//!   namespacing and `--map` carry over): changed only upstream, taken; only here, kept; the
//!   same on both sides, fine; differently, a conflict: refused (exit 4) unless `--conflicts
//!   keep-local|take-incoming|copy` decides (`copy` keeps the local file and writes the
//!   incoming one beside it as `NAME.sync-conflict-YYYYMMDD-HHMMSS-ID8.EXT`). Memory,
//!   `MEMORY_SNAPSHOT.md` and what the manifests list as left behind are never touched. The
//!   merged config passes ZeroClaw's loader and `validate()`.
//! - **Before anything is written**: `import --dry-run`, `update --dry-run` and `review SOURCE
//!   --install DIR` print the three-way plan (taken, kept, deleted, config keys, conflicts,
//!   new grants); `review` plans it after the review, capturing the agent's workspace into the
//!   store only.
//! - **Skill trees** (`skills/<alias>`) of the skill bundles the agent's import added merge
//!   three ways too, each in its directory (paths shown as `skill bundle S: PATH`): a skill
//!   bundle the new version adds is written where the install puts skills, one it drops is
//!   removed once emptied (a skill file of the operator's own in it is kept). A change to a
//!   skill bundle the install had of its own (the first import used it rather than adding
//!   one) is refused, naming it: other agents may load it.
//! - **The base stays**: `forget` refuses the snapshot an agent was last imported from (the
//!   store keeps a hold per imported agent, checked against its provenance).
//! - **Grants**: what the incoming bundle grants that the base did not (the rules of `diff`'s
//!   `!`) is refused (exit 3) until accepted: `--accept-grants`, or a terminal's yes after the
//!   plan.
//! - **Written** as an import is (trees staged, `config.toml` last), after a state record in
//!   `.zeroclaw-bundle/updates/ALIAS/` (both config texts, the workspace before and after as
//!   store snapshots; the last three kept). `rollback ALIAS` merges the last state back the same
//!   way and records itself, so it can be rolled back.
//! - **`sync [[REMOTE/]agent/ALIAS]`** (`Bundles::sync`): for the agent named, or every agent
//!   imported from a remote, pulls `REMOTE/agent/BUNDLE_ALIAS`, requires a signature by the
//!   store's allowed signers (`--allow-unsigned` must be said), and updates in place when the
//!   plan grants nothing new and has no conflict. Otherwise nothing is written: it prints the
//!   plan, the review, and the commands to mount the snapshot and to apply it, and exits 3
//!   (grants) or 4 (conflicts); an agent that cannot be synced is reported and exits 1 while
//!   the others still sync. Up to date costs one listing of the remote per agent and writes
//!   nothing. Two syncs of one install: the second fails at once, naming the lock
//!   (`.zeroclaw-bundle/sync.lock`). `tests/cli/sync_hosts.rs` runs two hosts through 30
//!   random rounds over a `file://` remote and over S3.
