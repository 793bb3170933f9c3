//! The catalog's keys for what it caches per place on the host, owned here so no caller
//! spells one by hand: a [`SourceKey`] names the tree a capture reads (its stat cache), a
//! [`DestKey`] a destination a publish wrote (its destination record). Their encodings are
//! those the catalog has always used (`agent:<install>\0<alias>`, `dir:<path>`,
//! `diff:<path>`, `dest:<path>`), so caches written before these types still match.

use std::path::{Path, PathBuf};

/// The source a capture's stat cache belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceKey {
    /// An agent's bundle: the install root and the alias.
    Agent {
        /// The install root.
        install: PathBuf,
        /// The agent's alias.
        alias: String,
    },
    /// A directory captured into the store (`snapshot --dir`), by its source description.
    Dir(String),
    /// A directory hashed without writing objects (`diff` of a directory): a cache of its
    /// own, since its ids name no stored object.
    Diff(PathBuf),
}

impl SourceKey {
    /// The stored key bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            SourceKey::Agent { install, alias } => {
                format!("agent:{}\0{alias}", install.display()).into_bytes()
            }
            SourceKey::Dir(source) => format!("dir:{source}").into_bytes(),
            SourceKey::Diff(path) => format!("diff:{}", path.display()).into_bytes(),
        }
    }
}

/// A publish destination (resolved: canonical parent, last component as given).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DestKey(PathBuf);

impl DestKey {
    /// The key of destination `resolved`.
    pub fn new(resolved: &Path) -> DestKey {
        DestKey(resolved.to_path_buf())
    }

    /// The stored key bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        format!("dest:{}", self.0.display()).into_bytes()
    }

    /// The destination a stored key names, or `None` when the key cannot say it exactly (not
    /// a destination key, or a path that was not UTF-8: `encode` wrote it lossily).
    pub(crate) fn decode(key: &[u8]) -> Option<PathBuf> {
        let path = std::str::from_utf8(key.strip_prefix(b"dest:")?).ok()?;
        (!path.contains(char::REPLACEMENT_CHARACTER) && path.starts_with('/'))
            .then(|| PathBuf::from(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_the_ones_stored_before_the_types() {
        let agent = SourceKey::Agent {
            install: PathBuf::from("/home/me/.zeroclaw"),
            alias: "researcher".into(),
        };
        assert_eq!(agent.encode(), b"agent:/home/me/.zeroclaw\0researcher");
        assert_eq!(SourceKey::Dir("/srv/x".into()).encode(), b"dir:/srv/x");
        assert_eq!(SourceKey::Diff("/srv/x".into()).encode(), b"diff:/srv/x");
        assert_eq!(DestKey::new(Path::new("/out/b")).encode(), b"dest:/out/b");
        let back = DestKey::decode(b"dest:/out/b").unwrap();
        assert_eq!(back, Path::new("/out/b"));
        assert_eq!(DestKey::decode(b"dir:/out/b"), None);
        assert_eq!(
            DestKey::decode("dest:/out/\u{FFFD}".as_bytes()),
            None,
            "lossy"
        );
        assert_eq!(DestKey::decode(b"dest:relative"), None);
    }
}
