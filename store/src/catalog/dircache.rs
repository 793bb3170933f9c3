//! The stat caches of captures: one file per source at `<store>/dircache/<blake3 of the
//! key>` (a `snapshot` or `export` source, and a hash-only `diff` of a directory,
//! [`SourceKey::Diff`], whose ids name no stored object and whose key says so), outside the
//! catalog. Opening sled replays its log, builds its metrics and starts its I/O threads:
//! measured on the benchmark corpus (4,972 files) that cost about a fifth of a diff of a
//! directory, as much as `git status` spends on its index. And sled holds everything
//! inserted into or read from it in memory: a 300,000-file cache (about 30 MB) written
//! through it kept 30 MB more for the rest of the session, which took a first capture of
//! such a tree past 64 MiB. A file is read and written in pieces instead.
//!
//! A cache only saves work, so nothing here is synced or locked beyond the store's writer
//! lock the capture already holds: a file is written to `tmp/` and renamed into place (two
//! captures at once: the last rename wins, both files are whole). A snapshot's cache is
//! written after the commit made every blob it names durable; `gc` removes every cache file
//! before it removes any object. A file that is missing, torn, foreign (another key, another
//! format) or fails its checksum reads as an empty cache: the next capture hashes the
//! directory again and rewrites it. A source whose cache an older version kept in the
//! catalog is read from there until its next commit writes the file (see
//! `Catalog::load_source_cache`).
//!
//! Format: [`MAGIC`], the key's length (u32 big-endian) and bytes, the records (the catalog's
//! `{path_len:u16 path entry}` encoding), then the blake3 of everything before it (32 bytes).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::keys::SourceKey;
use super::session::{record_at, SourceStatCache, StatCacheUpdate};
use super::Catalog;
use crate::error::StoreError;
use crate::id::{IdHasher, ObjectId};
use crate::sys::{self, random_token};

/// The directory of these caches, below the store root.
pub(crate) const DIR: &str = "dircache";
/// What every cache file starts with (the format version is its last byte).
const MAGIC: &[u8] = b"zeroclaw-bundle dircache 1\n";
/// A cache file above this is not read (a real one holds about 100 bytes per file).
const MAX_FILE: u64 = 1 << 32;
/// About how many bytes of records a loaded piece holds.
const PIECE: usize = 64 * 1024;

impl Catalog<'_> {
    /// Where the cache of `key` lives.
    fn dircache_path(&self, key: &[u8]) -> PathBuf {
        self.root().join(DIR).join(ObjectId::of(key).to_hex())
    }

    /// The cache of source `key`: `None` when there is no file, empty when it is unusable
    /// (see the module doc). Fails only when the file exists and cannot be read
    /// (permissions, an I/O error), naming it. Read in pieces of about [`PIECE`] bytes,
    /// hashed as they come, so the records are in memory once, never a second time as one
    /// buffer.
    pub(crate) fn load_dircache(
        &self,
        key: &SourceKey,
    ) -> Result<Option<SourceStatCache>, StoreError> {
        let key = key.encode();
        let path = self.dircache_path(&key);
        // Not followed and never blocking: the cache is a regular file this tool wrote, and a
        // symlink to `/dev/zero` or a FIFO put in its place must not fill memory or hang the
        // capture. Whatever is not a regular file of at most `MAX_FILE` bytes is no cache.
        let read = sys::open_regular(&path).and_then(|file| match file {
            None => Ok(Some(None)),
            Some(file) => read_pieces(file, &key).map(|p| Some(Some(p))),
        });
        match read {
            Ok(Some(Some(pieces))) => Ok(Some(
                pieces.map_or_else(SourceStatCache::empty, SourceStatCache::from_pieces),
            )),
            Ok(Some(None)) | Ok(None) => Ok(Some(SourceStatCache::empty())),
            // Nothing there (also when `dircache` is not a directory: the write then fails
            // too, quietly, and each capture hashes again).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(StoreError::io("read stat cache", path, e)),
        }
    }

    /// Removes every cache file (`gc`, before it removes objects a cache may name).
    pub(crate) fn clear_dircaches(&self) -> Result<(), StoreError> {
        let dir = self.root().join(DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io("read", &dir, e)),
        };
        for entry in entries {
            let path = entry.map_err(|e| StoreError::io("read", &dir, e))?.path();
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path, e)),
            }
        }
        Ok(())
    }

    /// Writes the cache a capture left (nothing when it is unchanged): to `tmp/`, then
    /// renamed over the old one.
    pub(crate) fn write_dircache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        if update.is_empty() {
            return Ok(());
        }
        let key = update.key();
        self.replace_dircache_file(&self.dircache_path(key), "dircache", &|tmp| {
            write_file(tmp, key, update)
        })
    }

    /// Writes a file of `dircache/` whole: `write` fills a new file under `tmp/` (named
    /// `<tag>-<token>`), which is then renamed to `dest` (two writers at once: the last
    /// rename wins, both files are whole). A failure leaves nothing in `tmp/`.
    pub(crate) fn replace_dircache_file(
        &self,
        dest: &Path,
        tag: &str,
        write: &dyn Fn(&Path) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let dir = self.root().join(DIR);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, e))?;
        let tmp = self
            .objects()
            .tmp_dir()
            .join(format!("{tag}-{}", random_token()));
        let written = write(&tmp)
            .and_then(|()| fs::rename(&tmp, dest).map_err(|e| StoreError::io("rename", dest, e)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }
}

