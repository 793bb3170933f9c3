//! The object directory: the only code that writes under `<store>/objects/`.
//!
//! Writes hash while they write: bytes go to a fresh file in `<store>/tmp/`, which is then
//! made read-only and renamed to `objects/<2 hex>/<62 hex>`. An object that already exists
//! with the expected length is success (dedup) and the temp file is dropped. Small inputs are
//! hashed in memory first, so a duplicate costs no write at all.
//!
//! Durability: individual objects are NOT fsynced. Instead [`ObjectDir::sync`] calls
//! `syncfs(2)` once on the store's filesystem before anything that references the new objects
//! (the snapshot record, then the catalog entry) is written. One syncfs flushes every object
//! file and every directory entry of the capture in a single pass, where 20,000 fsyncs would
//! each wait for the journal; since Linux 5.8 syncfs reports writeback errors. The cost: it
//! also flushes other dirty data on the same filesystem.
//!
//! A crash before that sync can leave an object whose name exists but whose data never reached
//! the disk (typically a zero-length file after ext4 delayed allocation). Such an object is
//! unreferenced (no record was written), and the dedup check compares the length, so a later
//! capture rewrites it rather than trusting it. `verify` rehashes everything.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::StoreError;
use crate::id::{IdHasher, ObjectId};
use crate::sys;

/// Inputs up to this size are hashed in memory before anything is written.
const SMALL: usize = 256 * 1024;
/// Read buffer for streaming larger inputs.
const CHUNK: usize = 1024 * 1024;

/// Name prefix of a staging directory under `tmp/` (see [`ObjectDir::staging`]).
pub(crate) const STAGING_PREFIX: &str = "stage-";

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Handle on `<store>/objects` and `<store>/tmp`.
#[derive(Debug, Clone)]
pub struct ObjectDir {
    objects: PathBuf,
    tmp: PathBuf,
}

/// An object's bytes, readable at any offset without loading them (a store file or a pack range).
#[derive(Debug, Clone)]
pub struct Blob {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

impl Blob {
    /// A blob that is the byte range `offset..offset+len` of `file` (a whole object file, or a
    /// member of a pack).
    pub fn from_range(file: Arc<File>, offset: u64, len: u64) -> Blob {
        Blob { file, offset, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for the empty blob.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positioned read (`pread(2)`): fills `buf` from `pos`, short only at the end.
    pub fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        if pos >= self.len {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.len - pos).unwrap_or(usize::MAX));
        let mut done = 0;
        while done < want {
            let n = self
                .file
                .read_at(&mut buf[done..want], self.offset + pos + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "object is shorter than recorded",
                ));
            }
            done += n;
        }
        Ok(done)
    }

    /// Hashes the whole blob and compares it with `id`.
    pub fn verify(&self, id: &ObjectId) -> Result<(), StoreError> {
        let mut hasher = IdHasher::new();
        let mut buf = vec![0u8; CHUNK];
        let mut pos = 0;
        while pos < self.len {
            let n = self
                .read_at(&mut buf, pos)
                .map_err(|e| StoreError::io("read object", id.to_hex(), e))?;
            hasher.update(&buf[..n]);
            pos += n as u64;
        }
        let actual = hasher.finish();
        if actual != *id {
            return Err(StoreError::CorruptObject { id: *id, actual });
        }
        Ok(())
    }

    /// A sequential reader that fails with `InvalidData` at the end if the bytes do not hash
    /// to `id` (so a copy made through it is discarded when the object is corrupt).
    pub fn verifying_reader(&self, id: ObjectId) -> VerifyingReader {
        VerifyingReader {
            blob: self.clone(),
            id,
            pos: 0,
            hasher: IdHasher::new(),
        }
    }
}

/// See [`Blob::verifying_reader`].
pub struct VerifyingReader {
    blob: Blob,
    id: ObjectId,
    pos: u64,
    hasher: IdHasher,
}

