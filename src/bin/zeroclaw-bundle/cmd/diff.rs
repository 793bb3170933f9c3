//! `diff <A> <B> [--stat | -p] [--exit-on-new-grants] [--export-time]` (and the global `-q`):
//! what changed between two snapshots, subtrees of snapshots (`SNAP:PATH`) or directories. For
//! two agent bundles, the semantic section (what the agent may do) comes first, then the files.
//! Exit 0 when equal, 1 when different, 2 on error (main), 3 with `--exit-on-new-grants` when B
//! grants something new. The gate fails closed: a side whose grants cannot be read (not a whole
//! agent bundle, or no file contents: a digest pack, a remote snapshot) is an error, never a
//! pass. A manifest that differs only in its export time is not a change unless
//! `--export-time` asks for it: two exports of an unchanged agent compare equal.
//!
//! The verb is `zeroclaw_bundle::diff::side` (what each side names) and `zeroclaw_bundle::diff::compare` (the
//! whole diff); this file parses, calls them, and prints: name-status, `--stat`, `-p`, `--json`
//! lines, the notes on stderr, and the exit code.

use std::io::Write;

use anyhow::{bail, Result};
use serde_json::json;

use crate::cli::DiffArgs;
use crate::cmd::{escape_message, stdout_error, Ctx, Outcome, StdoutClosed};
use zeroclaw_bundle::agent::{SemanticChange, MANIFEST_FILE};
use zeroclaw_bundle::diff::compare::{
    compare_sides, CompareError, DiffOptions, DiffSink, Semantic, SinkError,
};
use zeroclaw_bundle::diff::content::{patch, Patch, Shown, CONTENT_CAP};
use zeroclaw_bundle::diff::side::{
    paths_only, refuse_missing_path, resolve_side, scratch_store, Side, SideKind, SideStats,
};
use zeroclaw_bundle::diff::{Change, Status};

