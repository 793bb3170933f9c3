//! The `zeroclaw-bundle` binary: parse, run, exit code. The only place that prints errors
//! (`error: ...` with its causes) and picks exit codes: 0 ok, 1 failure, 2 usage.

use std::process::ExitCode;

use clap::Parser;
use zeroclaw_bundle::cli::Cli;
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
    match cmd::run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}
