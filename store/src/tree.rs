//! Tree objects: the canonical, versioned encoding of one directory.
//!
//! A tree holds only portable metadata, so the same directory on two hosts has the same id
//! and a diff can skip equal subtrees. Encoding (all integers big-endian):
//!
//! ```text
//! "ZCBT" version:u8(=1) count:u32
//! count x { kind:u8 (1 file, 2 exec-file, 3 dir)  name_len:u16  name  size:u64  id:[u8;32] }
//! ```
//!
//! Entries are sorted by name bytes, strictly (no duplicates). Names are raw bytes (a
//! non-UTF-8 file name is kept exactly), never empty, never `.` or `..`, never containing
//! `/` or NUL. A file's size is its length; a directory's size is the total length of the
//! files beneath it. Every size, and the sum of a tree's sizes, is at most [`MAX_SIZE`]
//! (`i64::MAX`, the largest file Linux can hold), so no sum over a decoded tree overflows and
//! every size fits `off_t`. Decoding rejects anything else, including truncation and trailing
//! bytes. Whether a recorded size matches its blob or subtree is `verify`'s check.

use crate::error::DecodeError;
use crate::escape::escape_name;
use crate::id::ObjectId;

const MAGIC: &[u8; 4] = b"ZCBT";
const VERSION: u8 = 1;
const HEADER_LEN: usize = 4 + 1 + 4;
const FIXED_RECORD_LEN: usize = 1 + 2 + 8 + 32;

/// The largest size an entry, or a whole tree, may record: `i64::MAX` (Linux's `off_t` bound).
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// What an entry is. Only what travels: a file, an executable file, or a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file without the executable bit.
    File,
    /// A regular file with the executable bit (published as 0755).
    ExecFile,
    /// A directory (its id names a tree object).
    Dir,
}

impl EntryKind {
    fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::ExecFile => 2,
            EntryKind::Dir => 3,
        }
    }

    fn from_code(code: u8) -> Result<EntryKind, DecodeError> {
        match code {
            1 => Ok(EntryKind::File),
            2 => Ok(EntryKind::ExecFile),
            3 => Ok(EntryKind::Dir),
            other => Err(DecodeError::BadKind(other)),
        }
    }

    /// True for both file kinds.
    pub fn is_file(self) -> bool {
        !matches!(self, EntryKind::Dir)
    }

    /// The permission bits a published copy gets (umask aside).
    pub fn mode(self) -> u32 {
        match self {
            EntryKind::File => 0o644,
            EntryKind::ExecFile | EntryKind::Dir => 0o755,
        }
    }
}

/// One named entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// The raw name bytes (one path component).
    pub name: Vec<u8>,
    /// File, exec-file or dir.
    pub kind: EntryKind,
    /// File length, or total file bytes beneath a directory.
    pub size: u64,
    /// Blob id for files, tree id for directories.
    pub id: ObjectId,
}

impl TreeEntry {
    /// The name for display, through the one escaper ([`escape_name`]).
    pub fn display_name(&self) -> String {
        escape_name(&self.name)
    }
}

/// A decoded directory: entries in strictly increasing name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    entries: Vec<TreeEntry>,
}

/// Why a name cannot be a tree entry name, or `None` when it can.
pub fn invalid_name_reason(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty name")
    } else if name == b"." || name == b".." {
        Some("`.` and `..` are not entry names")
    } else if name.contains(&b'/') {
        Some("name contains '/'")
    } else if name.contains(&0) {
        Some("name contains NUL")
    } else if name.len() > usize::from(u16::MAX) {
        Some("name longer than 65535 bytes")
    } else {
        None
    }
}

impl Tree {
    /// Builds a tree from entries in any order. Fails on an invalid or duplicate name.
    pub fn from_entries(mut entries: Vec<TreeEntry>) -> Result<Tree, DecodeError> {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for (i, e) in entries.iter().enumerate() {
            if invalid_name_reason(&e.name).is_some() {
                return Err(DecodeError::BadName(escape_name(&e.name)));
            }
            if i > 0 && entries[i - 1].name == e.name {
                return Err(DecodeError::Duplicate(escape_name(&e.name)));
            }
        }
        check_sizes(&entries)?;
        Ok(Tree { entries })
    }

