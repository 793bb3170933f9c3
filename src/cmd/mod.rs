//! One file per subcommand, each a thin `run(args, ctx)`; this file holds what they share:
//! the context (store location, output mode), progress bars, and snapshot-path parsing.

pub mod cat;
pub mod checkout;
pub mod diff;
pub mod export;
pub mod gc;
pub mod list;
pub mod ls;
pub mod mount;
pub mod pack;
pub mod recover;
pub mod show;
pub mod snapshot;
pub mod verify;

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zeroclaw_bundle_store::{unescape_name, Store};

use crate::cli::{Cli, Command};

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
    /// Exit 3: `diff --exit-on-new-grants` found a new capability grant.
    NewGrants,
}

impl Ctx {
    /// The context of a parsed command line.
    pub fn from_cli(cli: &Cli) -> Result<Ctx> {
        let store_path = match &cli.store {
            Some(p) => p.clone(),
            None => default_store()?,
        };
        Ok(Ctx {
            store_path,
            json: cli.json,
            quiet: cli.quiet,
            verbose: cli.verbose,
        })
    }

    /// Opens (creating if needed) the store.
    pub fn store(&self) -> Result<Store> {
        Store::open_or_create(&self.store_path)
            .with_context(|| format!("could not open the store {}", self.store_path.display()))
    }

    /// A progress bar on a terminal; hidden in a pipe or with `--quiet`/`--json`.
    pub fn progress(&self, len: Option<u64>, what: &str, bytes: bool) -> ProgressBar {
        if self.quiet || self.json || !std::io::stderr().is_terminal() {
            return ProgressBar::hidden();
        }
        let bar = match len {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        let template = match (len.is_some(), bytes) {
            (true, true) => "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})",
            (true, false) => "{msg} [{bar:30}] {pos}/{len}",
            (false, true) => "{spinner} {msg} {bytes}",
            (false, false) => "{spinner} {msg} {pos} files",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        bar
    }

    /// Prints a JSON document on stdout.
    pub fn print_json(&self, value: &serde_json::Value) -> Result<()> {
        println!("{}", serde_json::to_string_pretty(value)?);
        Ok(())
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

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<Outcome> {
    let ctx = Ctx::from_cli(&cli)?;
    match cli.command {
        Command::Export(args) => export::run(args, &ctx),
        Command::Snapshot(args) => snapshot::run(args, &ctx),
        Command::List => list::run(&ctx),
        Command::Show(args) => show::run(args, &ctx),
        Command::Ls(args) => ls::run(args, &ctx),
        Command::Cat(args) => cat::run(args, &ctx),
        Command::Checkout(args) => checkout::run(args, &ctx),
        Command::Mount(args) => mount::run(args, &ctx),
        Command::Umount(args) => mount::run_umount(args, &ctx),
        Command::Recover(args) => recover::run(args, &ctx),
        Command::Verify => verify::run(&ctx),
        Command::Gc(args) => gc::run_gc(args, &ctx),
        Command::Reindex => gc::run_reindex(&ctx),
        Command::Forget(args) => gc::run_forget(args, &ctx),
        Command::Diff(args) => diff::run(args, &ctx),
        Command::Pack(args) => pack::run_pack(args, &ctx),
        Command::Unpack(args) => pack::run_unpack(args, &ctx),
    }
}

/// Splits `SNAPSHOT[:PATH]` into the reference and the raw path bytes. A UTF-8 path may spell
/// non-UTF-8 bytes as `\xNN` (how `ls` shows them).
pub fn split_target(target: &OsStr) -> (String, Vec<u8>) {
    let bytes = target.as_bytes();
    match bytes.iter().position(|b| *b == b':') {
        Some(i) => {
            let reference = String::from_utf8_lossy(&bytes[..i]).into_owned();
            let path = &bytes[i + 1..];
            let path = match std::str::from_utf8(path) {
                Ok(text) => unescape_name(text),
                Err(_) => path.to_vec(),
            };
            (reference, path)
        }
        None => (String::from_utf8_lossy(bytes).into_owned(), Vec::new()),
    }
}

/// Human-readable byte counts.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
