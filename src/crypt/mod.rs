//! Encryption of packs and remotes, in the age format (`age-encryption.org/v1`, through the
//! `age` crate: no cryptography is written here). The only module that names `age`.
//!
//! - **Recipients** ([`Recipients::parse`]): an age X25519 recipient (`age1...`), an SSH public
//!   key (`ssh-ed25519 ...`, `ssh-rsa ...`), or a file of them, one a line (`~/.ssh/id_ed25519.pub`,
//!   an age recipients file; `#` comments and blank lines are skipped). A string that is none
//!   of these is named in the error.
//! - **Identities** ([`Identities::load`]): an age identity file (`AGE-SECRET-KEY-1...` lines,
//!   as `age-keygen` writes) or an OpenSSH private key (ed25519 or RSA). Without `--identity`
//!   the key `sign` would use is tried (`sign::choose_key`: git's signing key, else
//!   `~/.ssh/id_ed25519`). A passphrase-protected key asks for its passphrase on the terminal,
//!   as `sign` does, and is refused with a message when there is none.
//! - **Files** ([`encrypt_to`], [`decrypt_file`], [`seal`], [`open`]): a standard age file, so
//!   `age -d -i KEY` opens anything written here. age authenticates its payload in 64 KiB
//!   chunks (STREAM): a flipped byte, a cut or a swapped chunk fails decryption, and every
//!   failure here names the object it was reading.
//! - **Remote keys** ([`DataKeys`]): the data keys of an encrypted remote (age X25519
//!   identities, one per generation), and the name key derived from the first, which turns a
//!   plaintext object name into a keyed one (`blake3::keyed_hash`).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use age::secrecy::{ExposeSecret as _, SecretString};

/// The first bytes of every age file (what tells an encrypted pack from a plain one).
pub const MAGIC: &[u8] = b"age-encryption.org/v1";

/// What went wrong encrypting or decrypting (each names the recipient, the key file or the
/// object).
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    /// A recipient string that is no recipient.
    #[error("recipient {given:?}: {why}")]
    Recipient {
        /// The string given (a public key is no secret).
        given: String,
        /// What is wrong.
        why: String,
    },
    /// An identity file that cannot be used.
    #[error("identity {path}: {why}")]
    Identity {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// None of the identities opens the object.
    #[error(
        "{what} is encrypted, and not to {tried}: no identity given opens it (pass \
         --identity FILE with a key it was encrypted to)"
    )]
    WrongIdentity {
        /// The object.
        what: String,
        /// The identity files tried.
        tried: String,
    },
    /// The object fails authentication: changed, cut short or not an age file.
    #[error("{what}: authentication failed, refusing it ({why}); it was changed or cut short")]
    Tampered {
        /// The object.
        what: String,
        /// age's words.
        why: String,
    },
    /// A local file operation.
    #[error("could not {op} {path}")]
    Io {
        /// The verb.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// The recipients something is encrypted to, with the strings they were read from.
pub struct Recipients {
    keys: Vec<Box<dyn age::Recipient + Send + Sync>>,
    texts: Vec<String>,
}

impl std::fmt::Debug for Recipients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.texts).finish()
    }
}

/// One recipient from its text form.
fn parse_one(text: &str) -> Result<Box<dyn age::Recipient + Send + Sync>, String> {
    if text.starts_with("age1") {
        return age::x25519::Recipient::from_str(text)
            .map(|r| Box::new(r) as _)
            .map_err(|e| format!("is not an age X25519 recipient ({e})"));
    }
    if text.starts_with("ssh-") {
        use age::ssh::ParseRecipientKeyError as P;
        return age::ssh::Recipient::from_str(text)
            .map(|r| Box::new(r) as _)
            .map_err(|e| match e {
                P::Ignore | P::Unsupported(_) => {
                    "is an SSH key of a type age cannot encrypt to (ssh-ed25519 and ssh-rsa can)"
                        .to_string()
                }
                P::RsaModulusTooLarge => "is an ssh-rsa key larger than 8192 bits".into(),
                P::RsaModulusTooSmall => "is an ssh-rsa key smaller than 2048 bits".into(),
                P::Invalid(why) => format!("is not a valid SSH public key ({why})"),
                _ => "is not an SSH public key age can use".into(),
            });
    }
    Err(
        "is neither an age recipient (age1...) nor an SSH public key (ssh-ed25519, ssh-rsa), \
         nor a file of them"
            .into(),
    )
}

