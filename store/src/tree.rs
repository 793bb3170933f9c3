//! Tree objects: the canonical, versioned encoding of one directory.
//!
//! A tree holds only portable metadata, so the same directory on two hosts has the same id
//! and a diff can skip equal subtrees. Encoding, format 2 (all integers big-endian):
//!
//! ```text
//! "ZCBT" version:u8(=2) count:u32
//! count x { kind:u8 (1 file, 2 exec-file, 3 dir)  mode:u16  name_len:u16  name  size:u64  id:[u8;32] }
//! ```
//!
//! `mode` is the permission bits (`st_mode & 0o777`) of a regular file; setuid, setgid and
//! sticky are never recorded (a bundle must not hand a setuid file to whoever publishes it).
//! The kind and the mode agree: a file is `exec-file` exactly when its mode has an execute
//! bit. A directory's mode is always 0o755: like ZeroClaw's own export, directory modes do not
//! travel.
//!
//! Format 1 (no `mode` field) is still read, so old stores, packs and remotes stay usable: its
//! files have the mode their kind implies ([`EntryKind::implied_mode`]: file 0o644, exec-file
//! 0o755). A decoded tree remembers its format, so re-encoding it gives back the object's exact
//! bytes (a pack copies format-1 trees under their own ids); every new tree is format 2.
//!
//! Entries are sorted by name bytes, strictly (no duplicates). Names are raw bytes (a
//! non-UTF-8 file name is kept exactly), never empty, never `.` or `..`, never containing
//! `/` or NUL. A file's size is its length; a directory's size is the total length of the
//! files beneath it. Every size, and the sum of a tree's sizes, is at most [`MAX_SIZE`]
//! (`i64::MAX`, the largest file Linux can hold), so no sum over a decoded tree overflows and
//! every size fits `off_t`. Decoding rejects anything else, including a mode beyond 0o777 or
//! one that disagrees with its kind, truncation and trailing bytes. Whether a recorded size
//! matches its blob or subtree is `verify`'s check.

use crate::error::{DecodeError, ModeProblem};
use crate::escape::escape_name;
use crate::id::ObjectId;

const MAGIC: &[u8; 4] = b"ZCBT";
/// The format every new tree is written in (entries carry their mode).
const VERSION: u8 = 2;
/// The first format: no mode field, modes implied by kinds. Read, and re-encoded only from a
/// decoded format-1 tree.
const VERSION_1: u8 = 1;
pub(crate) const HEADER_LEN: usize = 4 + 1 + 4;
const FIXED_RECORD_LEN_1: usize = 1 + 2 + 8 + 32;
pub(crate) const FIXED_RECORD_LEN: usize = FIXED_RECORD_LEN_1 + 2;

/// A record's length without its name, in format `version` (1 or 2).
pub(crate) fn fixed_record_len(version: u8) -> usize {
    if version == VERSION_1 {
        FIXED_RECORD_LEN_1
    } else {
        FIXED_RECORD_LEN
    }
}

/// The largest size an entry, or a whole tree, may record: `i64::MAX` (Linux's `off_t` bound).
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// The permission bits a tree can record: read, write, execute for owner, group, other.
/// Setuid, setgid and sticky are never carried.
pub const MODE_BITS: u32 = 0o777;

/// The mode of every directory entry (directory modes do not travel).
pub const DIR_MODE: u32 = 0o755;

/// What an entry is. Only what travels: a file, an executable file, or a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file without any execute bit.
    File,
    /// A regular file with at least one execute bit.
    ExecFile,
    /// A directory (its id names a tree object).
    Dir,
}

