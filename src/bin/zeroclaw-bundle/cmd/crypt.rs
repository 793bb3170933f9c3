//! `--identity FILE` of the verbs that read a pack file (`unpack`, `mount`, `review`, `import`,
//! `diff`): an argument naming an encrypted pack (an age file, `FILE` or `FILE:PATH`) is
//! decrypted whole into a private temporary copy first (every chunk authenticated, so a wrong
//! identity or a changed byte stops the verb before it reads anything), and the verb reads
//! that copy. The identity is opened once, on the first encrypted pack, asking for a
//! passphrase on the terminal as `sign` does.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::Result;
use zeroclaw_bundle::{is_encrypted_file, Identities, PlainPack};

/// Decrypts the encrypted packs a command's arguments name, keeping each copy until dropped.
#[derive(Debug)]
pub struct Decrypting {
    identity: Option<PathBuf>,
    opened: Option<Identities>,
    copies: Vec<PlainPack>,
}

impl Decrypting {
    /// With `--identity FILE`, or the default key (`sign`'s) when `None`.
    pub fn new(identity: Option<&Path>) -> Decrypting {
        Decrypting {
            identity: identity.map(Path::to_path_buf),
            opened: None,
            copies: Vec::new(),
        }
    }

    /// `arg`, or, when it names an encrypted pack (`FILE` or `FILE:PATH`), the same argument
    /// naming its decrypted copy.
    pub fn arg(&mut self, arg: &OsStr) -> Result<OsString> {
        let whole = Path::new(arg);
        let (file, rest) = if whole.is_file() {
            (whole.to_path_buf(), None)
        } else {
            let bytes = arg.as_encoded_bytes();
            match bytes.iter().position(|&b| b == b':') {
                Some(at) => {
                    // SAFETY-free split: both halves are cut at an ASCII byte.
                    let (head, tail) = bytes.split_at(at);
                    let head = PathBuf::from(String::from_utf8_lossy(head).into_owned());
                    if !head.is_file() || head.as_os_str().as_encoded_bytes() != &bytes[..at] {
                        return Ok(arg.to_os_string());
                    }
                    (head, Some(String::from_utf8_lossy(tail).into_owned()))
                }
                None => return Ok(arg.to_os_string()),
            }
        };
        if !is_encrypted_file(&file)? {
            return Ok(arg.to_os_string());
        }
        let identities = match self.opened.take() {
            Some(ids) => ids,
            None => Identities::load(self.identity.as_deref())?,
        };
        let plain = PlainPack::decrypt(&file, &identities);
        self.opened = Some(identities);
        let plain = plain?;
        let mut out = plain.path().as_os_str().to_os_string();
        if let Some(rest) = rest {
            out.push(rest);
        }
        self.copies.push(plain);
        Ok(out)
    }

    /// [`Decrypting::arg`] of a `String` argument.
    pub fn arg_string(&mut self, arg: &str) -> Result<String> {
        Ok(self.arg(OsStr::new(arg))?.to_string_lossy().into_owned())
    }
}
