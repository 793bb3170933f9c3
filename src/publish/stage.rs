//! Materializing a stored tree into the staging directory, through directory fds only.
//!
//! Every directory is created with `mkdirat` in its parent's fd and then opened no-follow;
//! every file is created `O_EXCL | O_NOFOLLOW` in its directory's fd, so nothing below the
//! staging root is ever reached by a path. Modes are set with `fchmod` after creation (0644,
//! 0755 for executable files and directories), so the umask does not change what a checkout
//! holds and a checkout matches what `mount` shows. File bytes come through the blob's
//! verifying reader: a corrupt object fails at its end, and the publish with it.
//!
//! At the root, `zeroclaw-agent.toml` is written last, after every other entry (SPEC §1).
//! Nothing here fsyncs: the caller runs one `syncfs` over the finished staging tree.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{EntryKind, ObjectId, ObjectSource, StoreError, TreeEntry};

use super::PublishError;
use crate::{hooks, sys};

/// The manifest, written last at the bundle root.
pub(crate) const MANIFEST: &[u8] = b"zeroclaw-agent.toml";

const COPY_BUF: usize = 256 * 1024;

/// Counts of what was written.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub files: u64,
    pub bytes: u64,
}

struct Stager<'a> {
    source: &'a dyn ObjectSource,
    staging_path: &'a Path,
    buf: Vec<u8>,
    tally: Tally,
    progress: &'a mut dyn FnMut(u64, u64),
}

/// Writes tree `root` into the (empty) directory `root_dir`, whose path is `staging_path`
/// (used in messages only). `progress` gets the running (files, bytes) after each file.
pub(crate) fn materialize(
    source: &dyn ObjectSource,
    root: &ObjectId,
    root_dir: BorrowedFd<'_>,
    staging_path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Tally, PublishError> {
    let mut stager = Stager {
        source,
        staging_path,
        buf: vec![0u8; COPY_BUF],
        tally: Tally::default(),
        progress,
    };
    stager.write_dir(root, root_dir, &mut PathBuf::new())?;
    Ok(stager.tally)
}

fn store_error(rel: &Path, err: StoreError) -> PublishError {
    if err.is_corruption() {
        PublishError::CorruptObject {
            path: rel.display().to_string(),
            detail: err.to_string(),
        }
    } else {
        PublishError::Store {
            path: rel.display().to_string(),
            source: err,
        }
    }
}

impl Stager<'_> {
    fn write_dir(
        &mut self,
        id: &ObjectId,
        dir: BorrowedFd<'_>,
        rel: &mut PathBuf,
    ) -> Result<(), PublishError> {
        let tree = self.source.tree(id).map_err(|e| store_error(rel, e))?;
        let at_root = rel.as_os_str().is_empty();
        let (manifest, rest): (Vec<&TreeEntry>, Vec<&TreeEntry>) = tree
            .entries()
            .iter()
            .partition(|e| at_root && e.name == MANIFEST && e.kind.is_file());
        for entry in rest.into_iter().chain(manifest) {
            rel.push(std::ffi::OsStr::from_bytes(&entry.name));
            let res = match entry.kind {
                EntryKind::Dir => self.write_subdir(entry, dir, rel),
                EntryKind::File | EntryKind::ExecFile => self.write_file(entry, dir, rel),
            };
            rel.pop();
            res?;
        }
        Ok(())
    }

    fn write_subdir(
        &mut self,
        entry: &TreeEntry,
        dir: BorrowedFd<'_>,
        rel: &mut PathBuf,
    ) -> Result<(), PublishError> {
        let path = self.staging_path.join(&*rel);
        sys::mkdir_at(dir, &entry.name, entry.kind.mode())
            .map_err(|e| PublishError::io("create directory", &path, e))?;
        let sub = sys::open_dir_at(dir, &entry.name)
            .map_err(|e| PublishError::io("open directory", &path, e))?;
        sys::chmod_fd(&sub, entry.kind.mode())
            .map_err(|e| PublishError::io("set the mode of", &path, e))?;
        self.write_dir(&entry.id, sub.as_fd(), rel)
    }

    fn write_file(
        &mut self,
        entry: &TreeEntry,
        dir: BorrowedFd<'_>,
        rel: &Path,
    ) -> Result<(), PublishError> {
        hooks::seam("publish-write", &rel.to_string_lossy());
        let path = self.staging_path.join(rel);
        let blob = self
            .source
            .blob(&entry.id)
            .map_err(|e| store_error(rel, e))?;
        if blob.len() != entry.size {
            return Err(PublishError::CorruptObject {
                path: rel.display().to_string(),
                detail: format!(
                    "object {} holds {} bytes where its tree records {}",
                    entry.id,
                    blob.len(),
                    entry.size
                ),
            });
        }
        let mode = entry.kind.mode();
        let mut file = sys::create_file_at(dir, &entry.name, mode)
            .map_err(|e| PublishError::io("create", &path, e))?;
        let mut reader = blob.verifying_reader(entry.id);
        loop {
            let n = match reader.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                    ) =>
                {
                    return Err(PublishError::CorruptObject {
                        path: rel.display().to_string(),
                        detail: e.to_string(),
                    })
                }
                Err(e) => return Err(PublishError::io("read the object for", &path, e)),
            };
            file.write_all(&self.buf[..n])
                .map_err(|e| PublishError::io("write", &path, e))?;
        }
        sys::chmod_fd(&file, mode).map_err(|e| PublishError::io("set the mode of", &path, e))?;
        self.tally.files += 1;
        self.tally.bytes += entry.size;
        (self.progress)(self.tally.files, self.tally.bytes);
        Ok(())
    }
}
