//! The `zeroclaw-bundle` binary: the library's first client. It parses the command line
//! ([`cli`]), runs one command through the public API ([`cmd`], one file per subcommand that
//! calls [`zeroclaw_bundle::Bundles`] and prints), and maps SIGINT/SIGTERM onto the library's
//! cancel token ([`interrupt`]). It holds no rule of its own: what a verb does, refuses or
//! reports is the library's; this crate decides only how it reads on a terminal and in JSON.

mod cli;
mod cmd;
mod interrupt;

use std::process::ExitCode;

fn main() -> ExitCode {
    cmd::entry::main_with(cmd::run)
}
