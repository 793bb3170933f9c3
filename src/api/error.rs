//! The public API's one error type: which verb failed, on what, and a coarse kind a caller can
//! match, around the cause chain the library built (each cause names its path, field or
//! snapshot). Its `Display` is the outermost message and its `source()` the next cause, so a
//! caller printing the chain (`anyhow`'s `{:#}`, or walking `source()`) sees exactly the
//! messages the `zeroclaw-bundle` binary prints.

use std::fmt;
use std::path::PathBuf;

use zeroclaw_bundle_mount::MountError;
use zeroclaw_bundle_store::StoreError;

use crate::agent::AgentError;
use crate::cancel::Interrupted;
use crate::publish::{FileError, PublishError};
use crate::remote::RemoteError;

/// The verb of the public API an [`Error`] comes from.
///
/// ```
/// assert_eq!(zeroclaw_bundle::Verb::Export.to_string(), "export");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// Opening or creating the store.
    Open,
    /// Capturing an agent or a directory into the store.
    Snapshot,
    /// Capturing an agent and publishing its bundle.
    Export,
    /// Publishing a stored snapshot.
    Checkout,
    /// Listing, showing or reading what the store holds (`list`, `show`, `ls`, `cat`).
    Read,
    /// Comparing two sides.
    Diff,
    /// Mounting a snapshot.
    Mount,
    /// Writing a pack.
    Pack,
    /// Importing a pack.
    Unpack,
    /// Uploading to a remote.
    Push,
    /// Downloading from a remote.
    Pull,
    /// Checking the store.
    Verify,
    /// Collecting garbage.
    Gc,
    /// Reviewing a bundle before import.
    Review,
    /// Importing a bundle into an install.
    Import,
    /// Signing a snapshot or checking its signatures.
    Sign,
    /// Configuring a remote, or listing, forgetting or collecting garbage on one.
    Remote,
    /// Forgetting a snapshot of the store.
    Forget,
    /// Rebuilding the store's catalog and tree indexes.
    Reindex,
    /// Repairing what an interrupted publish left beside its destination.
    Recover,
}

impl Verb {
    /// The verb as an operator types it (`export`), what its messages name it.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verb::Open => "open",
            Verb::Snapshot => "snapshot",
            Verb::Export => "export",
            Verb::Checkout => "checkout",
            Verb::Read => "read",
            Verb::Diff => "diff",
            Verb::Mount => "mount",
            Verb::Pack => "pack",
            Verb::Unpack => "unpack",
            Verb::Push => "push",
            Verb::Pull => "pull",
            Verb::Verify => "verify",
            Verb::Gc => "gc",
            Verb::Review => "review",
            Verb::Import => "import",
            Verb::Sign => "sign",
            Verb::Remote => "remote",
            Verb::Forget => "forget",
            Verb::Reindex => "reindex",
            Verb::Recover => "recover",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// What kind of failure an [`Error`] is, for callers that act on it (retry, ask for another
/// name, tell the operator to run `verify`).
///
/// ```
/// use zeroclaw_bundle::{Bundles, ErrorKind};
/// let dir = tempfile::tempdir()?;
/// let err = Bundles::open(dir.path().join("no-store")).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NoStore);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// There is no store at the path given.
    NoStore,
    /// A snapshot reference (id, prefix, name, `agent/<alias>`) names nothing, or is ambiguous.
    UnknownSnapshot,
    /// The install, its `config.toml` or the agent is missing or invalid.
    Install,
    /// A destination (an output directory, a file, a mountpoint) was refused or could not be
    /// written; nothing was published there.
    Destination,
    /// Stored or received data failed its check (a damaged object, a bad pack).
    Corrupt,
    /// A remote could not be reached, or refused or lacks what was asked.
    Remote,
    /// The trust policy refused the snapshot: a signature it requires is missing, bad, or by
    /// a key the allowed signers do not trust (see [`crate::TrustPolicy`]).
    Untrusted,
    /// The caller's [`crate::Cancel`] token stopped the work; it unwound its cleanups.
    Interrupted,
    /// Anything else (I/O, another process holding the store, a bad argument).
    Other,
}

/// A failed verb of the public API: [`Error::verb`], [`Error::target`] (the path, snapshot
/// or agent it was about), [`Error::kind`], and the cause chain through
/// [`std::error::Error::source`].
///
/// ```
/// use zeroclaw_bundle::{Bundles, ErrorKind, Verb};
/// let dir = tempfile::tempdir()?;
/// let bundles = Bundles::create(dir.path().join("store"))?;
/// let err = bundles.show("agent/nobody").unwrap_err();
/// assert_eq!((err.verb(), err.kind()), (Verb::Read, ErrorKind::UnknownSnapshot));
/// assert_eq!(err.target(), "agent/nobody");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Error {
    verb: Verb,
    target: String,
    kind: ErrorKind,
    inner: anyhow::Error,
}

impl Error {
    /// The error of `verb` on `target`, its kind read from the cause chain.
    pub(crate) fn new(verb: Verb, target: impl Into<String>, inner: anyhow::Error) -> Error {
        let kind = classify(&inner);
        Error {
            verb,
            target: target.into(),
            kind,
            inner,
        }
    }