impl EntryKind {
    /// The kind's code in the tree encoding (1 file, 2 exec-file, 3 dir).
    pub fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::ExecFile => 2,
            EntryKind::Dir => 3,
        }
    }

    /// The kind of encoding code `code` ([`EntryKind::code`]); BadKind for any other.
    pub fn from_code(code: u8) -> Result<EntryKind, DecodeError> {
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

    /// The kind of a regular file with permission bits `mode`.
    pub fn of_file_mode(mode: u32) -> EntryKind {
        if mode & 0o111 != 0 {
            EntryKind::ExecFile
        } else {
            EntryKind::File
        }
    }

    /// The mode a format-1 tree implies for this kind (it recorded none): 0o644 for a file,
    /// 0o755 for an exec-file and a directory.
    pub fn implied_mode(self) -> u32 {
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
    /// Permission bits, at most [`MODE_BITS`]: a file's own; [`DIR_MODE`] for a directory.
    /// A file is [`EntryKind::ExecFile`] exactly when this has an execute bit.
    pub mode: u32,
    /// File length, or total file bytes beneath a directory.
    pub size: u64,
    /// Blob id for files, tree id for directories.
    pub id: ObjectId,
}

impl TreeEntry {
    /// A regular file entry with permission bits `mode` (anything beyond [`MODE_BITS`] is
    /// dropped: setuid, setgid and sticky never travel); its kind follows from the mode.
    pub fn file(name: Vec<u8>, mode: u32, size: u64, id: ObjectId) -> TreeEntry {
        let mode = mode & MODE_BITS;
        TreeEntry {
            name,
            kind: EntryKind::of_file_mode(mode),
            mode,
            size,
            id,
        }
    }

    /// A directory entry naming tree `id` with `size` file bytes beneath.
    pub fn dir(name: Vec<u8>, size: u64, id: ObjectId) -> TreeEntry {
        TreeEntry {
            name,
            kind: EntryKind::Dir,
            mode: DIR_MODE,
            size,
            id,
        }
    }

    /// The entry, its name borrowed.
    pub fn borrowed(&self) -> TreeEntryRef<'_> {
        TreeEntryRef {
            name: &self.name,
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            id: self.id,
        }
    }

    /// The name for display, through the one escaper ([`escape_name`]).
    pub fn display_name(&self) -> String {
        escape_name(&self.name)
    }

    /// The mode as four octal digits (`0644`), as diff and ls print it.
    pub fn mode_octal(&self) -> String {
        format!("{:04o}", self.mode)
    }
}

/// Why `mode` cannot go with `kind`, or `None` when it can.
fn mode_problem(kind: EntryKind, mode: u32) -> Option<ModeProblem> {
    if mode & !MODE_BITS != 0 {
        Some(ModeProblem::BeyondPermissions)
    } else if kind == EntryKind::Dir && mode != DIR_MODE {
        Some(ModeProblem::Directory)
    } else if kind.is_file() && EntryKind::of_file_mode(mode) != kind {
        Some(ModeProblem::KindMismatch)
    } else {
        None
    }
}

fn check_mode(e: &TreeEntry) -> Result<(), DecodeError> {
    check_mode_of(&e.name, e.kind, e.mode)
}

fn check_mode_of(name: &[u8], kind: EntryKind, mode: u32) -> Result<(), DecodeError> {
    match mode_problem(kind, mode) {
        Some(why) => Err(DecodeError::BadMode {
            name: escape_name(name),
            // Saturated: a mode from the API may exceed the encoding's 16 bits.
            mode: u16::try_from(mode).unwrap_or(u16::MAX),
            why,
        }),
        None => Ok(()),
    }
}

/// A decoded directory: entries in strictly increasing name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    entries: Vec<TreeEntry>,
    /// The format it was decoded from (or [`VERSION`] for a new tree): [`Tree::encode`]
    /// writes it back in that format, so the bytes still hash to the object's id.
    version: u8,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree {
            entries: Vec::new(),
            version: VERSION,
        }
    }
}

