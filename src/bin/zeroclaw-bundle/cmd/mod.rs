//! One file per subcommand, each a thin `run(args, ctx)`; this file holds what they share:
//! the context (store location, output mode), progress bars, snapshot-path parsing, and the
//! two print paths: [`crate::outln!`] for stdout and [`crate::note!`] for stderr.
//!
//! A closed stdout (the reader went away: `... | head -1`) is not an error: the write fails
//! with EPIPE (Rust ignores SIGPIPE), [`crate::outln!`] turns that into [`StdoutClosed`], and `main`
//! exits 0 without a message, as ripgrep does. (git is killed by SIGPIPE instead, status 141;
//! 0 keeps `set -o pipefail` scripts that only wanted the first lines working.) The exception
//! is `pack --out -`: a pack cut short is no pack, so a reader that leaves early fails it
//! (`pack::pack_to_stdout`). Notes on stderr are best-effort: a closed stderr never fails a
//! command.

pub mod cat;
pub mod checkout;
pub mod crypt;
pub mod diff;
pub mod entry;
pub mod export;
pub mod export_plugin;
pub mod gc;
pub mod import;
pub mod json;
pub mod list;
pub mod ls;
pub mod mount;
pub mod pack;
pub mod recover;
pub mod remote;
pub mod review;
pub mod rollback;
pub mod show;
pub mod sign;
pub mod snapshot;
pub mod sync;
pub mod update;
pub mod verify;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{Cli, Command};
use zeroclaw_bundle::{Cancel, Progress, Totals};

/// Clears `bars` (any of them may be hidden). After a Ctrl-C typed while one was drawn, also
/// erases the frame the terminal's `^C` echo left behind: indicatif leaves the cursor at the
/// right edge of its line, so the echo wraps to a new line, and the bar, which only knows the
/// line it is on, clears that one and not the frame above it.
pub fn clear_progress(bars: &[&ProgressBar]) {
    let drawn = bars.iter().any(|b| !b.is_hidden());
    for b in bars {
        b.finish_and_clear();
    }
    if drawn && crate::interrupt::by_sigint() && echoes_control_chars(std::io::stderr()) {
        use std::io::Write as _;
        let mut err = std::io::stderr();
        let _ = err.write_all(b"\x1b[1A\r\x1b[2K");
        let _ = err.flush();
    }
}

/// The time a bar says is left: an estimate only once it means something (3 s in and 5 % done),
/// so a 4-second export never announces half an hour.
fn time_left(state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = if state.elapsed().as_secs_f64() < 3.0 || state.fraction() < 0.05 {
        w.write_str("estimating")
    } else {
        write!(w, "{} left", indicatif::HumanDuration(state.eta()))
    };
}

/// A bar (with `len`) or a spinner on stderr (see [`Ctx::progress`]).
fn new_bar(len: Option<u64>, what: &str, bytes: bool) -> ProgressBar {
    let bar = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    let template = match (len.is_some(), bytes) {
        (true, true) => "{msg} [{bar:30}] {bytes}/{total_bytes} ({time_left})",
        (true, false) => "{msg} [{bar:30}] {pos}/{len} ({time_left})",
        (false, _) => "{spinner} {msg}: {prefix}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> ").with_key("time_left", time_left));
    }
    bar.set_message(what.to_string());
    bar.set_prefix("0 files");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// The CLI's [`Progress`] adapter: an indicatif bar on a terminal, nothing in a pipe or with
/// `--quiet`/`--json`. A phase with known totals is a bar of bytes with an ETA and `files/total`
/// in its message (a publish); one without is a spinner counting files and bytes (a capture).
/// Dropping it clears whatever is drawn, so an error is never printed over a bar.
pub struct TermProgress {
    shows: bool,
    phase: Mutex<Option<Phase>>,
    /// The command's token, which the library checks through [`Progress::cancel`].
    cancel: Cancel,
    /// Whether the library's notes are printed ([`Ctx::noting_progress`]), and how loudly.
    notes: Option<Loudness>,
}

/// The output flags a [`TermProgress`] that prints notes follows.
#[derive(Clone, Copy)]
struct Loudness {
    quiet: bool,
    json: bool,
    verbose: bool,
}

struct Phase {
    bar: ProgressBar,
    what: String,
    total: Option<Totals>,
    /// What `Totals::files` counts: `file` or `object`.
    noun: &'static str,
}

