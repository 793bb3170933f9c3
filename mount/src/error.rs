//! `MountError`: everything that can stop a mount, an unmount or a mountpoint check.
//!
//! One enum for the crate (callers match on the mountpoint variants to explain them); every
//! message names the path and, where there is one, the command that fixes it. Errors *inside*
//! a running mount never surface here: they become errno values (see `fs::errno`).

use std::io;
use std::path::PathBuf;

use zeroclaw_bundle_store::{ObjectId, StoreError};

/// Why a mount, an unmount or a mountpoint check failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The mountpoint does not exist.
    #[error("mountpoint {0} does not exist: create an empty directory there first")]
    MissingMountpoint(PathBuf),
    /// The mountpoint is a file (or something else that is not a directory).
    #[error("mountpoint {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The mountpoint has entries, which the mount would hide.
    #[error("mountpoint {0} is not empty: mount on an empty directory (the mount would hide what is there)")]
    NotEmpty(PathBuf),
    /// Something is already mounted on the mountpoint.
    #[error("{path} is already a mount point ({fstype} from {device}): unmount it first or choose another directory")]
    AlreadyMounted {
        /// The mountpoint.
        path: PathBuf,
        /// Filesystem type of the existing mount, from `/proc/self/mountinfo`.
        fstype: String,
        /// Its source (for ours: `zeroclaw-bundle:<label>`).
        device: String,
    },
    /// A FUSE mount whose serving process died: every access fails with ENOTCONN.
    #[error("{0} is a stale FUSE mount (\"Transport endpoint is not connected\"): the process that served it has died; unmount it (`fusermount3 -u {0}`) and try again")]
    StaleMount(PathBuf),
    /// FUSE cannot be used here (no `/dev/fuse`, no permission, no `fusermount3`).
    #[error("FUSE is not available: {why}")]
    FuseUnavailable {
        /// What is missing and how to get it.
        why: String,
    },
    /// The snapshot's root tree cannot be read, so there is nothing to serve.
    #[error("could not read the root tree {root} of the snapshot to mount")]
    Root {
        /// The root tree id.
        root: ObjectId,
        /// What the object source said.
        source: StoreError,
    },
    /// The snapshot expands past the store's limits (`zeroclaw_bundle_store::limits`), so
    /// serving it could grow the daemon without bound.
    #[error("refusing to mount")]
    TooLarge(#[source] StoreError),
    /// The kernel refused the mount, or the session could not start.
    #[error("could not mount on {path}")]
    Mount {
        /// The mountpoint.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// `umount` of a path that is not a mount point.
    #[error("{0} is not mounted")]
    NotMounted(PathBuf),
    /// `umount` of a mount that zeroclaw-bundle did not make.
    #[error("{path} is a {fstype} mount from {device}, not a zeroclaw-bundle mount: refusing to unmount it")]
    NotOurMount {
        /// The mountpoint.
        path: PathBuf,
        /// Its filesystem type.
        fstype: String,
        /// Its source.
        device: String,
    },
    /// The mount is in use (a shell's working directory, an open file).
    #[error("{0} is busy: a process still has a file or directory open in it (`fuser -vm {0}` lists them); close them and unmount again")]
    Busy(PathBuf),
    /// Unmounting failed for another reason.
    #[error("could not unmount {path}: {why}")]
    Unmount {
        /// The mountpoint.
        path: PathBuf,
        /// The reason (errno text or `fusermount3`'s message).
        why: String,
    },
    /// An I/O failure while inspecting a path.
    #[error("could not {op} {path}")]
    Io {
        /// The verb.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl MountError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> MountError {
        MountError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