impl Drop for Tree {
    /// A directory of 200,000 entries holds 14 MB of them: freed without raising the
    /// allocator's mmap threshold (see [`crate::heap`]), wherever a tree is dropped.
    fn drop(&mut self) {
        crate::heap::release(std::mem::take(&mut self.entries));
    }
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
    /// Builds a (format 2) tree from entries in any order. Fails on an invalid or duplicate
    /// name, or a mode that is out of range or disagrees with its kind.
    pub fn from_entries(mut entries: Vec<TreeEntry>) -> Result<Tree, DecodeError> {
        // Unstable: equal names fail below whatever their order, and a stable sort of
        // 200,000 entries takes an 8 MB scratch buffer (see `heap`).
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        for (i, e) in entries.iter().enumerate() {
            if invalid_name_reason(&e.name).is_some() {
                return Err(DecodeError::BadName(escape_name(&e.name)));
            }
            if i > 0 && entries[i - 1].name == e.name {
                return Err(DecodeError::Duplicate(escape_name(&e.name)));
            }
            check_mode(e)?;
        }
        check_sizes(&entries)?;
        Ok(Tree {
            entries,
            version: VERSION,
        })
    }

    /// The entries, sorted by name bytes.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// The entries, sorted by name bytes, taken out of the tree (no copy: a walk that holds a
    /// huge directory's entries holds them once).
    pub fn into_entries(mut self) -> Vec<TreeEntry> {
        std::mem::take(&mut self.entries)
    }

    /// The format this tree is encoded in: 2, or 1 for a tree decoded from format 1.
    pub fn format_version(&self) -> u8 {
        self.version
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

    /// The canonical encoding, in the tree's format; its blake3 is the tree's id.
    pub fn encode(&self) -> Vec<u8> {
        let fixed = fixed_record_len(self.version);
        let body: usize = self.entries.iter().map(|e| fixed + e.name.len()).sum();
        let mut out = Vec::with_capacity(HEADER_LEN + body);
        self.encode_in_parts(&mut out, usize::MAX, &mut |_| {});
        out
    }

    /// The tree's id, the blake3 of [`Tree::encode`], hashed in parts of about 64 KiB rather
    /// than from the whole encoding: a capture that finds a directory unchanged needs only
    /// the id, and a directory of 200,000 entries encodes to 12 MB.
    pub fn id(&self) -> ObjectId {
        let mut hasher = crate::id::IdHasher::new();
        let mut buf = Vec::with_capacity(65 * 1024);
        self.encode_in_parts(&mut buf, 64 * 1024, &mut |part| {
            hasher.update(part);
            part.clear();
        });
        hasher.finish()
    }

    /// Appends the canonical encoding to `buf`, handing `buf` to `flush` whenever it holds
    /// `part` bytes or more and once at the end (`flush` may take the bytes out).
    fn encode_in_parts(&self, buf: &mut Vec<u8>, part: usize, flush: &mut dyn FnMut(&mut Vec<u8>)) {
        let v1 = self.version == VERSION_1;
        buf.extend_from_slice(MAGIC);
        buf.push(self.version);
        let count = u32::try_from(self.entries.len()).expect("a directory has < 2^32 entries");
        buf.extend_from_slice(&count.to_be_bytes());
        for e in &self.entries {
            buf.push(e.kind.code());
            if !v1 {
                let mode = u16::try_from(e.mode).expect("modes were checked at construction");
                buf.extend_from_slice(&mode.to_be_bytes());
            }
            let len = u16::try_from(e.name.len()).expect("names were checked at construction");
            buf.extend_from_slice(&len.to_be_bytes());
            buf.extend_from_slice(&e.name);
            buf.extend_from_slice(&e.size.to_be_bytes());
            buf.extend_from_slice(e.id.as_bytes());
            if buf.len() >= part {
                flush(buf);
            }
        }
        flush(buf);
    }

    /// Decodes and validates a tree object (format 2, or format 1 with implied modes).
    pub fn decode(bytes: &[u8]) -> Result<Tree, DecodeError> {
        struct Owned(Vec<TreeEntry>);
        impl<'a> EntrySink<'a> for Owned {
            fn reserve(&mut self, n: usize) {
                self.0.reserve(n);
            }
            fn push(&mut self, _at: usize, e: TreeEntryRef<'a>) {
                self.0.push(e.to_entry());
            }
        }
        let mut owned = Owned(Vec::new());
        let version = decode_into(bytes, &mut owned)?;
        Ok(Tree {
            entries: owned.0,
            version,
        })
    }
}

/// What an expansion check needs of a tree (`limits`): its entry count, the sizes of its
/// non-directory entries, and its subdirectories, without a copy of any name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeShape {
    /// How many entries it has.
    pub entries: u64,
    /// The sum of its non-directory entries' sizes (saturating).
    pub file_bytes: u64,
    /// Its subdirectories' tree ids, in name order.
    pub subdirs: Vec<ObjectId>,
}