impl Progress for TermProgress {
    fn cancel(&self) -> Option<&Cancel> {
        Some(&self.cancel)
    }

    /// Printed on stderr when made by [`Ctx::noting_progress`], never over a bar: a step
    /// unless `--quiet` or `--json`, a notice unless `--quiet`, a warning always, a remote's
    /// traffic with `-v`.
    fn note(&self, note: zeroclaw_bundle::Note<'_>) {
        use zeroclaw_bundle::Note;
        let Some(l) = self.notes else {
            return;
        };
        self.finish();
        match note {
            Note::Step(text) if !l.quiet && !l.json => crate::note!("{text}"),
            Note::Notice(text) if !l.quiet => crate::note!("notice: {text}"),
            Note::Warning(text) => crate::note!("warning: {text}"),
            Note::Traffic { remote, summary } if l.verbose => {
                crate::note!("remote {remote}: {summary}")
            }
            _ => {}
        }
    }

    fn begin(&self, what: &str, total: Option<Totals>) {
        self.start(what, total, "file");
    }

    fn begin_objects(&self, what: &str, total: Option<Totals>) {
        self.start(what, total, "object");
    }

    fn advance(&self, done: Totals) {
        let guard = self.lock();
        let Some(p) = guard.as_ref() else {
            return;
        };
        match p.total {
            Some(total) => {
                p.bar.set_position(done.bytes);
                // A phase that counts bytes only (a pack) names itself, not `0/0 files`.
                if total.files > 0 {
                    p.bar.set_message(format!(
                        "{} {}/{} {}s",
                        p.what, done.files, total.files, p.noun
                    ));
                }
            }
            None => {
                p.bar.set_position(done.files);
                p.bar.set_prefix(format!(
                    "{} ({})",
                    count(done.files, p.noun),
                    indicatif::HumanBytes(done.bytes)
                ));
            }
        }
    }

    fn finish(&self) {
        if let Some(p) = self.lock().take() {
            clear_progress(&[&p.bar]);
        }
    }
}

impl TermProgress {
    fn start(&self, what: &str, total: Option<Totals>, noun: &'static str) {
        self.finish();
        if !self.shows {
            return;
        }
        let bar = new_bar(total.map(|t| t.bytes), what, true);
        if let Some(t) = total.filter(|t| t.files > 0) {
            bar.set_message(format!("{what} 0/{} {noun}s", t.files));
        }
        *self.lock() = Some(Phase {
            bar,
            what: what.to_string(),
            total,
            noun,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Phase>> {
        // A panic while drawing poisons nothing worth refusing: the bar is only display.
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for TermProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Escapes notes and error messages for the terminal (used by [`crate::note!`] and `main`).
pub use zeroclaw_bundle_store::escape_message;

/// Stdout was closed by its reader (EPIPE); the command stops printing and `main` exits 0
/// quietly.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct StdoutClosed;

/// Writes `text` to stdout and flushes it. EPIPE becomes [`StdoutClosed`].
pub fn write_stdout(text: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text)
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// Maps a stdout write error: EPIPE to [`StdoutClosed`], anything else with its context.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("could not write to stdout")
    }
}

/// `println!` that returns EPIPE as [`StdoutClosed`] (use with `?`).
#[doc(hidden)]
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cmd::write_stdout(format!("{}\n", format_args!($($arg)*)).as_bytes())
    };
}

/// `eprintln!` that never fails or panics (stderr may be closed too).
#[doc(hidden)]
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // Notes quote config values and arguments: escaped like error messages.
        let text = $crate::cmd::escape_message(&format!($($arg)*));
        let _ = writeln!(std::io::stderr(), "{text}");
    }};
}

/// What every command gets: where the store is and how to print.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The store directory.
    pub store_path: PathBuf,
    /// `--json`.
    pub json: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// `--verbose`.
    pub verbose: bool,
    /// The command's cancellation token: SIGINT/SIGTERM trip it (see [`crate::interrupt`]);
    /// it reaches the library through [`Ctx::term_progress`], the remote handles and the
    /// staged output file's request.
    pub cancel: Cancel,
}

/// How a command ended, for the exit code (errors are 1, usage errors 2, set by main).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1 without an error message of its own (verify found problems, already printed).
    Failure,
    /// Exit 1: `diff` found the sides different (diff(1)'s convention).
    Different,
    /// Exit 3: `diff --exit-on-new-grants` found a new capability grant (`update`: one not
    /// accepted).
    NewGrants,
    /// Exit 4: `update` refused conflicts.
    Conflicts,
}

