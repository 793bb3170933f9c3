//! `recover DEST`: repairs what an interrupted publish left beside the destination.
//!
//! The leftovers name no destination, only a token, so the rules are built from what each
//! crash point of the protocol can leave:
//!
//! - A **matching pair** `.zeroclaw-export-<T>` + `.zeroclaw-export-old-<T>` exists only
//!   between the two renames of the fallback (or in its rollback): the destination is
//!   missing and the old tree is intact. If DEST is missing, the one such pair is restored
//!   (old tree renamed back to DEST, staged tree removed); several pairs are refused as
//!   ambiguous. If DEST exists, a pair belongs to another destination and is left alone.
//! - An **unpaired old tree** is what remains after the swap completed (a crash after the
//!   exchange's retire, or after the second rename): garbage whatever its destination was,
//!   removed when DEST exists (left alone when DEST is missing: it is not clear whose it is).
//! - An **unpaired staging tree** is an unfinished staging, or the previous tree after an
//!   exchange whose retire did not happen: garbage either way, removed.
//!
//! A leftover whose `flock` is held belongs to a publish still running and is never touched.
//! `recover` claims the destination first (`claim`): it refuses to run beside a publish to
//! the same destination, and removes the stale lock file of a killed one.
//! Only directories are considered; a file or symlink with such a name is not ours.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{resolve, PublishError, RETIRED_PREFIX, STAGING_PREFIX};
use crate::sys::{self, FileKind};

/// A leftover `recover` did not touch, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftAlone {
    /// The leftover.
    pub path: PathBuf,
    /// Why it was kept.
    pub reason: &'static str,
}

/// What `recover` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The resolved destination.
    pub dest: PathBuf,
    /// The previous tree that was renamed back to the destination.
    pub restored_from: Option<PathBuf>,
    /// Previous trees removed (the publish they belonged to had completed).
    pub removed_old: Vec<PathBuf>,
    /// Staging trees removed.
    pub removed_staging: Vec<PathBuf>,
    /// Leftovers kept.
    pub left_alone: Vec<LeftAlone>,
}

impl Recovered {
    /// True when there was nothing to repair or remove.
    pub fn nothing_done(&self) -> bool {
        self.restored_from.is_none()
            && self.removed_old.is_empty()
            && self.removed_staging.is_empty()
    }
}

/// The token of a leftover name, or `None` when `name` is not `<prefix><6 alphanumerics>`.
fn token<'a>(name: &'a [u8], prefix: &str) -> Option<&'a [u8]> {
    let t = name.strip_prefix(prefix.as_bytes())?;
    (t.len() == 6 && t.iter().all(u8::is_ascii_alphanumeric)).then_some(t)
}

/// A leftover opened and locked (so no publish can be holding it while we work).
struct Leftover {
    name: Vec<u8>,
    path: PathBuf,
    _fd: OwnedFd,
}

/// Opens directory `name` and takes its lock; `Ok(None)` when it is not a directory or a live
/// publish holds it (recorded in `left`).
fn claim(
    parent: BorrowedFd<'_>,
    parent_path: &Path,
    name: &[u8],
    left: &mut Vec<LeftAlone>,
) -> Result<Option<Leftover>, PublishError> {
    let path = parent_path.join(std::ffi::OsStr::from_bytes(name));
    match sys::stat_at(parent, name) {
        Ok(st) if st.kind == FileKind::Dir => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PublishError::io("inspect", &path, e)),
    }
    let fd = match sys::open_dir_at(parent, name) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PublishError::io("open", &path, e)),
    };
    if !sys::try_lock_exclusive(&fd).map_err(|e| PublishError::io("lock", &path, e))? {
        left.push(LeftAlone {
            path,
            reason: "a publish that is still running holds it",
        });
        return Ok(None);
    }
    Ok(Some(Leftover {
        name: name.to_vec(),
        path,
        _fd: fd,
    }))
}

/// Repairs the leftovers of an interrupted publish beside `dest` (see the module doc).
pub fn recover(dest: &Path) -> Result<Recovered, PublishError> {
    let d = resolve::resolve_destination(dest)?;
    let mut out = Recovered {
        dest: d.full.clone(),
        restored_from: None,
        removed_old: Vec::new(),
        removed_staging: Vec::new(),
        left_alone: Vec::new(),
    };
    let parent = match sys::open_dir_path(&d.parent) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(PublishError::io("open", &d.parent, e)),
    };
    // Claiming the destination keeps a publish to it from starting meanwhile, fails at once
    // when one is running, and removes the lock file a killed publish left.
    let _claim = super::claim::claim(dest, &d)?;
    let parent_fd = parent.as_fd();
    let names =
        sys::read_dir_names(parent_fd).map_err(|e| PublishError::io("read", &d.parent, e))?;
    let mut staged: BTreeMap<Vec<u8>, Leftover> = BTreeMap::new();
    let mut old: BTreeMap<Vec<u8>, Leftover> = BTreeMap::new();
    for name in &names {
        let (map, t) = if let Some(t) = token(name, RETIRED_PREFIX) {
            (&mut old, t)
        } else if let Some(t) = token(name, STAGING_PREFIX) {
            (&mut staged, t)
        } else {
            continue;
        };
        if let Some(l) = claim(parent_fd, &d.parent, name, &mut out.left_alone)? {
            map.insert(t.to_vec(), l);
        }
    }
    let dest_name = d.name.as_bytes();
    let dest_present = match sys::stat_at(parent_fd, dest_name) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(PublishError::io("inspect", &d.full, e)),
    };

    let pairs: Vec<Vec<u8>> = old
        .keys()
        .filter(|t| staged.contains_key(*t))
        .cloned()
        .collect();
    if !dest_present && pairs.len() > 1 {
        return Err(PublishError::RecoverAmbiguous {
            path: dest.to_path_buf(),
            candidates: pairs
                .iter()
                .filter_map(|t| old.get(t))
                .map(|l| l.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    for t in &pairs {
        let (Some(o), Some(s)) = (old.remove(t), staged.remove(t)) else {
            continue;
        };
        if dest_present {
            for l in [o, s] {
                out.left_alone.push(LeftAlone {
                    path: l.path,
                    reason: "an interrupted publish of another destination (this one exists)",
                });
            }
            continue;
        }
        sys::rename_noreplace(parent_fd, &o.name, parent_fd, dest_name)
            .map_err(|e| PublishError::io("move the previous bundle back to", &d.full, e))?;
        sys::fsync(parent_fd).map_err(|e| PublishError::io("sync", &d.parent, e))?;
        out.restored_from = Some(o.path);
        remove(parent_fd, s, &mut out.removed_staging)?;
    }
    for (_, l) in std::mem::take(&mut old) {
        if dest_present || out.restored_from.is_some() {
            remove(parent_fd, l, &mut out.removed_old)?;
        } else {
            out.left_alone.push(LeftAlone {
                path: l.path,
                reason: "a previous tree with no staged partner while the destination is missing",
            });
        }
    }
    for (_, l) in std::mem::take(&mut staged) {
        remove(parent_fd, l, &mut out.removed_staging)?;
    }
    if !out.nothing_done() {
        sys::fsync(parent_fd).map_err(|e| PublishError::io("sync", &d.parent, e))?;
    }
    Ok(out)
}

fn remove(
    parent: BorrowedFd<'_>,
    l: Leftover,
    done: &mut Vec<PathBuf>,
) -> Result<(), PublishError> {
    sys::remove_tree_at(parent, &l.name).map_err(|e| PublishError::io("remove", &l.path, e))?;
    done.push(l.path);
    Ok(())
}
