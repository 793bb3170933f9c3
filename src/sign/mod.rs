//! Signed snapshots: who made a snapshot, proved with the SSH keys operators already have, in
//! OpenSSH's sshsig format (`ssh-keygen -Y sign` / `-Y verify`, git's `gpg.format = ssh`) so
//! that a tool nobody here wrote can check it. This module owns what a signature means; the
//! store keeps signatures as opaque blobs beside each record (`<store>/signatures/`), packs
//! carry them in a section, remotes under `signatures/<snapshot-id>/`.
//!
//! **The message.** A signature signs the snapshot's full id in lowercase hex followed by one
//! newline (what `echo <id>` prints), under the namespace [`NAMESPACE`]. The namespace is
//! bound into the signed data by sshsig itself, so a bundle signature can never be replayed as
//! a git commit, file or login signature, nor the other way round. So an operator can make one
//! by hand: `echo <id> | ssh-keygen -Y sign -n zeroclaw-bundle@snapshot -f KEY`, and add it
//! with `sign <SNAPSHOT> --signature FILE`.
//!
//! **Trust.** An allowed_signers file ([`allowed`]) says which keys are trusted, for which
//! principals, namespaces and dates; given with `--allowed-signers FILE` or set once in the
//! store (`trust --allowed-signers FILE`, kept in `<store>/trust.toml`: [`config`]).
//! [`require_signed`] is the one gate every enforcing verb calls (unpack, pull, checkout,
//! mount, import): it passes when at least one signature verifies over this snapshot's
//! message, in this namespace, by a key an entry accepts now; otherwise it names the snapshot
//! and why each signature failed.
//!
//! **Keys never leak.** Only public keys and fingerprints (`SHA256:...`) are ever printed or
//! stored; the private key is opened in [`key`] and dropped (zeroized) after signing.

pub mod allowed;
pub mod config;
mod ecdsa_width;
pub mod key;
mod ssh_keygen;

use std::path::{Path, PathBuf};

use ssh_key::{HashAlg, LineEnding, SshSig};
use zeroclaw_bundle_store::{ObjectId, Store, StoreError};

pub use allowed::AllowedSigners;
pub use config::{load_trust, save_trust, Trust, TrustSettings};
pub use key::{choose_key, open_key, KeyChoice};

/// The sshsig namespace of snapshot signatures (never `git` or `file`).
pub const NAMESPACE: &str = "zeroclaw-bundle@snapshot";

/// What a signature of snapshot `id` signs: its full id in lowercase hex and a newline.
pub fn message(id: &ObjectId) -> Vec<u8> {
    format!("{}\n", id.to_hex()).into_bytes()
}