impl TreeShape {
    /// The shape of a decoded tree.
    pub fn of(tree: &Tree) -> TreeShape {
        let mut shape = TreeShape::default();
        for e in tree.entries() {
            shape.add(e.kind, e.size, e.id);
        }
        shape
    }

    /// Decodes a tree object's shape: the same checks and errors as [`Tree::decode`], so
    /// exactly the objects it accepts have a shape, and the same shape as [`TreeShape::of`].
    pub fn decode(bytes: &[u8]) -> Result<TreeShape, DecodeError> {
        let mut shape = TreeShape::default();
        decode_into(bytes, &mut shape)?;
        Ok(shape)
    }

    fn add(&mut self, kind: EntryKind, size: u64, id: ObjectId) {
        self.entries += 1;
        if kind == EntryKind::Dir {
            self.subdirs.push(id);
        } else {
            self.file_bytes = self.file_bytes.saturating_add(size);
        }
    }
}

impl<'a> EntrySink<'a> for TreeShape {
    fn reserve(&mut self, _: usize) {}
    fn push(&mut self, _at: usize, e: TreeEntryRef<'a>) {
        self.add(e.kind, e.size, e.id);
    }
}

/// One entry of a tree, its name borrowed: from a tree's encoding ([`crate::TreeView::entry`]) or
/// from a [`TreeEntry`] ([`TreeEntry::borrowed`]). The fields mean what [`TreeEntry`]'s mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeEntryRef<'a> {
    /// The raw name bytes (one path component).
    pub name: &'a [u8],
    /// File, exec-file or dir.
    pub kind: EntryKind,
    /// Permission bits ([`TreeEntry::mode`]).
    pub mode: u32,
    /// File length, or total file bytes beneath a directory.
    pub size: u64,
    /// Blob id for files, tree id for directories.
    pub id: ObjectId,
}

impl TreeEntryRef<'_> {
    /// The entry with its name copied.
    pub fn to_entry(&self) -> TreeEntry {
        TreeEntry {
            name: self.name.to_vec(),
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            id: self.id,
        }
    }
}

/// The entry recorded at byte `at` of a tree encoding in format `version`, read without any
/// check: for an encoding [`decode_into`] accepted, with `at` a record start it reported.
pub(crate) fn record_at(bytes: &[u8], at: usize, version: u8) -> Option<TreeEntryRef<'_>> {
    let mut r = Reader { bytes, pos: at };
    let kind = EntryKind::from_code(r.take(1).ok()?[0]).ok()?;
    let mode = if version == VERSION_1 {
        kind.implied_mode()
    } else {
        u32::from(u16::from_be_bytes(r.array().ok()?))
    };
    let len = usize::from(u16::from_be_bytes(r.array().ok()?));
    let name = r.take(len).ok()?;
    let size = u64::from_be_bytes(r.array().ok()?);
    let id = ObjectId::from_bytes(r.array().ok()?);
    Some(TreeEntryRef {
        name,
        kind,
        mode,
        size,
        id,
    })
}

/// The name of the record that starts at byte `at` of a tree encoding in format `version`,
/// read without any check (as [`record_at`]): what a search by name compares.
pub(crate) fn name_at(bytes: &[u8], at: usize, version: u8) -> Option<&[u8]> {
    let len_at = at + if version == VERSION_1 { 1 } else { 3 };
    let len = usize::from(u16::from_be_bytes(
        bytes.get(len_at..len_at + 2)?.try_into().ok()?,
    ));
    bytes.get(len_at + 2..len_at + 2 + len)
}

