//! The key a signature is made with: which one (`--key`, else the SSH key git signs with,
//! else `~/.ssh/id_ed25519`), and opening it. A private key file is opened here, asking for
//! its passphrase on the terminal when it is protected; its secret bytes never leave this
//! module's return value: no message, report or file ever holds them (ssh-key zeroizes them
//! on drop). A public key (a `.pub` file, or git's `user.signingkey` holding the key itself)
//! means the private half is held elsewhere (ssh-agent, a security key, a password manager's
//! agent): the signing is handed to `ssh-keygen -Y sign`, as git does ([`super::ssh_keygen`];
//! see `crate::docs::signatures`).

use std::path::{Path, PathBuf};
use std::process::Command;

use ssh_key::PrivateKey;

use super::ecdsa_width::{self, Decrypted};
use super::SignError;

/// Which key signs, and where that choice came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyChoice {
    /// The key file: a private key, or a public key whose private half ssh-keygen finds (in
    /// ssh-agent, else in the file beside it without `.pub`).
    pub path: PathBuf,
    /// Why this one (`--key`, `git config user.signingkey`, `~/.ssh/id_ed25519`).
    pub from: String,
    /// A public key given as text (git's `user.signingkey = key::ssh-ed25519 AAAA...`) rather
    /// than in a file; `path` then only names where it came from.
    pub literal: Option<String>,
}

/// Whether `text` is an OpenSSH public key line (`ssh-ed25519 AAAA...`, `ecdsa-sha2-...`,
/// `sk-ssh-ed25519@openssh.com ...`), not a private key.
pub fn looks_public(text: &[u8]) -> bool {
    [&b"ssh-"[..], b"ecdsa-", b"sk-ssh-", b"sk-ecdsa-"]
        .iter()
        .any(|p| text.starts_with(p))
}

/// The public key in file `choice.path` when it holds one (`None`: it holds something else,
/// a private key presumably), or in `choice.literal`. A file that cannot be read is left to
/// [`open_key`], which says why.
pub fn public_key_of(choice: &KeyChoice) -> Result<Option<ssh_key::PublicKey>, SignError> {
    let text = match &choice.literal {
        Some(text) => text.clone().into_bytes(),
        None => match crate::sys::read_small_file(&choice.path, KEY_CAP, "an SSH key") {
            Ok(bytes) if looks_public(&bytes) => bytes,
            _ => return Ok(None),
        },
    };
    let text = String::from_utf8_lossy(&text);
    ssh_key::PublicKey::from_openssh(text.trim())
        .map(Some)
        .map_err(|e| SignError::Key {
            path: choice.path.clone(),
            why: format!("is not an OpenSSH public key ({e})"),
        })
}

fn git_config(key: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["config", "--get", key])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The key to sign with: `explicit` when given, else the SSH key git would sign commits with
/// (`git config gpg.format` is `ssh` and `user.signingkey` names a key file, or holds a public
/// key as `key::ssh-ed25519 AAAA...` or `ssh-ed25519 AAAA...`), else `~/.ssh/id_ed25519`.
pub fn choose_key(explicit: Option<&Path>) -> Result<KeyChoice, SignError> {
    if let Some(p) = explicit {
        return Ok(KeyChoice {
            path: p.to_path_buf(),
            from: "--key".into(),
            literal: None,
        });
    }
    if git_config("gpg.format").as_deref() == Some("ssh") {
        if let Some(v) = git_config("user.signingkey") {
            let from = "git config user.signingkey".to_string();
            let text = v.strip_prefix("key::").unwrap_or(&v);
            if looks_public(text.as_bytes()) {
                return Ok(KeyChoice {
                    path: PathBuf::from(&from),
                    from,
                    literal: Some(text.to_string()),
                });
            }
            return Ok(KeyChoice {
                path: expand_home(&v),
                from,
                literal: None,
            });
        }
    }
    let home = std::env::var_os("HOME").ok_or_else(|| SignError::Key {
        path: PathBuf::from("~/.ssh/id_ed25519"),
        why: "HOME is not set; pass --key FILE".into(),
    })?;
    Ok(KeyChoice {
        path: Path::new(&home).join(".ssh/id_ed25519"),
        from: "the default ~/.ssh/id_ed25519".into(),
        literal: None,
    })
}

/// The largest key file read (an OpenSSH RSA-16384 private key is about 13 KiB).
const KEY_CAP: u64 = 1 << 20;

/// Opens the private key `choice` names, asking for its passphrase on the terminal when it
/// has one (never echoed); without a terminal a protected key is refused with a message.
pub fn open_key(choice: &KeyChoice) -> Result<PrivateKey, SignError> {
    let path = &choice.path;
    let key_err = |why: String| SignError::Key {
        path: path.clone(),
        why,
    };
    // The key file's bytes and the passphrase are wiped from memory when dropped.
    let text = zeroize::Zeroizing::new(
        crate::sys::read_small_file(path, KEY_CAP, "an SSH private key").map_err(|e| {
            key_err(match e.kind() {
                std::io::ErrorKind::NotFound => format!(
                    "no such key file (chosen from {}); pass --key FILE, or create one with \
                 `ssh-keygen -t ed25519`",
                    choice.from
                ),
                _ => format!("cannot be read: {e}"),
            })
        })?,
    );
    if looks_public(&text) {
        return Err(key_err(
            "is a public key: its signing is handed to ssh-keygen (`sign` does that), not \
             opened here"
                .into(),
        ));
    }
    // ssh-key's messages never quote the key's bytes.
    let key = match PrivateKey::from_openssh(&text) {
        Ok(key) => key,
        Err(e) => ecdsa_width::read_plain(&text).ok_or_else(|| {
            key_err(
                if text.starts_with(b"-----BEGIN OPENSSH PRIVATE KEY-----") {
                    format!(
                        "cannot be read ({e}); if ssh-keygen can use it, sign with `ssh-keygen \
                         -Y sign -n {} -f FILE` and add that with `sign --signature`",
                        super::NAMESPACE
                    )
                } else {
                    format!(
                        "is not an OpenSSH private key ({e}); `ssh-keygen -p -f FILE` converts a \
                         PEM key"
                    )
                },
            )
        })?,
    };
    if !key.is_encrypted() {
        return Ok(key);
    }
    let prompt = format!("Enter passphrase for {}: ", path.display());
    let asked = crate::sys::read_hidden_line(&prompt).map_err(|e| {
        key_err(match e.kind() {
            std::io::ErrorKind::Interrupted => "interrupted at the passphrase prompt".into(),
            std::io::ErrorKind::UnexpectedEof => "no passphrase given".into(),
            _ => format!("could not ask for its passphrase: {e}"),
        })
    })?;
    let Some(pass) = asked else {
        return Err(key_err(
            "is protected by a passphrase and there is no terminal to ask for it on (stdin is \
             not a terminal); run the command on a terminal"
                .into(),
        ));
    };
    let pass = zeroize::Zeroizing::new(pass);
    // ECDSA keys are opened with their scalar at full width (see `ecdsa_width`).
    let opened = match ecdsa_width::decrypt(&text, &key, pass.as_bytes()) {
        Decrypted::Key(key) => Ok(*key),
        Decrypted::NotEcdsa => key
            .decrypt(pass.as_bytes())
            .map_err(|_| "the passphrase is wrong".to_string()),
        Decrypted::WrongPassphrase => Err("the passphrase is wrong".into()),
        Decrypted::Unreadable(why) => Err(format!("cannot be read once decrypted ({why})")),
    };
    drop(pass);
    opened.map_err(key_err)
}