/// What went wrong signing, reading trust, or checking signatures (each names the snapshot,
/// file or key).
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// A key file that cannot be used (never quotes the key).
    #[error("key {path}: {why}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A signature given to add that is not one of this snapshot.
    #[error("signature {path} cannot be added to snapshot {snapshot}: {why}")]
    BadExternal {
        /// The signature file.
        path: PathBuf,
        /// The snapshot.
        snapshot: ObjectId,
        /// What is wrong.
        why: String,
    },
    /// A malformed allowed_signers file.
    #[error("allowed signers file {path} line {line}: {why}")]
    AllowedSigners {
        /// The file.
        path: PathBuf,
        /// The line (0: the whole file).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The trust settings file is malformed or cannot be written.
    #[error("trust settings {path}: {why}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// `--require-signed` without an allowed_signers file to check against.
    #[error("{what} cannot be checked: signatures are required but no allowed_signers file is set (pass --allowed-signers FILE, or set one with `zeroclaw-bundle trust --allowed-signers FILE`)")]
    NoAllowedSigners {
        /// What was to be checked (`snapshot 1a2b3c4d5e6f`, `origin/agent/researcher`).
        what: String,
    },
    /// The gate refused a snapshot.
    #[error("snapshot {snapshot} refused: {why}")]
    Refused {
        /// The snapshot.
        snapshot: ObjectId,
        /// Why (unsigned, or each signature's failure).
        why: String,
    },
    /// A file operation (the OS error is its source).
    #[error("could not {op} {path}")]
    Io {
        /// The verb.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A key that signed a snapshot, trusted by an allowed_signers entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Signer {
    /// The entry's principals (`alice@example.com`).
    pub principals: String,
    /// The key's fingerprint, `SHA256:...`.
    pub fingerprint: String,
    /// The key type (`ssh-ed25519`).
    pub key_type: String,
}

impl Signer {
    /// `snapshot 3f2a9c01e0b4 signed by alice@example.com (SHA256:...), ...`: who a trust
    /// policy found signed `id`, as every verb says it.
    pub fn signed_by(id: &ObjectId, signers: &[Signer]) -> String {
        let who: Vec<String> = signers
            .iter()
            .map(|s| {
                format!(
                    "{} ({})",
                    zeroclaw_bundle_store::escape_text(&s.principals),
                    s.fingerprint
                )
            })
            .collect();
        format!("snapshot {} signed by {}", id.short(12), who.join(", "))
    }
}

/// What one signature of a snapshot proves.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Verdict {
    /// Verifies, by a key an allowed_signers entry accepts now.
    Trusted {
        /// Who.
        signer: Signer,
    },
    /// Verifies, by a key no allowed_signers entry lists (or none was given).
    UnknownKey {
        /// The key's fingerprint.
        fingerprint: String,
        /// The key type.
        key_type: String,
    },
    /// Verifies, by a listed key whose entry does not accept it here or now.
    NotAccepted {
        /// The key's fingerprint.
        fingerprint: String,
        /// The entry's principals.
        principals: String,
        /// Why not.
        why: String,
    },
    /// Does not verify: malformed, another namespace, another snapshot, or damaged.
    Bad {
        /// The key's fingerprint when the signature could be read.
        fingerprint: Option<String>,
        /// Why.
        why: String,
    },
}

/// One signature and its verdict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Checked {
    /// The blake3 of the signature's bytes (its name in the store).
    pub signature: ObjectId,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

fn fingerprint(key: &ssh_key::public::KeyData) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Reads an armored sshsig (PEM) and re-encodes it canonically (LF line ends), so one
/// signature always has the same bytes and so the same name wherever it is stored.
fn canonical(bytes: &[u8]) -> Result<(SshSig, Vec<u8>), String> {
    let sig = SshSig::from_pem(bytes).map_err(|e| format!("not an SSH signature (sshsig): {e}"))?;
    let pem = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| format!("cannot be encoded again: {e}"))?;
    Ok((sig, pem.into_bytes()))
}

/// Checks one signature `bytes` of snapshot `id` against `allowed` (none: every key is
/// unknown) at `now` (seconds since the epoch).
pub fn check_one(
    id: &ObjectId,
    bytes: &[u8],
    allowed: Option<&AllowedSigners>,
    now: i64,
) -> Checked {
    let signature = ObjectId::of(bytes);
    let verdict = match SshSig::from_pem(bytes) {
        Err(e) => Verdict::Bad {
            fingerprint: None,
            why: format!("not an SSH signature (sshsig): {e}"),
        },
        Ok(sig) => judge(id, &sig, allowed, now),
    };
    Checked { signature, verdict }
}

