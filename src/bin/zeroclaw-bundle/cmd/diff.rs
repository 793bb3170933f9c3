//! `diff <A> <B> [--stat | -p] [--exit-on-new-grants] [--export-time] [--allowed-signers FILE]`
//! (and the global `-q`): what changed between two snapshots, subtrees of snapshots
//! (`SNAP:PATH`), directories, packs or remote refs. For two agent bundles, the semantic
//! section (what the agent may do) comes first, then the files. Exit 0 when equal, 1 when
//! different, 2 on error (main), 3 with `--exit-on-new-grants` when B grants something new.
//! The gate fails closed: a side whose grants cannot be read is an error, never a pass.
//!
//! The verb is the library's streaming diff ([`Bundles::diff_in`]); this file is its sink
//! ([`Printer`]): name-status, `--stat`, `-p`, `--json` lines, the notes on stderr, and the
//! exit code.

use std::io::Write;

use anyhow::{bail, Result};
use zeroclaw_bundle::{
    Bundles, Change, DiffLine, DiffOptions, DiffReport, DiffRequest, DiffSide, DiffSink, Patch,
    Semantic, SemanticChange, Shown, SideStats, SignedSide, SinkError, Status, CONTENT_CAP,
};

use crate::cli::DiffArgs;
use crate::cmd::{escape_message, stdout_error, Ctx, Outcome, StdoutClosed};

