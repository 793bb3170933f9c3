//! What a review (and an import) reads: its source made a snapshot of the store FIRST, so
//! everything after reads that snapshot only and the id shown is exactly what was read. The
//! grammar is the one of every verb ([`crate::source`]), without `:PATH`: an existing
//! directory is captured into the store as `snapshot --dir` captures it
//! ([`crate::export::capture_dir`]); an existing file is a pack, checked whole and unpacked
//! (its every object verified); `NAME/SNAPSHOT` with `NAME` a configured remote is pulled;
//! anything else is a snapshot of the store (a full id, a prefix, a name, `agent/<alias>`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use zeroclaw_bundle_store::{ObjectId, PackReader, Store, StoreError};

use crate::export::{capture_dir, SourceDir};
use crate::progress::{ImportProgress, Progress};
use crate::remote::{pull_checked, Remote, RemoteError};
use crate::sign::{require_signed, require_signed_blobs, AllowedSigners, SignError};
use crate::source::{classify, ReferenceError, Takes, Target};

/// Why a source could not be made a snapshot of the store.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A path that does not exist, a ref that names no snapshot, a form the verb does not
    /// take (the grammar's words: [`ReferenceError`]).
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The directory could not be captured.
    #[error("could not capture the directory {} into the store", path.display())]
    Capture {
        /// The directory.
        path: PathBuf,
        /// The capture's error, with its causes.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The pack could not be read or unpacked.
    #[error("could not unpack {}", path.display())]
    Unpack {
        /// The pack file.
        path: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The remote snapshot could not be pulled.
    #[error("could not pull {reference} from remote {remote}")]
    Pull {
        /// The remote's name.
        remote: String,
        /// The snapshot reference on it.
        reference: String,
        /// The remote's error.
        #[source]
        source: Box<RemoteError>,
    },
    /// Signatures are required and the source carries none a trusted key made.
    #[error(transparent)]
    Refused(#[from] SignError),
    /// Signatures are required and a directory carries none.
    #[error("{} is a directory, which carries no signatures", path.display())]
    UnsignedDirectory {
        /// The directory.
        path: PathBuf,
    },
}

/// What a reviewed source was, for the screen and `--json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReviewSource {
    /// The argument as given (lossy).
    pub arg: String,
    /// `directory` (captured), `pack` (unpacked), `remote` (pulled) or `snapshot`.
    pub kind: &'static str,
    /// The directory or pack file (absolute for a directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The remote's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// Makes `arg` a snapshot of `store` (see the module docs) and says what it was; `takes` is
/// the verb's ([`Takes::REVIEW`], [`Takes::IMPORT`]), for what errors say. With `require`
/// (`import --require-signed`), the snapshot must carry a signature these allowed signers
/// trust, checked before it becomes visible in the store: a pack's section before it is
/// unpacked, a remote's signatures before anything is pulled, a stored snapshot's own; a
/// directory, which carries none, is refused before it is captured.
pub fn resolve(
    store: &Store,
    arg: &OsStr,
    takes: Takes,
    require: Option<&AllowedSigners>,
    progress: &dyn Progress,
) -> Result<(ObjectId, ReviewSource), SourceError> {
    let reference = classify(store.root(), arg, takes)?;
    let given = reference.arg().to_string();
    let shown = |p: &Path| {
        use std::os::unix::ffi::OsStrExt as _;
        zeroclaw_bundle_store::escape_name(p.as_os_str().as_bytes())
    };
    let described = |kind, path: Option<String>, remote: Option<String>| ReviewSource {
        arg: given.clone(),
        kind,
        path,
        remote,
    };
    match reference.target {
        Target::Dir(path) => {
            if require.is_some() {
                return Err(SourceError::UnsignedDirectory { path });
            }
            let id = capture(store, &path, progress)?;
            let abs = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
            Ok((id, described("directory", Some(shown(&abs)), None)))
        }
        Target::Pack { file, .. } => {
            let id = unpack(store, &file, require, progress)?;
            Ok((id, described("pack", Some(shown(&file)), None)))
        }
        Target::Remote {
            spec, reference, ..
        } => {
            let pulled = || -> Result<ObjectId, RemoteError> {
                let mut remote = Remote::open(&spec, false)?;
                if let Some(cancel) = progress.cancel() {
                    remote = remote.with_cancel(cancel.clone());
                }
                let id = remote.resolve(&reference)?;
                pull_checked(store, &remote, &id, require, progress)?;
                Ok(id)
            };
            let id = pulled().map_err(|source| SourceError::Pull {
                remote: spec.name.clone(),
                reference: reference.clone(),
                source: Box::new(source),
            })?;
            Ok((id, described("remote", None, Some(spec.name))))
        }
        Target::Stored { .. } => {
            let id = reference.stored_id(store)?;
            if let Some(allowed) = require {
                require_signed(store, &id, allowed)?;
            }
            Ok((id, described("snapshot", None, None)))
        }
    }
}

/// Captures directory `path` into the store, as `snapshot --dir` does.
fn capture(store: &Store, path: &Path, progress: &dyn Progress) -> Result<ObjectId, SourceError> {
    let capture = |dir: &Path| -> anyhow::Result<ObjectId> {
        let dir = SourceDir::open(dir)?;
        Ok(capture_dir(store, dir, None, progress)?.id)
    };
    capture(path).map_err(|e| SourceError::Capture {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// Unpacks the pack at `path` into the store (its signatures checked first with `require`).
fn unpack(
    store: &Store,
    path: &Path,
    require: Option<&AllowedSigners>,
    progress: &dyn Progress,
) -> Result<ObjectId, SourceError> {
    let failed = |source| SourceError::Unpack {
        path: path.to_path_buf(),
        source,
    };
    let opened = PackReader::open(path).map_err(failed)?;
    if let Some(allowed) = require {
        let sigs = opened.signatures().map_err(failed)?;
        require_signed_blobs(&opened.root, &sigs, allowed)?;
    }
    // Held (shared) until the catalog entry: a gc waits instead of removing objects this
    // import is about to reference.
    let _lock = store.write_lock().map_err(failed)?;
    store
        .packs()
        .unpack_watched(&opened, &ImportProgress::new(progress))
        .map_err(failed)
}
