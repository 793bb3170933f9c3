//! Cancellation: a [`Cancel`] token the caller keeps a clone of and trips when the work should
//! stop (the binary trips it from its SIGINT/SIGTERM handler; a program linking this crate from
//! wherever it likes). The library never reads process-global state: the token reaches an
//! operation through what the operation already takes, in one place per kind of operation:
//!
//! - capture, export, checkout, diff of a directory, push, pull, unpack: the `&dyn Progress`
//!   ([`crate::progress::Progress::cancel`]; [`crate::progress::Cancellable`] adds a token to
//!   any progress receiver);
//! - a remote's requests (push, pull, gc): the [`crate::remote::Remote`] handle
//!   ([`crate::remote::Remote::with_cancel`]);
//! - a staged output file (`pack --out`): [`crate::publish::FileRequest::cancel`].
//!
//! Work checks the token at its safe points ([`Cancel::check`]) and then fails with its own
//! `Interrupted` error after unwinding its cleanups (a staging tree is removed, nothing is
//! recorded). A publish marks its destination on the token while it runs
//! ([`Cancel::publishing`]), and an update past its commit point its install
//! ([`Cancel::changing_install`]), so whoever stops the process at once can name the
//! `recover` that repairs it ([`Cancel::recovery_command`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The work stopped at a safe point because its [`Cancel`] token was tripped.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// A cancellation token: clones share one flag (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    publishing: Arc<Mutex<Option<PathBuf>>>,
    changing: Arc<Mutex<Option<PathBuf>>>,
}

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks the work holding this token (or a clone) to stop at its next safe point.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// True once [`Cancel::cancel`] was called on this token or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Fails with [`Interrupted`] once the token was cancelled.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.is_cancelled() {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// The flag itself, for a signal handler that must set it without locking or allocating
    /// (`signal_hook::flag::register`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }

    /// Marks a publish to `dest` (as given) as running until the guard drops: a process
    /// stopped meanwhile leaves a destination that `recover` repairs.
    pub fn publishing(&self, dest: &Path) -> PublishingGuard {
        if let Ok(mut slot) = self.publishing.lock() {
            *slot = Some(dest.to_path_buf());
        }
        PublishingGuard {
            slot: Arc::clone(&self.publishing),
        }
    }

    /// The destination of the publish running now, if any (see [`Cancel::publishing`]).
    pub fn publishing_to(&self) -> Option<PathBuf> {
        self.publishing.lock().ok().and_then(|slot| slot.clone())
    }

    /// Marks an update or rollback of an agent of install `root` as past its commit point
    /// until the guard drops: a process stopped meanwhile leaves a change that `recover
    /// --install` finishes (its publishes included).
    pub fn changing_install(&self, root: &Path) -> PublishingGuard {
        if let Ok(mut slot) = self.changing.lock() {
            *slot = Some(root.to_path_buf());
        }
        PublishingGuard {
            slot: Arc::clone(&self.changing),
        }
    }

    /// The command that finishes what a process stopped now would leave half done: `recover
    /// --install ROOT` during an update past its commit point ([`Cancel::changing_install`]),
    /// `recover DEST` during a publish ([`Cancel::publishing`]), else none.
    pub fn recovery_command(&self) -> Option<String> {
        let slot = |m: &Mutex<Option<PathBuf>>| m.lock().ok().and_then(|s| s.clone());
        if let Some(root) = slot(&self.changing) {
            return Some(format!(
                "zeroclaw-bundle recover --install {}",
                crate::publish::shell_quote(&root)
            ));
        }
        slot(&self.publishing).map(|dest| {
            format!(
                "zeroclaw-bundle recover {}",
                crate::publish::shell_quote(&dest)
            )
        })
    }
}

/// See [`Cancel::publishing`].
pub struct PublishingGuard {
    slot: Arc<Mutex<Option<PathBuf>>>,
}

impl Drop for PublishingGuard {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.slot.lock() {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_the_publish_mark() {
        let token = Cancel::new();
        let held = token.clone();
        assert!(held.check().is_ok());
        {
            let _guard = held.publishing(Path::new("out"));
            assert_eq!(token.publishing_to(), Some(PathBuf::from("out")));
        }
        assert_eq!(token.publishing_to(), None);
        token.cancel();
        assert!(held.is_cancelled());
        assert!(held.check().is_err());
    }
}
