//! The one error enum of `import`. Every message is lowercase and names the install path, the
//! bundle path, the config field (dotted) or the snapshot it is about.

use std::path::PathBuf;

use zeroclaw_bundle_store::{ObjectId, StoreError};

use crate::agent::AgentError;
use crate::provenance::ProvenanceError;
use crate::publish::{FileError, PublishError};
use crate::remote::RemoteError;

/// What can go wrong while planning or applying an import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source could not be captured, unpacked or pulled into the store.
    #[error("could not capture {arg} into the store")]
    Capture {
        /// The source as given.
        arg: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The import is an update in place (of an agent an earlier import made), and the update
    /// could not be planned or applied.
    #[error(transparent)]
    Update(Box<super::update::UpdateError>),
    /// `--require-signed` refused the source (unsigned, a bad signature, an untrusted key).
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
    /// `--require-signed` with a bundle directory, which carries no signatures.
    #[error(
        "refusing to import {arg}: signatures are required and a bundle directory carries none \
         (import a signed pack, remote snapshot or store snapshot instead)"
    )]
    UnsignedDirectory {
        /// The source as given.
        arg: String,
    },
    /// A remote failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The snapshot is not an agent bundle.
    #[error("snapshot {} is not an agent bundle: {problem}", snapshot.short(12))]
    NotABundle {
        /// The snapshot.
        snapshot: ObjectId,
        /// What is missing or wrong.
        problem: String,
    },
    /// The bundle's manifest or config fragment could not be read.
    #[error("the bundle's {file} is not valid")]
    Bundle {
        /// `zeroclaw-agent.toml` or `config.toml`.
        file: &'static str,
        /// Why.
        #[source]
        source: AgentError,
    },
    /// The bundle's config fragment holds something an import does not merge.
    #[error("the bundle's config.toml: {path} {problem}")]
    Fragment {
        /// Dotted path in the fragment.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// `--expect` named another content id.
    #[error(
        "refusing to import: the content id of {arg} is {actual}, not the expected {expected} \
         (it changed since it was reviewed; review it again)"
    )]
    NotExpected {
        /// The source as given.
        arg: String,
        /// `--expect` as given.
        expected: String,
        /// What was captured.
        actual: ObjectId,
    },
    /// The install could not be loaded.
    #[error("could not load the install at {}", root.display())]
    Install {
        /// The install root.
        root: PathBuf,
        /// Why.
        #[source]
        source: AgentError,
    },
    /// The install's config is of an older schema than the bundle's.
    #[error(
        "{} declares schema_version {found}; an import merges into schema {supported} only \
         (start ZeroClaw once so it migrates its config, then import)",
        path.display()
    )]
    OldSchema {
        /// The install's config.toml.
        path: PathBuf,
        /// What it declares.
        found: u32,
        /// What the bundle is written in.
        supported: u32,
    },
    /// A `--map` or `--as` argument is not usable.
    #[error("{arg}: {problem}")]
    BadArgument {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        problem: String,
    },
    /// `--as` names an agent the install already has.
    #[error("agent {alias} already exists in {}; an import never overwrites an entry (pick another --as)", path.display())]
    AgentExists {
        /// The alias.
        alias: String,
        /// The install's config.toml.
        path: PathBuf,
    },
    /// A reference of the fragment resolves to nothing.
    #[error(
        "dangling reference: {field} = {value:?} but {target} is neither in the bundle nor \
         mapped to a local entry (--map {kind}.{value}=LOCAL)"
    )]
    Dangling {
        /// The dotted field holding the reference.
        field: String,
        /// The value.
        value: String,
        /// The entry it names (`risk_profiles.x`).
        target: String,
        /// The `--map` kind word.
        kind: &'static str,
    },
    /// The merged config does not load or validate under ZeroClaw's schema.
    #[error("the merged {} would not be accepted by ZeroClaw: {problem}; nothing was written", path.display())]
    Invalid {
        /// The install's config.toml.
        path: PathBuf,
        /// ZeroClaw's words.
        problem: String,
    },
    /// A directory the import would create exists already.
    #[error("{} already exists ({what}); {problem}", path.display())]
    Exists {
        /// The directory.
        path: PathBuf,
        /// What it would have been.
        what: String,
        /// Why it is not replaced, and the flag that would replace it.
        problem: String,
    },
    /// A tree's destination is not a place of its own inside the install: a `..` in its
    /// configured path, outside `<install>/shared` (`<install>/agents` for a workspace) once
    /// symlinks are followed, or the install's own directory.
    #[error("refusing to publish {what} at {}: {problem}", path.display())]
    Destination {
        /// What (`skill bundle x`, `the workspace of agent y`).
        what: String,
        /// The destination, as configured.
        path: PathBuf,
        /// Why, naming the config field.
        problem: String,
    },
    /// A tree the import would publish lies inside, or holds, a directory the install (or
    /// another tree of the same import) already uses.
    #[error(
        "{} ({what}) would lie inside or hold {other}; an import writes only into places of \
         its own (--force does not change this)",
        path.display()
    )]
    Overlaps {
        /// The directory the import would publish.
        path: PathBuf,
        /// What it would have been.
        what: String,
        /// What it overlaps, with its path.
        other: String,
    },
    /// Another import into the same install is running.
    #[error("another import into {} is running", path.display())]
    Busy {
        /// The install root.
        path: PathBuf,
    },
    /// An update or rollback of an agent of the install was cut short and is not finished.
    #[error(
        "the last update or rollback of agent {alias} in {} was cut short and is not \
         finished ({} is pending): run `zeroclaw-bundle recover --install {}` first",
        install.display(), intent.display(), crate::publish::shell_quote(install)
    )]
    Pending {
        /// The agent.
        alias: String,
        /// The install root.
        install: PathBuf,
        /// Its intent file.
        intent: PathBuf,
    },
    /// `config.toml` changed between the plan and the write.
    #[error("{} changed while the import ran; nothing was written (run the import again)", path.display())]
    ConfigChanged {
        /// The install's config.toml.
        path: PathBuf,
    },
    /// The install's config.toml could not be read or inspected.
    #[error("could not read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A directory could not be published.
    #[error("could not publish {what} at {}", path.display())]
    Publish {
        /// What (`the workspace of agent x`, `skill bundle y`).
        what: String,
        /// The destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<PublishError>,
    },
    /// The provenance record could not be written.
    #[error(transparent)]
    Provenance(#[from] ProvenanceError),
    /// The backup or the new config.toml could not be written.
    #[error("could not write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<FileError>,
    },
    /// A secret could not be encrypted with the install's key.
    #[error("could not encrypt {path} with the install's secret key")]
    Secret {
        /// The dotted config path.
        path: String,
        /// Why (never the value).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The import was interrupted before config.toml was written.
    #[error("interrupted")]
    Interrupted,
}