fn judge(id: &ObjectId, sig: &SshSig, allowed: Option<&AllowedSigners>, now: i64) -> Verdict {
    let key = sig.public_key();
    let fp = fingerprint(key);
    if sig.namespace() != NAMESPACE {
        return Verdict::Bad {
            fingerprint: Some(fp),
            why: format!(
                "made in namespace {:?}, not {NAMESPACE:?}",
                zeroclaw_bundle_store::escape_text(sig.namespace())
            ),
        };
    }
    let public = ssh_key::PublicKey::new(key.clone(), "");
    if public.verify(NAMESPACE, &message(id), sig).is_err() {
        // `printf %s ID | ssh-keygen -Y sign` signs the id without its newline: said so, as
        // that is a mistake of hand, not damage (and still refused: the message is fixed).
        let without_newline = id.to_hex();
        let why = if public
            .verify(NAMESPACE, without_newline.as_bytes(), sig)
            .is_ok()
        {
            format!(
                "signs the id of snapshot {} without the newline the signed message ends \
                 with (sign what `echo ID` prints, not `printf %s ID`)",
                id.short(12)
            )
        } else {
            format!(
                "does not verify over snapshot {} (damaged, or made for another snapshot)",
                id.short(12)
            )
        };
        return Verdict::Bad {
            fingerprint: Some(fp),
            why,
        };
    }
    let key_type = key.algorithm().to_string();
    let Some(allowed) = allowed else {
        return Verdict::UnknownKey {
            fingerprint: fp,
            key_type,
        };
    };
    let entries = allowed.lookup(key, NAMESPACE, now);
    if let Some((e, _)) = entries.iter().find(|(_, r)| r.is_none()) {
        return Verdict::Trusted {
            signer: Signer {
                principals: e.principals.clone(),
                fingerprint: fp,
                key_type,
            },
        };
    }
    match entries.first() {
        Some((e, Some(why))) => Verdict::NotAccepted {
            fingerprint: fp,
            principals: e.principals.clone(),
            why: why.to_string(),
        },
        _ => Verdict::UnknownKey {
            fingerprint: fp,
            key_type,
        },
    }
}

/// Seconds since the epoch now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Checks every signature in `signatures` of snapshot `id`.
pub fn check_all(
    id: &ObjectId,
    signatures: &[Vec<u8>],
    allowed: Option<&AllowedSigners>,
) -> Vec<Checked> {
    let now = now_secs();
    signatures
        .iter()
        .map(|s| check_one(id, s, allowed, now))
        .collect()
}

/// The signatures `store` keeps for snapshot `id`, each checked.
pub fn check_stored(
    store: &Store,
    id: &ObjectId,
    allowed: Option<&AllowedSigners>,
) -> Result<Vec<Checked>, SignError> {
    let sigs: Vec<Vec<u8>> = store
        .catalog()
        .signatures(id)?
        .into_iter()
        .map(|s| s.bytes)
        .collect();
    Ok(check_all(id, &sigs, allowed))
}

/// The gate over signatures received from anywhere (a pack's section, a remote): the trusted
/// signers, or [`SignError::Refused`] naming the snapshot and why.
pub fn require_signed_blobs(
    id: &ObjectId,
    signatures: &[Vec<u8>],
    allowed: &AllowedSigners,
) -> Result<Vec<Signer>, SignError> {
    let checked = check_all(id, signatures, Some(allowed));
    let signers: Vec<Signer> = checked
        .iter()
        .filter_map(|c| match &c.verdict {
            Verdict::Trusted { signer } => Some(signer.clone()),
            _ => None,
        })
        .collect();
    if !signers.is_empty() {
        return Ok(signers);
    }
    let why = if checked.is_empty() {
        "it is unsigned (signatures are required)".to_string()
    } else {
        let each: Vec<String> = checked.iter().map(|c| describe(&c.verdict)).collect();
        format!(
            "no signature is by a key {} trusts: {}",
            allowed.path.display(),
            each.join("; ")
        )
    };
    Err(SignError::Refused { snapshot: *id, why })
}

/// The gate of the enforcing verbs: snapshot `id` of `store` must carry at least one signature
/// that verifies, in [`NAMESPACE`], by a key `allowed` accepts now. Returns who signed; the
/// error names the snapshot and the reason (unsigned, bad signature, unknown key, expired
/// entry, wrong namespace).
pub fn require_signed(
    store: &Store,
    snapshot_id: &ObjectId,
    allowed: &AllowedSigners,
) -> Result<Vec<Signer>, SignError> {
    let sigs: Vec<Vec<u8>> = store
        .catalog()
        .signatures(snapshot_id)?
        .into_iter()
        .map(|s| s.bytes)
        .collect();
    require_signed_blobs(snapshot_id, &sigs, allowed)
}

