//! The `zeroclaw-bundle` binary: parses the command line, serves `mount` and `umount`, and
//! hands every other command to `zeroclaw-bundle-full` beside it (`cmd::entry` says why).

use std::process::ExitCode;

fn main() -> ExitCode {
    zeroclaw_bundle::cmd::entry::main_with(zeroclaw_bundle::cmd::entry::run_front)
}
