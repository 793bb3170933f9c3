//! Signatures kept beside snapshot records: `<store>/signatures/<snapshot-id>/<sig-id>.sig`,
//! where `<sig-id>` is the blake3 of the signature's bytes. This module stores and lists
//! opaque byte strings per snapshot and nothing more: what a signature is (an OpenSSH sshsig,
//! a key, a namespace) and whether it verifies is the root crate's business.
//!
//! Invariants:
//! - Signatures are outside `objects/`: adding one never changes any object or id, and no
//!   reachability walk, pack of objects or tree index ever sees one.
//! - A signature file is named by the hash of its bytes, so adding the same signature twice is
//!   a no-op, two processes adding different ones never touch the same name, and nothing is
//!   ever read, modified and written back (what remotes rely on too).
//! - Each file is written to `tmp/`, synced, hard-linked into place (a link never replaces:
//!   an existing file of that name already holds the same bytes), then the directories are
//!   synced and the temporary name removed.
//! - Adding holds the store's write lock shared, so `gc` (exclusive) never removes the
//!   signatures of a snapshot an unpack or pull is about to commit; gc drops the directories of
//!   snapshots it does not keep, and `reindex` leaves them alone.
//! - Reading is bounded: at most [`MAX_SIGNATURES`] signatures of at most
//!   [`MAX_SIGNATURE_BYTES`] bytes each per snapshot (more files: the rest are skipped with a
//!   notice); a file whose bytes do not hash to its name is skipped with a notice (it is a
//!   damaged copy, not a signature of the store).
//! - Signatures received with an unpack or a pull never fail it: past the bound they are left
//!   out with a notice ([`Catalog::add_received_signatures`]), so a pack or remote stuffed with
//!   junk once cannot block every later import of that snapshot.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::PathBuf;

use super::Catalog;
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::limits::{check_signature_size, MAX_SIGNATURES, MAX_SIGNATURE_BYTES};
use crate::lock::WriteLock;

/// The directory under the store root.
pub(crate) const SIGNATURES_DIR: &str = "signatures";
const SUFFIX: &str = ".sig";

/// One signature of a snapshot, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSignature {
    /// The blake3 of its bytes (its file name).
    pub id: ObjectId,
    /// Its bytes, opaque to the store.
    pub bytes: Vec<u8>,
}

