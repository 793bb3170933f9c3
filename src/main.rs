//! The `zeroclaw-bundle-full` binary: every command. A person runs `zeroclaw-bundle`
//! (`src/front.rs`), which serves `mount` and `umount` itself and hands every other command
//! here (`cmd::entry` says why there are two).

use std::process::ExitCode;

fn main() -> ExitCode {
    zeroclaw_bundle::cmd::entry::main_with(zeroclaw_bundle::cmd::run)
}
