//! The store's error type: one enum, each message naming the operation and the path or id.
//! Also `ObjectId`'s `FromStr`, whose error is [`StoreError::BadObjectId`]: it lives here so
//! that `id` depends on nothing and this module is the only side of the `error`-`id` edge.

use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use crate::id::ObjectId;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O failure, with the operation and the path it touched. The OS error is part of
    /// the message (not a separate `source`), so a printed chain says it once.
    #[error("could not {op} {path}: {error}")]
    Io {
        /// The verb: "open", "read", "write", "rename", ...
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },
    /// Writing a pack to its output (a file or stdout, which the caller names) failed.
    #[error("could not {op} the pack: {error}")]
    PackOutput {
        /// The verb: "write", "start zstd for", ...
        op: &'static str,
        /// The underlying error.
        error: io::Error,
    },
    /// The store directory is not a store (a file, or a directory with foreign content).
    #[error("{path} is not a zeroclaw-bundle store: {why}")]
    NotAStore {
        /// The store path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The store was written by a newer version of this tool.
    #[error("store {path} has format version {found}; this zeroclaw-bundle understands up to {supported}: upgrade zeroclaw-bundle")]
    NewerStore {
        /// The store path.
        path: PathBuf,
        /// Version in the STORE marker.
        found: u32,
        /// Highest version this build reads.
        supported: u32,
    },
    /// The caller's [`crate::ImportWatch`] asked the import to stop; nothing was imported.
    #[error("interrupted")]
    Interrupted,
    /// An object named by a reference is not in the store.
    #[error("object {0} is missing from the store")]
    MissingObject(ObjectId),
    /// An object's bytes do not hash to its name.
    #[error("object {id} is corrupt (its content hashes to {actual})")]
    CorruptObject {
        /// The object's name.
        id: ObjectId,
        /// What its bytes hash to now.
        actual: ObjectId,
    },
    /// An object stored compressed does not decode (its file is damaged).
    #[error("object {id} is stored compressed but does not decode: {why}")]
    Undecodable {
        /// The object's name.
        id: ObjectId,
        /// What is wrong with its frame.
        why: String,
    },
    /// A tree or snapshot object does not decode.
    #[error("object {id} is not a valid {what}: {why}")]
    Malformed {
        /// The object (if known).
        id: ObjectId,
        /// "tree" or "snapshot record".
        what: &'static str,
        /// The decoder's finding.
        why: DecodeError,
    },
    /// A string that should be a 64-digit hex id is not.
    #[error("not an object id: {0:?}")]
    BadObjectId(String),
    /// A snapshot reference matched nothing.
    #[error("no snapshot matches {reference:?}: {hint}")]
    UnknownSnapshot {
        /// The reference as given.
        reference: String,
        /// What to try instead.
        hint: String,
    },
    /// A snapshot reference matched several snapshots.
    #[error("snapshot reference {reference:?} is ambiguous: it matches {candidates}")]
    AmbiguousSnapshot {
        /// The reference given.
        reference: String,
        /// The matching ids, shortened.
        candidates: String,
    },
    /// A name is already taken by another snapshot.
    #[error("snapshot name {0:?} is invalid: {1}")]
    BadName(String, &'static str),
    /// Another process holds the catalog for longer than we wait.
    #[error("the catalog {path} is in use by another zeroclaw-bundle process (waited {waited_ms} ms); try again when it finishes")]
    CatalogBusy {
        /// The catalog directory.
        path: PathBuf,
        /// How long we waited.
        waited_ms: u64,
    },
    /// Another process holds the store lock for longer than we wait (a gc waiting for a
    /// capture, or a capture waiting for a gc).
    #[error("the store is busy: another zeroclaw-bundle process holds {path} (waited {waited_ms} ms to {purpose}); try again when it finishes")]
    StoreBusy {
        /// The lock file.
        path: PathBuf,
        /// What we wanted the lock for.
        purpose: &'static str,
        /// How long we waited.
        waited_ms: u64,
    },
    /// The catalog cannot be opened (a torn log after a full disk or a crash). Opening the
    /// store's catalog recovers from it (sets it aside and rebuilds it); callers see it only
    /// if that fails too.
    #[error("catalog {path} is unreadable: {why}")]
    CatalogUnreadable {
        /// The catalog directory.
        path: PathBuf,
        /// The database's message.
        why: String,
    },
    /// The catalog database failed.
    #[error("catalog {path}: {why}; it can be rebuilt from the objects")]
    Catalog {
        /// The catalog directory.
        path: PathBuf,
        /// The database's message.
        why: String,
    },
    /// A signature kept beside a snapshot cannot be stored or read.
    #[error("signature of snapshot {snapshot}: {why}")]
    Signature {
        /// The snapshot.
        snapshot: ObjectId,
        /// What is wrong.
        why: String,
    },
    /// A pack file is malformed, corrupt or not usable here.
    #[error("pack {pack} {why}")]
    BadPack {
        /// The pack file.
        pack: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A tree expands past one of the limits of [`crate::limits`].
    #[error(
        "{label} is too large to expand: its {what} passes the limit of {limit}; it was not \
         written, listed or mounted (a tree this size is hostile or damaged, not an agent)"
    )]
    TooLarge {
        /// What was expanded (`snapshot 1a2b3c4d5e6f`).
        label: String,
        /// Which limit: "directory depth", "entry count", "total file size".
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A blob whose length is not the size its tree records (found before it is read, where
    /// its source knows its length: a pack's index).
    #[error("object {id} is {len} bytes long but its tree records {recorded} bytes")]
    WrongLength {
        /// The blob.
        id: ObjectId,
        /// Its length.
        len: u64,
        /// The size its tree records.
        recorded: u64,
    },
    /// A path inside a tree does not exist.
    #[error("{path}: no such file or directory in snapshot {snapshot}")]
    NoSuchPath {
        /// The path asked for.
        path: String,
        /// The snapshot id, shortened.
        snapshot: String,
    },
}

/// Why a tree or snapshot object failed to decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Magic bytes missing.
    #[error("bad magic")]
    BadMagic,
    /// A version this build does not know.
    #[error("unsupported format version {0}")]
    BadVersion(u32),
    /// The data ends inside a record.
    #[error("truncated")]
    Truncated,
    /// Bytes after the last record.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    /// Entry names not in strictly increasing byte order.
    #[error("entries not sorted at \"{0}\"")]
    Unsorted(String),
    /// The same name twice.
    #[error("duplicate entry \"{0}\"")]
    Duplicate(String),
    /// A name that cannot be a single path component.
    #[error("invalid entry name \"{0}\"")]
    BadName(String),
    /// An unknown entry kind byte.
    #[error("unknown entry kind {0}")]
    BadKind(u8),
    /// A permission mode a tree entry cannot have.
    #[error("invalid mode {mode:#o} for \"{name}\": {why}")]
    BadMode {
        /// The entry's name, escaped.
        name: String,
        /// The recorded mode (the encoding's 16 bits).
        mode: u16,
        /// What is wrong with it.
        why: ModeProblem,
    },
    /// A record field outside its grammar.
    #[error("invalid {field}: {why}")]
    BadField {
        /// The field.
        field: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A recorded size that cannot be true (over the bound, or a sum that overflows).
    #[error("impossible size for \"{0}\"")]
    BadSize(String),
    /// The snapshot record's JSON is invalid.
    #[error("{0}")]
    Json(String),
}

/// What is wrong with a tree entry's mode ([`DecodeError::BadMode`]). One byte, so the
/// error stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ModeProblem {
    /// Bits beyond the permission bits (setuid, setgid, sticky, or above).
    #[error("bits beyond 0o777 (setuid, setgid and sticky never travel)")]
    BeyondPermissions,
    /// A directory whose mode is not 0o755.
    #[error("a directory's mode is 0o755")]
    Directory,
    /// A file kind the execute bits contradict.
    #[error("the execute bits disagree with the kind")]
    KindMismatch,
}

impl StoreError {
    /// Shorthand for an I/O error with its verb and path.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> StoreError {
        StoreError::Io {
            op,
            path: path.into(),
            error: source,
        }
    }

    /// True when the error means the data is damaged (FUSE maps this to EIO).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            StoreError::CorruptObject { .. }
                | StoreError::Malformed { .. }
                | StoreError::Undecodable { .. }
                | StoreError::WrongLength { .. }
        )
    }
}

impl FromStr for ObjectId {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<ObjectId, StoreError> {
        ObjectId::from_hex(s).ok_or_else(|| StoreError::BadObjectId(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_id_reads_the_same_from_str_and_from_json() {
        let bad = "zz".repeat(32);
        let parsed = bad.parse::<ObjectId>().unwrap_err();
        assert!(matches!(&parsed, StoreError::BadObjectId(s) if *s == bad));
        let json = serde_json::from_str::<ObjectId>(&format!("{bad:?}")).unwrap_err();
        assert!(
            json.to_string().starts_with(&parsed.to_string()),
            "{json} vs {parsed}"
        );
    }
}
