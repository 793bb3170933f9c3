//! The `zeroclaw-bundle` binary: parse, run, exit code. The only place that prints errors
//! (`error: ...` with its causes) and picks exit codes: 0 ok, 1 failure, 2 usage (and for
//! `diff`, like diff(1): 0 equal, 1 different, 2 error, 3 new grants when asked).

use std::process::ExitCode;

use clap::Parser;
use zeroclaw_bundle::cli::{Cli, Command};
use zeroclaw_bundle::cmd::{self, Outcome};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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
    match cmd::run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure | Outcome::Different) => ExitCode::from(1),
        Ok(Outcome::NewGrants) => ExitCode::from(3),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(error_code)
        }
    }
}