impl Recipients {
    /// Reads each of `given`: a recipient, or an existing file of them, one a line.
    pub fn parse(given: &[String]) -> Result<Recipients, CryptError> {
        let mut keys = Vec::new();
        let mut texts = Vec::new();
        for g in given {
            let g = g.trim();
            let path = Path::new(g);
            if !g.starts_with("age1") && !g.starts_with("ssh-") && path.is_file() {
                let bytes = crate::sys::read_small_file(path, 1 << 20, "a recipients file")
                    .map_err(|source| CryptError::Io {
                        op: "read recipients file",
                        path: path.to_path_buf(),
                        source,
                    })?;
                let text = String::from_utf8_lossy(&bytes);
                let before = keys.len();
                for (n, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let key = parse_one(line).map_err(|why| CryptError::Recipient {
                        given: format!("{}:{}", path.display(), n + 1),
                        why,
                    })?;
                    keys.push(key);
                    texts.push(line.to_string());
                }
                if keys.len() == before {
                    return Err(CryptError::Recipient {
                        given: g.to_string(),
                        why: "is a file with no recipient in it".into(),
                    });
                }
                continue;
            }
            let key = parse_one(g).map_err(|why| CryptError::Recipient {
                given: g.to_string(),
                why,
            })?;
            keys.push(key);
            texts.push(g.to_string());
        }
        if keys.is_empty() {
            return Err(CryptError::Recipient {
                given: String::new(),
                why: "no recipient given".into(),
            });
        }
        Ok(Recipients { keys, texts })
    }

    /// The recipients as given, one string each (what a remote's key file records).
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    fn encryptor(&self) -> Result<age::Encryptor, CryptError> {
        age::Encryptor::with_recipients(self.keys.iter().map(|k| k.as_ref() as &dyn age::Recipient))
            .map_err(|e| CryptError::Recipient {
                given: self.texts.join(", "),
                why: format!("cannot encrypt to these together ({e})"),
            })
    }
}

/// The identities that open encrypted packs and remotes, with the files they came from.
pub struct Identities {
    keys: Vec<Box<dyn age::Identity + Send + Sync>>,
    from: Vec<PathBuf>,
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.from).finish()
    }
}

/// The largest identity file read.
const IDENTITY_CAP: u64 = 1 << 20;

impl Identities {
    /// Opens the identity file `path`, or the key `sign` would use when `None`.
    pub fn load(path: Option<&Path>) -> Result<Identities, CryptError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => {
                let choice = crate::sign::choose_key(None).map_err(|e| CryptError::Identity {
                    path: PathBuf::from("--identity"),
                    why: format!("none given, and no default key: {e}"),
                })?;
                // A public key names its private half beside it (`sign` hands those to
                // ssh-keygen; decryption needs the private key itself).
                match choice.path.to_str().and_then(|p| p.strip_suffix(".pub")) {
                    Some(private) if choice.literal.is_none() => PathBuf::from(private),
                    _ => choice.path,
                }
            }
        };
        let fail = |why: String| CryptError::Identity {
            path: path.clone(),
            why,
        };
        let text = zeroize::Zeroizing::new(
            crate::sys::read_small_file(&path, IDENTITY_CAP, "an identity file").map_err(|e| {
                fail(match e.kind() {
                    io::ErrorKind::NotFound => {
                        "no such file; pass --identity FILE (an age identity file or an SSH \
                         private key)"
                            .into()
                    }
                    _ => format!("cannot be read: {e}"),
                })
            })?,
        );
        if crate::sign::key::looks_public(&text) {
            return Err(fail(
                "is a public key; decrypting needs the private key (the file without .pub)".into(),
            ));
        }
        let keys = if text.starts_with(b"-----BEGIN") {
            vec![ssh_identity(&text, &path)?]
        } else {
            age::IdentityFile::from_buffer(&text[..])
                .map_err(|e| fail(format!("is not an age identity file ({e})")))?
                .into_identities()
                .map_err(|e| fail(format!("cannot be used ({e})")))?
        };
        if keys.is_empty() {
            return Err(fail("holds no identity".into()));
        }
        Ok(Identities {
            keys,
            from: vec![path],
        })
    }

    /// The identities of a remote's data keys (what its objects are encrypted to).
    fn of_data_keys(keys: &DataKeys) -> Identities {
        Identities {
            keys: keys
                .generations
                .iter()
                .map(|k| Box::new(k.clone()) as _)
                .collect(),
            from: vec![PathBuf::from("the remote's data key")],
        }
    }

    fn tried(&self) -> String {
        let names: Vec<String> = self.from.iter().map(|p| p.display().to_string()).collect();
        names.join(", ")
    }

    /// The plaintext of the age stream `input` (`what` names it): refused at once when no
    /// identity opens it; a changed or cut chunk fails the read that reaches it.
    pub fn decrypt_stream<'a, R: Read + 'a>(
        &self,
        input: R,
        what: &str,
    ) -> Result<Box<dyn Read + 'a>, CryptError> {
        Ok(Box::new(Authenticated {
            inner: self.open(input, what)?,
            what: what.to_string(),
        }))
    }

    /// A decryptor of `input`, refusing it when no identity opens it.
    fn open<R: Read>(
        &self,
        input: R,
        what: &str,
    ) -> Result<age::stream::StreamReader<R>, CryptError> {
        let decryptor = age::Decryptor::new(input).map_err(|e| decrypt_error(e, what, self))?;
        decryptor
            .decrypt(self.keys.iter().map(|k| k.as_ref() as &dyn age::Identity))
            .map_err(|e| decrypt_error(e, what, self))
    }
}

