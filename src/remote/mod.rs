//! Remote stores on object storage: where a fleet's hosts push and pull snapshots. The only
//! module that names `object_store` or tokio; everything it offers is synchronous (each
//! [`Remote`] owns a small current-thread runtime), so the rest of the code stays sync.
//!
//! Remotes are configured per store in `<store>/remotes.toml` (`remote add NAME URL`):
//! `s3://bucket/prefix` (AWS S3, or any S3-compatible server with `--endpoint URL`) or
//! `file:///path` (a shared filesystem). Credentials come only from the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, ...)
//! or, when it has none, the standard AWS files (`~/.aws/credentials`, `~/.aws/config`,
//! `AWS_PROFILE`; see `aws`): never from the command line, never stored in the remotes
//! file, never printed.
//!
//! Layout under the remote's prefix:
//!
//! ```text
//! packs/<pack-id>.zcpack   a pack (the store's pack format) of the objects the remote lacked
//! index/<pack-id>.idx      the ids in that pack: "zeroclaw-bundle remote index 1\n", then one
//!                          hex id per line; written after its pack is complete
//! trees/<snapshot-id>.zcpack  the snapshot's trees-only pack (record and every tree), written
//!                          after the packs and before the record: what a remote `diff` reads
//!                          (one object) and what a remote `mount` lists directories from
//! signatures/<snapshot-id>/<sig-id>.sig  a signature of the snapshot (see `sign`), named by
//!                          the blake3 of its bytes; added before the record by a push, and
//!                          by any later push of the same snapshot (append-only)
//! snapshots/<snapshot-id>  the snapshot record's bytes, written last
//! ```
//!
//! `<pack-id>` is the blake3 of the whole pack file, so two hosts never write different bytes
//! under one key: a name is new, or it holds exactly the same bytes. A push reads every index
//! to learn what the remote holds, writes ONE pack of the rest (one request, or one multipart
//! upload), then its index, then the record. Nothing is ever read, modified and written back;
//! each key is written once (a repeated write stores identical bytes), so any number of hosts
//! may push at once. Because an index appears only after its pack is whole and a record only
//! after the indexes of every object it reaches, a push killed at any point leaves at most an
//! unindexed pack (ignored; the next push re-uploads what it needs) or indexed objects with no
//! record: the remote never lists a snapshot whose objects are missing.
//!
//! A pull reads the record, walks its trees through the local store and the packs that hold
//! what the store lacks (found through the indexes), downloads those packs into the store's
//! `tmp/` (a round's packs at once, each as ranged GETs of 8 MiB parts, 8 in flight, each
//! part written at its offset), verifies each (trailer checksum, every object against its id), then imports the
//! objects and commits the record, as `unpack` does.
//!
//! An **encrypted remote** (`remote add NAME URL --encrypt-to RECIPIENT...`) keeps the same
//! layout behind `sealed`: every key but its first component is a keyed name (blake3 keyed
//! hash under a name key derived from the remote's first data key), and every object is an
//! age file under the remote's newest data key holding its plaintext key and its bytes, so the
//! bucket shows no id, no name and no byte of content, and a changed byte or a moved object
//! fails authentication. The data keys (one per generation: a recipient removed means a new
//! one) are in `keys/keyring.age`, an age file encrypted to every recipient and rewritten by
//! `remote recipients add|remove`; `remotes.toml` pins the first key's id, so a key file
//! replaced by someone who can only write to the bucket is refused. A bucket with a key file
//! never takes a plaintext push.
//!
//! The handle's cancellation token ([`Remote::with_cancel`]; the binary trips it on SIGINT or
//! SIGTERM) stops a push or pull at its next step, upload part or downloaded chunk: its temporary pack is removed and the remote holds at most what a
//! kill would leave.

mod aws;
mod client;
mod config;
mod counting;
mod gc;
mod local;
mod sealed;
mod sync;
mod view;

#[cfg(feature = "fuzzing")]
pub use client::{check_record, parse_index, IndexParser};
pub use client::{KnownRecords, Remote, KEY_FILE};
pub use config::{add_remote, find_remote, load_remotes, remove_remote, RemoteSpec};
pub use gc::{forget, gc, GcReport, DEFAULT_GRACE_SECS};
pub use sync::{pull_checked, push, PullReport, PushReport};
pub use view::RemoteView;

use std::path::PathBuf;

use zeroclaw_bundle_store::StoreError;

/// What went wrong with a remote (each names the remote, the key or the file).
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The remotes file cannot be read or written, or is malformed.
    #[error("remotes file {path}: {why}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A remote name that is not configured.
    #[error("no remote named {name:?} (configured: {known}); add one with `remote add NAME URL`")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The configured names.
        known: String,
    },
    /// A URL or option that cannot be used.
    #[error("remote {name}: {why}")]
    Invalid {
        /// The remote.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A request to the object store failed.
    #[error("remote {name}: could not {op} {key}: {why}")]
    Request {
        /// The remote.
        name: String,
        /// The verb.
        op: &'static str,
        /// The key.
        key: String,
        /// The object store's error, rendered (its text already carries its causes, so it is
        /// not chained again as a source).
        why: String,
    },
    /// What the remote holds is not what it must be.
    #[error("remote {name}: {key}: {why}")]
    Corrupt {
        /// The remote.
        name: String,
        /// The key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// A snapshot the remote does not list.
    #[error("remote {name} has no snapshot {reference} (`list --remote {name}` shows them)")]
    NoSnapshot {
        /// The remote.
        name: String,
        /// The reference asked for.
        reference: String,
    },
    /// A local file operation.
    #[error("could not {op} {path}")]
    Io {
        /// The verb.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Stopped at a safe point by SIGINT or SIGTERM (temporary files removed).
    #[error("interrupted")]
    Interrupted,
    /// The local store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A snapshot refused by `--require-signed`, or a signature problem.
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
}