/// One line for a verdict (its [`std::fmt::Display`]).
impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(self))
    }
}

/// One line for a verdict: `alice@example.com (SHA256:...)`, `unknown key SHA256:...`, ...
pub fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Trusted { signer } => format!(
            "signed by {} ({})",
            zeroclaw_bundle_store::escape_text(&signer.principals),
            signer.fingerprint
        ),
        Verdict::UnknownKey { fingerprint, .. } => {
            format!("signed by an unknown key {fingerprint}")
        }
        Verdict::NotAccepted {
            fingerprint,
            principals,
            why,
        } => format!(
            "signed by {} ({fingerprint}), not accepted: {why}",
            zeroclaw_bundle_store::escape_text(principals)
        ),
        Verdict::Bad {
            fingerprint: Some(fp),
            why,
        } => format!("bad signature by {fp}: {why}"),
        Verdict::Bad {
            fingerprint: None,
            why,
        } => format!("bad signature: {why}"),
    }
}

/// What [`summary`] says of a snapshot without signatures.
pub const UNSIGNED: &str = "unsigned";

/// One line summing up a snapshot's signatures: `unsigned`, or each verdict joined by `; `.
pub fn summary(checked: &[Checked]) -> String {
    if checked.is_empty() {
        return UNSIGNED.into();
    }
    checked
        .iter()
        .map(|c| describe(&c.verdict))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What `sign` did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SignReport {
    /// The snapshot.
    pub snapshot: ObjectId,
    /// The signature's id (blake3 of its bytes, its name in the store).
    pub signature: ObjectId,
    /// The signing key's fingerprint.
    pub fingerprint: String,
    /// The key type.
    pub key_type: String,
    /// False when the store had this exact signature already.
    pub added: bool,
}

/// A key opened ahead of the work it signs (so a wrong passphrase or a missing key stops
/// `export --sign` before it captures anything): a private key, or a public key whose signing
/// is handed to ssh-keygen ([`ssh_keygen`]).
pub struct OpenedKey {
    key: Opened,
    path: PathBuf,
}

enum Opened {
    /// A private key file, opened here.
    Private(Box<ssh_key::PrivateKey>),
    /// A public key: ssh-keygen signs with its private half, read from `file` (the key's own
    /// file, or `None` for a key given as text).
    Public {
        key: ssh_key::PublicKey,
        file: Option<PathBuf>,
    },
}

impl std::fmt::Debug for OpenedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key: its file and fingerprint only.
        let data = match &self.key {
            Opened::Private(key) => key.public_key().key_data().clone(),
            Opened::Public { key, .. } => key.key_data().clone(),
        };
        write!(
            f,
            "OpenedKey({}, {})",
            self.path.display(),
            fingerprint(&data)
        )
    }
}

impl OpenedKey {
    /// Opens the key `choice` names: a public key is read (its signing goes to ssh-keygen),
    /// a private key is opened (see [`open_key`]).
    pub fn open(choice: &KeyChoice) -> Result<OpenedKey, SignError> {
        let key = match key::public_key_of(choice)? {
            Some(key) => Opened::Public {
                key,
                file: choice.literal.is_none().then(|| choice.path.clone()),
            },
            None => Opened::Private(Box::new(open_key(choice)?)),
        };
        Ok(OpenedKey {
            key,
            path: choice.path.clone(),
        })
    }
}

/// What to sign with.
#[derive(Debug)]
pub enum SignWith {
    /// A key opened already.
    Opened(Box<OpenedKey>),
    /// A signature made elsewhere (`ssh-keygen -Y sign`), read from this file (`-`: stdin).
    Signature(PathBuf),
}