    /// The entries, sorted by name bytes.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// Looks an entry up by exact name (binary search).
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Total file bytes beneath this directory (the size its parent records for it).
    pub fn total_size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The canonical encoding; its blake3 is the tree's id.
    pub fn encode(&self) -> Vec<u8> {
        let body: usize = self
            .entries
            .iter()
            .map(|e| FIXED_RECORD_LEN + e.name.len())
            .sum();
        let mut out = Vec::with_capacity(HEADER_LEN + body);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        let count = u32::try_from(self.entries.len()).expect("a directory has < 2^32 entries");
        out.extend_from_slice(&count.to_be_bytes());
        for e in &self.entries {
            out.push(e.kind.code());
            let len = u16::try_from(e.name.len()).expect("names were checked at construction");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&e.name);
            out.extend_from_slice(&e.size.to_be_bytes());
            out.extend_from_slice(e.id.as_bytes());
        }
        out
    }

    /// Decodes and validates a tree object.
    pub fn decode(bytes: &[u8]) -> Result<Tree, DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        if r.take(4)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = r.take(1)?[0];
        if version != VERSION {
            return Err(DecodeError::BadVersion(u32::from(version)));
        }
        let count = u32::from_be_bytes(r.array()?) as usize;
        // Do not trust `count` for allocation: each record is at least FIXED_RECORD_LEN + 1.
        let mut entries = Vec::with_capacity(count.min(bytes.len() / (FIXED_RECORD_LEN + 1)));
        for _ in 0..count {
            let kind = EntryKind::from_code(r.take(1)?[0])?;
            let len = usize::from(u16::from_be_bytes(r.array()?));
            let name = r.take(len)?.to_vec();
            if invalid_name_reason(&name).is_some() {
                return Err(DecodeError::BadName(escape_name(&name)));
            }
            let size = u64::from_be_bytes(r.array()?);
            let id = ObjectId::from_bytes(r.array()?);
            if let Some(prev) = entries.last() {
                let prev: &TreeEntry = prev;
                match prev.name.cmp(&name) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => {
                        return Err(DecodeError::Duplicate(escape_name(&name)))
                    }
                    std::cmp::Ordering::Greater => {
                        return Err(DecodeError::Unsorted(escape_name(&name)))
                    }
                }
            }
            entries.push(TreeEntry {
                name,
                kind,
                size,
                id,
            });
        }
        if r.pos != bytes.len() {
            return Err(DecodeError::TrailingBytes(bytes.len() - r.pos));
        }
        check_sizes(&entries)?;
        Ok(Tree { entries })
    }
}