impl Read for VerifyingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.blob.read_at(buf, self.pos)?;
        if n == 0 && !buf.is_empty() {
            let actual = self.hasher.finish();
            if actual != self.id {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    StoreError::CorruptObject {
                        id: self.id,
                        actual,
                    },
                ));
            }
            return Ok(0);
        }
        self.hasher.update(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl ObjectDir {
    pub(crate) fn new(store: &Path) -> ObjectDir {
        ObjectDir {
            objects: store.join("objects"),
            tmp: store.join("tmp"),
        }
    }

    /// Creates the 256 fan-out directories (done once at store creation).
    pub(crate) fn create_layout(&self) -> Result<(), StoreError> {
        for dir in [&self.objects, &self.tmp] {
            fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        }
        for i in 0..=255u8 {
            let d = self.objects.join(format!("{i:02x}"));
            match fs::create_dir(&d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::io("create", d, e)),
            }
        }
        Ok(())
    }

    /// Where object `id` lives.
    pub fn path_of(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.objects.join(&hex[..2]).join(&hex[2..])
    }

    /// The `tmp/` directory.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    /// True when the object exists with length `len` (the dedup test: a crash-truncated
    /// object of the wrong length does not count).
    pub fn has_with_len(&self, id: &ObjectId, len: u64) -> bool {
        fs::symlink_metadata(self.path_of(id))
            .map(|m| m.is_file() && m.len() == len)
            .unwrap_or(false)
    }

    /// True when the object exists and its bytes hash to its id (reads it whole: for the
    /// rare object an import finds present, never for a whole closure).
    pub fn is_intact(&self, id: &ObjectId) -> bool {
        self.open_blob(id).and_then(|b| b.verify(id)).is_ok()
    }

    /// True when the object exists.
    pub fn has(&self, id: &ObjectId) -> bool {
        fs::symlink_metadata(self.path_of(id))
            .map(|m| m.is_file())
            .unwrap_or(false)
    }

    /// Stores `bytes` as an object; returns its id. Existing objects are not rewritten.
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<ObjectId, StoreError> {
        let id = ObjectId::of(bytes);
        if !self.has_with_len(&id, bytes.len() as u64) {
            let (mut file, tmp) = self.temp_file()?;
            let res = file
                .write_all(bytes)
                .map_err(|e| StoreError::io("write", &tmp, e));
            self.finish_temp(file, tmp, &id, res)?;
        }
        Ok(id)
    }

    /// Streams `reader` into the store, hashing as it goes; returns (id, length).
    pub fn write_from(&self, reader: &mut dyn Read) -> Result<(ObjectId, u64), StoreError> {
        let mut buf = vec![0u8; SMALL];
        let mut filled = 0;
        while filled < SMALL {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StoreError::io("read", "source file", e)),
            }
        }
        if filled < SMALL {
            let id = self.write_bytes(&buf[..filled])?;
            return Ok((id, filled as u64));
        }
        // Large: stream to a temp file while hashing.
        let (mut file, tmp) = self.temp_file()?;
        let mut hasher = IdHasher::new();
        let mut total = 0u64;
        let res = (|| -> Result<(), StoreError> {
            buf.resize(CHUNK, 0);
            hasher.update(&buf[..filled]);
            file.write_all(&buf[..filled])
                .map_err(|e| StoreError::io("write", &tmp, e))?;
            total += filled as u64;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(StoreError::io("read", "source file", e)),
                };
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])
                    .map_err(|e| StoreError::io("write", &tmp, e))?;
                total += n as u64;
            }
        })();
        let id = hasher.finish();
        if res.is_ok() && self.has_with_len(&id, total) {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Ok((id, total));
        }
        self.finish_temp(file, tmp, &id, res)?;
        Ok((id, total))
    }

    fn temp_file(&self) -> Result<(File, PathBuf), StoreError> {
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = self.tmp.join(format!(
                "obj-{}-{}-{}",
                std::process::id(),
                n,
                sys::random_token()
            ));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&path)
            {
                Ok(f) => return Ok((f, path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create temp file in", &self.tmp, e)),
            }
        }
    }

    /// A fresh staging directory under `tmp/` (the temp files' naming, with a `stage-` prefix)
    /// for an import that lands many objects at once: see [`Staging`]. The caller holds the
    /// store's write lock, so only an interrupted import leaves one behind, which `gc` removes.
    pub(crate) fn staging(&self) -> Result<Staging, StoreError> {
        fs::create_dir_all(&self.tmp).map_err(|e| StoreError::io("create", &self.tmp, e))?;
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = self.tmp.join(format!(
                "{STAGING_PREFIX}{}-{}-{}",
                std::process::id(),
                n,
                sys::random_token()
            ));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(Staging {
                        objects: self.clone(),
                        dir,
                        staged: Mutex::new(Vec::new()),
                        done: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create staging directory in", &self.tmp, e)),
            }
        }
    }

    /// Moves `from` (a complete, verified object file) to object `id`'s place.
    fn rename_into_place(&self, from: &Path, id: &ObjectId) -> Result<(), StoreError> {
        let dest = self.path_of(id);
        // A fan-out directory removed by hand is made again.
        making_parent(&dest, || fs::rename(from, &dest))
            .map_err(|e| StoreError::io("rename into", &dest, e))
    }

    /// Renames a fully written temp file into place, or removes it on failure.
    fn finish_temp(
        &self,
        file: File,
        tmp: PathBuf,
        id: &ObjectId,
        written: Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        drop(file);
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.rename_into_place(&tmp, id).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }

    /// Reads a whole (small) object and checks its hash.
    pub fn read_verified(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(id);
        let bytes = fs::read(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                StoreError::MissingObject(*id)
            } else {
                StoreError::io("read", &path, e)
            }
        })?;
        let actual = ObjectId::of(&bytes);
        if actual != *id {
            return Err(StoreError::CorruptObject { id: *id, actual });
        }
        Ok(bytes)
    }

    /// Opens an object for positioned reads (not verified: see [`Blob::verify`]).
    pub fn open_blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        let path = self.path_of(id);
        let file = File::open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                StoreError::MissingObject(*id)
            } else {
                StoreError::io("open", &path, e)
            }
        })?;
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("stat", &path, e))?
            .len();
        Ok(Blob::from_range(Arc::new(file), 0, len))
    }

    /// Makes every object and directory entry written so far durable (`syncfs(2)`).
    pub fn sync(&self) -> Result<(), StoreError> {
        sys::syncfs(&self.objects).map_err(|e| StoreError::io("sync", &self.objects, e))
    }

    /// Every object id present, with its file length and age in seconds.
    pub fn list(&self) -> Result<Vec<(ObjectId, u64, u64)>, StoreError> {
        let mut out = Vec::new();
        let now = std::time::SystemTime::now();
        for i in 0..=255u8 {
            let dir = self.objects.join(format!("{i:02x}"));
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("list", &dir, e)),
            };
            for ent in rd {
                let ent = ent.map_err(|e| StoreError::io("list", &dir, e))?;
                let name = ent.file_name();
                let Some(rest) = name.to_str() else { continue };
                let Ok(id) = format!("{i:02x}{rest}").parse::<ObjectId>() else {
                    continue;
                };
                let meta = ent
                    .metadata()
                    .map_err(|e| StoreError::io("stat", ent.path(), e))?;
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                out.push((id, meta.len(), age));
            }
        }
        Ok(out)
    }

    /// Removes an object (gc only).
    pub(crate) fn remove(&self, id: &ObjectId) -> Result<(), StoreError> {
        let path = self.path_of(id);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("remove", &path, e)),
        }
    }

    /// Reads the first bytes of an object (to recognise snapshot records cheaply).
    pub(crate) fn peek(&self, id: &ObjectId, n: usize) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(id);
        let mut f = File::open(&path).map_err(|e| StoreError::io("open", &path, e))?;
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match f.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StoreError::io("read", &path, e)),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }
}

