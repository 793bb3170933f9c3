//! Progress of a long operation as the library reports it: a small trait the capture and the
//! publish call, with no terminal code behind it. The CLI's adapter (an indicatif bar on a
//! terminal, nothing in a pipe) lives in `cmd`; a test or a linking program passes a closure
//! or [`Silent`].

/// Running totals of an operation: files and file bytes done (or, in [`Progress::begin`],
/// to expect).
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
    /// The running totals of the phase so far.
    fn advance(&self, done: Totals);
    /// The phase is over (success or failure).
    fn finish(&self) {}
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