/// Every size, and their sum, within [`MAX_SIZE`].
fn check_sizes(entries: &[TreeEntry]) -> Result<(), DecodeError> {
    let mut total: u64 = 0;
    for e in entries {
        total = total
            .checked_add(e.size)
            .filter(|t| *t <= MAX_SIZE)
            .ok_or_else(|| DecodeError::BadSize(escape_name(&e.name)))?;
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let slice = self
            .bytes
            .get(self.pos..end)
            .ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &[u8], kind: EntryKind) -> TreeEntry {
        TreeEntry {
            name: name.to_vec(),
            kind,
            size: 3,
            id: ObjectId::of(name),
        }
    }

    fn sample() -> Tree {
        Tree::from_entries(vec![
            entry(b"b.md", EntryKind::File),
            entry(b"a", EntryKind::Dir),
            entry(b"run.sh", EntryKind::ExecFile),
            entry(b"caf\xe9", EntryKind::File),
        ])
        .unwrap()
    }

    #[test]
    fn round_trip_is_canonical() {
        let t = sample();
        let bytes = t.encode();
        let back = Tree::decode(&bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.encode(), bytes);
        let names: Vec<_> = back.entries().iter().map(|e| e.display_name()).collect();
        assert_eq!(names, ["a", "b.md", "caf\\xe9", "run.sh"]);
        assert_eq!(back.get(b"run.sh").unwrap().kind, EntryKind::ExecFile);
        assert!(back.get(b"zzz").is_none());
        assert_eq!(Tree::default().encode().len(), HEADER_LEN);
    }

    #[test]
    fn rejects_bad_version_and_magic() {
        let mut bytes = sample().encode();
        bytes[4] = 2;
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::BadVersion(2)));
        bytes[0] = b'X';
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::BadMagic));
    }

    #[test]
    fn rejects_truncation_at_every_length_and_trailing_bytes() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(Tree::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Tree::decode(&longer), Err(DecodeError::TrailingBytes(1)));
    }

    /// Encodes entries verbatim, bypassing `from_entries` (to build hostile input).
    fn raw(entries: &[TreeEntry]) -> Vec<u8> {
        let t = Tree {
            entries: entries.to_vec(),
        };
        t.encode()
    }

    #[test]
    fn rejects_unsorted_duplicate_and_bad_names() {
        let a = entry(b"a", EntryKind::File);
        let b = entry(b"b", EntryKind::File);
        assert!(matches!(
            Tree::decode(&raw(&[b.clone(), a.clone()])),
            Err(DecodeError::Unsorted(_))
        ));
        assert!(matches!(
            Tree::decode(&raw(&[a.clone(), a.clone()])),
            Err(DecodeError::Duplicate(_))
        ));
        for bad in [&b"x/y"[..], b"x\0y", b".", b"..", b""] {
            assert!(
                matches!(
                    Tree::decode(&raw(&[entry(bad, EntryKind::File)])),
                    Err(DecodeError::BadName(_))
                ),
                "{bad:?}"
            );
            assert!(Tree::from_entries(vec![entry(bad, EntryKind::File)]).is_err());
        }
        let mut bytes = raw(&[a]);
        bytes[HEADER_LEN] = 9;
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::BadKind(9)));
    }

    #[test]
    fn rejects_sizes_over_the_bound_or_overflowing_their_sum() {
        let mut big = entry(b"a", EntryKind::Dir);
        big.size = u64::MAX;
        assert!(matches!(
            Tree::decode(&raw(std::slice::from_ref(&big))),
            Err(DecodeError::BadSize(_))
        ));
        assert!(Tree::from_entries(vec![big.clone()]).is_err());
        big.size = MAX_SIZE;
        let ok = raw(std::slice::from_ref(&big));
        assert_eq!(Tree::decode(&ok).unwrap().total_size(), MAX_SIZE);
        let mut b = entry(b"b", EntryKind::File);
        b.size = 1;
        assert!(matches!(Tree::decode(&raw(&[big, b])), Err(DecodeError::BadSize(n)) if n == "b"));
    }

    #[test]
    fn huge_count_does_not_allocate() {
        let mut bytes = Tree::default().encode();
        bytes[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::Truncated));
    }
}

#[cfg(test)]
mod robustness {
    //! Hostile input: random corruptions of valid encodings must decode to a typed error or
    //! to a tree that re-encodes to exactly the same bytes; never a panic.
    use super::*;

    #[test]
    fn random_mutations_never_panic_and_never_decode_ambiguously() {
        let tree = Tree::from_entries(
            (0..20u8)
                .map(|i| TreeEntry {
                    name: format!("entry-{i:02}").into_bytes(),
                    kind: if i % 3 == 0 {
                        EntryKind::Dir
                    } else {
                        EntryKind::File
                    },
                    size: u64::from(i) * 1000,
                    id: ObjectId::of(&[i]),
                })
                .collect(),
        )
        .unwrap();
        let good = tree.encode();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut bytes = good.clone();
            for _ in 0..(1 + next() % 4) {
                let pos = (next() as usize) % bytes.len();
                match next() % 3 {
                    0 => bytes[pos] = next() as u8,
                    1 => {
                        bytes.remove(pos);
                    }
                    _ => bytes.insert(pos, next() as u8),
                }
            }
            if let Ok(t) = Tree::decode(&bytes) {
                assert_eq!(t.encode(), bytes, "a decoded tree must be canonical");
            }
        }
    }
}