/// Writes the cache file of `key` holding `update`'s records at `path` (see the format above),
/// streaming: the records are never gathered in one buffer.
fn write_file(path: &Path, key: &[u8], update: &StatCacheUpdate) -> Result<(), StoreError> {
    let failed = |e| StoreError::io("write", path, e);
    // 256 KiB writes: the corpus's 2 MB cache went out in 250 writes of 8 KiB.
    let mut out = io::BufWriter::with_capacity(1 << 18, fs::File::create(path).map_err(failed)?);
    let mut sum = IdHasher::new();
    let mut put = |out: &mut io::BufWriter<fs::File>, bytes: &[u8]| {
        sum.update(bytes);
        out.write_all(bytes).map_err(failed)
    };
    put(&mut out, MAGIC)?;
    put(&mut out, &(key.len() as u32).to_be_bytes())?;
    put(&mut out, key)?;
    update.for_each_record(&mut |record| put(&mut out, record))?;
    out.write_all(sum.finish().as_bytes()).map_err(failed)?;
    out.flush().map_err(failed)
}

/// The records of a whole, checksummed cache file of `key` in pieces of whole records;
/// `None` for anything else (torn, foreign, another key, a failed checksum).
fn read_pieces(file: fs::File, key: &[u8]) -> io::Result<Option<Vec<Vec<u8>>>> {
    let len = file.metadata()?.len();
    let header = (MAGIC.len() + 4 + key.len()) as u64;
    if len > MAX_FILE || len < header + 32 {
        return Ok(None);
    }
    let mut input = io::BufReader::with_capacity(PIECE, file.take(len));
    let mut sum = IdHasher::new();
    let mut head = vec![0u8; header as usize];
    if !read_full(&mut input, &mut head)? {
        return Ok(None);
    }
    sum.update(&head);
    let want_head = [MAGIC, &(key.len() as u32).to_be_bytes()[..], key].concat();
    if head != want_head {
        return Ok(None);
    }
    let mut left = len - header - 32;
    let mut pieces = Vec::new();
    let mut block: Vec<u8> = Vec::new();
    while left > 0 {
        let start = block.len();
        let want = (PIECE as u64).min(left) as usize;
        block.resize(start + want, 0);
        if !read_full(&mut input, &mut block[start..])? {
            return Ok(None);
        }
        sum.update(&block[start..]);
        left -= want as u64;
        let mut end = 0;
        while let Some((_, _, next)) = record_at(&block, end) {
            end = next;
        }
        if end == 0 && left > 0 {
            continue; // one record longer than a piece so far: read on
        }
        if end > 0 {
            pieces.push(block[..end].to_vec());
            block.drain(..end);
        }
    }
    let mut stored = [0u8; 32];
    if !block.is_empty() || !read_full(&mut input, &mut stored)? {
        return Ok(None);
    }
    Ok((sum.finish().as_bytes() == &stored).then_some(pieces))
}