    /// The verb that failed.
    ///
    /// ```
    /// # use zeroclaw_bundle::{Bundles, Verb};
    /// let err = Bundles::open("/nonexistent/store").unwrap_err();
    /// assert_eq!(err.verb(), Verb::Open);
    /// ```
    pub fn verb(&self) -> Verb {
        self.verb
    }

    /// What it failed on: a path, a snapshot reference or an agent alias, as the caller gave it.
    ///
    /// ```
    /// # use zeroclaw_bundle::Bundles;
    /// let err = Bundles::open("/nonexistent/store").unwrap_err();
    /// assert_eq!(err.target(), "/nonexistent/store");
    /// ```
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The kind of failure.
    ///
    /// ```
    /// # use zeroclaw_bundle::{Bundles, ErrorKind};
    /// let err = Bundles::open("/nonexistent/store").unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NoStore);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Every message of the chain, outermost first (what the binary prints, joined by `: `).
    ///
    /// ```
    /// # use zeroclaw_bundle::Bundles;
    /// let err = Bundles::open("/nonexistent/store").unwrap_err();
    /// assert!(err.messages().next().unwrap().contains("no store at /nonexistent/store"));
    /// ```
    pub fn messages(&self) -> impl Iterator<Item = String> + '_ {
        self.inner.chain().map(|e| e.to_string())
    }

    /// The first cause of type `T` in the chain, outermost first: how a caller tells causes
    /// apart beyond [`Error::kind`] (a store's [`zeroclaw_bundle_store::StoreError`], a
    /// mount's [`zeroclaw_bundle_mount::MountError`], an [`std::io::Error`]).
    ///
    /// ```
    /// # use zeroclaw_bundle::Bundles;
    /// use zeroclaw_bundle_store::StoreError;
    /// let dir = tempfile::tempdir()?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let err = bundles.show("0123456789abcdef").unwrap_err();
    /// assert!(matches!(err.store_error(), Some(StoreError::UnknownSnapshot { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn find<T: std::error::Error + Send + Sync + 'static>(&self) -> Option<&T> {
        self.inner.chain().find_map(|e| e.downcast_ref::<T>())
    }

    /// The store's error in the chain, also where a reference or an opened snapshot carries
    /// it inside its own error.
    pub fn store_error(&self) -> Option<&zeroclaw_bundle_store::StoreError> {
        self.inner.chain().find_map(crate::source::store_error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The outermost message only; the rest is `source()` (so `{:#}` prints no duplicate).
        fmt::Display::fmt(&self.inner, f)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {:#}", self.verb, self.target, self.inner)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let outer: &(dyn std::error::Error + 'static) = self.inner.as_ref();
        outer.source()
    }
}

/// The kind of a cause chain: the first cause whose type says what happened decides.
fn classify(err: &anyhow::Error) -> ErrorKind {
    // A refused signature anywhere in the chain (a pull wraps it in a remote error).
    let refused = |e: &crate::sign::SignError| {
        matches!(
            e,
            crate::sign::SignError::Refused { .. }
                | crate::sign::SignError::NoAllowedSigners { .. }
        )
    };
    // `transparent` wrappers hide their inner error from the chain: looked through by hand.
    let remote_refused = |e: &RemoteError| matches!(e, RemoteError::Sign(s) if refused(s));
    if err.chain().any(|e| {
        e.downcast_ref::<crate::sign::SignError>()
            .is_some_and(refused)
            || e.downcast_ref::<RemoteError>().is_some_and(remote_refused)
            || e.downcast_ref::<crate::import::ImportError>()
                .is_some_and(|i| match i {
                    crate::import::ImportError::Sign(s) => refused(s),
                    crate::import::ImportError::UnsignedDirectory { .. } => true,
                    crate::import::ImportError::Remote(r) => remote_refused(r),
                    _ => false,
                })
    }) {
        return ErrorKind::Untrusted;
    }
    for e in err.chain() {
        if e.is::<Interrupted>() {
            return ErrorKind::Interrupted;
        }
        if let Some(e) = crate::source::store_error(e) {
            match e {
                StoreError::UnknownSnapshot { .. } | StoreError::AmbiguousSnapshot { .. } => {
                    return ErrorKind::UnknownSnapshot
                }
                StoreError::CorruptObject { .. }
                | StoreError::Undecodable { .. }
                | StoreError::MissingObject(_)
                | StoreError::Malformed { .. }
                | StoreError::BadPack { .. } => return ErrorKind::Corrupt,
                StoreError::Interrupted => return ErrorKind::Interrupted,
                _ => {}
            }
        }
        if e.is::<AgentError>() {
            return ErrorKind::Install;
        }
        if e.is::<PublishError>() || e.is::<FileError>() || e.is::<MountError>() {
            return ErrorKind::Destination;
        }
        if e.is::<RemoteError>() {
            return ErrorKind::Remote;
        }
    }
    ErrorKind::Other
}

/// The error of opening a store that is not there.
pub(crate) fn no_store(path: PathBuf) -> Error {
    let message = format!(
        "no store at {} (a store is created by the first command that adds to it: \
         `snapshot`, `export`, `unpack` or `remote add`; pass --store DIR or set \
         ZEROCLAW_BUNDLE_STORE to use another)",
        path.display()
    );
    Error {
        verb: Verb::Open,
        target: path.display().to_string(),
        kind: ErrorKind::NoStore,
        inner: anyhow::anyhow!(message),
    }
}
