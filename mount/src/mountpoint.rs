//! Mountpoint admission (`check_mountpoint`) and `unmount`: the checks and the one-line
//! explanations a person needs before and after a mount.
//!
//! Admission order matters: a stale FUSE mount fails stat with ENOTCONN (or, when the kernel
//! still has the root's attributes cached, as ours always do, only statfs fails), so that is
//! recognised first; a live mount point is reported as a mount before its (foreign) content
//! would make it look merely "not empty". `unmount` only ever unmounts a mount this crate
//! made (a FUSE mount whose source is our fsname), never whatever happens to be at a path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::MountError;
use crate::sys::{self, UnmountOutcome};

/// Checks that `path` can be mounted on: an existing, empty directory that is not already a
/// mount point (and not a stale one), on a host where FUSE is usable. Each failure is its own
/// [`MountError`] variant with a message that names the path and the fix.
pub fn check_mountpoint(path: &Path) -> Result<(), MountError> {
    checked_mountpoint(path).map(drop)
}

/// [`check_mountpoint`], returning the mountpoint's absolute form as the mount table spells
/// it (what [`mount_table_path`] gives for a live directory), resolved once.
pub(crate) fn checked_mountpoint(path: &Path) -> Result<PathBuf, MountError> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if sys::is_not_connected(&e) => {
            return Err(MountError::StaleMount(path.to_path_buf()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(MountError::MissingMountpoint(path.to_path_buf()))
        }
        Err(e) => return Err(MountError::io("inspect mountpoint", path, e)),
    };
    if !meta.is_dir() {
        return Err(MountError::NotADirectory(path.to_path_buf()));
    }
    let abs = fs::canonicalize(path).map_err(|e| MountError::io("resolve mountpoint", path, e))?;
    if let Some(m) =
        sys::mount_at(&abs).map_err(|e| MountError::io("read", "/proc/self/mountinfo", e))?
    {
        if sys::is_stale(&abs) {
            return Err(MountError::StaleMount(path.to_path_buf()));
        }
        return Err(MountError::AlreadyMounted {
            path: path.to_path_buf(),
            fstype: m.fstype,
            device: m.source,
        });
    }
    let mut entries = fs::read_dir(path).map_err(|e| MountError::io("list", path, e))?;
    if entries.next().is_some() {
        return Err(MountError::NotEmpty(path.to_path_buf()));
    }
    sys::probe_dev_fuse().map_err(|why| MountError::FuseUnavailable { why })?;
    if !sys::is_root() && sys::fusermount().is_none() {
        return Err(MountError::FuseUnavailable {
            why: "fusermount3 is not installed (it lets a non-root user mount FUSE; \
                  install the fuse3 package)"
                .into(),
        });
    }
    Ok(abs)
}

/// The absolute form of a mountpoint as the mount table spells it. A live mount resolves
/// fully; a stale one (where stat fails) resolves through its parent.
pub(crate) fn mount_table_path(path: &Path) -> Result<PathBuf, MountError> {
    fs::canonicalize(path)
        .or_else(|_| sys::absolute(path))
        .map_err(|e| MountError::io("resolve mountpoint", path, e))
}

/// Unmounts the zeroclaw-bundle mount on `mountpoint` (live or stale), what
/// `zeroclaw-bundle umount` runs. Refuses a path that is not mounted or holds another kind of
/// mount. A mount still in use fails with [`MountError::Busy`] and stays mounted.
pub fn unmount(mountpoint: &Path) -> Result<(), MountError> {
    let abs = mount_table_path(mountpoint)?;
    let entry = sys::mount_at(&abs)
        .map_err(|e| MountError::io("read", "/proc/self/mountinfo", e))?
        .ok_or_else(|| MountError::NotMounted(mountpoint.to_path_buf()))?;
    if !entry.is_ours() {
        return Err(MountError::NotOurMount {
            path: mountpoint.to_path_buf(),
            fstype: entry.fstype,
            device: entry.source,
        });
    }
    match sys::unmount(&abs, false) {
        UnmountOutcome::Done => Ok(()),
        UnmountOutcome::Busy => Err(MountError::Busy(mountpoint.to_path_buf())),
        UnmountOutcome::Failed(why) => Err(MountError::Unmount {
            path: mountpoint.to_path_buf(),
            why,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_and_nonempty_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(matches!(
            check_mountpoint(&missing),
            Err(MountError::MissingMountpoint(_))
        ));
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            check_mountpoint(&file),
            Err(MountError::NotADirectory(_))
        ));
        let full = dir.path().join("full");
        fs::create_dir(&full).unwrap();
        fs::write(full.join("x"), "x").unwrap();
        let err = check_mountpoint(&full).unwrap_err();
        assert!(matches!(err, MountError::NotEmpty(_)), "{err}");
        assert!(err.to_string().contains("full"), "{err}");
    }

    #[test]
    fn proc_is_a_mount_and_not_ours() {
        let err = check_mountpoint(Path::new("/proc")).unwrap_err();
        assert!(matches!(err, MountError::AlreadyMounted { .. }), "{err}");
        let err = unmount(Path::new("/proc")).unwrap_err();
        assert!(matches!(err, MountError::NotOurMount { .. }), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = unmount(dir.path()).unwrap_err();
        assert!(matches!(err, MountError::NotMounted(_)), "{err}");
    }
}