/// Fills `buf`; false when the input ends first.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    match input.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::session::StatEntry;
    use super::*;
    use crate::handle::Store;
    use std::path::Path;

    /// The cache of `key`, which must have a file (damaged or not).
    fn load(store: &Store, key: &SourceKey) -> SourceStatCache {
        store
            .catalog()
            .load_dircache(key)
            .unwrap()
            .expect("a cache file")
    }

    fn entry(size: u64) -> StatEntry {
        StatEntry {
            dev: 1,
            ino: 2,
            size,
            mtime_ns: 3,
            ctime_ns: 4,
            exec: false,
            id: ObjectId::of(b"x"),
        }
    }

    #[test]
    fn round_trip_and_every_damage_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let key = SourceKey::Diff("/srv/bundle".into());
        assert!(
            store.catalog().load_dircache(&key).unwrap().is_none(),
            "no file, no cache"
        );
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        cache.put(b"b/c.md", &entry(7));
        store
            .catalog()
            .write_dircache(&cache.into_update(&key))
            .unwrap();
        let loaded = load(&store, &key);
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.get(b"b/c.md").unwrap().1, entry(7));
        // Unchanged: no write (the file keeps its bytes even if it were damaged).
        let path = store.catalog().dircache_path(&key.encode());
        let before = fs::read(&path).unwrap();
        let mut again = load(&store, &key);
        for p in [&b"a.md"[..], b"b/c.md"] {
            let (at, _) = again.get(p).unwrap();
            again.keep(at);
        }
        assert!(again.into_update(&key).is_empty());
        // Another key never reads this file's records, even at its path.
        let other = SourceKey::Diff("/srv/other".into());
        fs::copy(&path, store.catalog().dircache_path(&other.encode())).unwrap();
        assert!(load(&store, &other).is_empty());
        // Torn, flipped, foreign format: empty, never an error, never a wrong entry.
        for damaged in [
            before[..before.len() - 1].to_vec(),
            before[..10].to_vec(),
            Vec::new(),
            {
                let mut b = before.clone();
                let n = b.len();
                b[n - 40] ^= 1;
                b
            },
            [b"zeroclaw-bundle dircache 9\n", &before[MAGIC.len()..]].concat(),
        ] {
            fs::write(&path, &damaged).unwrap();
            assert!(load(&store, &key).is_empty());
        }
        // Not a regular file: a symlink (even to a whole cache of this key), a FIFO (would
        // block the read) or a device (`/dev/zero` would fill memory) reads as no cache,
        // promptly.
        let whole = dir.path().join("whole-cache");
        fs::write(&whole, &before).unwrap();
        for target in [whole.as_path(), Path::new("/dev/zero")] {
            fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(target, &path).unwrap();
            assert!(load(&store, &key).is_empty(), "{target:?}");
        }
        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(load(&store, &key).is_empty());
        fs::remove_file(&path).unwrap();
        // No temp file is left behind.
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        // `dircache` not a directory: nothing to read; the write fails naming the path, and
        // leaves no temp file either.
        fs::remove_dir_all(store.root().join(DIR)).unwrap();
        fs::write(store.root().join(DIR), b"").unwrap();
        assert!(store.catalog().load_dircache(&key).unwrap().is_none());
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        let err = store
            .catalog()
            .write_dircache(&cache.into_update(&key))
            .unwrap_err();
        assert!(err.to_string().contains(DIR), "{err}");
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
    }
}
