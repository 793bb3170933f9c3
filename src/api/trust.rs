//! Signing a snapshot and the store's trust settings: `sign` (with a key file, a key opened
//! beforehand, or a signature made elsewhere) and `trust` (the allowed signers and whether
//! signatures are required, kept in the store's `trust.toml`).

use std::path::Path;

use super::error::{Error, Verb};
use super::{Bundles, Result};
use crate::sign::{AllowedSigners, KeyChoice, SignReport, SignWith, Trust, TrustSettings};

impl KeyChoice {
    /// The key to sign with: `explicit` (`--key`) when given, else git's
    /// `user.signingkey`, else the first of `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`.
    pub fn choose(explicit: Option<&Path>) -> Result<KeyChoice> {
        crate::sign::choose_key(explicit).map_err(|e| {
            Error::new(
                Verb::Sign,
                explicit.map_or_else(String::new, |p| p.display().to_string()),
                e.into(),
            )
        })
    }
}

impl Bundles {
    /// Signs snapshot `reference` (of this store) `with` a key or a signature made elsewhere;
    /// the signature is checked against the snapshot before it is stored. Signing twice with
    /// one key stores one signature ([`SignReport::added`] says which).
    pub fn sign_with(&self, reference: &str, with: &SignWith) -> Result<SignReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, reference, e);
        let id = self.stored("sign", reference).map_err(|e| fail(e.into()))?;
        crate::sign::sign(&self.store, &id, with).map_err(|e| fail(e.into()))
    }

    /// The store's trust settings (`trust.toml`; the defaults when there is none).
    pub fn trust_settings(&self) -> Result<TrustSettings> {
        crate::sign::load_trust(self.store.root())
            .map_err(|e| Error::new(Verb::Sign, self.root().display().to_string(), e.into()))
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

impl Trust {
    /// What a command's `--allowed-signers FILE` and `--require-signed` mean over the store's
    /// settings at `store_root` ([`Trust`]), and the notes of reading the file.
    pub fn from_flags(
        store_root: &Path,
        allowed_signers: Option<&Path>,
        require_signed: bool,
    ) -> Result<(Trust, Vec<String>)> {
        Trust::resolve(store_root, allowed_signers, require_signed)
            .map_err(|e| Error::new(Verb::Sign, store_root.display().to_string(), e.into()))
    }

    /// The policy a handle applies for this trust: signatures by these allowed signers when
    /// they are required, else none. Requiring signatures with no allowed_signers file is an
    /// error naming `what`.
    pub fn policy(&self, what: &str) -> Result<super::TrustPolicy> {
        match self.enforcing(what) {
            Ok(Some(allowed)) => Ok(super::TrustPolicy::Require(allowed.clone())),
            Ok(None) => Ok(super::TrustPolicy::Off),
            Err(e) => Err(Error::new(Verb::Sign, what, e.into())),
        }
    }
}
