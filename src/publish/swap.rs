//! Admission and the swap, every step through the parent directory's fd.
//!
//! Admission binds to an object: the destination's (dev, ino) is recorded, and before the
//! swap the object at the name must still be that directory (not another one, not a source
//! tree). The recursive delete of the previous tree only ever runs after its identity was
//! checked again at its retired name.
//!
//! - Vacant: `renameat2(RENAME_NOREPLACE)`, which refuses anything that appeared meanwhile.
//! - Existing, exchange supported: `renameat2(RENAME_EXCHANGE)` swaps staged and existing in
//!   one crash-atomic step. The old tree, now at the staging name, is checked, renamed to
//!   `.zeroclaw-export-old-<token>` and removed. A crash leaves the new tree in place plus a
//!   hidden leftover that `recover` removes.
//! - Existing, exchange unsupported: existing -> `.zeroclaw-export-old-<token>`, staged ->
//!   destination, rolled back on failure. A crash between the two renames leaves the matching
//!   pair (`.zeroclaw-export-<token>` and `-old-<token>`) that `recover` turns back into the
//!   old tree.
//!
//! An *empty* destination (admitted without needing `--force`) must still be empty when it is
//! retired: its removal is an `rmdir`, which the kernel refuses if entries arrived; the swap is
//! then undone and the publish refused, so whatever arrived is kept.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{PublishError, Staging};
use crate::hooks;
use crate::sys::{self, FileKind, Stat};

/// What admission decided about the destination.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Nothing at the name.
    Vacant,
    /// An empty real directory; it must still be empty at the swap.
    Empty {
        id: Stat,
        /// Held open so its `flock` tells `recover` the publish is live.
        _fd: OwnedFd,
    },
    /// A non-empty real directory, admitted by `--force`.
    Forced { id: Stat, _fd: OwnedFd },
}

impl Admission {
    /// A new fd on the admitted non-empty destination (the tree a publish may reuse files
    /// from), for a forced admission.
    pub(crate) fn previous_tree(&self) -> Option<OwnedFd> {
        match self {
            Admission::Forced { _fd, .. } => _fd.try_clone().ok(),
            _ => None,
        }
    }
}

/// Classifies the destination `name` in `parent` (SPEC §7, ref §9.3).
pub(crate) fn admit(
    parent: BorrowedFd<'_>,
    name: &[u8],
    given: &Path,
    force: bool,
) -> Result<Admission, PublishError> {
    let path = || given.to_path_buf();
    let st = match sys::stat_at(parent, name) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Admission::Vacant),
        Err(e) => return Err(PublishError::io("inspect destination", given, e)),
    };
    match st.kind {
        FileKind::Symlink => return Err(PublishError::DestIsSymlink { path: path() }),
        FileKind::Dir => {}
        FileKind::File | FileKind::Special => {
            return Err(PublishError::DestNotADirectory { path: path() })
        }
    }
    // Nothing, a symlink or a non-directory here now means the entry was swapped since the
    // stat; anything else (say EACCES) is reported as it is.
    let fd = sys::open_dir_at(parent, name).map_err(|e| {
        if matches!(
            e.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        ) || sys::is_symlink_refusal(&e)
        {
            PublishError::DestChanged { path: path() }
        } else {
            PublishError::io("open destination", given, e)
        }
    })?;
    let opened = sys::fstat(&fd).map_err(|e| PublishError::io("inspect destination", given, e))?;
    if !opened.same_object(&st) {
        return Err(PublishError::DestChanged { path: path() });
    }
    let empty = sys::read_dir_names(fd.as_fd())
        .map_err(|e| PublishError::io("read destination", given, e))?
        .is_empty();
    let _ = sys::try_lock_exclusive(&fd);
    if empty {
        Ok(Admission::Empty { id: st, _fd: fd })
    } else if force {
        Ok(Admission::Forced { id: st, _fd: fd })
    } else {
        Err(PublishError::DestNotEmpty { path: path() })
    }
}

/// How the swap went.
pub(crate) struct SwapOutcome {
    pub used_exchange: bool,
    pub retired_left: Option<PathBuf>,
}

/// Everything the swap touches.
pub(crate) struct Swapper<'a> {
    pub parent: BorrowedFd<'a>,
    pub parent_path: &'a Path,
    pub name: &'a [u8],
    pub full: &'a Path,
    pub given: &'a Path,
    pub hook_path: &'a str,
    pub sources: &'a [Stat],
}

fn is_exists(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists || e.kind() == io::ErrorKind::DirectoryNotEmpty
}