/// Runs `op` on `path`; when it fails because `path`'s directory does not exist (a fan-out
/// directory not made yet, or removed by hand), makes the directory and runs `op` once more.
fn making_parent<T>(path: &Path, op: impl Fn() -> io::Result<T>) -> io::Result<T> {
    op().or_else(|e| {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(e);
        }
        fs::create_dir_all(path.parent().expect("object paths have a parent"))?;
        op()
    })
}

/// A directory under `<store>/tmp/` where an import (`unpack`, `pull`) writes objects it has
/// verified, each as a read-only file named by its id (fanned out as in `objects/`). Nothing in it is visible in the store:
/// [`Staging::land`] renames every staged object into `objects/` only once the whole import
/// verified (cheap renames within one filesystem); dropping a staging that did not land
/// removes it with everything in it. A process killed meanwhile leaves the directory, which
/// `gc` removes (staging is only done under the store's write lock, which gc excludes).
/// Objects are not fsynced here: the commit's `syncfs` covers them, as for a capture.
#[derive(Debug)]
pub(crate) struct Staging {
    objects: ObjectDir,
    dir: PathBuf,
    /// Objects completely written (only these are landed).
    staged: Mutex<Vec<ObjectId>>,
    done: bool,
}

/// One object being streamed into a [`Staging`]; it counts only once [`StagedFile::finish`]ed.
pub(crate) struct StagedFile<'s> {
    staging: &'s Staging,
    id: ObjectId,
    path: PathBuf,
    file: io::BufWriter<File>,
    /// The first write that failed (its OS error, or kind), kept so the caller can name this
    /// file instead of blaming the bytes it was decoding (a full disk is not a bad pack).
    failed: Option<(Option<i32>, io::ErrorKind)>,
}

