//! The store lock: `<store>/lock`, an advisory `flock(2)` that keeps `gc` and writers apart.
//!
//! Writers (a capture from its first dedup decision to its catalog entry, `forget`, a mount
//! registering its lease, the catalog walk of `verify`) hold it shared; `gc` and `reindex`
//! hold it exclusive. So no writer can reuse an object gc has judged unreachable, gc never
//! sweeps a record written after its mark, and two gcs serialize. The lock belongs to the
//! open file description, so the kernel releases it when a process dies (SIGKILL included):
//! there is no stale lock to clean up.
//!
//! Waiting is bounded: after `ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS` (default 30 minutes, longer
//! than any real capture) the command fails with [`StoreError::StoreBusy`] rather than hang.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::StoreError;

/// The default wait for the store lock.
const DEFAULT_WAIT: Duration = Duration::from_secs(30 * 60);

/// After this long waiting, say so once on stderr.
const NOTICE_AFTER: Duration = Duration::from_secs(2);

/// Proof that this process holds the store lock shared (a writer). Dropping it releases it.
#[derive(Debug)]
pub struct WriteLock {
    _file: File,
}

/// The store lock held exclusively (gc, reindex). Dropping it releases it.
#[derive(Debug)]
pub(crate) struct ExclusiveLock {
    _file: File,
}

/// The file name of the lock inside a store.
pub(crate) const LOCK_FILE: &str = "lock";

fn open(root: &Path) -> Result<(File, PathBuf), StoreError> {
    let path = root.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        // flock needs no write access: a user who may only read the store still locks it.
        .or_else(|_| File::open(&path))
        .map_err(|e| StoreError::io("open the store lock", &path, e))?;
    Ok((file, path))
}

/// Creates the lock file of a store being made (empty; locking never writes it).
pub(crate) fn create(root: &Path) -> Result<(), StoreError> {
    open(root).map(drop)
}

fn wait_limit() -> Duration {
    std::env::var("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_WAIT)
}

fn acquire(
    root: &Path,
    exclusive: bool,
    purpose: &'static str,
    wait: Duration,
) -> Result<File, StoreError> {
    let (file, path) = open(root)?;
    let start = Instant::now();
    let mut delay = Duration::from_millis(2);
    let mut told = false;
    loop {
        let attempt = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match attempt {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) => {
                if start.elapsed() >= wait {
                    return Err(StoreError::StoreBusy {
                        path,
                        purpose,
                        waited_ms: start.elapsed().as_millis() as u64,
                    });
                }
                if !told && start.elapsed() >= NOTICE_AFTER {
                    // Say why nothing happens (a gc waiting for a capture, or the reverse).
                    eprintln!(
                        "notice: waiting to {purpose}: another zeroclaw-bundle process holds {}",
                        path.display()
                    );
                    told = true;
                }
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(50));
            }
            Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::io("lock", &path, e));
            }
        }
    }
}

/// Takes the lock shared, for a writer.
pub(crate) fn shared(root: &Path, purpose: &'static str) -> Result<WriteLock, StoreError> {
    Ok(WriteLock {
        _file: acquire(root, false, purpose, wait_limit())?,
    })
}

/// Takes the lock exclusive, for gc and reindex.
pub(crate) fn exclusive(root: &Path, purpose: &'static str) -> Result<ExclusiveLock, StoreError> {
    Ok(ExclusiveLock {
        _file: acquire(root, true, purpose, wait_limit())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_coexist_and_exclude_an_exclusive_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let short = Duration::from_millis(30);
        let a = acquire(root, false, "capture", short).unwrap();
        let b = acquire(root, false, "capture", short).unwrap();
        let busy = acquire(root, true, "gc", short);
        assert!(
            matches!(busy, Err(StoreError::StoreBusy { .. })),
            "{busy:?}"
        );
        drop((a, b));
        let x = acquire(root, true, "gc", short).unwrap();
        assert!(matches!(
            acquire(root, false, "capture", short),
            Err(StoreError::StoreBusy { .. })
        ));
        assert!(matches!(
            acquire(root, true, "gc", short),
            Err(StoreError::StoreBusy { .. })
        ));
        drop(x);
        acquire(root, false, "capture", short).unwrap();
    }
}
