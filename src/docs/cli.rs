//! # The command line
//!
//! `zeroclaw-bundle --help` and `zeroclaw-bundle <command> --help` show every option, with
//! examples. `zeroclaw-bundle --version` names the git commit it was built from (set
//! `ZEROCLAW_BUNDLE_COMMIT` when building outside a git checkout; else it says "unknown
//! commit"). Global options (`--store`, `--json`, `-q`, `-v`) go before or after the command.
//!
//! ## Where the store and the install are
//!
//! - The store is `--store`, else `$ZEROCLAW_BUNDLE_STORE`, else
//!   `$XDG_DATA_HOME/zeroclaw-bundle`, else `~/.local/share/zeroclaw-bundle`. A store is
//!   created only by the commands that add to it: `snapshot`, `export`, `unpack` and
//!   `remote add`. Every other command (`remote list` too) says `no store at PATH` and exits 1
//!   when there is none, so a mistyped `--store` creates nothing.
//! - `--install` defaults to the install ZeroClaw 0.8.7 itself would use:
//!   `$ZEROCLAW_CONFIG_DIR`, else the install `$ZEROCLAW_DATA_DIR` (or the deprecated
//!   `$ZEROCLAW_WORKSPACE`) belongs to, then this tool's `$ZEROCLAW_HOME` (which ZeroClaw does
//!   not read), else `~/.zeroclaw`.
//!
//! ## References
//!
//! Every command that reads something names it in one grammar (`source.rs` in the crate is its
//! one reader):
//!
//! ```text
//! DIR | PACK | SNAPSHOT | NAME | agent/ALIAS | REMOTE/REF   [:PATH]
//! ```
//!
//! A SNAPSHOT is a full id or a unique prefix of 8 or more hex digits; a NAME is one given with
//! `snapshot --name` (a name in use moves to the new snapshot; the old one stays, reachable by
//! its id); `agent/<alias>` is the newest snapshot of that agent, local or received;
//! `REMOTE/REF` is a snapshot (id, prefix, name or `agent/<alias>`) of a remote configured in
//! this store ([`super::remotes`]). An argument is read in this order:
//!
//! 1. spelled as a path (`/x`, `./x`, `../x`, `~/x`, `.`, `..`), it is that path, and one that
//!    does not exist is "PATH does not exist";
//! 2. an existing directory is DIR, an existing file is PACK (where the command takes that
//!    form: a bare word that is also a path here, `keep`, is read as a snapshot by a command
//!    that does not, so `checkout keep --out keep` works twice);
//! 3. `:PATH` (after the first `:`) names a path inside the snapshot, for `diff`, `ls` and
//!    `cat`; the other commands take the argument whole (a name may hold a `:`);
//! 4. `NAME/...` with `NAME` a configured remote is a remote ref (`agent` can be no remote's
//!    name); otherwise it is a local ref, and an unknown one is reported as "not a file or
//!    directory, and NAME is not a configured remote".
//!
//! | command | DIR | PACK | SNAPSHOT, NAME, agent/ALIAS | REMOTE/REF | :PATH |
//! |---|---|---|---|---|---|
//! | `diff` | hashed in memory | read in place | yes | trees read in place | yes |
//! | `review`, `import` | captured | unpacked | yes | pulled | no |
//! | `mount` | no | served in place | yes | served in place | no |
//! | `checkout` | no | unpacked, then published | yes | pulled, then published | no |
//! | `ls`, `cat` | no | read in place | yes | read in place | yes |
//! | `show` | no | its record | yes | its record | no |
//! | `pack`, `push`, `sign`, `forget` | no | no | yes | no | no |
//!
//! A form a command does not take is refused naming it and what makes it one it takes
//! ("./bundle is a directory, which `pack` does not take (...); capture it first:
//! zeroclaw-bundle snapshot --dir ./bundle"); a `:PATH` given to a command that reads none
//! is "`show` takes no :PATH".
//!
//! ## Output
//!
//! - Commands that make something print its id last on stdout. `-q` prints only that id; `-v`
//!   adds detail (object ids in `ls`, the work a capture or publish did, what a command asked
//!   of a remote); `--json` prints one JSON document instead ([`super::json`]; `diff`: JSON
//!   lines).
//! - Exit codes: 0 ok, 1 failure, 2 usage, 130 interrupted (`diff`: 0 equal, 1 different, 2
//!   error, 3 new grants with `--exit-on-new-grants`). Errors are one line `error: ...` naming
//!   the path or config field, then its causes.
//! - A closed stdout is not an error: `zeroclaw-bundle ls -r agent/x | head -1` ends quietly
//!   with exit 0 (ripgrep's choice; git is killed by SIGPIPE instead, 141, which
//!   `set -o pipefail` scripts would see as a failure). Except `pack --out -`: a pack cut
//!   short is no pack, so a reader that leaves before the last byte fails it (exit 1, and it
//!   never says `packed`).
//! - Every name, path, label and source printed goes through one escaper: bytes that are not
//!   UTF-8 and ASCII control characters as `\xNN` (`caf\xe9`, `\x1b`), other invisible or
//!   terminal-active characters (U+0080 to U+009F, bidi overrides, zero-width) as `\u{NNNN}`,
//!   and `\` as `\\`. Config values and arguments quoted back in messages go through it too, so
//!   a crafted MCP command in a received bundle cannot rewrite the reviewer's screen. `cat` and
//!   `ls` accept every printed spelling back (and the older `\x85` for U+0085); a malformed
//!   escape is taken literally.
//! - A progress bar appears on a terminal for long captures, publishes and `verify`, never in
//!   a pipe (nor with `-q` or `--json`).
//!
//! ## Publishing to a directory (`export`, `checkout`)
//!
//! A publish is staged beside the destination and swapped in with one
//! `renameat2(RENAME_EXCHANGE)`: the destination is the whole old tree or the whole new one,
//! never half-written. `--force` replaces a destination that is a bundle (it holds
//! `zeroclaw-agent.toml`) or a previous checkout of this tool; any other non-empty directory
//! is refused unless `--replace-any` is given, and the report names what was replaced. An
//! export or checkout claims its destination first (a lock file
//! `.zeroclaw-export-lock-<name>` beside it, released when the process ends, even when
//! killed): a second one to the same `--out` fails at once. A failed export records no
//! snapshot, so `agent/<alias>` never moves to an unpublished capture. `--out` overlapping a
//! source or the store (either way, through symlinks or bind mounts) is refused before
//! anything happens.
//!
//! A `--force` export or checkout over a tree this tool published reuses its unchanged files:
//! the catalog remembers each published file's (dev, ino, size, mtime, ctime) and blob id, and
//! a file whose stat still matches (hashed first if the record is within the timestamp
//! granularity) is hard-linked into the new tree instead of written again. An edited file
//! never matches, so it is rewritten from the store.
//!
//! ## Interrupts
//!
//! Ctrl-C (SIGINT) or SIGTERM during a capture or publish stops it at the next safe point:
//! nothing is recorded, the staging directory is removed, the destination is unchanged, exit
//! 130. A second signal stops at once and prints the `zeroclaw-bundle recover DEST` command
//! that removes what is left. Objects an interrupted capture stored are unreachable; `gc`
//! keeps them for its grace period (an hour) and says so; `gc --grace 0` frees them when no
//! capture runs. Push and pull stop at their next step, upload part or download chunk, and
//! remove their temporary pack; a request stuck in the kernel (a FIFO in a `file://` remote, a
//! hung network filesystem) is abandoned at the first signal.
//!
//! ## Maintenance
//!
//! - `verify` rehashes every object (raw, compressed or packed), checks that every snapshot's
//!   objects exist and that each tree index matches its trees.
//! - `gc [--grace SECONDS]` removes what no snapshot and no live mount reaches, once older than
//!   the grace period (default an hour), merges small packs, and drops stat caches and
//!   destination records of directories that are gone.
//! - `reindex` rebuilds the catalog from the snapshot records and writes missing or bad tree
//!   indexes. `forget SNAPSHOT` removes a snapshot (its data goes at the next `gc`; a running
//!   mount keeps serving it). `recover DEST` repairs what a killed publish left beside `DEST`:
//!   it removes the hidden staging and retired trees, puts the previous bundle back when the
//!   swap was cut in half, and removes a stale lock file; it never touches a publish that is
//!   still running. `recover --install DIR` finishes every `update` or `rollback` of that
//!   install that a kill cut short, rolling each agent forward to the state after it (until
//!   then `update`, `rollback` and `import` into the install refuse); it refuses, naming the
//!   path, when `config.toml` or the workspace was edited since.
