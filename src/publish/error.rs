//! `PublishError`: one variant per refusal of the publish protocol, plus I/O and store
//! failures. Messages are lowercase and name the destination as the user gave it (`--out`), or
//! the exact path an I/O call touched.

use std::io;
use std::path::PathBuf;

use zeroclaw_bundle_store::StoreError;

/// Why a publish or a recovery did not happen. Every variant is reported only after the
/// destination was left (or put back) as it was and the staging tree was removed, except
/// [`PublishError::RestoreFailed`], which says where the previous tree is.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Another export or checkout holds the destination's claim.
    #[error(
        "another export or checkout to {path} is running (it holds {lock}); wait for it to \
         finish, then run this again"
    )]
    DestBusy {
        /// `--out` as given.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// `--force` at a non-empty directory that is neither a bundle nor a recorded checkout.
    #[error(
        "{path} is not a bundle or a previous checkout of zeroclaw-bundle (it holds \
         {entries}{more}); --force only replaces those. Pass --replace-any to replace this \
         directory and everything in it"
    )]
    NotReplaceable {
        /// `--out` as given.
        path: PathBuf,
        /// Its first entries (by name, escaped), comma-separated.
        entries: String,
        /// `, ...` when it holds more than those.
        more: &'static str,
    },
    /// The publish was cancelled before the swap: nothing was published.
    #[error("interrupted before anything was published; the destination is unchanged")]
    Interrupted,
    /// The destination resolves to `/` (or has no last component to publish under).
    #[error("destination {path} has no parent directory to stage the bundle beside")]
    NoParent {
        /// `--out` as given.
        path: PathBuf,
    },
    /// A `..` steps out of a directory that does not exist yet.
    #[error(
        "{path} reaches through `..` inside {missing}, which does not exist yet, so what it names \
         cannot be checked before anything is written; write the path without `..`"
    )]
    DotDotThroughMissing {
        /// The path as given.
        path: PathBuf,
        /// The prefix before the `..` that is not an existing directory.
        missing: PathBuf,
    },
    /// The destination contains a source tree (or is one).
    #[error(
        "destination {path} contains the source tree {source_tree}; publishing there would \
         replace the tree being published from"
    )]
    DestContainsSource {
        /// `--out` as given.
        path: PathBuf,
        /// The source as given.
        source_tree: PathBuf,
    },
    /// The destination lies inside a source tree.
    #[error(
        "destination {path} is inside the source tree {source_tree}; choose a path outside it"
    )]
    DestInsideSource {
        /// `--out` as given.
        path: PathBuf,
        /// The source as given.
        source_tree: PathBuf,
    },
    /// The destination is the store, or one of its ancestors.
    #[error(
        "destination {path} is or contains the store {store}; publishing there would replace \
         the store's objects and catalog, so choose a path outside the store"
    )]
    DestContainsStore {
        /// `--out` as given.
        path: PathBuf,
        /// The store directory.
        store: PathBuf,
    },
    /// The destination lies inside the store.
    #[error(
        "destination {path} is inside the store {store}; publishing there would overwrite the \
         store's own files, so choose a path outside the store"
    )]
    DestInsideStore {
        /// `--out` as given.
        path: PathBuf,
        /// The store directory.
        store: PathBuf,
    },
    /// The destination is a symbolic link.
    #[error(
        "destination {path} is a symlink; publishing would replace whatever it points at rather \
         than the path you named, so name the directory itself"
    )]
    DestIsSymlink {
        /// `--out` as given.
        path: PathBuf,
    },
    /// The destination exists and is a file or a special file.
    #[error("destination {path} exists and is not a directory")]
    DestNotADirectory {
        /// `--out` as given.
        path: PathBuf,
    },
    /// The destination has entries and `--force` was not given.
    #[error(
        "destination {path} is not empty; pass --force to replace it if it is a bundle or a \
         previous checkout, or --replace-any to replace it whatever it holds"
    )]
    DestNotEmpty {
        /// `--out` as given.
        path: PathBuf,
    },
    /// The destination was absent at admission and exists at the swap.
    #[error(
        "destination {path} did not exist when the publish started and does now; replacing it \
         was never admitted, so nothing was written"
    )]
    DestAppeared {
        /// `--out` as given.
        path: PathBuf,
    },
    /// The object at the destination name is not the admitted directory.
    #[error(
        "destination {path} is not the directory this publish checked before staging; nothing \
         was replaced, so look at what is there and publish again"
    )]
    DestChanged {
        /// `--out` as given.
        path: PathBuf,
    },
    /// The destination is now one of the source trees.
    #[error(
        "destination {path} is now one of the trees this publish read; publishing would replace \
         that source, so nothing was written"
    )]
    DestIsSource {
        /// `--out` as given.
        path: PathBuf,
    },
    /// An empty destination (admitted without `--force`) gained entries before the swap.
    #[error(
        "destination {path} was empty when the publish started and is not any more; nothing was \
         replaced, so look at what arrived and publish again"
    )]
    DestNoLongerEmpty {
        /// `--out` as given.
        path: PathBuf,
    },
    /// A stored object does not hash to its id (or is shorter than recorded).
    #[error(
        "could not publish {path}: {detail}; nothing was replaced (run `zeroclaw-bundle verify`)"
    )]
    CorruptObject {
        /// The entry's path inside the bundle.
        path: String,
        /// What the check found.
        detail: String,
    },
    /// The tree expands past the store's limits; nothing was written.
    #[error(transparent)]
    TooLarge {
        /// The limit check's error (names the tree and the limit).
        source: StoreError,
    },
    /// Reading a tree or blob from the object source failed.
    #[error("could not read {path} from the store")]
    Store {
        /// The entry's path inside the bundle (empty for the root).
        path: String,
        /// The store's error.
        source: StoreError,
    },
    /// A system call failed.
    #[error("could not {op} {path}")]
    Io {
        /// The verb.
        op: &'static str,
        /// The path the call touched.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The swap failed and the previous tree could not be moved back.
    #[error(
        "failed to publish to {path} ({error}), and the previous bundle could not be moved back; \
         it is at {retired} (`zeroclaw-bundle recover` puts it back)"
    )]
    RestoreFailed {
        /// `--out` as given.
        path: PathBuf,
        /// Where the previous tree is.
        retired: PathBuf,
        /// The first failure (in the message, so not a `source`).
        error: io::Error,
    },
    /// The new tree is in place, but the fsync that makes its name durable failed.
    #[error(
        "published to {path}, but could not make the rename durable (fsync of its parent \
         directory failed: {error}); after a crash the previous state may come back"
    )]
    NotDurable {
        /// `--out` as given.
        path: PathBuf,
        /// The fsync error (in the message, so not a `source`).
        error: io::Error,
    },
    /// `recover` found several interrupted publishes and cannot tell which one was this
    /// destination's.
    #[error(
        "{path} is missing and several interrupted publishes left a previous tree beside it \
         ({candidates}); move the right one back by hand"
    )]
    RecoverAmbiguous {
        /// The destination.
        path: PathBuf,
        /// The candidate old trees.
        candidates: String,
    },
}

impl PublishError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        PublishError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
