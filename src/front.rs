//! The `zeroclaw-bundle` binary: serves `mount` and `umount` and hands every other command
//! line (help and usage errors too) to `zeroclaw-bundle-full` beside it (`cmd::entry` says
//! why).

use std::process::ExitCode;

fn main() -> ExitCode {
    zeroclaw_bundle::cmd::entry::front_main()
}