impl Staging {
    /// The staging directory.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Where object `id` is staged: fanned out like `objects/` (`<2 hex>/<62 hex>`), so
    /// workers creating files at once rarely wait on the same directory's lock (one flat
    /// directory serialized their creates).
    fn staged_path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    fn create(&self, id: &ObjectId) -> Result<(File, PathBuf), StoreError> {
        let path = self.staged_path(id);
        let open = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&path)
        };
        // The fan-out directory is made on first use.
        let file = making_parent(&path, open)
            .map_err(|e| StoreError::io("create staged object", &path, e))?;
        Ok((file, path))
    }

    /// Stages object `id` whose bytes are `bytes`. The caller has hashed them and compared
    /// the hash with `id` (they are not hashed again here).
    pub(crate) fn put_verified(&self, id: &ObjectId, bytes: &[u8]) -> Result<(), StoreError> {
        let (mut file, path) = self.create(id)?;
        file.write_all(bytes)
            .map_err(|e| StoreError::io("write", &path, e))?;
        self.staged
            .lock()
            .expect("no panic holds the list")
            .push(*id);
        Ok(())
    }

    /// Starts streaming object `id` (a large one) into the staging directory; the caller
    /// hashes what it writes and calls [`StagedFile::finish`] only when the hash matched.
    pub(crate) fn stream(&self, id: &ObjectId) -> Result<StagedFile<'_>, StoreError> {
        let (file, path) = self.create(id)?;
        Ok(StagedFile {
            staging: self,
            id: *id,
            path,
            file: io::BufWriter::with_capacity(CHUNK, file),
            failed: None,
        })
    }

    /// How many objects are staged.
    pub(crate) fn len(&self) -> usize {
        self.staged.lock().expect("no panic holds the list").len()
    }

    /// Renames every staged object into `objects/` (an object already there is replaced by
    /// the same bytes) and removes the staging directory. Call only when the whole import
    /// verified. An interruption midway leaves some objects landed, unreferenced until the
    /// record is committed: the crash invariant allows that.
    pub(crate) fn land(mut self) -> Result<(), StoreError> {
        let staged = std::mem::take(&mut *self.staged.lock().expect("no panic holds the list"));
        for id in &staged {
            self.objects.rename_into_place(&self.staged_path(id), id)?;
        }
        self.done = true;
        // Only the emptied fan-out directories are left.
        fs::remove_dir_all(&self.dir).map_err(|e| StoreError::io("remove", &self.dir, e))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Write for StagedFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf).inspect_err(|e| self.note(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush().inspect_err(|e| self.note(e))
    }
}

impl StagedFile<'_> {
    fn note(&mut self, e: &io::Error) {
        self.failed.get_or_insert((e.raw_os_error(), e.kind()));
    }

    /// The error of the first failed write, naming this file, if a write failed.
    pub(crate) fn write_error(&self) -> Option<StoreError> {
        self.failed.map(|(os, kind)| {
            let e = os.map_or_else(|| io::Error::from(kind), io::Error::from_raw_os_error);
            StoreError::io("write", &self.path, e)
        })
    }

    /// Completes the object: the caller verified its bytes against its id.
    pub(crate) fn finish(mut self) -> Result<(), StoreError> {
        self.file
            .flush()
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        self.staging
            .staged
            .lock()
            .expect("no panic holds the list")
            .push(self.id);
        Ok(())
    }
}
