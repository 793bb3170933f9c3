//! The `zeroclaw-bundle` binary: parse, run, exit code. The only place that prints errors
//! (`error: ...` with its causes, then a `hint:` naming a command that helps, `cmd::hint`) and
//! picks exit codes: 0 ok, 1 failure, 2 usage, 130 when interrupted (SIGINT/SIGTERM); for
//! `diff`, like diff(1): 0 equal, 1 different, 2 error, and 3 for new grants when asked. A
//! closed stdout (`| head -1`) ends the command quietly with 0 (see `cmd::StdoutClosed`).

use std::io::Write;
use std::process::ExitCode;

use zeroclaw_bundle::cli::Command;
use zeroclaw_bundle::cmd::{self, Outcome, StdoutClosed};
use zeroclaw_bundle::Cancel;

fn main() -> ExitCode {
    let cli = match zeroclaw_bundle::cli::parse() {
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
    // diff(1)'s convention: 1 means "different", so a failed diff exits 2.
    let error_code = if matches!(cli.command, Command::Diff(_)) {
        2
    } else {
        1
    };
    // SIGINT/SIGTERM trip this token (the command installs the handlers it needs).
    let cancel = Cancel::new();
    match cmd::run(cli, &cancel) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure | Outcome::Different) => ExitCode::from(1),
        Ok(Outcome::NewGrants) => ExitCode::from(3),
        Err(err) if err.downcast_ref::<StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(err) => {
            let interrupted = cancel.is_cancelled();
            // Messages quote config values and arguments: no raw control characters reach
            // the terminal (a crafted value could clear the screen or fake a line).
            let message = cmd::escape_message(&format!("{err:#}"));
            let _ = writeln!(std::io::stderr(), "error: {message}");
            if let Some(hint) = cmd::hint(&err) {
                let hint = cmd::escape_message(&hint);
                let _ = writeln!(std::io::stderr(), "hint: {hint}");
            }
            if interrupted {
                ExitCode::from(130)
            } else {
                ExitCode::from(error_code)
            }
        }
    }
}
