//! # The `--json` vocabulary
//!
//! With `--json` every command prints one JSON document on stdout (`diff`: JSON lines), in one
//! vocabulary. `tests/cli/json_schema.rs` runs every command with `--json` and checks its
//! document against this table (keys may be added; none is renamed or removed without changing
//! both).
//!
//! - `snapshot` is always a snapshot's full id (64 hex digits), never `id`; `object` is the full id
//!   of a blob or tree (`ls`, `diff`, `verify`); `root` a snapshot's (or a compared side's) root
//!   tree; `parent` and `since` are snapshot ids too.
//! - `destination` is a publish or pack destination, `mountpoint` a mountpoint, `remote` a
//!   remote's name. Host paths are strings (their `\xNN` escaped form if not UTF-8).
//! - A name inside a snapshot (`ls`, `diff`) is carried losslessly: `path` is the real name when
//!   it is UTF-8, else `null` with `path_bytes`, its bytes in
//!   lowercase hex; `display` is always the escaped form text output prints (`caf\xe9`). A
//!   rename's old name is `from` / `from_bytes` / `from_display`.
//! - Every string is written with the characters a terminal would act on or hide (controls, DEL,
//!   C1 controls, bidi overrides and isolates, zero-width characters) as `\uXXXX` escapes: the
//!   output is plain visible text, and a JSON parser reads back the exact value.
//! - Times: `created_unix_ns` (integer) and `created` (RFC 3339, UTC). Sizes are `bytes` or
//!   `size`; counts are integers.
//!
//! | command | document |
//! |---|---|
//! | `export`, `snapshot ALIAS` | `{snapshot, agent, destination` (null for `snapshot`)`, reused_files, replaced, files, bytes, skills_carried, skill_bundles, tallies, skipped, risk_flags:[{kind, path, detail}], required_secrets, scrubbed_by_name:[{path, rule}], credential_looking_values:[{location, reason}], personal_files, skipped_config_sections, skipped_config_reason, unknown_keys, set_secrets, dropped:[{path, reason, detail}], work}` |
//! | `snapshot --dir` | `{snapshot, root, files, bytes, report:{trees, skipped}, work}` |
//! | `list` | `[{snapshot, created_unix_ns, created, kind, source, agent, agent_latest, name, files, bytes, root}]` (`agent_latest`: the snapshot `agent/<alias>` names) |
//! | `list --remote NAME` | `[{snapshot, remote, created_unix_ns, created, kind, source, agent, agent_latest, name, files, bytes, root}]` |
//! | `show` | `{snapshot, root, created_unix_ns, created, host, kind, source, agent, name, parent, report}` |
//! | `ls` | `[{path, path_bytes?, display, kind, mode, size, object}]` |
//! | `cat` | refused: it writes the file's bytes (`ls --json SNAP:PATH` describes the file) |
//! | `checkout` | `{snapshot, destination, files, bytes, reused_files, replaced}` |
//! | `mount` | `{snapshot, mountpoint, pid}` once the mount answers (foreground or `--daemon`) |
//! | `umount` | `{mountpoint}` |
//! | `recover` | `{destination, restored_from, removed_old, removed_staging, left_alone:[{path, reason}]}` |
//! | `update` (and `--dry-run`) | the plan: `{source, alias, bundle_alias, install, base, incoming, content_id, up_to_date, taken, deleted, kept, conflicts:[{path, kind, resolution}], config_keys:[{key, action}], new_grants, accept_grants, policy, notes?, downgrade?:{imported, incoming}, allow_downgrade?}` (a skill bundle's paths read `skill bundle S: PATH`; `resolution` null: refused; `notes`, `downgrade` and `allow_downgrade` only when there are any: an Agent Plugin's refused components, its update to an older version by SemVer, refused unless allowed) |
//! | `rollback` | `{alias, written, backup, states}` |
//! | `sync` | `{install, agents:[{alias, source, outcome, snapshot, plan` (as `update`'s)`, review, error}], listings}` |
//! | `recover --install` | `{install, completed:[{alias, verb, seq, published:[the trees published again], config_written, backup, leftovers}]}` (one entry per agent whose update or rollback was finished; `[]`: nothing was pending) |
//! | `verify` | `{objects, bytes, snapshots, tree_indexes, tree_indexes_missing, problems:[{problem, message, snapshot?, object?, path?}]}` |
//! | `gc` | `{reachable, removed, freed_bytes, young_kept, young_kept_bytes, temp_removed, temp_freed_bytes, tree_indexes_removed, signatures_removed, dest_records_removed, duplicates_removed, duplicate_bytes, packs_merged}` |
//! | `reindex` | `{snapshots, tree_indexes_written, problems}` |
//! | `forget` | `{snapshot, served_by_a_mount}` (whether a running mount still serves it: its data stays until that mount ends) |
//! | `diff` | lines: `{type: "semantic", area, item, path, old?, new?, grant, secret?, note?}` (`old`/`new` are JSON values: a string, number, boolean, array or object; for a `secret` path only `"scrubbed"` or `"set"`), then `{type: "file", status, path, path_bytes?, display, from?.., old?, new?}` (each side `{kind, mode, size, object}`), then `{type: "summary", a, b, added, deleted, modified, kind_changed, mode_changed, renamed, bytes_added, bytes_removed, trees_read, new_grants}` where `a` and `b` are `{kind: "snapshot"\|"directory"\|"pack"\|"remote", snapshot?, directory?, pack?, remote?, path?, root, label}` |
//! | `pack` | `{snapshot, destination, since, trees_only, objects, trees, blobs, bytes, pack_bytes}` (refused with `--out -`: stdout carries the pack) |
//! | `unpack` | `{snapshot, objects, read, already_present}` (`objects`: what the pack lists; `read`: objects read from it and verified, the record included; `already_present`: objects the store held, not read from the pack) |
//! | `remote add` | `{remote, url, endpoint}` |
//! | `remote list` | `[{remote, url, endpoint}]` |
//! | `remote remove` | `{remote}` |
//! | `remote forget` | `{snapshot, remote}` |
//! | `remote gc` | `{remote, snapshots, reachable, live_packs, marked, marked_young, unmarked, deleted_packs, deleted_bytes, deleted_indexes, deleted_trees, unwalked}` |
//! | `push` | `{snapshot, remote, already, objects, pack_bytes, pack, signatures}` |
//! | `pull` | `{snapshot, remote, packs, bytes}` |
//! | `review` | `{source:{arg, kind, path?, remote?}, snapshot, root` (the content id)`, files, bytes, skipped, bundle:{agent, format_version, zeroclaw_version, exported_at, risk_flags:[{kind, path, detail, listed, stale}], grants_unchecked, required_secrets, set_secrets, dropped, not_exported:[{path, reason, detail}], skill_bundles}` (null when not an agent bundle, with `not_a_bundle` saying why)`, credentials:[{path, path_bytes?, display, line, reason}], executables, skill_scripts:[{path.., why}], personal_files, not_scanned:[{path.., size}], binary_files, scanned_files, parts:[{part, files, bytes, skills?}], scan_cap, install:{path, found}, updates:[{alias, imported_at, imported_snapshot, baseline_kind, baseline, note, changes` (as `diff`'s semantic lines)`, new_grants, summary}], signatures` (as `show`'s)`, mount, update_plan}` (`update_plan`: null, or when the source is a newer version of an agent imported into the install, the three-way plan as `update --dry-run --json` prints it) |
//! | `import` | `{snapshot, root` (the content id)`, source, source_kind, agent, bundle_agent, install, config, backup, entries:[{kind, bundle, local, path, action}], notes, trees:[{bundle_path, destination, files, bytes, replaces}], config_diff, risk_flags, required_secrets, set_secrets, dropped, dry_run}`; once applied also `secrets_filled, secrets_encrypted, config_mode, provenance` (`secrets_encrypted` false: the filled secrets are plain text in `config.toml`, whose permission bits `config_mode` gives, e.g. `"0644"`) |
//! | `sign` | `{snapshot, signature` (the signature's id)`, fingerprint, key_type, added}` |