impl Swapper<'_> {
    fn given(&self) -> PathBuf {
        self.given.to_path_buf()
    }

    fn path_of(&self, name: &[u8]) -> PathBuf {
        self.parent_path.join(std::ffi::OsStr::from_bytes(name))
    }

    fn seam(&self, name: &str) {
        hooks::seam(name, self.hook_path);
    }

    /// The object now at `name`, or `None` when nothing is there.
    fn at(&self, name: &[u8]) -> Result<Option<Stat>, PublishError> {
        match sys::stat_at(self.parent, name) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PublishError::io("inspect", self.path_of(name), e)),
        }
    }

    fn sync_parent(&self) -> Result<(), PublishError> {
        sys::fsync(self.parent).map_err(|error| PublishError::NotDurable {
            path: self.given(),
            error,
        })
    }

    /// Moves the staged tree into place; see the module doc.
    pub(crate) fn swap(
        &self,
        admission: &Admission,
        staging: &mut Staging<'_>,
    ) -> Result<SwapOutcome, PublishError> {
        let (id, must_be_empty) = match admission {
            Admission::Vacant => return self.swap_vacant(staging),
            Admission::Empty { id, .. } => (id, true),
            Admission::Forced { id, .. } => (id, false),
        };
        match self.at(self.name)? {
            Some(cur) if self.sources.iter().any(|s| s.same_object(&cur)) => {
                return Err(PublishError::DestIsSource { path: self.given() })
            }
            Some(cur) if cur.same_object(id) => {}
            _ => return Err(PublishError::DestChanged { path: self.given() }),
        }
        // The check above and the rename below are two system calls: whatever replaces the
        // destination in between is caught after the rename (`after_exchange`, `two_renames`).
        self.seam("publish-before-rename");
        let exchanged = match hooks::fault("rename", self.hook_path)
            .and_then(|()| sys::rename_exchange(self.parent, &staging.name, self.parent, self.name))
        {
            Ok(done) => done,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(PublishError::DestChanged { path: self.given() })
            }
            Err(e) => {
                return Err(PublishError::io(
                    "swap the staged bundle into",
                    self.full,
                    e,
                ))
            }
        };
        if exchanged {
            self.after_exchange(id, must_be_empty, staging)
        } else {
            self.two_renames(id, must_be_empty, staging)
        }
    }

    fn swap_vacant(&self, staging: &mut Staging<'_>) -> Result<SwapOutcome, PublishError> {
        if self.at(self.name)?.is_some() {
            return Err(PublishError::DestAppeared { path: self.given() });
        }
        // Anything that appears now is refused by RENAME_NOREPLACE itself.
        self.seam("publish-before-rename");
        match hooks::fault("rename", self.hook_path).and_then(|()| {
            sys::rename_noreplace(self.parent, &staging.name, self.parent, self.name)
        }) {
            Ok(()) => staging.armed = false,
            Err(e) if is_exists(&e) => {
                return Err(PublishError::DestAppeared { path: self.given() })
            }
            Err(e) => {
                return Err(PublishError::io(
                    "move the staged bundle into",
                    self.full,
                    e,
                ))
            }
        }
        self.seam("publish-after-rename");
        self.sync_parent()?;
        Ok(SwapOutcome {
            used_exchange: false,
            retired_left: None,
        })
    }

    /// Exchange done: the staging name holds what was at the destination.
    fn after_exchange(
        &self,
        id: &Stat,
        must_be_empty: bool,
        staging: &mut Staging<'_>,
    ) -> Result<SwapOutcome, PublishError> {
        // The staging name no longer holds our tree: the guard must not remove it.
        staging.armed = false;
        self.seam("publish-after-exchange");
        let moved = self.at(&staging.name).ok().flatten();
        if !moved.is_some_and(|m| m.same_object(id)) {
            // Not the admitted directory: put it back; the guard then removes our tree.
            self.exchange_back(&staging.name, &staging.path)?;
            staging.armed = true;
            return Err(PublishError::DestChanged { path: self.given() });
        }
        let old_name: &[u8] = match sys::rename_noreplace(
            self.parent,
            &staging.name,
            self.parent,
            &staging.retired,
        ) {
            Ok(()) => &staging.retired,
            // Untidy but published: remove it from where it is.
            Err(_) => &staging.name,
        };
        self.seam("publish-after-retire");
        if must_be_empty {
            let mut retired_left = None;
            if let Err(e) = sys::unlink_at(self.parent, old_name, true) {
                if !is_exists(&e) {
                    // Published; the empty directory just could not be removed.
                    retired_left = Some(self.path_of(old_name));
                } else {
                    // Entries arrived: swap them back, drop our tree.
                    self.exchange_back(old_name, &self.path_of(old_name))?;
                    let _ = sys::remove_tree_at(self.parent, old_name);
                    return Err(PublishError::DestNoLongerEmpty { path: self.given() });
                }
            }
            self.sync_parent()?;
            self.seam("publish-after-remove");
            return Ok(SwapOutcome {
                used_exchange: true,
                retired_left,
            });
        }
        self.sync_parent()?;
        let retired_left = self.remove_retired(old_name, id);
        self.seam("publish-after-remove");
        Ok(SwapOutcome {
            used_exchange: true,
            retired_left,
        })
    }

    /// Undoes an exchange of `other` with the destination.
    fn exchange_back(&self, other: &[u8], other_path: &Path) -> Result<(), PublishError> {
        match sys::rename_exchange(self.parent, other, self.parent, self.name) {
            Ok(true) => Ok(()),
            Ok(false) => Err(PublishError::RestoreFailed {
                path: self.given(),
                retired: other_path.to_path_buf(),
                error: io::Error::other("the filesystem stopped supporting RENAME_EXCHANGE"),
            }),
            Err(error) => Err(PublishError::RestoreFailed {
                path: self.given(),
                retired: other_path.to_path_buf(),
                error,
            }),
        }
    }

    /// The fallback: existing -> retired, staged -> destination.
    fn two_renames(
        &self,
        id: &Stat,
        must_be_empty: bool,
        staging: &mut Staging<'_>,
    ) -> Result<SwapOutcome, PublishError> {
        let retired_path = self.path_of(&staging.retired);
        match hooks::fault("rename-first", self.hook_path).and_then(|()| {
            sys::rename_noreplace(self.parent, self.name, self.parent, &staging.retired)
        }) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(PublishError::DestChanged { path: self.given() })
            }
            Err(e) => {
                return Err(PublishError::io(
                    "retire the existing bundle at",
                    self.full,
                    e,
                ))
            }
        }
        self.seam("publish-after-first-rename");
        let moved = self.at(&staging.retired).ok().flatten();
        if !moved.is_some_and(|m| m.same_object(id)) {
            self.move_back(&staging.retired, &retired_path, None)?;
            return Err(PublishError::DestChanged { path: self.given() });
        }
        if let Err(e) = hooks::fault("rename-second", self.hook_path).and_then(|()| {
            sys::rename_noreplace(self.parent, &staging.name, self.parent, self.name)
        }) {
            self.move_back(&staging.retired, &retired_path, Some(&e))?;
            return Err(if is_exists(&e) {
                PublishError::DestAppeared { path: self.given() }
            } else {
                PublishError::io("move the staged bundle into", self.full, e)
            });
        }
        staging.armed = false;
        self.seam("publish-after-second-rename");
        if must_be_empty {
            let mut retired_left = None;
            match sys::unlink_at(self.parent, &staging.retired, true) {
                Ok(()) => {}
                // Published; the empty directory just could not be removed.
                Err(e) if !is_exists(&e) => retired_left = Some(retired_path.clone()),
                Err(_) => {
                    // Entries arrived: our tree goes back to the staging name (a crash here leaves
                    // the pair `recover` restores), the previous directory back to the name.
                    sys::rename_noreplace(self.parent, self.name, self.parent, &staging.name)
                        .map_err(|error| PublishError::RestoreFailed {
                            path: self.given(),
                            retired: retired_path.clone(),
                            error,
                        })?;
                    staging.armed = true;
                    self.move_back(&staging.retired, &retired_path, None)?;
                    return Err(PublishError::DestNoLongerEmpty { path: self.given() });
                }
            }
            self.sync_parent()?;
            self.seam("publish-after-remove");
            return Ok(SwapOutcome {
                used_exchange: false,
                retired_left,
            });
        }
        self.sync_parent()?;
        let retired_left = self.remove_retired(&staging.retired, id);
        self.seam("publish-after-remove");
        Ok(SwapOutcome {
            used_exchange: false,
            retired_left,
        })
    }

    /// Renames `retired` back to the destination name (rollback of the first rename).
    fn move_back(
        &self,
        retired: &[u8],
        retired_path: &Path,
        first: Option<&io::Error>,
    ) -> Result<(), PublishError> {
        sys::rename_noreplace(self.parent, retired, self.parent, self.name).map_err(|e| {
            let error = match first {
                Some(f) => io::Error::new(f.kind(), format!("{f}; moving it back: {e}")),
                None => e,
            };
            PublishError::RestoreFailed {
                path: self.given(),
                retired: retired_path.to_path_buf(),
                error,
            }
        })
    }

    /// Removes the previous tree at `old` if it is still the admitted object; returns its path
    /// when it is left behind.
    fn remove_retired(&self, old: &[u8], id: &Stat) -> Option<PathBuf> {
        let path = self.path_of(old);
        match sys::stat_at(self.parent, old) {
            Ok(st) if st.same_object(id) => match sys::remove_tree_at(self.parent, old) {
                Ok(()) => None,
                Err(_) => Some(path),
            },
            Ok(_) => Some(path),
            Err(_) => None,
        }
    }
}
