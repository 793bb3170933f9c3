//! `<store>/trust.toml`: the store's signature settings, set once with `trust`:
//! `allowed_signers = "PATH"` (the file every command checks signatures against unless
//! `--allowed-signers` names another; `trust` writes it absolute, a relative one is read from
//! the store's directory) and `require_signed = true|false` (make
//! `--require-signed` the default of unpack, pull, checkout, mount and import). Written to a
//! temporary file and renamed into place, like `remotes.toml`. Holds paths, never keys.

use std::fs;
use std::path::{Path, PathBuf};

use toml_edit::{value, DocumentMut};

use super::{AllowedSigners, SignError};

/// `trust.toml` holds two settings: a larger one is refused, never read whole.
const TRUST_CAP: u64 = 1 << 20;

/// The settings file of a store.
pub fn file_of(store_root: &Path) -> PathBuf {
    store_root.join("trust.toml")
}

/// What `trust.toml` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TrustSettings {
    /// The allowed_signers file.
    pub allowed_signers: Option<PathBuf>,
    /// Signatures required by default.
    pub require_signed: bool,
}

/// Reads the store's settings (none set when the file is absent).
pub fn load_trust(store_root: &Path) -> Result<TrustSettings, SignError> {
    let path = file_of(store_root);
    let text = match crate::sys::read_small_text(&path, TRUST_CAP, "a trust.toml") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustSettings::default()),
        Err(e) => {
            return Err(SignError::Io {
                op: "read",
                path,
                source: e,
            })
        }
    };
    let bad = |why: String| SignError::Config {
        path: path.clone(),
        why,
    };
    let doc: DocumentMut = text.parse().map_err(|e| bad(format!("not TOML: {e}")))?;
    let mut out = TrustSettings::default();
    for (k, v) in doc.iter() {
        match k {
            "allowed_signers" => {
                let p = v
                    .as_str()
                    .ok_or_else(|| bad("allowed_signers must be a string (a path)".into()))?;
                // A relative path (a hand-edited file) is the store's, never the working
                // directory's: a received bundle's own `allowed_signers` in the directory an
                // operator runs `unpack` from must not become the trusted file.
                out.allowed_signers = Some(store_root.join(p));
            }
            "require_signed" => {
                out.require_signed = v
                    .as_bool()
                    .ok_or_else(|| bad("require_signed must be true or false".into()))?;
            }
            other => return Err(bad(format!("unknown setting {other:?}"))),
        }
    }
    Ok(out)
}

/// Writes the store's settings.
pub fn save_trust(store_root: &Path, settings: &TrustSettings) -> Result<(), SignError> {
    let path = file_of(store_root);
    let mut doc = DocumentMut::new();
    if let Some(p) = &settings.allowed_signers {
        let text = p.to_str().ok_or_else(|| SignError::Config {
            path: path.clone(),
            why: format!("the path {} is not UTF-8", p.display()),
        })?;
        doc["allowed_signers"] = value(text);
    }
    doc["require_signed"] = value(settings.require_signed);
    let tmp = store_root.join(format!("trust.toml.tmp.{}", std::process::id()));
    let io = |op, e| SignError::Io {
        op,
        path: tmp.clone(),
        source: e,
    };
    fs::write(&tmp, doc.to_string()).map_err(|e| io("write", e))?;
    fs::rename(&tmp, &path).map_err(|e| io("rename", e))
}

/// What a command checks signatures against, and whether it must refuse unsigned snapshots:
/// the command line over the store's settings.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// The allowed signers, when a file is given or set.
    pub allowed: Option<AllowedSigners>,
    /// Whether signatures are required.
    pub require: bool,
}

impl Trust {
    /// `--allowed-signers` (`flag_file`) over the store's `allowed_signers`; `--require-signed`
    /// (`flag_require`) or the store's `require_signed`. Notes about left-out lines are
    /// returned for the caller to print.
    pub fn resolve(
        store_root: &Path,
        flag_file: Option<&Path>,
        flag_require: bool,
    ) -> Result<(Trust, Vec<String>), SignError> {
        let settings = load_trust(store_root)?;
        let file = flag_file
            .map(Path::to_path_buf)
            .or(settings.allowed_signers);
        let allowed = file.as_deref().map(AllowedSigners::load).transpose()?;
        let notes = allowed
            .as_ref()
            .map(|a| a.notes.clone())
            .unwrap_or_default();
        Ok((
            Trust {
                allowed,
                require: flag_require || settings.require_signed,
            },
            notes,
        ))
    }

    /// When signatures are required: the allowed signers to check against, or the error
    /// naming `what` (the snapshot or ref) when there is no file. `None`: nothing to enforce.
    pub fn enforcing(&self, what: &str) -> Result<Option<&AllowedSigners>, SignError> {
        if !self.require {
            return Ok(None);
        }
        match &self.allowed {
            Some(a) => Ok(Some(a)),
            None => Err(SignError::NoAllowedSigners {
                what: what.to_string(),
            }),
        }
    }
}
