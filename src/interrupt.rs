//! SIGINT and SIGTERM during the commands that write (capture, publish): the first signal
//! asks the work to stop at its next safe point ([`check`]), where it fails with
//! [`Interrupted`] and unwinds its cleanups (a staging tree is removed, nothing is recorded);
//! `main` then exits 130. A second signal stops the process at once, after printing the
//! command that finishes the job when a publish was running (`zeroclaw-bundle recover DEST`).
//!
//! Without [`install`] (every other command), the default dispositions stay: Ctrl-C kills.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;

/// Set by the signal handler itself (not the watcher thread), so a check right after the
/// signal was delivered sees it.
static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// Set when a SIGINT (what Ctrl-C sends) arrived.
static SIGINT_SEEN: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The destination of the publish in progress, for the hint after a second signal.
static PUBLISHING: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The work stopped at a safe point because of SIGINT or SIGTERM.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Starts watching SIGINT and SIGTERM (see the module doc).
pub fn install() -> std::io::Result<()> {
    let requested = Arc::clone(REQUESTED.get_or_init(Arc::default));
    let sigint = Arc::clone(SIGINT_SEEN.get_or_init(Arc::default));
    for signal in [SIGINT, SIGTERM] {
        flag::register(signal, Arc::clone(&requested))?;
    }
    flag::register(SIGINT, sigint)?;
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        // The first signal only sets the flag (above); the second stops at once.
        for (seen, _) in signals.forever().enumerate() {
            if seen == 0 {
                continue;
            }
            let hint = match PUBLISHING.lock() {
                Ok(dest) => dest.as_ref().map(|d| {
                    format!(
                        "; finish the interrupted publish with: zeroclaw-bundle recover {}",
                        shell_quote(d)
                    )
                }),
                Err(_) => None,
            };
            crate::note!(
                "\nerror: interrupted twice: stopped at once{}",
                hint.unwrap_or_default()
            );
            std::process::exit(130);
        }
    });
    Ok(())
}

/// True once a signal asked the work to stop.
pub fn requested() -> bool {
    REQUESTED.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// True when the stop was asked by SIGINT (what Ctrl-C sends).
pub fn by_sigint() -> bool {
    SIGINT_SEEN.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// Fails with [`Interrupted`] once a signal asked the work to stop.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Marks a publish to `dest` as running until the guard drops (for the hint after a second
/// signal).
pub fn publishing(dest: &Path) -> PublishingGuard {
    if let Ok(mut slot) = PUBLISHING.lock() {
        *slot = Some(dest.to_path_buf());
    }
    PublishingGuard
}

/// See [`publishing`].
pub struct PublishingGuard;

impl Drop for PublishingGuard {
    fn drop(&mut self) {
        if let Ok(mut slot) = PUBLISHING.lock() {
            *slot = None;
        }
    }
}

/// `path` as one shell word (single quotes when it holds anything but safe characters).
pub fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,".contains(&b));
    if safe {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
