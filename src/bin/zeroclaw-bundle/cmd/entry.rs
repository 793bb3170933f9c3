//! The binary's entry: parse, run, print an error, pick the exit code.
//!
//! `run_parsed` (through [`main_with`]) is the only place that prints errors (`error: ...`
//! with its causes, then a `hint:` naming a command that helps, [`super::hint`]) and picks
//! exit codes: 0 ok, 1 failure, 2 usage, 130 when interrupted (SIGINT/SIGTERM); for `diff`,
//! like diff(1): 0 equal, 1 different, 2 error, and 3 for new grants when asked. A closed
//! stdout (`| head -1`) ends the command quietly with 0 (see [`super::StdoutClosed`]).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::{escape_message, hint, Outcome, StdoutClosed};
use crate::cli::{Cli, Command};
use zeroclaw_bundle::Cancel;

/// Parses the command line, runs it with `run`, prints any error and returns the exit code.
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
        Ok(Outcome::Conflicts) => ExitCode::from(4),
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