/// Runs `diff`.
pub fn run(mut args: DiffArgs, ctx: &Ctx) -> Result<Outcome> {
    let mut decrypting = super::crypt::Decrypting::new(args.identity.identity.as_deref());
    args.a = decrypting.arg(&args.a)?;
    args.b = decrypting.arg(&args.b)?;
    // `-q` is the global option (before or after the command): it prints nothing, so asking
    // for an output form with it is a mistake said at once.
    if ctx.quiet && (args.stat || args.content) {
        bail!("-q/--quiet prints nothing: it cannot be combined with --stat or -p");
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
    let request = DiffRequest {
        a: &args.a,
        b: &args.b,
        options: DiffOptions {
            gate: args.exit_on_new_grants,
            export_time: args.export_time,
        },
        patches: mode == Mode::Content,
        // Who signed each side, first: only when a side carries a signature (an unsigned pair
        // prints exactly what it printed before signatures existed). Not a change: the exit
        // status is the content's.
        signatures: !ctx.quiet,
        allowed_signers: args.signers.allowed_signers.as_deref(),
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    let mut printer = Printer {
        out: &mut out,
        mode,
        quiet: ctx.quiet,
        verbose: ctx.verbose,
        stat_rows: Vec::new(),
        grants: false,
        failed: None,
        before_changes: true,
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
    let progress = ctx.term_progress();
    let result = Bundles::diff_in(&ctx.store_path, &request, &mut printer, &progress);
    drop(progress);
    let report = match result {
        Ok(report) => report,
        // The consumer of the output went away (`| head`): stop quietly, as every command
        // does, but keep the answer: output of the changes stops only once there was a change
        // to print, so the exit code still says "different" (or "new grants"), never "equal".
        Err(e) => {
            let Some(io) = printer.failed.take() else {
                return Err(e.into());
            };
            let e = stdout_error(io);
            return match e.is::<StdoutClosed>() {
                true if printer.before_changes => Ok(Outcome::Success),
                true => Ok(outcome(true, printer.grants)),
                false => Err(e),
            };
        }
    };
    let differs = report.differs();
    if let Err(e) = printer.summary(&report).and_then(|()| out.flush()) {
        let e = stdout_error(e);
        return if e.is::<StdoutClosed>() {
            Ok(outcome(differs, report.new_grants))
        } else {
            Err(e)
        };
    }
    if ctx.verbose {
        note_reads(&report);
    }
    Ok(outcome(differs, report.new_grants))
}

/// What reading each side cost (`--verbose`): trees from its index or objects, a remote's
/// traffic.
fn note_reads(report: &DiffReport) {
    for side in [&report.a, &report.b] {
        match &side.stats {
            Some(SideStats::Snapshot(s)) => crate::note!(
                "side {}: {} trees from its tree index ({}), {} tree objects read",
                side.name,
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    NameStatus,
    Stat,
    Content,
    Json,
    Quiet,
}

/// The diff's sink: prints each part as the library hands it out.
struct Printer<'p, W: Write> {
    out: &'p mut W,
    mode: Mode,
    quiet: bool,
    verbose: bool,
    stat_rows: Vec<(String, String)>,
    /// Whether the semantic section granted something new (known once it was handed out).
    grants: bool,
    /// The write to stdout that failed (and stopped the diff).
    failed: Option<std::io::Error>,
    /// Nothing of the comparison was handed out yet (only sides and signatures).
    before_changes: bool,
}

impl<W: Write> DiffSink for Printer<'_, W> {
    fn side(&mut self, side: &DiffSide) -> Result<(), SinkError> {
        capture_notes(side, self.quiet, self.verbose);
        Ok(())
    }

    fn signatures(&mut self, sides: &[SignedSide; 2], notes: &[String]) -> Result<(), SinkError> {
        for n in notes {
            crate::note!("notice: {n}");
        }
        let written = self.signature_lines(sides);
        self.kept(written)
    }

    fn semantic(&mut self, section: &Semantic) -> Result<(), SinkError> {
        self.before_changes = false;
        self.grants = section.new_grants();
        if !self.quiet {
            for note in section.notes() {
                crate::note!("note: {note}");
            }
        }
        let written = self.semantic_lines(&section.changes);
        self.kept(written)
    }

    fn change(&mut self, change: &Change, patch: Option<&Patch>) -> Result<(), SinkError> {
        let written = self.change_lines(change, patch);
        self.kept(written)
    }
}

/// What a directory side's capture says on stderr: its work with `--verbose`, and what the
/// reader refused to follow (not compared), or a symlink planted in a received bundle would be
/// invisible here.
fn capture_notes(side: &DiffSide, quiet: bool, verbose: bool) {
    let Some(capture) = &side.capture else {
        return;
    };
    if verbose {
        crate::note!(
            "directory {}: {} file(s) hashed, {} from its stat cache",
            capture.path.display(),
            capture.stats.hashed_files,
            capture.stats.cached_files
        );
    }
    let skipped = &capture.skipped;
    if !skipped.is_empty() && !quiet {
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

impl<W: Write> Printer<'_, W> {
    /// Keeps a failed write for the caller (which tells a closed stdout from another failure)
    /// and stops the diff.
    fn kept(&mut self, written: std::io::Result<()>) -> Result<(), SinkError> {
        written.map_err(|e| {
            let stop = SinkError::from(format!("could not write to stdout: {e}"));
            self.failed = Some(e);
            stop
        })
    }

    fn json_line(&mut self, line: DiffLine<'_>) -> std::io::Result<()> {
        let value = serde_json::to_value(line).map_err(std::io::Error::other)?;
        writeln!(self.out, "{}", crate::cmd::json::line(&value)?)
    }

    /// The "who signed" lines (text: a `Signatures:` block; `--json`: one `signatures` line
    /// per side).
    fn signature_lines(&mut self, sides: &[SignedSide; 2]) -> std::io::Result<()> {
        if self.mode == Mode::Json {
            for side in sides {
                self.json_line(DiffLine::Signatures(side))?;
            }
            return Ok(());
        }
        writeln!(self.out, "Signatures:")?;
        for side in sides {
            writeln!(
                self.out,
                "  {} {}: {}",
                side.side,
                side.label,
                side.summary()
            )?;
        }
        Ok(())
    }

    fn semantic_lines(&mut self, changes: &[SemanticChange]) -> std::io::Result<()> {
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => {
                for c in changes {
                    self.json_line(DiffLine::Semantic(c))?;
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

    fn change_lines(&mut self, c: &Change, patch: Option<&Patch>) -> std::io::Result<()> {
        let letter = format!("{:?}", c.status);
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => self.json_line(DiffLine::File(c)),
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
                self.content(c, patch)
            }
        }
    }

    fn content(&mut self, c: &Change, patch: Option<&Patch>) -> std::io::Result<()> {
        match patch {
            None => Ok(()),
            Some(Patch::NotHeld { side }) => writeln!(
                self.out,
                "Not shown: {}: side {side} holds no file contents (a digest pack or a remote snapshot)",
                c.path,
            ),
            // Escape sequences inside a file reach the terminal escaped (`\x1b`).
            Some(Patch::Shown(Shown::Text(t))) => write!(self.out, "{}", escape_message(t)),
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

    fn summary(&mut self, report: &DiffReport) -> std::io::Result<()> {
        let s = &report.summary;
        match self.mode {
            Mode::Json => self.json_line(DiffLine::Summary(report)),
            Mode::Stat => {
                let width = self.stat_rows.iter().map(|(n, _)| n.chars().count()).max();
                for (name, detail) in &self.stat_rows {
                    writeln!(self.out, " {name:<w$} | {detail}", w = width.unwrap_or(0))?;
                }
                writeln!(
                    self.out,
                    " {} changed: {} added, {} modified, {} deleted, {} renamed, {} kind, {} mode; +{} -{} bytes",
                    crate::cmd::count(
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

fn kind(c: &Change, old: bool) -> &'static str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.kind)
}

fn mode(c: &Change, old: bool) -> &str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.mode.as_str())
}