impl Ctx {
    /// The context of a parsed command line, its work stopped by `cancel`.
    pub fn from_cli(cli: &Cli, cancel: Cancel) -> Result<Ctx> {
        let store_path = match &cli.store {
            Some(p) => p.clone(),
            None => default_store()?,
        };
        // The store reads this itself; a value it cannot use must not be ignored silently.
        if let Some(v) = std::env::var_os("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS") {
            if v.to_str().and_then(|v| v.parse::<u64>().ok()).is_none() {
                bail!(
                    "ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS={} is not a whole number of milliseconds",
                    v.to_string_lossy()
                );
            }
        }
        Ok(Ctx {
            store_path,
            json: cli.json,
            quiet: cli.quiet,
            verbose: cli.verbose,
            cancel,
        })
    }

    /// Opens an existing store; fails with "no store at PATH" when there is none (commands
    /// that only read, or change only what exists, never create a store).
    pub fn bundles(&self) -> Result<zeroclaw_bundle::Bundles> {
        Ok(zeroclaw_bundle::Bundles::open(&self.store_path)?)
    }

    /// True when progress may be drawn: stderr is a terminal and neither `--quiet` nor
    /// `--json` was given.
    pub fn shows_progress(&self) -> bool {
        !self.quiet && !self.json && std::io::stderr().is_terminal()
    }

    /// A progress bar on a terminal; hidden in a pipe or with `--quiet`/`--json`. With a
    /// length it is a bar of `len` (bytes when `bytes`) with an ETA; without, a spinner
    /// counting files (and, for a capture, the bytes so far in its message). It redraws on a
    /// steady tick, so a long file still moves the spinner and the ETA.
    pub fn progress(&self, len: Option<u64>, what: &str, bytes: bool) -> ProgressBar {
        if !self.shows_progress() {
            return ProgressBar::hidden();
        }
        new_bar(len, what, bytes)
    }

    /// A spinner naming `what` for a step that reports no counts (`gc`, `unpack`); hidden
    /// where [`Ctx::progress`] is.
    pub fn spinner(&self, what: &str) -> ProgressBar {
        let bar = self.progress(None, what, false);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar
    }

    /// The [`Progress`] the library's capture and publish report to (`snapshot`, `export`,
    /// `checkout`, `diff` of a directory).
    pub fn term_progress(&self) -> TermProgress {
        TermProgress {
            shows: self.shows_progress(),
            phase: Mutex::new(None),
            cancel: self.cancel.clone(),
            notes: None,
        }
    }

    /// [`Ctx::term_progress`] that also prints what the library notes on the way (the
    /// transfer verbs: push, pull, pack, unpack, checkout, remote gc).
    pub fn noting_progress(&self) -> TermProgress {
        let mut progress = self.term_progress();
        progress.notes = Some(Loudness {
            quiet: self.quiet,
            json: self.json,
            verbose: self.verbose,
        });
        progress
    }

    /// Prints a JSON document on stdout, hidden characters as `\uXXXX` ([`json`]).
    pub fn print_json(&self, value: &serde_json::Value) -> Result<()> {
        crate::outln!("{}", json::pretty(value)?)
    }
}

fn default_store() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("zeroclaw-bundle"));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("no store location: set --store, ZEROCLAW_BUNDLE_STORE, XDG_DATA_HOME or HOME")?;
    Ok(PathBuf::from(home).join(".local/share/zeroclaw-bundle"))
}

/// What the CLI adds to an error the store or mount crate reported (those crates never name
/// this program's commands): the command that helps, if there is one.
pub fn hint(err: &anyhow::Error) -> Option<String> {
    use zeroclaw_bundle_mount::MountError;
    use zeroclaw_bundle_store::StoreError;
    err.chain().find_map(|e| {
        // An error of the public API carries the library's chain whole: look into it.
        let (store, mount) = match e.downcast_ref::<zeroclaw_bundle::Error>() {
            Some(e) => (e.store_error(), e.find::<MountError>()),
            None => (
                e.downcast_ref::<StoreError>()
                    .or_else(|| e.downcast_ref::<Box<StoreError>>().map(|b| &**b)),
                e.downcast_ref::<MountError>(),
            ),
        };
        match (store, mount) {
            (Some(StoreError::UnknownSnapshot { .. }), _) => {
                Some("`zeroclaw-bundle list` shows the snapshots".to_string())
            }
            (Some(StoreError::CorruptObject { .. } | StoreError::Undecodable { .. }), _) => {
                Some("`zeroclaw-bundle verify` checks the whole store".to_string())
            }
            (Some(StoreError::Catalog { .. }), _) => {
                Some("`zeroclaw-bundle reindex` rebuilds the catalog from the objects".to_string())
            }
            (_, Some(MountError::StaleMount(path))) => Some(format!(
                "`zeroclaw-bundle umount {}` clears it",
                zeroclaw_bundle::shell_quote(path)
            )),
            _ => None,
        }
    })
}

