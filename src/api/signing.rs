//! Signatures around the verbs that make or read a snapshot: a [`SigningKey`] opened before
//! the work it signs (so a wrong passphrase or a missing key stops `export --sign` before
//! anything is captured) and [`Bundles::sign_with_key`] after it; and the [`SignerTrust`] of
//! one command: its `--allowed-signers FILE` and `--require-signed` over the store's
//! `trust.toml`, as the allowed signers a review or a diff names signers with, and as the
//! [`TrustPolicy`] a verb that makes a snapshot visible applies.

use std::path::Path;

use super::{Bundles, Error, Result, SignReport, TrustPolicy, Verb};
use crate::sign::{AllowedSigners, SignError, SignWith, Trust};

pub use crate::sign::{Checked, Verdict};

/// A signing key, opened (its passphrase asked on the terminal when it has one) and held for
/// [`Bundles::sign_with_key`]: a private key file, or a public key whose signing is handed to
/// `ssh-keygen -Y sign` (its private half in ssh-agent, on a security key, or beside it).
///
/// ```
/// use zeroclaw_bundle::{Bundles, Silent, SigningKey};
/// # let dir = tempfile::tempdir()?;
/// let key = dir.path().join("id_ed25519");
/// let made = std::process::Command::new("ssh-keygen")
///     .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice@example.com", "-f"]).arg(&key).status()?;
/// assert!(made.success());
/// // Opened first: a key problem stops the work before anything is made.
/// let key = SigningKey::open(Some(&key))?;
/// let tree = dir.path().join("tree");
/// std::fs::create_dir(&tree)?;
/// let bundles = Bundles::create(dir.path().join("store"))?;
/// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
/// let signed = bundles.sign_with_key(&snap.id.to_hex(), key)?;
/// assert!(signed.added && signed.snapshot == snap.id);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SigningKey {
    key: crate::sign::OpenedKey,
}

impl SigningKey {
    /// Opens `key` (a private or public OpenSSH key file); `None`: the SSH key git signs
    /// commits with (`gpg.format = ssh`, `user.signingkey`), else `~/.ssh/id_ed25519`. Refused
    /// (naming the key file, never quoting the key) when it cannot be read, is not a key, or
    /// is protected by a passphrase and there is no terminal to ask on.
    pub fn open(key: Option<&Path>) -> Result<SigningKey> {
        let target = key.map(|p| p.display().to_string()).unwrap_or_default();
        let fail = |e: SignError| Error::new(Verb::Sign, target.clone(), e.into());
        let choice = crate::sign::choose_key(key).map_err(fail)?;
        let key = crate::sign::OpenedKey::open(&choice).map_err(fail)?;
        Ok(SigningKey { key })
    }
}

impl Bundles {
    /// Signs snapshot `reference` with `key` (see [`Bundles::sign`]); returns what was added
    /// (`added` is false when the store held this exact signature already).
    ///
    /// See [`SigningKey`] for an example.
    pub fn sign_with_key(&self, reference: &str, key: SigningKey) -> Result<SignReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, reference, e);
        let id = self.stored("sign", reference).map_err(|e| fail(e.into()))?;
        crate::sign::sign(&self.store, &id, &SignWith::Opened(Box::new(key.key)))
            .map_err(|e| fail(e.into()))
    }
}

/// Whom one command trusts: its `--allowed-signers FILE` over the store's `allowed_signers`,
/// and whether it requires signatures (`--require-signed`, or the store's `require_signed`).
///
/// ```
/// use zeroclaw_bundle::{SignerTrust, TrustPolicy};
/// # let dir = tempfile::tempdir()?;
/// let store = dir.path().join("store");
/// zeroclaw_bundle::Bundles::create(&store)?;
/// // Nothing set and nothing asked: signers are named as unknown keys, nothing is required.
/// let trust = SignerTrust::resolve(&store, None, false)?;
/// assert!(trust.allowed.is_none() && !trust.require);
/// assert!(matches!(trust.policy("bundle")?, TrustPolicy::Store));
/// // Required without an allowed_signers file: refused, naming what was to be checked.
/// let err = SignerTrust::resolve(&store, None, true)?.policy("bundle").unwrap_err();
/// assert!(err.to_string().starts_with("bundle cannot be checked"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct SignerTrust {
    /// The allowed signers signatures are checked against (`None`: every signer is an
    /// unknown key).
    pub allowed: Option<AllowedSigners>,
    /// Whether a signature by a key `allowed` trusts is required.
    pub require: bool,
    /// What the operator should know (lines of the allowed_signers file left out, a store
    /// setting naming a file that cannot be read), one sentence each.
    pub notes: Vec<String>,
}

impl SignerTrust {
    /// Reads the trust of a command in the store at `store`: `allowed_signers` (the command's
    /// `--allowed-signers FILE`) over the store's setting, `require_signed` or the store's
    /// setting. A store setting naming a file that cannot be read does not stop a command that
    /// only names signers (they show as unknown keys, and a note says why); it does stop one
    /// that requires signatures, and a file given here always does.
    pub fn resolve(
        store: &Path,
        allowed_signers: Option<&Path>,
        require_signed: bool,
    ) -> Result<SignerTrust> {
        let fail = |e: SignError| Error::new(Verb::Sign, store.display().to_string(), e.into());
        let (trust, notes) = match Trust::resolve(store, allowed_signers, require_signed) {
            Ok(found) => found,
            Err(e)
                if allowed_signers.is_none()
                    && !require_signed
                    && !crate::sign::load_trust(store).map_err(fail)?.require_signed =>
            {
                let note = format!(
                    "{e}; signatures are shown as by unknown keys (fix it with \
                     `zeroclaw-bundle trust --allowed-signers FILE`)"
                );
                (Trust::default(), vec![note])
            }
            Err(e) => return Err(fail(e)),
        };
        Ok(SignerTrust {
            allowed: trust.allowed,
            require: trust.require,
            notes,
        })
    }

    /// The policy a verb that makes `what` (a source, a snapshot) visible applies under this
    /// trust: [`TrustPolicy::Require`] when signatures are required (refused, naming `what`,
    /// when there is no allowed_signers file to check them against), else the store's own
    /// setting, which then requires nothing.
    pub fn policy(&self, what: &str) -> Result<TrustPolicy> {
        let trust = Trust {
            allowed: self.allowed.clone(),
            require: self.require,
        };
        match trust.enforcing(what) {
            Ok(Some(allowed)) => Ok(TrustPolicy::Require(allowed.clone())),
            Ok(None) => Ok(TrustPolicy::Store),
            Err(e) => Err(Error::new(Verb::Sign, what, e.into())),
        }
    }
}
