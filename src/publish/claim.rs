//! The claim on a destination: `<parent>/.zeroclaw-export-lock-<name>`, a file held under
//! `flock` from before an export captures anything until its publish is over, so a second
//! export or checkout to the same destination fails at once instead of capturing for nothing
//! and then losing at admission. The lock dies with its process (a killed export never
//! blocks the next one); the file is removed when the claim drops.
//!
//! Removing a lock file races with a process that opened it just before: after taking the
//! lock, the claimant checks that the locked file is still the one at the name (same dev and
//! ino) and starts over otherwise. The holder unlinks the name before it unlocks, so whoever
//! holds a lock on the file at the name holds the destination.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use zeroclaw_bundle_store::ObjectId;

use super::{resolve, PublishError};
use crate::sys;

/// Prefix of a destination's lock file.
pub const LOCK_PREFIX: &str = ".zeroclaw-export-lock-";

/// A held claim on a destination; dropping it releases the destination.
#[derive(Debug)]
pub struct DestClaim {
    parent: OwnedFd,
    name: Vec<u8>,
    _file: File,
}

impl Drop for DestClaim {
    fn drop(&mut self) {
        let _ = sys::unlink_at(self.parent.as_fd(), &self.name, false);
    }
}

/// The lock file's name for destination name `name` (hashed when the name is too long to
/// carry the prefix within NAME_MAX).
fn lock_name(name: &[u8]) -> Vec<u8> {
    let mut out = LOCK_PREFIX.as_bytes().to_vec();
    if out.len() + name.len() <= 255 {
        out.extend_from_slice(name);
    } else {
        out.extend_from_slice(ObjectId::of(name).to_hex().as_bytes());
    }
    out
}

/// Claims destination `d` (resolved from `dest`, `--out` as given, which messages name) for
/// one publish. Creates the destination's parent when it is missing (the publish would create
/// it anyway). Fails with [`PublishError::DestBusy`] when another process holds the claim.
pub(crate) fn claim(dest: &Path, d: &resolve::Destination) -> Result<DestClaim, PublishError> {
    std::fs::create_dir_all(&d.parent).map_err(|e| PublishError::io("create", &d.parent, e))?;
    let parent =
        sys::open_dir_path(&d.parent).map_err(|e| PublishError::io("open", &d.parent, e))?;
    let name = lock_name(d.name.as_bytes());
    let path = d.parent.join(std::ffi::OsStr::from_bytes(&name));
    for _ in 0..64 {
        let file = sys::open_lock_file_at(parent.as_fd(), &name)
            .map_err(|e| PublishError::io("create the lock file", &path, e))?;
        if !sys::try_lock_exclusive(&file).map_err(|e| PublishError::io("lock", &path, e))? {
            return Err(PublishError::DestBusy {
                path: dest.to_path_buf(),
                lock: path,
            });
        }
        let held = sys::fstat(&file).map_err(|e| PublishError::io("inspect", &path, e))?;
        match sys::stat_at(parent.as_fd(), &name) {
            Ok(st) if st.same_object(&held) => {
                return Ok(DestClaim {
                    parent,
                    name,
                    _file: file,
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(PublishError::io("inspect", &path, e)),
        }
    }
    Err(PublishError::DestBusy {
        path: dest.to_path_buf(),
        lock: path,
    })
}