/// The length of the tree encoding that `bytes` starts with, read off its entry count and
/// name lengths alone (nothing is validated: [`Tree::decode`] of that prefix does it, and the
/// caller hashes it). `None` when `bytes` is not a tree's start or ends inside it. For a
/// reader that finds a tree at a known offset without its length (the root at the head of a
/// tree index).
pub(crate) fn encoded_len(bytes: &[u8]) -> Option<usize> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4).ok()? != MAGIC {
        return None;
    }
    let version = r.take(1).ok()?[0];
    let fixed = match version {
        VERSION => FIXED_RECORD_LEN,
        VERSION_1 => FIXED_RECORD_LEN_1,
        _ => return None,
    };
    let count = u32::from_be_bytes(r.array().ok()?);
    for _ in 0..count {
        // kind, [mode,] name length, then the name, size and id.
        let before_len = fixed - 2 - 8 - 32;
        r.take(before_len).ok()?;
        let len = usize::from(u16::from_be_bytes(r.array().ok()?));
        r.take(len + 8 + 32).ok()?;
    }
    Some(r.pos)
}

/// Where [`decode_into`] puts the entries it checked.
pub(crate) trait EntrySink<'a> {
    /// About how many entries follow (never more than the bytes can hold).
    fn reserve(&mut self, n: usize);
    /// Entry `e`, whose record starts at byte `at` of the encoding.
    fn push(&mut self, at: usize, e: TreeEntryRef<'a>);
}