/// Runs `diff`.
pub fn run(args: DiffArgs, ctx: &Ctx) -> Result<Outcome> {
    // `-q` is the global option (before or after the command): it prints nothing, so asking
    // for an output form with it is a mistake said at once.
    if ctx.quiet && (args.stat || args.content) {
        bail!("-q/--quiet prints nothing: it cannot be combined with --stat or -p");
    }
    // A side spelled as a path that is not there is said as such, before a store is needed
    // and before it could be read as a snapshot or a remote ref (`./x` is no remote `.`).
    for (name, arg) in [('A', &args.a), ('B', &args.b)] {
        refuse_missing_path(arg).map_err(|e| CompareError::side(name, arg, e))?;
    }
    // Directory and pack sides need no store, but a directory's stat cache lives in one (a
    // second diff of the same directory is then a stat walk). Without a store at the given
    // path, they use a scratch store, dropped at the end: a diff creates no store. Snapshot
    // and remote sides need the store: without it, "no store at PATH".
    let mut _scratch = None;
    let store = match ctx.existing_store()? {
        Some(store) => store,
        None if paths_only(&[&args.a, &args.b]) => {
            let (dir, store) = scratch_store()?;
            _scratch = Some(dir);
            store
        }
        None => ctx.store()?,
    };
    let mut sides = Vec::with_capacity(2);
    for (name, arg) in [('A', &args.a), ('B', &args.b)] {
        let progress = ctx.term_progress();
        let side = resolve_side(&store, arg, args.content, &progress)
            .map_err(|e| CompareError::side(name, arg, e))?;
        drop(progress);
        capture_notes(&side, ctx);
        sides.push(side);
    }
    let b = sides.pop().expect("two sides were resolved");
    let a = sides.pop().expect("two sides were resolved");
    // Who signed each side, first: only when a side carries a signature (an unsigned pair
    // prints exactly what it printed before signatures existed). Not a change: the exit status
    // is the content's.
    let signed = if ctx.quiet {
        None
    } else {
        signatures_lines(&store, &a, &b, &args, ctx.json)?
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    if let Some(text) = signed {
        if let Err(e) = out.write_all(text.as_bytes()) {
            let e = stdout_error(e);
            return if e.is::<StdoutClosed>() {
                Ok(Outcome::Success)
            } else {
                Err(e)
            };
        }
    }
    let mode = if ctx.quiet {
        Mode::Quiet
    } else if ctx.json {
        Mode::Json
    } else if args.stat {
        Mode::Stat
    } else if args.content {
        Mode::Content
    } else {
        Mode::NameStatus
    };
    let mut printer = Printer {
        out: &mut out,
        mode,
        quiet: ctx.quiet,
        a: &a,
        b: &b,
        stat_rows: Vec::new(),
        grants: false,
    };
    let outcome = |differs: bool, grants: bool| {
        if args.exit_on_new_grants && grants {
            Outcome::NewGrants
        } else if differs {
            Outcome::Different
        } else {
            Outcome::Success
        }
    };
    let opts = DiffOptions {
        gate: args.exit_on_new_grants,
        export_time: args.export_time,
    };
    // The consumer of the output went away (`| head`): stop quietly, as every command does,
    // but keep the answer: output stops only once there was a change to print, so the exit
    // code still says "different" (or "new grants"), never "equal".
    let report = match compare_sides(&a, &b, opts, &mut printer) {
        Ok(report) => report,
        Err(CompareError::Output(e)) => match e.downcast::<std::io::Error>() {
            Ok(io) => {
                let e = stdout_error(*io);
                return if e.is::<StdoutClosed>() {
                    Ok(outcome(true, printer.grants))
                } else {
                    Err(e)
                };
            }
            Err(e) => return Err(anyhow::anyhow!(e)),
        },
        Err(e) => return Err(e.into()),
    };
    let differs = report.differs();
    if let Err(e) = printer
        .summary(&report.summary, report.new_grants)
        .and_then(|()| out.flush())
    {
        let e = stdout_error(e);
        return if e.is::<StdoutClosed>() {
            Ok(outcome(differs, report.new_grants))
        } else {
            Err(e)
        };
    }
    if ctx.verbose {
        for (name, side) in [('A', &a), ('B', &b)] {
            match side.stats() {
                Some(SideStats::Snapshot(s)) => crate::note!(
                    "side {name}: {} trees from its tree index ({}), {} tree objects read",
                    s.trees_from_index,
                    if s.index_used { "used" } else { "not used" },
                    s.trees_from_objects
                ),
                Some(SideStats::Remote { name, traffic }) => {
                    crate::note!("remote {name}: {traffic}");
                }
                None => {}
            }
        }
    }
    Ok(outcome(differs, report.new_grants))
}

/// What a directory side's capture says on stderr: its work with `--verbose`, and what the
/// reader refused to follow (not compared), or a symlink planted in a received bundle would be
/// invisible here.
fn capture_notes(side: &Side, ctx: &Ctx) {
    let Some(capture) = &side.capture else {
        return;
    };
    if ctx.verbose {
        crate::note!(
            "directory {}: {} file(s) hashed, {} from its stat cache",
            capture.path.display(),
            capture.stats.hashed_files,
            capture.stats.cached_files
        );
    }
    let skipped = &capture.skipped;
    if !skipped.is_empty() && !ctx.quiet {
        crate::note!(
            "note: {} entr{} of {} not compared (the reader skips symlinks, special files and hard links):",
            skipped.len(),
            if skipped.len() == 1 { "y" } else { "ies" },
            capture.path.display()
        );
        for s in skipped.iter().take(20) {
            crate::note!("  {} ({})", s.path, s.reason);
        }
        if skipped.len() > 20 {
            crate::note!("  ... and {} more", skipped.len() - 20);
        }
    }
}

/// A side's `--json` description: `kind`, its fields, `root` (the compared tree or file's
/// object id, full) and `label` (the short form text output uses), then `path` (with
/// `path_bytes` and `display`) for a side limited to a subtree.
fn describe(side: &Side) -> serde_json::Value {
    let (kind, fields, sub) = match &side.kind {
        SideKind::Snapshot { id, path } => ("snapshot", json!({"snapshot": id}), &path[..]),
        SideKind::Pack { path, snapshot } => (
            "pack",
            json!({"pack": crate::cmd::host_path(path), "snapshot": snapshot}),
            &[][..],
        ),
        SideKind::Directory { path } => (
            "directory",
            json!({"directory": crate::cmd::host_path(path)}),
            &[][..],
        ),
        SideKind::Remote {
            remote,
            snapshot,
            path,
        } => (
            "remote",
            json!({"remote": remote, "snapshot": snapshot}),
            &path[..],
        ),
    };
    let mut m = serde_json::Map::new();
    m.insert("kind".into(), json!(kind));
    if let serde_json::Value::Object(f) = fields {
        m.extend(f);
    }
    m.insert("root".into(), json!(side.root.entry.id));
    m.insert("label".into(), json!(side.label));
    if !sub.is_empty() {
        crate::cmd::put_name(&mut m, "path", "display", sub);
    }
    serde_json::Value::Object(m)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    NameStatus,
    Stat,
    Content,
    Json,
    Quiet,
}

struct Printer<'p, W: Write> {
    out: &'p mut W,
    mode: Mode,
    quiet: bool,
    a: &'p Side,
    b: &'p Side,
    stat_rows: Vec<(String, String)>,
    /// Whether the semantic section granted something new (known once it was handed out).
    grants: bool,
}

