//! # Diff
//!
//! `zeroclaw-bundle diff A B` compares two sides, each a snapshot (`SNAP:PATH` limits it to a
//! subtree), a directory (a published bundle or any tree, read with the same descriptor-verified
//! reader and hashed in memory: no object and no snapshot is written, and its stat cache makes a
//! second diff of the same directory a stat walk), or a pack file (a digest pack compares by
//! content id). Both trees are walked in name order and equal subtree ids are skipped, so the
//! cost grows with the change, not the bundle. Output is git's name-status (`A`, `M`, `D`, `T`
//! kind change, `X` mode only: same content, other permission bits, `R old -> new` exact
//! renames), `--stat` (`path | mode 0644 -> 0600` for an `X`), `-p` (a unified diff
//! of text files, capped at 256 KiB a file; binary and larger files are named), `--json` (JSON
//! lines: one object per change, streamed, then a summary; each side of a change carries `kind`,
//! `mode` as four octal digits, `size`, `object`; the summary counts `X` as `mode_changed`), or
//! nothing with the global `-q` (before or after the command). Exit 0 equal, 1 different, 2
//! error, like diff(1). Two exports of an unchanged agent differ only in the manifest's
//! `provenance.exported_at`: that alone is not a change (exit 0, a note on stderr naming both
//! times); `--export-time` counts it. `--exit-on-new-grants` fails closed: a side whose bundle
//! files it cannot read (a digest pack, a remote snapshot, an update pack without its base, a
//! plain tree or `SNAP:PATH`) exits 2 with the reason, never 0 or 1.
//!
//! For two agent bundles, a section comes first that says what changed in what the agent may do:
//! risk flags, required secrets, dropped entries, carried skill bundles (provenance time is
//! ignored) and `config.toml` key by key as dotted paths. Secret values are never shown
//! (`(scrubbed)` / `(set, not shown)`), in the patch of `-p` either: a TOML file's secret-named
//! keys and secret tables print as `"(not shown: a secret field)"` (masked on the parsed
//! document: multi-line strings and inline tables too; a `.toml` file that does not parse is not
//! shown at all), and control characters in any file print escaped. A change that grants
//! something new is marked `!`: the grant model is the one `review` uses ([`super::review_import`]:
//! ZeroClaw's risk flags, an auto-approved tool, an allowed command, an allowlist that gained an
//! entry or was removed so ZeroClaw's default applies, a denylist that lost one, a provider's or
//! MCP server's endpoint, a fallback provider, a new MCP server or skill bundle, a knowledge
//! source). `--exit-on-new-grants` exits 3 on one. Risk flags are recomputed from each side's
//! `config.toml`, not taken from its manifest: a config edited after export cannot hide a grant,
//! and a grant the config makes but the manifest does not list is marked as such. A reader that
//! leaves early (`| head`) does not change the exit code. Entries a directory side
//! skips (symlinks, special files, hard links) are named on stderr, not silently ignored.
//!
//! With `-v`, `diff` says per side how many trees came from the snapshot's tree index and how
//! many tree objects were read. A diff of directories or packs needs no store: without one it
//! hashes in a scratch store that is dropped afterwards.
