//! What a review (and an import) reads: its source made a snapshot of the store FIRST, so
//! everything after reads that snapshot only and the id shown is exactly what was read. The
//! grammar is `diff`'s side grammar without `:PATH` ([`crate::diff::side`]): an existing
//! directory is captured into the store as `snapshot --dir` captures it
//! ([`crate::export::capture_dir`]); an existing file is a pack, checked whole and unpacked
//! (its every object verified); `NAME/SNAPSHOT` with `NAME` a configured remote is pulled;
//! anything else is a snapshot of the store (a full id, a prefix, a name, `agent/<alias>`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use zeroclaw_bundle_store::{unpack_watched, ObjectId, PackReader, Store, StoreError};

use crate::diff::side::{refuse_missing_path, SideError};
use crate::export::{capture_dir, SourceDir};
use crate::progress::{ImportProgress, Progress};
use crate::remote::{parse_remote_ref, pull_checked, Remote, RemoteError};
use crate::sign::{require_signed, require_signed_blobs, AllowedSigners, SignError};

/// Why a source could not be made a snapshot of the store.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A path that does not exist, or a ref that names no snapshot (`diff`'s words).
    #[error(transparent)]
    Side(#[from] SideError),
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

/// Makes `arg` a snapshot of `store` (see the module docs) and says what it was. With
/// `require` (`import --require-signed`), the snapshot must carry a signature these allowed
/// signers trust, checked before it becomes visible in the store: a pack's section before it
/// is unpacked, a remote's signatures before anything is pulled, a stored snapshot's own; a
/// directory, which carries none, is refused before it is captured.
pub fn resolve(
    store: &Store,
    arg: &OsStr,
    require: Option<&AllowedSigners>,
    progress: &dyn Progress,
) -> Result<(ObjectId, ReviewSource), SourceError> {
    refuse_missing_path(arg)?;
    let given = arg.to_string_lossy().into_owned();
    let path = Path::new(arg);
    let shown = |p: &Path| {
        use std::os::unix::ffi::OsStrExt as _;
        zeroclaw_bundle_store::escape_name(p.as_os_str().as_bytes())
    };
    if path.is_dir() {
        if require.is_some() {
            return Err(SourceError::UnsignedDirectory {
                path: path.to_path_buf(),
            });
        }
        let capture = |dir: &Path| -> anyhow::Result<ObjectId> {
            let dir = SourceDir::open(dir)?;
            Ok(capture_dir(store, dir, None, progress)?.id)
        };
        let id = capture(path).map_err(|e| SourceError::Capture {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        return Ok((
            id,
            ReviewSource {
                arg: given,
                kind: "directory",
                path: Some(shown(&abs)),
                remote: None,
            },
        ));
    }
    if path.is_file() {
        let opened = PackReader::open(path).map_err(|source| SourceError::Unpack {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(allowed) = require {
            let sigs = opened.signatures().map_err(|source| SourceError::Unpack {
                path: path.to_path_buf(),
                source,
            })?;
            require_signed_blobs(&opened.root, &sigs, allowed)?;
        }
        let unpack = || -> Result<ObjectId, StoreError> {
            let pack = opened;
            // Held (shared) until the catalog entry: a gc waits instead of removing objects
            // this import is about to reference.
            let _lock = store.write_lock()?;
            unpack_watched(store, &pack, &ImportProgress::new(progress))
        };
        let id = unpack().map_err(|source| SourceError::Unpack {
            path: path.to_path_buf(),
            source,
        })?;
        return Ok((
            id,
            ReviewSource {
                arg: given,
                kind: "pack",
                path: Some(shown(path)),
                remote: None,
            },
        ));
    }
    if let Some((spec, reference)) =
        parse_remote_ref(store.root(), &given).map_err(SideError::Remote)?
    {
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
        return Ok((
            id,
            ReviewSource {
                arg: given,
                kind: "remote",
                path: None,
                remote: Some(spec.name),
            },
        ));
    }
    // A full id names its record directly; anything else goes through the catalog.
    let direct = given
        .parse::<ObjectId>()
        .ok()
        .filter(|id| store.read_snapshot(id).is_ok());
    let id = match direct {
        Some(id) => id,
        None => store.resolve(&given).map_err(|source| {
            let source = Box::new(source);
            match given.split_once('/') {
                Some((name, _)) if name != "agent" => SideError::NotRemote {
                    arg: given.clone(),
                    name: name.to_string(),
                    source,
                },
                _ => SideError::NotSnapshot {
                    arg: given.clone(),
                    source,
                },
            }
        })?,
    };
    if let Some(allowed) = require {
        require_signed(store, &id, allowed)?;
    }
    Ok((
        id,
        ReviewSource {
            arg: given,
            kind: "snapshot",
            path: None,
            remote: None,
        },
    ))
}
