//! The store's trust settings (`trust`: the allowed signers and whether signatures are
//! required, kept in the store's `trust.toml`), and a signature made elsewhere
//! (`sign --signature`).

use std::path::{Path, PathBuf};

use super::error::{Error, Verb};
use super::{Bundles, Result};
use crate::sign::{AllowedSigners, SignReport, SignWith, TrustSettings};

impl Bundles {
    /// Stores a signature of snapshot `reference` made elsewhere (`ssh-keygen -Y sign`), read
    /// from `file` (`-`: stdin); it is checked against the snapshot before it is stored.
    pub fn sign_with_signature(&self, reference: &str, file: &Path) -> Result<SignReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, reference, e);
        let id = self.stored("sign", reference).map_err(|e| fail(e.into()))?;
        crate::sign::sign(&self.store, &id, &SignWith::Signature(PathBuf::from(file)))
            .map_err(|e| fail(e.into()))
    }

    /// The store's trust settings (`trust.toml`; the defaults when there is none).
    pub fn trust_settings(&self) -> Result<TrustSettings> {
        TrustSettings::load(self.store.root())
    }

    /// Changes the store's trust settings: `allowed_signers` (read now, so a typo is found
    /// here and not at the next unpack; kept as an absolute path) and `require_signed`. A
    /// store that requires signatures must name an allowed_signers file. Returns the settings
    /// and the notes of reading the file (entries it skipped).
    pub fn set_trust(
        &self,
        allowed_signers: Option<&Path>,
        require_signed: Option<bool>,
    ) -> Result<(TrustSettings, Vec<String>)> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, self.root().display().to_string(), e);
        let mut settings = self.trust_settings()?;
        let mut notes = Vec::new();
        if let Some(p) = allowed_signers {
            let parsed = AllowedSigners::load(p).map_err(|e| fail(e.into()))?;
            notes = parsed.notes.clone();
            let abs = std::path::absolute(p).map_err(|e| {
                fail(
                    anyhow::Error::new(e)
                        .context(format!("could not make {} absolute", p.display())),
                )
            })?;
            settings.allowed_signers = Some(abs);
        }
        if let Some(r) = require_signed {
            settings.require_signed = r;
        }
        if settings.require_signed && settings.allowed_signers.is_none() {
            return Err(fail(anyhow::anyhow!(
                "require_signed needs an allowed_signers file: pass --allowed-signers FILE too"
            )));
        }
        if allowed_signers.is_some() || require_signed.is_some() {
            crate::sign::save_trust(self.store.root(), &settings).map_err(|e| fail(e.into()))?;
        }
        Ok((settings, notes))
    }
}

impl TrustSettings {
    /// The trust settings of the store at `store_root` (`trust.toml`; the defaults when there
    /// is none), read without opening the store.
    pub fn load(store_root: &Path) -> Result<TrustSettings> {
        crate::sign::load_trust(store_root)
            .map_err(|e| Error::new(Verb::Sign, store_root.display().to_string(), e.into()))
    }
}