/// Decodes and validates a tree object into `sink`; returns its format version. The one
/// decoder of trees: [`Tree::decode`], [`TreeShape::decode`] and [`crate::TreeView::decode`]
/// differ only in what they keep (`at`, each record's start, is what a view keeps).
pub(crate) fn decode_into<'a>(
    bytes: &'a [u8],
    sink: &mut dyn EntrySink<'a>,
) -> Result<u8, DecodeError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4)? != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = r.take(1)?[0];
    if version != VERSION && version != VERSION_1 {
        return Err(DecodeError::BadVersion(u32::from(version)));
    }
    let v1 = version == VERSION_1;
    let count = u32::from_be_bytes(r.array()?) as usize;
    // Do not trust `count` for allocation: each record is at least FIXED_RECORD_LEN_1 + 1.
    sink.reserve(count.min(bytes.len() / (FIXED_RECORD_LEN_1 + 1)));
    let mut prev: Option<&[u8]> = None;
    // The first entry at which the running sum of sizes passes MAX_SIZE: reported after every
    // other check, as a check of the whole list would (`check_sizes`).
    let mut total: u64 = 0;
    let mut size_problem: Option<&[u8]> = None;
    for _ in 0..count {
        let at = r.pos;
        let kind = EntryKind::from_code(r.take(1)?[0])?;
        let mode = if v1 {
            kind.implied_mode()
        } else {
            u32::from(u16::from_be_bytes(r.array()?))
        };
        let len = usize::from(u16::from_be_bytes(r.array()?));
        let name = r.take(len)?;
        if invalid_name_reason(name).is_some() {
            return Err(DecodeError::BadName(escape_name(name)));
        }
        let size = u64::from_be_bytes(r.array()?);
        let id = ObjectId::from_bytes(r.array()?);
        if let Some(prev) = prev {
            match prev.cmp(name) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Err(DecodeError::Duplicate(escape_name(name))),
                std::cmp::Ordering::Greater => {
                    return Err(DecodeError::Unsorted(escape_name(name)))
                }
            }
        }
        prev = Some(name);
        check_mode_of(name, kind, mode)?;
        if size_problem.is_none() {
            match total.checked_add(size).filter(|t| *t <= MAX_SIZE) {
                Some(t) => total = t,
                None => size_problem = Some(name),
            }
        }
        sink.push(
            at,
            TreeEntryRef {
                name,
                kind,
                mode,
                size,
                id,
            },
        );
    }
    if r.pos != bytes.len() {
        return Err(DecodeError::TrailingBytes(bytes.len() - r.pos));
    }
    if let Some(name) = size_problem {
        return Err(DecodeError::BadSize(escape_name(name)));
    }
    Ok(version)
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
        // Not `ok_or(DecodeError::Truncated)`: that builds and drops an error on every call
        // (a mount's start decodes every entry of every tree).
        let Some(slice) = self
            .pos
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.pos..end))
        else {
            return Err(DecodeError::Truncated);
        };
        self.pos += n;
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
            mode: kind.implied_mode(),
            size: 3,
            id: ObjectId::of(name),
        }
    }

    /// The id hashed in parts is the blake3 of the whole encoding, in both formats, for an
    /// empty tree and one whose encoding spans many parts.
    #[test]
    fn the_id_is_the_hash_of_the_encoding() {
        let empty = Tree::from_entries(Vec::new()).unwrap();
        assert_eq!(empty.id(), ObjectId::of(&empty.encode()));
        let entries: Vec<TreeEntry> = (0..5000)
            .map(|i| entry(format!("entry-{i:06}.txt").as_bytes(), EntryKind::File))
            .collect();
        let mut tree = Tree::from_entries(entries).unwrap();
        assert!(tree.encode().len() > 4 * 64 * 1024);
        assert_eq!(tree.id(), ObjectId::of(&tree.encode()));
        tree.version = VERSION_1;
        assert_eq!(tree.id(), ObjectId::of(&tree.encode()));
    }

    fn sample() -> Tree {
        Tree::from_entries(vec![
            entry(b"b.md", EntryKind::File),
            entry(b"a", EntryKind::Dir),
            entry(b"run.sh", EntryKind::ExecFile),
            entry(b"caf\xe9", EntryKind::File),
            TreeEntry::file(b"key".to_vec(), 0o600, 3, ObjectId::of(b"key")),
            TreeEntry::file(b"tool".to_vec(), 0o750, 3, ObjectId::of(b"tool")),
        ])
        .unwrap()
    }

    /// The format-1 bytes of `entries` (kind, name, size, id; no mode), as an old build wrote.
    fn v1_bytes(entries: &[TreeEntry]) -> Vec<u8> {
        let mut out = b"ZCBT\x01".to_vec();
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for e in entries {
            out.push(e.kind.code());
            out.extend_from_slice(&(e.name.len() as u16).to_be_bytes());
            out.extend_from_slice(&e.name);
            out.extend_from_slice(&e.size.to_be_bytes());
            out.extend_from_slice(e.id.as_bytes());
        }
        out
    }

    #[test]
    fn encoded_len_finds_where_a_tree_ends_in_longer_bytes() {
        let v1_entries: Vec<TreeEntry> = sample()
            .entries()
            .iter()
            .filter(|e| e.mode == e.kind.implied_mode())
            .cloned()
            .collect();
        for bytes in [
            sample().encode(),
            v1_bytes(&v1_entries),
            Tree::from_entries(vec![]).unwrap().encode(),
        ] {
            let mut longer = bytes.clone();
            longer.extend_from_slice(b"ZCBT\x02 what follows in a pack");
            assert_eq!(encoded_len(&longer), Some(bytes.len()));
            assert_eq!(encoded_len(&bytes), Some(bytes.len()));
            for cut in 0..bytes.len() {
                assert_eq!(encoded_len(&bytes[..cut]), None, "cut at {cut}");
            }
        }
        assert_eq!(encoded_len(b"ZCBS\x01 a record"), None);
        assert_eq!(encoded_len(b"ZCBT\x03\0\0\0\0"), None, "an unknown format");
    }

    #[test]
    fn round_trip_is_canonical_and_keeps_modes() {
        let t = sample();
        let bytes = t.encode();
        assert_eq!(bytes[4], VERSION);
        let back = Tree::decode(&bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.encode(), bytes);
        let names: Vec<_> = back.entries().iter().map(|e| e.display_name()).collect();
        assert_eq!(names, ["a", "b.md", "caf\\xe9", "key", "run.sh", "tool"]);
        assert_eq!(back.get(b"run.sh").unwrap().kind, EntryKind::ExecFile);
        let key = back.get(b"key").unwrap();
        assert_eq!(
            (key.kind, key.mode, key.mode_octal().as_str()),
            (EntryKind::File, 0o600, "0600")
        );
        assert_eq!(back.get(b"tool").unwrap().kind, EntryKind::ExecFile);
        assert_eq!(back.get(b"a").unwrap().mode, DIR_MODE);
        assert!(back.get(b"zzz").is_none());
        assert_eq!(Tree::default().encode().len(), HEADER_LEN);
    }

    #[test]
    fn a_mode_is_part_of_the_id() {
        let a = Tree::from_entries(vec![TreeEntry::file(
            b"k".to_vec(),
            0o600,
            1,
            ObjectId::of(b"x"),
        )]);
        let b = Tree::from_entries(vec![TreeEntry::file(
            b"k".to_vec(),
            0o644,
            1,
            ObjectId::of(b"x"),
        )]);
        assert_ne!(a.unwrap().encode(), b.unwrap().encode());
    }

    #[test]
    fn special_bits_never_travel() {
        let e = TreeEntry::file(b"s".to_vec(), 0o104_755, 1, ObjectId::of(b"s"));
        assert_eq!((e.kind, e.mode), (EntryKind::ExecFile, 0o755));
        let e = TreeEntry::file(b"t".to_vec(), 0o7640, 1, ObjectId::of(b"t"));
        assert_eq!((e.kind, e.mode), (EntryKind::File, 0o640));
    }

    #[test]
    fn format_1_decodes_with_implied_modes_and_reencodes_to_its_own_bytes() {
        let entries = [
            entry(b"a", EntryKind::Dir),
            entry(b"b.md", EntryKind::File),
            entry(b"run.sh", EntryKind::ExecFile),
        ];
        let old = v1_bytes(&entries);
        let t = Tree::decode(&old).unwrap();
        assert_eq!(t.format_version(), 1);
        let modes: Vec<u32> = t.entries().iter().map(|e| e.mode).collect();
        assert_eq!(modes, [0o755, 0o644, 0o755]);
        assert_eq!(
            t.encode(),
            old,
            "a format-1 tree keeps its id through a pack"
        );
        // The same entries built anew are format 2: another object.
        let new = Tree::from_entries(entries.to_vec()).unwrap();
        assert_eq!(new.format_version(), VERSION);
        assert_eq!(new.entries(), t.entries());
        assert_ne!(new.encode(), old);
        // Format 1 is still checked as strictly as ever.
        for cut in 0..old.len() {
            assert!(Tree::decode(&old[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = old.clone();
        bad[HEADER_LEN] = 9;
        assert_eq!(Tree::decode(&bad), Err(DecodeError::BadKind(9)));
    }

    #[test]
    fn rejects_bad_version_and_magic() {
        let mut bytes = sample().encode();
        bytes[4] = 3;
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::BadVersion(3)));
        bytes[4] = 0;
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::BadVersion(0)));
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
            version: VERSION,
        };
        t.encode()
    }

    #[test]
    fn rejects_modes_out_of_range_or_disagreeing_with_the_kind() {
        let with = |kind, mode| TreeEntry {
            mode,
            ..entry(b"x", kind)
        };
        for (kind, mode) in [
            (EntryKind::File, 0o4644), // setuid
            (EntryKind::File, 0o1644), // sticky
            (EntryKind::File, 0o2644), // setgid
            (EntryKind::ExecFile, 0o104_755),
            (EntryKind::File, 0o755), // exec bits on a plain file
            (EntryKind::File, 0o610),
            (EntryKind::ExecFile, 0o644), // an exec-file without one
            (EntryKind::Dir, 0o700),      // directory modes do not travel
            (EntryKind::Dir, 0),
            (EntryKind::ExecFile, 0xFFFF), // every bit of the field
        ] {
            let e = with(kind, mode);
            let bytes = raw(std::slice::from_ref(&e));
            assert!(
                matches!(Tree::decode(&bytes), Err(DecodeError::BadMode { .. })),
                "{kind:?} {mode:o}"
            );
            assert!(
                matches!(
                    Tree::from_entries(vec![e]),
                    Err(DecodeError::BadMode { .. })
                ),
                "{kind:?} {mode:o}"
            );
        }
        // Every mode up to 0o777 is fine on a file of the matching kind.
        for mode in 0..=0o777 {
            let e = TreeEntry::file(b"f".to_vec(), mode, 0, ObjectId::of(b"f"));
            let t = Tree::from_entries(vec![e]).unwrap();
            assert_eq!(Tree::decode(&t.encode()).unwrap(), t);
        }
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
        bytes[4] = VERSION_1;
        assert_eq!(Tree::decode(&bytes), Err(DecodeError::Truncated));
    }
}

