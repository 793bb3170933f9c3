//! The private key a signature is made with: which file (`--key`, else the SSH key git signs
//! with, else `~/.ssh/id_ed25519`), and opening it, asking for its passphrase on the terminal
//! when it is protected. The key's secret bytes never leave this module's return value: no
//! message, report or file ever holds them (ssh-key zeroizes them on drop).
//!
//! ssh-agent is not used: the key must be readable as a file (see `crate::docs::signatures`).

use std::path::{Path, PathBuf};
use std::process::Command;

use ssh_key::PrivateKey;

use super::ecdsa_width::{self, Decrypted};
use super::SignError;

/// Where the default key comes from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyChoice {
    /// The private key file.
    pub path: PathBuf,
    /// Why this one (`--key`, `git config user.signingkey`, `~/.ssh/id_ed25519`).
    pub from: String,
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
/// (`git config gpg.format` is `ssh` and `user.signingkey` names a key file; a `.pub` path
/// means the private key beside it), else `~/.ssh/id_ed25519`.
pub fn choose_key(explicit: Option<&Path>) -> Result<KeyChoice, SignError> {
    if let Some(p) = explicit {
        return Ok(KeyChoice {
            path: p.to_path_buf(),
            from: "--key".into(),
        });
    }
    if git_config("gpg.format").as_deref() == Some("ssh") {
        if let Some(v) = git_config("user.signingkey") {
            let literal =
                v.starts_with("key::") || v.starts_with("ssh-") || v.starts_with("ecdsa-");
            if literal {
                return Err(SignError::Key {
                    path: PathBuf::from("git config user.signingkey"),
                    why: "it holds a public key, not a key file; git signs with it through \
                          ssh-agent, which zeroclaw-bundle does not use: pass --key FILE (the \
                          private key file)"
                        .into(),
                });
            }
            let p = expand_home(&v);
            let private = match p.to_str().and_then(|s| s.strip_suffix(".pub")) {
                Some(stem) => PathBuf::from(stem),
                None => p,
            };
            return Ok(KeyChoice {
                path: private,
                from: "git config user.signingkey".into(),
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
    if text.starts_with(b"ssh-") || text.starts_with(b"ecdsa-") {
        return Err(key_err(
            "is a public key; signing needs the private key file (the same path without .pub)"
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