/// A decrypting reader whose failures say what was refused and why.
struct Authenticated<R> {
    inner: age::stream::StreamReader<R>,
    what: String,
}

impl<R: Read> Read for Authenticated<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| match e.kind() {
            io::ErrorKind::Interrupted => e,
            _ => io::Error::new(
                io::ErrorKind::InvalidData,
                CryptError::Tampered {
                    what: self.what.clone(),
                    why: e.to_string(),
                }
                .to_string(),
            ),
        })
    }
}

fn decrypt_error(e: age::DecryptError, what: &str, ids: &Identities) -> CryptError {
    use age::DecryptError as D;
    match e {
        D::NoMatchingKeys => CryptError::WrongIdentity {
            what: what.to_string(),
            tried: ids.tried(),
        },
        D::KeyDecryptionFailed => CryptError::Identity {
            path: ids.from.first().cloned().unwrap_or_default(),
            why: "the passphrase is wrong".into(),
        },
        other => CryptError::Tampered {
            what: what.to_string(),
            why: other.to_string(),
        },
    }
}

/// An OpenSSH private key as an age identity, asking for its passphrase when it has one.
fn ssh_identity(
    text: &[u8],
    path: &Path,
) -> Result<Box<dyn age::Identity + Send + Sync>, CryptError> {
    let fail = |why: String| CryptError::Identity {
        path: path.to_path_buf(),
        why,
    };
    let parsed = age::ssh::Identity::from_buffer(text, Some(path.display().to_string()))
        .map_err(|e| fail(format!("is not an SSH private key age can use ({e})")))?;
    match parsed {
        age::ssh::Identity::Unencrypted(_) => Ok(Box::new(parsed)),
        age::ssh::Identity::Unsupported(_) => Err(fail(
            "is an SSH key of a type age cannot decrypt with (ssh-ed25519 and ssh-rsa can)".into(),
        )),
        age::ssh::Identity::Encrypted(key) => {
            let prompt = format!("Enter passphrase for {}: ", path.display());
            let asked = crate::sys::read_hidden_line(&prompt).map_err(|e| {
                fail(match e.kind() {
                    io::ErrorKind::Interrupted => "interrupted at the passphrase prompt".into(),
                    io::ErrorKind::UnexpectedEof => "no passphrase given".into(),
                    _ => format!("could not ask for its passphrase: {e}"),
                })
            })?;
            let Some(pass) = asked else {
                return Err(fail(
                    "is protected by a passphrase and there is no terminal to ask for it on \
                     (stdin is not a terminal); run the command on a terminal"
                        .into(),
                ));
            };
            let opened = key
                .decrypt(SecretString::from(pass))
                .map_err(|_| fail("the passphrase is wrong".into()))?;
            Ok(Box::new(age::ssh::Identity::Unencrypted(opened)))
        }
    }
}

