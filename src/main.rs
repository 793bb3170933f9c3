//! The `zeroclaw-bundle-full` binary: every command. A person runs `zeroclaw-bundle`
//! (`src/front.rs`), which serves `mount` and `umount` itself and hands every other command
//! here (`cmd::entry` says why there are two).

use std::process::ExitCode;

use zeroclaw_bundle::cmd::{self, entry};

fn main() -> ExitCode {
    if let Some(code) = entry::refuse_another_front() {
        return code;
    }
    entry::main_with(cmd::run)
}