#[cfg(test)]
mod robustness {
    //! Hostile input: random corruptions of valid encodings (both formats) must decode to a
    //! typed error or to a tree that re-encodes to exactly the same bytes; never a panic.
    use super::*;

    #[test]
    fn the_shape_decoder_reports_a_size_overflow_after_every_other_check_as_decode_does() {
        let big = |name: &str| TreeEntry::file(name.into(), 0o644, MAX_SIZE, ObjectId::of(b"x"));
        let mut bytes = Tree::from_entries(vec![big("a")]).unwrap().encode();
        // Two entries whose sizes sum past MAX_SIZE ("a" and "b"), then a name out of order.
        let b = Tree::from_entries(vec![big("b")]).unwrap().encode();
        let record = b[9..].to_vec();
        let mut c = record.clone();
        c[5] = b'0'; // the name "0" sorts before "b": Unsorted, reported before the size
        for extra in [&record, &c] {
            bytes.extend_from_slice(extra);
        }
        bytes[5..9].copy_from_slice(&3u32.to_be_bytes());
        let expected = Tree::decode(&bytes).map(|t| TreeShape::of(&t));
        assert!(
            matches!(expected, Err(DecodeError::Unsorted(_))),
            "{expected:?}"
        );
        assert_eq!(TreeShape::decode(&bytes), expected);
        // Without the last entry: the size is the problem, named at "b" by both.
        bytes.truncate(bytes.len() - c.len());
        bytes[5..9].copy_from_slice(&2u32.to_be_bytes());
        let expected = Tree::decode(&bytes).map(|t| TreeShape::of(&t));
        assert_eq!(expected, Err(DecodeError::BadSize("b".into())));
        assert_eq!(TreeShape::decode(&bytes), expected);
    }