/// The `sign` verb: signs snapshot `snapshot_id` of `store` with a key, or adds a signature
/// made elsewhere after checking that it verifies over this snapshot in [`NAMESPACE`] (by any
/// key: trust is decided when the snapshot is used). Signing twice with one key adds nothing
/// new for deterministic key types (ed25519, RSA): the same bytes are the same signature.
pub fn sign(
    store: &Store,
    snapshot_id: &ObjectId,
    with: &SignWith,
) -> Result<SignReport, SignError> {
    // The snapshot must exist here: a signature of a missing snapshot would be invisible.
    store.objects().read_snapshot(snapshot_id)?;
    let (sig, bytes) = match with {
        SignWith::Opened(key) => sign_with_key(key, snapshot_id)?,
        SignWith::Signature(path) => {
            let bad = |why: String| SignError::BadExternal {
                path: path.clone(),
                snapshot: *snapshot_id,
                why,
            };
            let raw = read_limited(path)?;
            let (sig, bytes) = canonical(&raw).map_err(bad)?;
            if let Verdict::Bad { why, .. } = judge(snapshot_id, &sig, None, now_secs()) {
                return Err(bad(format!(
                    "{why} (make one with `echo {} | ssh-keygen -Y sign -n {NAMESPACE} -f KEY`)",
                    snapshot_id.to_hex()
                )));
            }
            (sig, bytes)
        }
    };
    let (signature, added) = store.catalog().add_signature(snapshot_id, &bytes)?;
    Ok(SignReport {
        snapshot: *snapshot_id,
        signature,
        fingerprint: fingerprint(sig.public_key()),
        key_type: sig.public_key().algorithm().to_string(),
        added,
    })
}

fn sign_with_key(opened: &OpenedKey, id: &ObjectId) -> Result<(SshSig, Vec<u8>), SignError> {
    let key = match &opened.key {
        Opened::Private(key) => key,
        Opened::Public { key, file } => {
            return ssh_keygen::sign(key, file.as_deref(), &opened.path, id)
        }
    };
    let key_err = |why: String| SignError::Key {
        path: opened.path.clone(),
        why,
    };
    let sig = match key.key_data() {
        ssh_key::private::KeypairData::Rsa(rsa) => rsa_sign(rsa, id),
        _ => key.sign(NAMESPACE, HashAlg::Sha512, &message(id)),
    }
    .map_err(|e| key_err(format!("could not sign: {e}")))?;
    let pem = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| key_err(format!("could not encode the signature: {e}")))?;
    Ok((sig, pem.into_bytes()))
}

/// The sshsig of snapshot `id` by RSA key `key` (rsa-sha2-512, what `ssh-keygen -Y sign`
/// makes), through the `rsa` crate: ssh-key 0.6.7's own RSA signing builds the private key
/// from the primes `[p, p]`, which `rsa` refuses, so it always fails. The key is checked
/// (`from_components` validates it) and zeroized when dropped.
fn rsa_sign(key: &ssh_key::private::RsaKeypair, id: &ObjectId) -> ssh_key::Result<SshSig> {
    use rsa::signature::{SignatureEncoding as _, Signer as _};
    let big = |m: &ssh_key::Mpint| rsa::BigUint::try_from(m);
    let private = rsa::RsaPrivateKey::from_components(
        big(&key.public.n)?,
        big(&key.public.e)?,
        big(&key.private.d)?,
        vec![big(&key.private.p)?, big(&key.private.q)?],
    )?;
    let data = SshSig::signed_data(NAMESPACE, HashAlg::Sha512, &message(id))?;
    let signed = rsa::pkcs1v15::SigningKey::<sha2::Sha512>::new(private)
        .try_sign(&data)
        .map_err(|_| ssh_key::Error::Crypto)?;
    let signature = ssh_key::Signature::new(
        ssh_key::Algorithm::Rsa {
            hash: Some(HashAlg::Sha512),
        },
        signed.to_vec(),
    )?;
    SshSig::new(
        ssh_key::public::KeyData::Rsa(key.public.clone()),
        NAMESPACE,
        HashAlg::Sha512,
        signature,
    )
}