/// Runs the parsed command; SIGINT/SIGTERM during the commands that write trip `cancel` (the
/// caller reads it afterwards for the exit code).
pub fn run(cli: Cli, cancel: &Cancel) -> Result<Outcome> {
    // `umount` needs no store, nor a place for one (no HOME, say).
    if let Command::Umount(args) = &cli.command {
        return mount::run_umount(args, cli.json);
    }
    let ctx = Ctx::from_cli(&cli, cancel.clone())?;
    if matches!(
        cli.command,
        Command::Export(_)
            | Command::ExportPlugin(_)
            | Command::Snapshot(_)
            | Command::Checkout(_)
            | Command::Push(_)
            | Command::Pull(_)
            | Command::Pack(_)
            | Command::Unpack(_)
            | Command::Review(_)
            | Command::Import(_)
            | Command::Update(_)
            | Command::Rollback(_)
            | Command::Sync(_)
    ) {
        crate::interrupt::install(ctx.cancel.clone())
            .context("could not install the signal handlers")?;
    }
    match cli.command {
        Command::Export(args) => export::run(args, &ctx),
        Command::ExportPlugin(args) => export_plugin::run(args, &ctx),
        Command::Snapshot(args) => snapshot::run(args, &ctx),
        Command::List(args) => match &args.remote {
            Some(name) => remote::run_list_remote(name, &ctx),
            None => list::run(&ctx, &args.signers),
        },
        Command::Show(args) => show::run(args, &ctx),
        Command::Ls(args) => ls::run(args, &ctx),
        Command::Cat(args) => cat::run(args, &ctx),
        Command::Checkout(args) => checkout::run(args, &ctx),
        Command::Mount(args) => mount::run(args, &ctx),
        Command::Umount(args) => mount::run_umount(&args, ctx.json),
        Command::Recover(args) => recover::run(args, &ctx),
        Command::Verify => verify::run(&ctx),
        Command::Gc(args) => gc::run_gc(args, &ctx),
        Command::Reindex => gc::run_reindex(&ctx),
        Command::Forget(args) => gc::run_forget(args, &ctx),
        Command::Diff(args) => diff::run(args, &ctx),
        Command::Import(args) => import::run(args, &ctx),
        Command::Update(args) => update::run(args, &ctx),
        Command::Rollback(args) => rollback::run(args, &ctx),
        Command::Sync(args) => sync::run(args, &ctx),
        Command::Pack(args) => pack::run_pack(args, &ctx),
        Command::Unpack(args) => pack::run_unpack(args, &ctx),
        Command::Remote(cmd) => remote::run_remote(cmd, &ctx),
        Command::Push(args) => remote::run_push(args, &ctx),
        Command::Pull(args) => remote::run_pull(args, &ctx),
        Command::Review(args) => review::run(args, &ctx),
        Command::Sign(args) => sign::run(args, &ctx),
        Command::Trust(args) => sign::run_trust(args, &ctx),
    }
}

pub use zeroclaw_bundle::words::{count, human_bytes};

/// True when `fd` is a terminal that echoes control characters (`ECHO` and `ECHOCTL`): a
/// Ctrl-C typed there was echoed as `^C`.
fn echoes_control_chars(fd: impl std::os::fd::AsFd) -> bool {
    use rustix::termios::LocalModes;
    rustix::termios::tcgetattr(fd).is_ok_and(|t| {
        t.local_modes
            .contains(LocalModes::ECHO | LocalModes::ECHOCTL)
    })
}

/// Asks `question` on stderr; true only for an answer starting with `y`.
pub fn ask(question: &str) -> Result<bool> {
    use std::io::{BufRead as _, Write as _};
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("could not read the answer")?;
    Ok(line.trim().to_ascii_lowercase().starts_with('y'))
}
