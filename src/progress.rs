//! Progress of a long operation as the library reports it: a small trait the capture and the
//! publish call, with no terminal code behind it. The CLI's adapter (an indicatif bar on a
//! terminal, nothing in a pipe) lives in `cmd`; a test or a linking program passes a closure
//! or [`Silent`]. The same receiver carries the operation's cancellation token
//! ([`Progress::cancel`]; [`Cancellable`] adds one to any receiver): the library reads no
//! global signal state.

use std::sync::atomic::{AtomicU64, Ordering};

use zeroclaw_bundle_store::ImportWatch;

use crate::cancel::{Cancel, Interrupted};

/// Running totals of an operation: files and file bytes done (or, in [`Progress::begin`],
/// to expect); objects and their bytes in a phase begun with [`Progress::begin_objects`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Files.
    pub files: u64,
    /// File bytes.
    pub bytes: u64,
}

/// What a capture or a publish tells its caller as it goes. Calls come from one thread at a
/// time, in order: `begin`, any number of `advance`, `finish`; a later phase (the publish
/// half of an export) may `begin` again.
pub trait Progress: Sync {
    /// A phase starts: `what` (`capturing`, `publishing`, `hashing`), with its totals when they
    /// are known in advance.
    fn begin(&self, what: &str, total: Option<Totals>) {
        let _ = (what, total);
    }
    /// A phase that counts objects, not files, starts (a transfer or an import: `packing`,
    /// `uploading`, `downloading`, `verifying`); `total.files` is then objects.
    fn begin_objects(&self, what: &str, total: Option<Totals>) {
        self.begin(what, total);
    }
    /// The running totals of the phase so far.
    fn advance(&self, done: Totals);
    /// The phase is over (success or failure).
    fn finish(&self) {}
    /// The token that stops the operation at its next safe point (see `crate::cancel`);
    /// `None`: nothing stops it.
    fn cancel(&self) -> Option<&Cancel> {
        None
    }
    /// Fails with [`Interrupted`] once [`Progress::cancel`]'s token was cancelled.
    fn check_cancel(&self) -> Result<(), Interrupted> {
        self.cancel().map_or(Ok(()), Cancel::check)
    }
    /// Something the operation tells the operator on the way (see [`Note`]), in the order it
    /// happens, whether the operation then succeeds or fails. Ignored unless overridden.
    fn note(&self, note: Note<'_>) {
        let _ = note;
    }
}

/// What an operation tells the operator besides its progress and its result, each one
/// sentence already worded (names escaped as messages escape them). The binary prints them on
/// stderr; a linking program may show or drop them.
///
/// ```
/// use zeroclaw_bundle::{Note, Progress, Totals};
/// struct Log(std::sync::Mutex<Vec<String>>);
/// impl Progress for Log {
///     fn advance(&self, _: Totals) {}
///     fn note(&self, note: Note<'_>) {
///         if let Note::Notice(text) = note {
///             self.0.lock().unwrap().push(text.to_string());
///         }
///     }
/// }
/// let log = Log(Default::default());
/// log.note(Note::Notice("remote origin: 1 key that is not part of the layout was ignored"));
/// assert_eq!(log.0.lock().unwrap().len(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note<'a> {
    /// A step taken on the way to the result (`pulled 3f2a9c01e0b4 from origin: 1 pack,
    /// 2.1 KiB, verified`; `snapshot 3f2a9c01e0b4 signed by alice@example.com (SHA256:...)`):
    /// the binary prints it unless `--quiet` or `--json`.
    Step(&'a str),
    /// Something noticed that is no error (a remote listing keys outside its layout): the
    /// binary prints it as `notice: ...` unless `--quiet`.
    Notice(&'a str),
    /// Something left out of the result because it could not be read (a remote's damaged
    /// snapshot record): the binary prints it as `warning: ...`, and the verb's result says
    /// how many.
    Warning(&'a str),
    /// What the operation asked of remote `remote` (requests and bytes received, per key
    /// prefix), said once its work there is over, failed or not: the binary prints it with
    /// `-v`.
    Traffic {
        /// The remote's name.
        remote: &'a str,
        /// The requests and bytes, in words.
        summary: &'a str,
    },
}

/// A [`Progress`] that reports to `progress` and stops on `cancel`.
pub struct Cancellable<'p> {
    progress: &'p dyn Progress,
    cancel: Cancel,
}

impl<'p> Cancellable<'p> {
    /// Reports to `progress`, stops on `cancel`.
    pub fn new(progress: &'p dyn Progress, cancel: Cancel) -> Cancellable<'p> {
        Cancellable { progress, cancel }
    }
}

impl Progress for Cancellable<'_> {
    fn begin(&self, what: &str, total: Option<Totals>) {
        self.progress.begin(what, total);
    }
    fn begin_objects(&self, what: &str, total: Option<Totals>) {
        self.progress.begin_objects(what, total);
    }
    fn advance(&self, done: Totals) {
        self.progress.advance(done);
    }
    fn finish(&self) {
        self.progress.finish();
    }
    fn cancel(&self) -> Option<&Cancel> {
        Some(&self.cancel)
    }
    fn note(&self, note: Note<'_>) {
        self.progress.note(note);
    }
}

/// No progress shown.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn advance(&self, _: Totals) {}
}

/// A closure is a progress receiver that only hears `advance`.
impl<F: Fn(Totals) + Sync> Progress for F {
    fn advance(&self, done: Totals) {
        self(done)
    }
}

/// The store's [`ImportWatch`] over a [`Progress`]: an import (`unpack`, the import half of a
/// `pull`) reports its verification as a `verifying` phase of objects and bytes, and stops
/// once the progress's token was cancelled ([`Progress::cancel`]). The import's workers report from
/// several threads: the totals are summed here.
pub struct ImportProgress<'p> {
    progress: &'p dyn Progress,
    objects: AtomicU64,
    bytes: AtomicU64,
}

impl<'p> ImportProgress<'p> {
    /// Reports to `progress`.
    pub fn new(progress: &'p dyn Progress) -> ImportProgress<'p> {
        ImportProgress {
            progress,
            objects: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }
}

impl ImportWatch for ImportProgress<'_> {
    fn begin(&self, objects: u64, bytes: u64) {
        self.progress.begin_objects(
            "verifying",
            Some(Totals {
                files: objects,
                bytes,
            }),
        );
    }

    fn advance(&self, bytes: u64) {
        let done = Totals {
            files: self.objects.fetch_add(1, Ordering::Relaxed) + 1,
            bytes: self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes,
        };
        self.progress.advance(done);
        crate::hooks::seam("import-verified", &format!("object-{}", done.files));
    }

    fn stop(&self) -> bool {
        self.progress.check_cancel().is_err()
    }
}