/// Reads a signature file (a regular file: see [`crate::sys::read_small_file`]; stdin for
/// `-`), at most the store's signature size.
fn read_limited(path: &Path) -> Result<Vec<u8>, SignError> {
    use std::io::Read;
    let limit = zeroclaw_bundle_store::limits::MAX_SIGNATURE_BYTES as u64;
    let read = if path == Path::new("-") {
        let mut out = Vec::new();
        std::io::stdin()
            .lock()
            .take(limit + 1)
            .read_to_end(&mut out)
            .map(|_| out)
    } else {
        crate::sys::read_small_file(path, limit, "a signature")
    };
    read.map_err(|e| SignError::Io {
        op: "read the signature",
        path: path.to_path_buf(),
        source: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_the_hex_id_and_a_newline() {
        let id = ObjectId::of(b"x");
        let m = message(&id);
        assert_eq!(m.len(), 65);
        assert_eq!(&m[..64], id.to_hex().as_bytes());
        assert_eq!(m[64], b'\n');
        assert!(NAMESPACE.contains('@') && NAMESPACE != "git" && NAMESPACE != "file");
    }

    fn key() -> ssh_key::PrivateKey {
        // A fixed ed25519 seed: deterministic, no RNG in tests.
        let kp = ssh_key::private::Ed25519Keypair::from_seed(&[7u8; 32]);
        ssh_key::PrivateKey::new(ssh_key::private::KeypairData::Ed25519(kp), "t").unwrap()
    }

    #[test]
    fn verdicts() {
        let k = key();
        let id = ObjectId::of(b"snap");
        let other = ObjectId::of(b"other");
        let good = k
            .sign(NAMESPACE, HashAlg::Sha512, &message(&id))
            .unwrap()
            .to_pem(LineEnding::LF)
            .unwrap()
            .into_bytes();
        let git = k
            .sign("git", HashAlg::Sha512, &message(&id))
            .unwrap()
            .to_pem(LineEnding::LF)
            .unwrap()
            .into_bytes();
        let line = format!(
            "alice@example.com {}\n",
            k.public_key().to_openssh().unwrap()
        );
        let allowed = AllowedSigners::parse(Path::new("a"), &line).unwrap();
        let now = now_secs();
        assert!(matches!(
            check_one(&id, &good, Some(&allowed), now).verdict,
            Verdict::Trusted { .. }
        ));
        assert!(matches!(
            check_one(&id, &good, None, now).verdict,
            Verdict::UnknownKey { .. }
        ));
        assert!(matches!(
            check_one(&other, &good, Some(&allowed), now).verdict,
            Verdict::Bad { .. }
        ));
        let bare = k
            .sign(NAMESPACE, HashAlg::Sha512, id.to_hex().as_bytes())
            .unwrap()
            .to_pem(LineEnding::LF)
            .unwrap()
            .into_bytes();
        let v = check_one(&id, &bare, Some(&allowed), now).verdict;
        assert!(matches!(&v, Verdict::Bad { why, .. } if why.contains("without the newline")));
        let v = check_one(&id, &git, Some(&allowed), now).verdict;
        assert!(describe(&v).contains("namespace"), "{v:?}");
        assert!(require_signed_blobs(&id, &[], &allowed)
            .unwrap_err()
            .to_string()
            .contains("unsigned"));
        assert_eq!(
            require_signed_blobs(&id, &[git, good], &allowed)
                .unwrap()
                .len(),
            1
        );
        // The canonical form is stable: CRLF input is the same signature.
        let crlf = String::from_utf8(
            k.sign(NAMESPACE, HashAlg::Sha512, &message(&id))
                .unwrap()
                .to_pem(LineEnding::CRLF)
                .unwrap()
                .into_bytes(),
        )
        .unwrap();
        let (_, canon) = canonical(crlf.as_bytes()).unwrap();
        let (_, canon2) = canonical(&canon).unwrap();
        assert_eq!(canon, canon2);
        assert!(!canon.contains(&b'\r'));
    }
}