    #[test]
    fn random_mutations_never_panic_and_never_decode_ambiguously() {
        let tree = Tree::from_entries(
            (0..20u8)
                .map(|i| {
                    let name = format!("entry-{i:02}").into_bytes();
                    let size = u64::from(i) * 1000;
                    let id = ObjectId::of(&[i]);
                    if i % 3 == 0 {
                        TreeEntry::dir(name, size, id)
                    } else {
                        TreeEntry::file(
                            name,
                            [0o644, 0o600, 0o755, 0o640][usize::from(i % 4)],
                            size,
                            id,
                        )
                    }
                })
                .collect(),
        )
        .unwrap();
        let v1 = Tree {
            entries: tree
                .entries()
                .iter()
                .map(|e| TreeEntry {
                    mode: e.kind.implied_mode(),
                    ..e.clone()
                })
                .collect(),
            version: VERSION_1,
        };
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for good in [tree.encode(), v1.encode()] {
            assert!(Tree::decode(&good).is_ok());
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
                // The shape decoder accepts exactly what the tree decoder accepts, with the
                // same error, and the same shape (the expansion check relies on it).
                assert_eq!(
                    TreeShape::decode(&bytes),
                    Tree::decode(&bytes).map(|t| TreeShape::of(&t))
                );
                if let Ok(t) = Tree::decode(&bytes) {
                    assert_eq!(t.encode(), bytes, "a decoded tree must be canonical");
                }
            }
        }
    }
}