impl Catalog<'_> {
    pub(crate) fn signatures_dir(&self, snapshot: &ObjectId) -> PathBuf {
        self.root().join(SIGNATURES_DIR).join(snapshot.to_hex())
    }

    /// Adds `bytes` as a signature of `snapshot` (taking the store's write lock shared); returns
    /// its id and whether it is new (false: the same bytes were there already). The snapshot
    /// need not be in the store yet.
    pub fn add_signature(
        &self,
        snapshot: &ObjectId,
        bytes: &[u8],
    ) -> Result<(ObjectId, bool), StoreError> {
        let lock = self.inner.write_lock()?;
        self.add_signature_locked(&lock, snapshot, bytes)
    }

    /// [`Catalog::add_signature`] for a writer that holds the write lock already (an unpack or a
    /// pull adds what it received before it commits the record).
    pub fn add_signature_locked(
        &self,
        _lock: &WriteLock,
        snapshot: &ObjectId,
        bytes: &[u8],
    ) -> Result<(ObjectId, bool), StoreError> {
        let sig_err = |why: String| StoreError::Signature {
            snapshot: *snapshot,
            why,
        };
        check_signature_size(bytes).map_err(|why| sig_err(format!("the signature {why}")))?;
        let id = ObjectId::of(bytes);
        let dir = self.signatures_dir(snapshot);
        let path = dir.join(format!("{}{SUFFIX}", id.to_hex()));
        if fs::symlink_metadata(&path).is_ok() {
            return Ok((id, false));
        }
        if self.signatures(snapshot)?.len() >= MAX_SIGNATURES {
            return Err(sig_err(format!(
                "it has {MAX_SIGNATURES} signatures already, the most a snapshot keeps"
            )));
        }
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, e))?;
        let tmp_dir = self.objects().tmp_dir();
        fs::create_dir_all(tmp_dir).map_err(|e| StoreError::io("create", tmp_dir, e))?;
        let tmp = tmp_dir.join(format!("sig-{}", crate::sys::random_token()));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::io("write", &tmp, e));
        }
        // A hard link fails when the name exists (RENAME_NOREPLACE's effect without a syscall
        // this crate does not wrap): then a concurrent writer stored the same bytes.
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        let new = match linked {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(StoreError::io("add signature", &path, e)),
        };
        for d in [&dir, &self.root().join(SIGNATURES_DIR)] {
            File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| StoreError::io("sync", d, e))?;
        }
        Ok((id, new))
    }

    /// Adds the signatures an unpack or a pull received for `snapshot` (the caller holds the
    /// write lock). Received signatures never fail the import they came with: once the store
    /// holds [`MAX_SIGNATURES`] for the snapshot (a pack or remote stuffed with junk earlier),
    /// the rest are left out with a notice on stderr naming the directory to clear. Returns how
    /// many were left out.
    pub fn add_received_signatures(
        &self,
        lock: &WriteLock,
        snapshot: &ObjectId,
        signatures: &[Vec<u8>],
    ) -> Result<usize, StoreError> {
        let mut left_out = 0;
        for sig in signatures {
            let id = ObjectId::of(sig);
            let path = self
                .signatures_dir(snapshot)
                .join(format!("{}{SUFFIX}", id.to_hex()));
            let known = fs::symlink_metadata(&path).is_ok();
            if !known && self.signatures(snapshot)?.len() >= MAX_SIGNATURES {
                left_out += 1;
                continue;
            }
            self.add_signature_locked(lock, snapshot, sig)?;
        }
        if left_out > 0 {
            eprintln!(
                "notice: {left_out} received signature(s) of snapshot {} left out: the store \
                 keeps {MAX_SIGNATURES} for it already (remove unwanted ones from {})",
                snapshot.short(12),
                self.signatures_dir(snapshot).display()
            );
        }
        Ok(left_out)
    }

    /// Whether anything is where `snapshot`'s signatures are kept: false only when nothing is
    /// there (a path that cannot be checked counts as something). Nothing is read: for a
    /// caller that only needs to know whether there is anything to check.
    pub fn signatures_present(&self, snapshot: &ObjectId) -> bool {
        !matches!(
            fs::symlink_metadata(self.signatures_dir(snapshot)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        )
    }

    /// The signatures of `snapshot`, sorted by id (none when it has none). A file whose bytes
    /// do not hash to its name (or too large) is left out with a notice on stderr, and so are
    /// those past [`MAX_SIGNATURES`] (read in directory order).
    pub fn signatures(&self, snapshot: &ObjectId) -> Result<Vec<StoredSignature>, StoreError> {
        let dir = self.signatures_dir(snapshot);
        let mut out = Vec::new();
        for ent in crate::sys::list_dir(&dir)? {
            let ent = ent?;
            let name = ent.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(SUFFIX))
                .and_then(|hex| hex.parse::<ObjectId>().ok())
            else {
                continue;
            };
            if out.len() >= MAX_SIGNATURES {
                // Only concurrent adds (each checks the count, then adds) or hands get here:
                // the first ones read are used, the rest named, never an error that would stop
                // every command that reads this snapshot's signatures.
                eprintln!(
                    "notice: {} holds more than {MAX_SIGNATURES} signatures; the rest are \
                     not read",
                    dir.display()
                );
                break;
            }
            let path = ent.path();
            let Some(file) =
                crate::sys::open_regular(&path).map_err(|e| StoreError::io("open", &path, e))?
            else {
                continue;
            };
            let mut bytes = Vec::new();
            file.take(MAX_SIGNATURE_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| StoreError::io("read", &path, e))?;
            if ObjectId::of(&bytes) != id {
                eprintln!(
                    "notice: signature file {} does not hash to its name (damaged); ignored",
                    path.display()
                );
                continue;
            }
            out.push(StoredSignature { id, bytes });
        }
        out.sort_by_key(|s| s.id);
        Ok(out)
    }

    /// Removes the signature directories of snapshots not in `keep` (gc, after their records
    /// went); returns how many signatures went with them. Only `<64 hex>` names are touched.
    pub(crate) fn remove_orphan_signatures(
        &self,
        keep: &HashSet<ObjectId>,
    ) -> Result<u64, StoreError> {
        let top = self.root().join(SIGNATURES_DIR);
        let mut removed = 0;
        for ent in crate::sys::list_dir(&top)? {
            let ent = ent?;
            let Some(id) = ent
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<ObjectId>().ok())
            else {
                continue;
            };
            if keep.contains(&id) || !ent.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let n = fs::read_dir(ent.path()).map(|rd| rd.count()).unwrap_or(0) as u64;
            match fs::remove_dir_all(ent.path()) {
                Ok(()) => removed += n,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", ent.path(), e)),
            }
        }
        if removed > 0 {
            File::open(&top)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::io("sync", &top, e))?;
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;

    #[test]
    fn add_is_idempotent_and_listing_is_sorted_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let snap = ObjectId::of(b"a snapshot");
        assert!(store.catalog().signatures(&snap).unwrap().is_empty());
        let (a, new_a) = store.catalog().add_signature(&snap, b"first").unwrap();
        let (again, new_again) = store.catalog().add_signature(&snap, b"first").unwrap();
        assert!(new_a && !new_again);
        assert_eq!(a, again);
        store.catalog().add_signature(&snap, b"second").unwrap();
        let listed = store.catalog().signatures(&snap).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed[0].id < listed[1].id);
        // A damaged copy is ignored, not returned.
        fs::write(
            store
                .catalog()
                .signatures_dir(&snap)
                .join(format!("{}{SUFFIX}", a.to_hex())),
            b"other",
        )
        .unwrap();
        assert_eq!(store.catalog().signatures(&snap).unwrap().len(), 1);
        assert!(store.catalog().add_signature(&snap, b"").is_err());
        assert!(store
            .catalog()
            .add_signature(&snap, &vec![b'x'; MAX_SIGNATURE_BYTES + 1])
            .is_err());
        // Received signatures past the bound are left out, not an error.
        let full = ObjectId::of(b"full");
        let many: Vec<Vec<u8>> = (0..MAX_SIGNATURES + 2)
            .map(|i| format!("sig {i}").into_bytes())
            .collect();
        let lock = store.write_lock().unwrap();
        assert_eq!(
            store
                .catalog()
                .add_received_signatures(&lock, &full, &many)
                .unwrap(),
            2
        );
        assert_eq!(
            store.catalog().signatures(&full).unwrap().len(),
            MAX_SIGNATURES
        );
        assert_eq!(
            store
                .catalog()
                .add_received_signatures(&lock, &full, &many[..1])
                .unwrap(),
            0,
            "one it holds already is no news"
        );
        drop(lock);
        // More files than the bound (concurrent adds, or hands): the first are read, no error.
        let extra = b"one too many".to_vec();
        fs::write(
            store
                .catalog()
                .signatures_dir(&full)
                .join(format!("{}{SUFFIX}", ObjectId::of(&extra).to_hex())),
            &extra,
        )
        .unwrap();
        assert_eq!(
            store.catalog().signatures(&full).unwrap().len(),
            MAX_SIGNATURES
        );
        // gc's sweep keeps what it is told to keep.
        let other = ObjectId::of(b"another");
        store.catalog().add_signature(&other, b"x").unwrap();
        assert_eq!(
            store
                .catalog()
                .remove_orphan_signatures(&HashSet::from([snap]))
                .unwrap(),
            2 + MAX_SIGNATURES as u64
        );
        assert!(store.catalog().signatures(&other).unwrap().is_empty());
        assert!(store.catalog().signatures(&full).unwrap().is_empty());
        assert_eq!(store.catalog().signatures(&snap).unwrap().len(), 1);
        // No object was written: signatures live outside objects/.
        assert!(store.objects().list().unwrap().is_empty());
    }
}