/// Whether the file at `path` is an age file (starts with `age-encryption.org/v1`).
pub fn is_encrypted_file(path: &Path) -> Result<bool, CryptError> {
    let mut head = [0u8; MAGIC.len()];
    let mut file = File::open(path).map_err(|source| CryptError::Io {
        op: "open",
        path: path.to_path_buf(),
        source,
    })?;
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(CryptError::Io {
                    op: "read",
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(got == head.len() && head == MAGIC)
}

/// Runs `write` over an age encryption of `out` to `recipients` and finishes the age file
/// (its last chunk), so what `write` wrote is what `age -d` gives back.
pub fn encrypt_to<T, E>(
    recipients: &Recipients,
    out: &mut dyn Write,
    failed: impl Fn(io::Error) -> E,
    write: impl FnOnce(&mut dyn Write) -> Result<T, E>,
) -> Result<T, E> {
    let encryptor = recipients
        .encryptor()
        .map_err(|e| failed(io::Error::new(io::ErrorKind::InvalidInput, e.to_string())))?;
    let mut sealed = encryptor.wrap_output(out).map_err(&failed)?;
    let done = write(&mut sealed)?;
    sealed.finish().map_err(failed)?;
    Ok(done)
}

/// Decrypts the age file at `path` with `identities` into `out`, whole: a failure at any
/// chunk fails it (what `out` received must then be thrown away). Returns the plain bytes
/// written.
pub fn decrypt_file(
    path: &Path,
    identities: &Identities,
    out: &mut dyn Write,
) -> Result<u64, CryptError> {
    let what = path.display().to_string();
    let file = File::open(path).map_err(|source| CryptError::Io {
        op: "open",
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = identities.open(BufReader::new(file), &what)?;
    copy_plain(&mut reader, out, &what)
}

fn copy_plain(reader: &mut dyn Read, out: &mut dyn Write, what: &str) -> Result<u64, CryptError> {
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(CryptError::Tampered {
                    what: what.to_string(),
                    why: e.to_string(),
                })
            }
        };
        out.write_all(&buf[..n]).map_err(|source| CryptError::Io {
            op: "write the decrypted copy of",
            path: PathBuf::from(what),
            source,
        })?;
        total += n as u64;
    }
}

/// A decrypted copy of an encrypted pack, in a private temporary directory (`0700`, the file
/// `0600`) removed when this is dropped: what the verbs that read a pack file read instead
/// of the age file.
#[derive(Debug)]
pub struct PlainPack {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl PlainPack {
    /// The decrypted pack.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Decrypts the age file at `sealed` whole (every chunk authenticated) into a private
    /// temporary copy; a wrong identity or a changed byte fails it and leaves nothing.
    pub fn decrypt(sealed: &Path, identities: &Identities) -> Result<PlainPack, CryptError> {
        let io_err = |op, path: &Path| {
            let path = path.to_path_buf();
            move |source| CryptError::Io { op, path, source }
        };
        let tmp = std::env::temp_dir();
        let dir = tempfile::Builder::new()
            .prefix("zeroclaw-bundle-decrypted-")
            .tempdir_in(&tmp)
            .map_err(io_err("create a private directory in", &tmp))?;
        let name = sealed
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.strip_suffix(".age").unwrap_or(n))
            .unwrap_or("pack");
        let path = dir.path().join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err("create", &path))?;
        decrypt_file(sealed, identities, &mut file)?;
        file.sync_all().map_err(io_err("write", &path))?;
        Ok(PlainPack { path, _dir: dir })
    }
}

/// `bytes` as an age file encrypted to `recipients`.
pub fn seal(recipients: &Recipients, bytes: &[u8]) -> Result<Vec<u8>, CryptError> {
    let mut out = Vec::with_capacity(bytes.len() + 256);
    encrypt_to(recipients, &mut out, |e| e, |w| w.write_all(bytes)).map_err(|e| {
        CryptError::Recipient {
            given: recipients.texts.join(", "),
            why: format!("cannot encrypt to these ({e})"),
        }
    })?;
    Ok(out)
}

/// The plain bytes of the age file `bytes`, `what` naming it in errors.
pub fn open(identities: &Identities, bytes: &[u8], what: &str) -> Result<Vec<u8>, CryptError> {
    let mut reader = identities.open(bytes, what)?;
    let mut out = Vec::with_capacity(bytes.len());
    copy_plain(&mut reader, &mut out, what)?;
    Ok(out)
}

