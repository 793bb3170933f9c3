//! The stat caches of hash-only captures (`diff` of a directory, [`SourceKey::Diff`]): one
//! file per directory at `<store>/dircache/<blake3 of the key>`, outside the catalog, so a
//! diff of a directory against a snapshot named by its full id never opens sled. Opening sled
//! replays its log, builds its metrics and starts its I/O threads: measured on the benchmark
//! corpus (4,972 files) that cost about a fifth of the whole diff, as much as `git status`
//! spends on its index.
//!
//! A cache only saves work, and its ids name no stored object (a hash-only capture writes
//! none), so nothing here is durable or locked beyond the store's writer lock the capture
//! already holds: a file is written to `tmp/` and renamed into place (two diffs at once: the
//! last rename wins, both files are whole), without fsync. A file that is missing, torn,
//! foreign (another key, another format) or fails its checksum reads as an empty cache: the
//! next diff hashes the directory again and rewrites it.
//!
//! Format: [`MAGIC`], the key's length (u32 big-endian) and bytes, the records (the catalog's
//! `{path_len:u16 path entry}` encoding), then the blake3 of everything before it (32 bytes).

use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;

use crate::catalog::{SourceStatCache, StatCacheUpdate};
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::keys::SourceKey;
use crate::sys::{self, random_token};
use crate::Store;

/// The directory of these caches, below the store root.
pub(crate) const DIR: &str = "dircache";
/// What every cache file starts with (the format version is its last byte).
const MAGIC: &[u8] = b"zeroclaw-bundle dircache 1\n";
/// A cache file above this is not read (a real one holds about 100 bytes per file).
const MAX_FILE: u64 = 1 << 32;

impl Store {
    /// Where the cache of `key` lives.
    fn dircache_path(&self, key: &[u8]) -> PathBuf {
        self.root().join(DIR).join(ObjectId::of(key).to_hex())
    }

    /// The cache of hash-only source `key`; empty when there is none or it is unusable (see
    /// the module doc). Fails only when the file exists and cannot be read (permissions, an
    /// I/O error), naming it.
    pub(crate) fn load_dircache(&self, key: &SourceKey) -> Result<SourceStatCache, StoreError> {
        let key = key.encode();
        let path = self.dircache_path(&key);
        // Not followed and never blocking: the cache is a regular file this tool wrote, and a
        // symlink to `/dev/zero` or a FIFO put in its place must not fill memory or hang the
        // diff. Whatever is not a regular file of at most `MAX_FILE` bytes is no cache.
        let read = sys::open_regular(&path).and_then(|file| {
            let Some(file) = file else { return Ok(None) };
            let len = file.metadata()?.len();
            if len > MAX_FILE {
                return Ok(None);
            }
            let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            file.take(MAX_FILE + 1).read_to_end(&mut bytes)?;
            Ok((bytes.len() as u64 <= MAX_FILE).then_some(bytes))
        });
        let bytes = match read {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(SourceStatCache::empty()),
            // Nothing there (also when `dircache` is not a directory: the write then fails
            // too, quietly, and each diff hashes again).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(SourceStatCache::empty())
            }
            Err(e) => return Err(StoreError::io("read stat cache", path, e)),
        };
        Ok(decode(&bytes, &key).map_or_else(SourceStatCache::empty, SourceStatCache::from_bytes))
    }

    /// Writes the cache a hash-only capture left (nothing when it is unchanged): to `tmp/`,
    /// then renamed over the old one.
    pub(crate) fn write_dircache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        let Some(records) = update.value() else {
            return Ok(());
        };
        let key = update.key();
        let dir = self.root().join(DIR);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, e))?;
        let dest = self.dircache_path(key);
        let tmp = self
            .objects()
            .tmp_dir()
            .join(format!("dircache-{}", random_token()));
        let written = fs::write(&tmp, encode(key, records))
            .map_err(|e| StoreError::io("write", &tmp, e))
            .and_then(|()| fs::rename(&tmp, &dest).map_err(|e| StoreError::io("rename", &dest, e)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }
}

fn encode(key: &[u8], records: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + key.len() + records.len() + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(records);
    let sum = ObjectId::of(&out);
    out.extend_from_slice(sum.as_bytes());
    out
}

/// The records of a whole, checksummed cache file of `key`; `None` for anything else.
fn decode<'b>(bytes: &'b [u8], key: &[u8]) -> Option<&'b [u8]> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if ObjectId::of(body).as_bytes() != sum {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let (len, rest) = rest.split_at_checked(4)?;
    let len = usize::try_from(u32::from_be_bytes(len.try_into().ok()?)).ok()?;
    let (stored_key, records) = rest.split_at_checked(len)?;
    (stored_key == key).then_some(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::StatEntry;
    use std::path::Path;

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
        assert!(store.load_dircache(&key).unwrap().is_empty());
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        cache.put(b"b/c.md", &entry(7));
        store.write_dircache(&cache.into_update(&key)).unwrap();
        let loaded = store.load_dircache(&key).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.get(b"b/c.md").unwrap().1, entry(7));
        // Unchanged: no write (the file keeps its bytes even if it were damaged).
        let path = store.dircache_path(&key.encode());
        let before = fs::read(&path).unwrap();
        let mut again = store.load_dircache(&key).unwrap();
        for p in [&b"a.md"[..], b"b/c.md"] {
            let (at, _) = again.get(p).unwrap();
            again.keep(at);
        }
        assert!(again.into_update(&key).is_empty());
        // Another key never reads this file's records, even at its path.
        let other = SourceKey::Diff("/srv/other".into());
        fs::copy(&path, store.dircache_path(&other.encode())).unwrap();
        assert!(store.load_dircache(&other).unwrap().is_empty());
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
            assert!(store.load_dircache(&key).unwrap().is_empty());
        }
        // Not a regular file: a symlink (even to a whole cache of this key), a FIFO (would
        // block the read) or a device (`/dev/zero` would fill memory) reads as no cache,
        // promptly.
        let whole = dir.path().join("whole-cache");
        fs::write(&whole, &before).unwrap();
        for target in [whole.as_path(), Path::new("/dev/zero")] {
            fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(target, &path).unwrap();
            assert!(store.load_dircache(&key).unwrap().is_empty(), "{target:?}");
        }
        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(store.load_dircache(&key).unwrap().is_empty());
        fs::remove_file(&path).unwrap();
        // No temp file is left behind.
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        // `dircache` not a directory: nothing to read; the write fails naming the path, and
        // leaves no temp file either.
        fs::remove_dir_all(store.root().join(DIR)).unwrap();
        fs::write(store.root().join(DIR), b"").unwrap();
        assert!(store.load_dircache(&key).unwrap().is_empty());
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        let err = store.write_dircache(&cache.into_update(&key)).unwrap_err();
        assert!(err.to_string().contains(DIR), "{err}");
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
    }
}
