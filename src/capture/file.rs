//! Reading one classified regular file, on a capture worker thread: open it no-follow through
//! its directory's fd, compare the opened object with the classification, and stream it into
//! the store. Also the meaning of a failed no-follow open, shared with directory opens.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{mpsc, Arc};

use zeroclaw_bundle_store::{ObjectId, Store, StoreError};

use crate::capture::{CaptureError, Sink, SkipReason};
use crate::hooks;
use crate::sys::{self, FileKind, Stat};

/// One file for a worker.
pub(crate) struct FileJob {
    /// The directory holding it (shared with the walker and other jobs of that directory).
    pub dir: Arc<OwnedFd>,
    /// Its name in that directory.
    pub name: Vec<u8>,
    /// What the walker's no-follow stat saw.
    pub classified: Stat,
    /// Its path in the bundle, for messages and the stat cache.
    pub path: String,
    /// Its position in the directory listing.
    pub slot: usize,
    /// Its directory among the walk's open ones (see `waiting`).
    pub dir_key: usize,
    /// Its number in walk order (see `waiting`).
    pub seq: u64,
    /// Where the worker sends the job back with its outcome.
    pub reply: mpsc::Sender<(FileJob, FileOutcome)>,
}

/// What became of a file.
pub(crate) enum FileOutcome {
    /// Stored: the blob id, its length, the fstat of the opened fd, and the clock just
    /// before that fstat (what the stat cache's racy rule measures the file's times against).
    Stored {
        id: ObjectId,
        len: u64,
        opened: Stat,
        read_from_ns: i64,
    },
    /// Skipped and counted.
    Skipped(SkipReason),
    /// The capture must fail.
    Failed(CaptureError),
}

/// What a failed no-follow open means.
pub(crate) enum OpenFailure {
    /// Skip and count.
    Skip(SkipReason),
    /// Fail the capture.
    Fail(CaptureError),
}

/// Decides what a failed no-follow open means: a symlink swapped in fails closed; a vanished
/// entry, or one replaced by something that is not a symlink, is a replaced one; anything
/// else is unreadable.
pub(crate) fn open_failure(
    dir: BorrowedFd<'_>,
    name: &[u8],
    path: &str,
    e: io::Error,
) -> OpenFailure {
    let now = sys::stat_at(dir, name).ok();
    let now_symlink = matches!(now, Some(st) if st.kind == FileKind::Symlink);
    if now_symlink || (sys::is_symlink_refusal(&e) && now.is_none()) {
        return OpenFailure::Fail(CaptureError::SwappedForSymlink {
            path: path.to_string(),
        });
    }
    if sys::is_symlink_refusal(&e)
        || e.kind() == io::ErrorKind::NotFound
        || sys::is_no_such_device(&e)
    {
        return OpenFailure::Skip(SkipReason::Replaced);
    }
    OpenFailure::Fail(CaptureError::Unreadable {
        path: path.to_string(),
        source: e,
    })
}

/// Opens, checks and stores one file.
pub(crate) fn read_file(store: &Store, sink: &Sink, job: &FileJob) -> FileOutcome {
    let dir = std::os::fd::AsFd::as_fd(&*job.dir);
    hooks::seam("classify-open", &job.path);
    let mut file = match sys::open_file_at(dir, &job.name) {
        Ok(f) => f,
        Err(e) => {
            return match open_failure(dir, &job.name, &job.path, e) {
                OpenFailure::Skip(r) => FileOutcome::Skipped(r),
                OpenFailure::Fail(e) => FileOutcome::Failed(e),
            }
        }
    };
    // Every change to the file from now on moves its ctime past this moment minus the clock's
    // tick: the stat cache may trust the times fstat gives when they are older than that.
    let read_from_ns = crate::clock::now_ns();
    let opened = match sys::fstat(&file) {
        Ok(st) => st,
        Err(source) => {
            return FileOutcome::Failed(CaptureError::Unreadable {
                path: job.path.clone(),
                source,
            })
        }
    };
    if opened.kind != FileKind::File || !opened.same_object(&job.classified) {
        return FileOutcome::Skipped(if opened.kind == FileKind::File && opened.nlink > 1 {
            SkipReason::HardLink
        } else {
            SkipReason::Replaced
        });
    }
    if opened.nlink > 1 {
        return FileOutcome::Skipped(SkipReason::HardLink);
    }
    match sink.put_blob(store, &job.path, &mut file, opened.size) {
        Ok((id, len)) => FileOutcome::Stored {
            id,
            len,
            opened,
            read_from_ns,
        },
        Err(StoreError::Io {
            op: "read", error, ..
        }) => FileOutcome::Failed(CaptureError::Unreadable {
            path: job.path.clone(),
            source: error,
        }),
        Err(source) => FileOutcome::Failed(CaptureError::Store {
            path: job.path.clone(),
            source,
        }),
    }
}