/// The data keys of an encrypted remote: one age X25519 identity per generation, the last the
/// one new objects are encrypted to; every generation still opens what was written under it.
/// The name key is derived from the first generation and never changes, so an object keeps
/// its keyed name across generations.
#[derive(Clone)]
pub struct DataKeys {
    generations: Vec<age::x25519::Identity>,
    name_key: [u8; 32],
}

/// The first line of a remote's key file.
const KEYS_HEADER: &str = "zeroclaw-bundle remote keys 1";

impl DataKeys {
    /// A first generation, fresh.
    pub fn generate() -> DataKeys {
        DataKeys::from_generations(vec![age::x25519::Identity::generate()])
    }

    fn from_generations(generations: Vec<age::x25519::Identity>) -> DataKeys {
        let first = generations[0].to_string();
        let name_key = blake3::derive_key(
            "zeroclaw-bundle remote object names v1",
            first.expose_secret().as_bytes(),
        );
        DataKeys {
            generations,
            name_key,
        }
    }

    /// The same keys with one generation more: what is written from now on is encrypted to
    /// it alone.
    pub fn rotated(&self) -> DataKeys {
        let mut generations = self.generations.clone();
        generations.push(age::x25519::Identity::generate());
        DataKeys::from_generations(generations)
    }

    /// The key id: a digest of the first generation that reveals nothing of it, pinned in
    /// `remotes.toml` when the remote is added, so a key file replaced by someone who could
    /// write to the bucket (encrypting to the recipients needs only their public keys) is
    /// refused instead of trusted.
    pub fn id(&self) -> String {
        let first = self.generations[0].to_string();
        blake3::derive_key(
            "zeroclaw-bundle remote key id v1",
            first.expose_secret().as_bytes(),
        )
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// How many generations there are.
    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    /// The keyed name of the plaintext name `plain` (hex of a blake3 keyed hash): equal names
    /// give equal keyed names, and nothing about `plain` can be learned or confirmed without
    /// the name key.
    pub fn name(&self, plain: &str) -> String {
        blake3::keyed_hash(&self.name_key, plain.as_bytes())
            .to_hex()
            .to_string()
    }

    /// `bytes` encrypted under the newest generation.
    pub fn seal(&self, bytes: &[u8]) -> Result<Vec<u8>, CryptError> {
        let newest = self.generations[self.generations.len() - 1].to_public();
        let mut out = Vec::with_capacity(bytes.len() + 256);
        let encryptor = age::Encryptor::with_recipients(std::iter::once(&newest as _))
            .map_err(|e| io::Error::other(e.to_string()))
            .and_then(|e| {
                let mut w = e.wrap_output(&mut out)?;
                w.write_all(bytes)?;
                w.finish().map(|_| ())
            });
        encryptor.map_err(|source| CryptError::Io {
            op: "encrypt",
            path: PathBuf::from("an object in memory"),
            source,
        })?;
        Ok(out)
    }

    /// An age writer over `out`, encrypting under the newest generation (finish it).
    pub fn writer<W: Write>(&self, out: W) -> Result<age::stream::StreamWriter<W>, CryptError> {
        let newest = self.generations[self.generations.len() - 1].to_public();
        let fail = |source| CryptError::Io {
            op: "encrypt",
            path: PathBuf::from("an upload"),
            source,
        };
        age::Encryptor::with_recipients(std::iter::once(&newest as _))
            .map_err(|e| fail(io::Error::other(e.to_string())))?
            .wrap_output(out)
            .map_err(fail)
    }

    /// The plain bytes of `bytes`, encrypted under any generation; `what` names it.
    pub fn open(&self, bytes: &[u8], what: &str) -> Result<Vec<u8>, CryptError> {
        open(&Identities::of_data_keys(self), bytes, what)
    }

    /// A reader of the plain bytes of the age stream `input` (seekable when `input` is).
    pub fn reader<R: Read>(
        &self,
        input: R,
        what: &str,
    ) -> Result<age::stream::StreamReader<R>, CryptError> {
        Identities::of_data_keys(self).open(input, what)
    }

    /// The key file's contents: every generation, encrypted to `recipients` (whose texts it
    /// records, inside the encryption, for a later rewrap).
    pub fn wrap(&self, recipients: &Recipients) -> Result<Vec<u8>, CryptError> {
        let mut text = String::new();
        let _ = writeln!(text, "{KEYS_HEADER}");
        for r in recipients.texts() {
            let _ = writeln!(text, "recipient {r}");
        }
        for g in &self.generations {
            let _ = writeln!(text, "key {}", g.to_string().expose_secret());
        }
        let text = zeroize::Zeroizing::new(text);
        seal(recipients, text.as_bytes())
    }

    /// The keys (and the recipients recorded) in a key file, opened with `identities`.
    pub fn unwrap(
        identities: &Identities,
        bytes: &[u8],
        what: &str,
    ) -> Result<(DataKeys, Vec<String>), CryptError> {
        let plain = zeroize::Zeroizing::new(open(identities, bytes, what)?);
        let bad = |why: &str| CryptError::Tampered {
            what: what.to_string(),
            why: why.to_string(),
        };
        let text = std::str::from_utf8(&plain).map_err(|_| bad("not UTF-8 inside"))?;
        let mut lines = text.lines();
        if lines.next() != Some(KEYS_HEADER) {
            return Err(bad("not a key file of this tool"));
        }
        let mut recipients = Vec::new();
        let mut generations = Vec::new();
        for line in lines {
            if let Some(r) = line.strip_prefix("recipient ") {
                recipients.push(r.to_string());
            } else if let Some(k) = line.strip_prefix("key ") {
                generations.push(
                    age::x25519::Identity::from_str(k).map_err(|_| bad("a malformed data key"))?,
                );
            } else {
                return Err(bad("an unknown line inside"));
            }
        }
        if generations.is_empty() {
            return Err(bad("no data key inside"));
        }
        Ok((DataKeys::from_generations(generations), recipients))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x25519() -> (age::x25519::Identity, String) {
        let id = age::x25519::Identity::generate();
        let public = id.to_public().to_string();
        (id, public)
    }

    fn ids(id: age::x25519::Identity) -> Identities {
        Identities {
            keys: vec![Box::new(id)],
            from: vec![PathBuf::from("test")],
        }
    }

    #[test]
    fn a_bad_recipient_is_named() {
        let e = Recipients::parse(&["age1nope".into()]).unwrap_err();
        assert!(e.to_string().contains("\"age1nope\""), "{e}");
        let e = Recipients::parse(&["hunter2".into()]).unwrap_err();
        assert!(e.to_string().contains("\"hunter2\""), "{e}");
    }

    #[test]
    fn sealed_bytes_open_with_the_right_identity_only() {
        let (id, public) = x25519();
        let (other, _) = x25519();
        let r = Recipients::parse(&[public]).unwrap();
        let sealed = seal(&r, b"secret").unwrap();
        assert!(sealed.starts_with(MAGIC));
        assert_eq!(open(&ids(id), &sealed, "x").unwrap(), b"secret");
        let e = open(&ids(other), &sealed, "obj").unwrap_err();
        assert!(matches!(e, CryptError::WrongIdentity { .. }), "{e}");
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let keys = DataKeys::generate();
        let sealed = keys.seal(b"some plain bytes").unwrap();
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(
                keys.open(&bad, "obj").is_err(),
                "byte {i} flipped was accepted"
            );
        }
    }

    #[test]
    fn key_files_round_trip_and_rotation_keeps_old_generations_and_names() {
        let (id, public) = x25519();
        let r = Recipients::parse(std::slice::from_ref(&public)).unwrap();
        let keys = DataKeys::generate();
        let old = keys.seal(b"old").unwrap();
        let rotated = keys.rotated();
        assert_eq!(rotated.name("a"), keys.name("a"));
        assert_ne!(keys.name("a"), keys.name("b"));
        let wrapped = rotated.wrap(&r).unwrap();
        let (back, recorded) = DataKeys::unwrap(&ids(id), &wrapped, "keys").unwrap();
        assert_eq!(recorded, vec![public]);
        assert_eq!(back.generations(), 2);
        assert_eq!(back.open(&old, "old").unwrap(), b"old");
        // What the newest generation seals, the first alone cannot open.
        let new = back.seal(b"new").unwrap();
        assert!(keys.open(&new, "new").is_err());
    }
}
