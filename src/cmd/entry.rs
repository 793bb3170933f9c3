//! The two binaries' shared entry: parse, run, exit code, and how the front binary hands a
//! command to the full one.
//!
//! `zeroclaw-bundle` (`src/front.rs`) is the binary a person runs. It reads a `mount` or
//! `umount` command line itself, without clap ([`crate::cli::parse_mount`]), and serves it;
//! it hands every other command line (help, `--version` and usage errors included, so they
//! are clap's, the same in both) to `zeroclaw-bundle-full` (`src/main.rs`) beside it with
//! `exec`: the same process, arguments, stdio and exit code. So does a mount that needs what
//! the front does not link (`mount::HandOff`: a name, a remote, signatures, trust settings).
//! Why two: a person mounts a bundle to review it, often with a cold cache, and the full
//! binary is about 37 MB, most of it ZeroClaw's schema (TOML deserializers of its config) and
//! the remote stack (S3 client, TLS). Paging that in took longer than the whole mount; the
//! front links neither, nor clap, the catalog or signature checks (1.5 MB instead of 3.6: a
//! cold start reads the binary whole, so each MB it does not hold is about half a ms).
//!
//! `run_parsed` (through [`main_with`] or [`front_main`]) is the only place that prints
//! errors (`error: ...` with its causes, then a `hint:` naming a command that helps,
//! [`super::hint`]) and picks exit codes: 0 ok, 1 failure, 2 usage, 130 when interrupted
//! (SIGINT/SIGTERM); for `diff`, like diff(1): 0 equal, 1 different, 2 error, and 3 for new
//! grants when asked. A closed stdout (`| head -1`) ends the command quietly with 0 (see
//! [`super::StdoutClosed`]).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::{escape_message, hint, mount, Ctx, Outcome, StdoutClosed};
use crate::cli::{Cli, Command};
use crate::Cancel;

/// The full binary's file name, beside the front's.
pub const FULL_BINARY: &str = "zeroclaw-bundle-full";

/// Set by the front for the full binary: the front's build (`--version`'s text). A full
/// binary of another build refuses to run, as their command lines may differ (a new front
/// installed beside an old full binary).
pub const FRONT_BUILD: &str = "ZEROCLAW_BUNDLE_FRONT_BUILD";

/// For the full binary, first thing in `main` (one thread): when a front of another build
/// handed the command over, says so and returns the exit code; else clears the variable.
pub fn refuse_another_front() -> Option<ExitCode> {
    let front = std::env::var_os(FRONT_BUILD)?;
    if front == crate::cli::VERSION {
        // Not passed on to what this command runs (hooks, git, another build's binaries).
        // Still one thread here, before anything else starts.
        std::env::remove_var(FRONT_BUILD);
        return None;
    }
    let _ = writeln!(
        std::io::stderr(),
        "error: zeroclaw-bundle is build {} but {FULL_BINARY} beside it is build {}: \
         install both from one build (`cargo install` installs both)",
        escape_message(&front.to_string_lossy()),
        crate::cli::VERSION
    );
    Some(ExitCode::from(1))
}

/// Parses the command line with clap, runs it with `run`, prints any error and returns the
/// exit code. The full binary's `main`.
pub fn main_with(run: fn(Cli, &Cancel) -> Result<Outcome>) -> ExitCode {
    let cli = match crate::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    run_parsed(cli, run)
}

/// The front binary's `main`: a `mount` or `umount` line that [`crate::cli::parse_mount`]
/// reads is run here ([`run_front`]); every other line, help and usage errors included, is
/// handed to the full binary, which parses it with clap. The front links no clap.
pub fn front_main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match crate::cli::parse_mount(&args, std::env::var_os(crate::cli::STORE_ENV)) {
        Some(cli) => run_parsed(cli, run_front),
        None => {
            // `exec` returns only when it failed.
            let Err(err) = hand_over() else {
                return ExitCode::SUCCESS;
            };
            report(&err, 1, false)
        }
    }
}

/// Runs a parsed command line with `run`; prints any error and returns the exit code.
fn run_parsed(cli: Cli, run: fn(Cli, &Cancel) -> Result<Outcome>) -> ExitCode {
    // diff(1)'s convention: 1 means "different", so a failed diff exits 2.
    let error_code = if matches!(cli.command, Command::Diff(_)) {
        2
    } else {
        1
    };
    // SIGINT/SIGTERM trip this token (the command installs the handlers it needs).
    let cancel = Cancel::new();
    match run(cli, &cancel) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure | Outcome::Different) => ExitCode::from(1),
        Ok(Outcome::NewGrants) => ExitCode::from(3),
        Err(err) if err.downcast_ref::<StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(err) => report(&err, error_code, cancel.is_cancelled()),
    }
}

/// Prints `err` (`error: ...` with its causes, then a `hint:`) and returns its exit code:
/// 130 when the command was interrupted, else `error_code`.
fn report(err: &anyhow::Error, error_code: u8, interrupted: bool) -> ExitCode {
    // Messages quote config values and arguments: no raw control characters reach the
    // terminal (a crafted value could clear the screen or fake a line).
    let message = escape_message(&format!("{err:#}"));
    let _ = writeln!(std::io::stderr(), "error: {message}");
    if let Some(hint) = hint(err) {
        let hint = escape_message(&hint);
        let _ = writeln!(std::io::stderr(), "hint: {hint}");
    }
    if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::from(error_code)
    }
}

/// The front binary's `run`: `mount` and `umount` here, everything else (and a mount the
/// front does not link what it needs for: [`mount::HandOff`]) by the full binary.
pub fn run_front(cli: Cli, cancel: &Cancel) -> Result<Outcome> {
    match &cli.command {
        Command::Umount(args) => return mount::run_umount(args, cli.json),
        Command::Mount(_) => {}
        _ => return hand_over(),
    }
    let ctx = Ctx::from_cli(&cli, cancel.clone())?;
    match cli.command {
        Command::Mount(args) => match mount::run_front(args, &ctx) {
            Err(e) if e.downcast_ref::<mount::HandOff>().is_some() => hand_over(),
            done => done,
        },
        _ => hand_over(),
    }
}

/// Replaces this process with the full binary, run with this process's own arguments.
fn hand_over() -> Result<Outcome> {
    let full = full_binary()?;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "zeroclaw-bundle".into());
    // `exec` returns only when it failed.
    let error = std::process::Command::new(&full)
        .arg0(arg0)
        .args(args)
        .env(FRONT_BUILD, crate::cli::VERSION)
        .exec();
    let advice = match error.kind() {
        std::io::ErrorKind::NotFound => {
            " (install it beside zeroclaw-bundle: `cargo install` installs both)"
        }
        std::io::ErrorKind::PermissionDenied => " (it must be executable: `chmod +x` it)",
        _ => "",
    };
    Err(error).with_context(|| {
        format!(
            "could not run {}, the binary that runs every command but `umount` and the \
             mounts this one serves alone (an unsigned snapshot of the store, a pack \
             file){advice}",
            full.display()
        )
    })
}

/// Where the full binary is: beside this one (symlinks to this one resolved).
fn full_binary() -> Result<PathBuf> {
    let me = std::env::current_exe().context("could not find this executable")?;
    Ok(me.with_file_name(FULL_BINARY))
}