impl<W: Write> DiffSink for Printer<'_, W> {
    fn semantic(&mut self, section: &Semantic) -> Result<(), SinkError> {
        self.grants = section.new_grants();
        if !self.quiet {
            for label in &section.not_held {
                crate::note!(
                    "note: {label} {}, so the agent section is left out; its files are compared \
                     by content id",
                    Semantic::NOT_HELD
                );
            }
            // Two exports of an unchanged agent differ in `provenance.exported_at` only:
            // unless asked, that manifest is left out of the changes, the summary and the
            // exit status (and said).
            if section.manifest_hidden {
                crate::note!(
                    "note: {MANIFEST_FILE} differs only in its export time (provenance.exported_at), \
                     which is not counted as a change; --export-time reports it"
                );
            }
        }
        Ok(self.semantic_lines(&section.changes)?)
    }

    fn change(&mut self, change: &Change) -> Result<(), SinkError> {
        Ok(self.change_lines(change)?)
    }
}

impl<W: Write> Printer<'_, W> {
    fn semantic_lines(&mut self, changes: &[SemanticChange]) -> std::io::Result<()> {
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => {
                for c in changes {
                    let mut v = serde_json::to_value(c).map_err(std::io::Error::other)?;
                    v["type"] = json!("semantic");
                    writeln!(self.out, "{}", crate::cmd::json::line(&v)?)?;
                }
                Ok(())
            }
            _ if changes.is_empty() => Ok(()),
            _ => {
                writeln!(
                    self.out,
                    "Agent bundle changes (lines marked ! grant something new):"
                )?;
                for c in changes {
                    writeln!(self.out, "{}", c.line())?;
                }
                writeln!(self.out)
            }
        }
    }

    fn change_lines(&mut self, c: &Change) -> std::io::Result<()> {
        let letter = format!("{:?}", c.status);
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => writeln!(self.out, "{}", crate::cmd::json::line(&change_json(c))?),
            Mode::NameStatus => match &c.from {
                Some(from) => writeln!(self.out, "{letter}\t{from} -> {}", c.path),
                None => writeln!(self.out, "{letter}\t{}", c.path),
            },
            Mode::Stat => {
                let old = c.old.as_ref().map_or(0, |e| e.size);
                let new = c.new.as_ref().map_or(0, |e| e.size);
                let name = match &c.from {
                    Some(from) => format!("{from} -> {}", c.path),
                    None => c.path.clone(),
                };
                let delta = new as i128 - old as i128;
                let detail = match c.status {
                    Status::T => format!("{} -> {}", kind(c, true), kind(c, false)),
                    Status::X => format!("mode {} -> {}", mode(c, true), mode(c, false)),
                    _ => format!("{old} -> {new} bytes ({delta:+})"),
                };
                self.stat_rows.push((name, detail));
                Ok(())
            }
            Mode::Content => {
                match &c.from {
                    Some(from) => writeln!(self.out, "{letter}\t{from} -> {}", c.path)?,
                    None => writeln!(self.out, "{letter}\t{}", c.path)?,
                }
                self.content(c)
            }
        }
    }

    fn content(&mut self, c: &Change) -> std::io::Result<()> {
        match patch(self.a, self.b, c) {
            None => Ok(()),
            Some(Patch::NotHeld { side }) => writeln!(
                self.out,
                "Not shown: {}: side {side} holds no file contents (a digest pack or a remote snapshot)",
                c.path,
            ),
            // Escape sequences inside a file reach the terminal escaped (`\x1b`).
            Some(Patch::Shown(Shown::Text(t))) => write!(self.out, "{}", escape_message(&t)),
            Some(Patch::Shown(Shown::Binary)) => {
                writeln!(self.out, "Binary files differ: {}", c.path)
            }
            Some(Patch::Shown(Shown::TooLarge)) => writeln!(
                self.out,
                "Not shown: {} is over {} KiB on one side",
                c.path,
                CONTENT_CAP / 1024
            ),
        }
    }

    fn summary(&mut self, s: &zeroclaw_bundle::diff::Summary, grants: bool) -> std::io::Result<()> {
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => {
                let mut v = serde_json::to_value(s).map_err(std::io::Error::other)?;
                v["type"] = json!("summary");
                v["a"] = describe(self.a);
                v["b"] = describe(self.b);
                v["new_grants"] = json!(grants);
                writeln!(self.out, "{}", crate::cmd::json::line(&v)?)
            }
            Mode::Stat => {
                let width = self.stat_rows.iter().map(|(n, _)| n.chars().count()).max();
                for (name, detail) in &self.stat_rows {
                    writeln!(self.out, " {name:<w$} | {detail}", w = width.unwrap_or(0))?;
                }
                writeln!(
                    self.out,
                    " {} changed: {} added, {} modified, {} deleted, {} renamed, {} kind, {} mode; +{} -{} bytes",
                    zeroclaw_bundle::words::count(
                        s.added + s.deleted + s.modified + s.renamed + s.kind_changed + s.mode_changed,
                        "file"
                    ),
                    s.added,
                    s.modified,
                    s.deleted,
                    s.renamed,
                    s.kind_changed,
                    s.mode_changed,
                    s.bytes_added,
                    s.bytes_removed
                )
            }
            _ => Ok(()),
        }
    }
}

