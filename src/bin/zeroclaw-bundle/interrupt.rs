//! The binary's signal mapping: SIGINT and SIGTERM during the commands that write (capture,
//! publish, pack, push, pull) trip the command's [`Cancel`] token, so the work stops at its
//! next safe point, where it fails with its `Interrupted` error and unwinds its cleanups (a
//! staging tree is removed, nothing is recorded); `main` then exits 130. A second signal stops
//! the process at once, after printing the command that finishes the job when a publish or an
//! update was running (`zeroclaw-bundle recover DEST` or `recover --install DIR`, from
//! [`Cancel::recovery_command`]).
//!
//! Only `cmd` and `main` use this module: the library never installs handlers nor reads
//! signal state. Without [`install`] (every other command), the default dispositions stay:
//! Ctrl-C kills.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;

use zeroclaw_bundle::Cancel;

/// Set when a SIGINT (what Ctrl-C sends) arrived, for the terminal's `^C` echo cleanup.
static SIGINT_SEEN: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Starts watching SIGINT and SIGTERM for `cancel` (see the module doc).
pub fn install(cancel: Cancel) -> std::io::Result<()> {
    let sigint = Arc::clone(SIGINT_SEEN.get_or_init(Arc::default));
    // The token's flag is set by the signal handler itself (not the watcher thread), so a
    // check right after the signal was delivered sees it.
    for signal in [SIGINT, SIGTERM] {
        flag::register(signal, cancel.flag())?;
    }
    flag::register(SIGINT, sigint)?;
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        // The first signal only sets the flag (above); the second stops at once.
        for (seen, _) in signals.forever().enumerate() {
            if seen == 0 {
                continue;
            }
            let hint = cancel
                .recovery_command()
                .map(|command| format!("; finish what was interrupted with: {command}"));
            crate::note!(
                "\nerror: interrupted twice: stopped at once{}",
                hint.unwrap_or_default()
            );
            std::process::exit(130);
        }
    });
    Ok(())
}

/// True when a SIGINT (what Ctrl-C sends) arrived since [`install`].
pub fn by_sigint() -> bool {
    SIGINT_SEEN.get().is_some_and(|f| f.load(Ordering::SeqCst))
}