/// A file change as one `--json` line: `type`, `status`, the path under the name rules of
/// [`crate::cmd::put_name`] (`path`, `path_bytes`, `display`; for a rename also `from`,
/// `from_bytes`, `from_display`), and each side's `kind`, `mode`, `size` and `object`.
fn change_json(c: &Change) -> serde_json::Value {
    use zeroclaw_bundle_store::unescape_name;
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!("file"));
    m.insert("status".into(), json!(c.status));
    // The walk joins escaped names; the escape is reversible (`\\` for a backslash).
    crate::cmd::put_name(&mut m, "path", "display", &unescape_name(&c.path));
    if let Some(from) = &c.from {
        crate::cmd::put_name(&mut m, "from", "from_display", &unescape_name(from));
    }
    for (key, e) in [("old", &c.old), ("new", &c.new)] {
        if let Some(e) = e {
            m.insert(
                key.into(),
                json!({"kind": e.kind, "mode": e.mode, "size": e.size, "object": e.id}),
            );
        }
    }
    serde_json::Value::Object(m)
}

fn kind(c: &Change, old: bool) -> &'static str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.kind)
}

fn mode(c: &Change, old: bool) -> &str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.mode.as_str())
}

/// The "who signed" lines of a diff (text: a `Signatures:` block; `--json`: one
/// `{"type":"signatures",...}` line per side), or `None` when neither side carries one.
fn signatures_lines(
    store: &zeroclaw_bundle_store::Store,
    a: &zeroclaw_bundle::diff::side::Side,
    b: &zeroclaw_bundle::diff::side::Side,
    args: &DiffArgs,
    json_lines: bool,
) -> Result<Option<String>> {
    let mut found = Vec::new();
    for (name, side) in [('A', a), ('B', b)] {
        let sigs = side
            .signatures()
            .map_err(|e| CompareError::side(name, std::ffi::OsStr::new(side.arg()), e))?;
        found.push((name, side, sigs));
    }
    if found
        .iter()
        .all(|(_, _, s)| s.as_ref().is_none_or(|(_, v)| v.is_empty()))
    {
        return Ok(None);
    }
    let trust =
        super::sign::trust_of(store.root(), args.signers.allowed_signers.as_deref(), false)?;
    let mut text = String::new();
    if !json_lines {
        text.push_str("Signatures:\n");
    }
    for (name, side, sigs) in &found {
        if json_lines {
            let checked = match sigs {
                None => serde_json::Value::Null,
                Some((id, v)) => super::sign::signed_by_blobs(id, v, &trust)?.1,
            };
            let v = json!({
                "type": "signatures",
                "side": name.to_ascii_lowercase().to_string(),
                "snapshot": sigs.as_ref().map(|(id, _)| id),
                "signatures": checked,
            });
            text.push_str(&format!("{v}\n"));
            continue;
        }
        let line = match sigs {
            None => "not a snapshot (a directory carries no signatures)".to_string(),
            Some((id, v)) => super::sign::signed_by_blobs(id, v, &trust)?.0,
        };
        text.push_str(&format!("  {name} {}: {line}\n", side.label));
    }
    Ok(Some(text))
}
