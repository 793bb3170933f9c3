//! Verdicts: what a check of an object's bytes found, per object id (export's credential scan
//! keeps its findings here; the bytes are the checker's own). An object's bytes never change
//! under its id, so a verdict holds as long as the checker's rules do: the checker names its
//! rules with a digest, and the verdicts of one digest live in one file,
//! `<store>/dircache/verdicts-<digest hex>`, beside the stat caches and like them outside the
//! catalog (sled keeps everything written through it in memory: 20,000 verdicts inserted as
//! one batch took a first export from 47 to 131 MiB).
//!
//! A cache only saves work: the file is written to `tmp/` and renamed into place (two writers
//! at once: the last rename wins, both files are whole), saving one digest's file removes the
//! files of other digests, and `gc` removes them all with the stat caches before it removes any
//! object. A file that is missing, torn, foreign or fails its checksum reads as no verdicts.
//!
//! Format: [`MAGIC`], the digest (8 bytes), then per verdict the object id (32 bytes), the
//! verdict's length (u16 big-endian) and bytes, in id order; then the blake3 of everything
//! before it (32 bytes).

use std::fs;
use std::io::{self, Read, Write};

use super::dircache::DIR;
use super::Catalog;
use crate::error::StoreError;
use crate::id::{IdHasher, ObjectId};
use crate::sys;

const MAGIC: &[u8] = b"zeroclaw-bundle verdicts 1\n";
const PREFIX: &str = "verdicts-";
/// A verdicts file above this is not read (a verdict with no findings takes 34 bytes).
const MAX_FILE: u64 = 1 << 30;

/// The verdicts of one rules digest: object id -> the checker's bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdicts {
    /// Sorted by id, one per id.
    entries: Vec<(ObjectId, Box<[u8]>)>,
    /// Added since loading, not yet sorted in.
    added: Vec<(ObjectId, Box<[u8]>)>,
}

impl Verdicts {
    /// The verdict on `id`, if one is recorded (among those loaded; not those added since).
    pub fn get(&self, id: &ObjectId) -> Option<&[u8]> {
        self.entries
            .binary_search_by(|(e, _)| e.cmp(id))
            .ok()
            .map(|at| &*self.entries[at].1)
    }

    /// Records `verdict` on `id` (kept when saved; a verdict must fit in 65,535 bytes, a
    /// longer one is dropped: the object is only checked again).
    pub fn insert(&mut self, id: ObjectId, verdict: Vec<u8>) {
        if verdict.len() <= usize::from(u16::MAX) {
            self.added.push((id, verdict.into_boxed_slice()));
        }
    }

    /// How many verdicts are held.
    pub fn len(&self) -> usize {
        self.entries.len() + self.added.len()
    }

    /// True when none are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sorts the added verdicts in (a later one on an id wins).
    fn merged(&mut self) -> &[(ObjectId, Box<[u8]>)] {
        if !self.added.is_empty() {
            self.added.reverse();
            self.entries.splice(0..0, self.added.drain(..));
            // Stable: for one id the added (now first) comes before the loaded one.
            self.entries.sort_by_key(|e| e.0);
            self.entries.dedup_by(|later, first| later.0 == first.0);
        }
        &self.entries
    }
}

fn file_name(rules: &[u8; 8]) -> String {
    let hex: String = rules.iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

impl Catalog<'_> {
    /// The verdicts recorded under `rules` (none when there is no usable file).
    pub fn load_verdicts(&self, rules: &[u8; 8]) -> Verdicts {
        let path = self.root().join(DIR).join(file_name(rules));
        // Not followed and never blocking, like the stat caches.
        match sys::open_regular(&path) {
            Ok(Some(file)) => read_file(file, rules).ok().flatten().unwrap_or_default(),
            _ => Verdicts::default(),
        }
    }

    /// Saves `verdicts` as the verdicts of `rules` (when any were added), and removes the
    /// files of other rules.
    pub fn save_verdicts(
        &self,
        rules: &[u8; 8],
        verdicts: &mut Verdicts,
    ) -> Result<(), StoreError> {
        if verdicts.added.is_empty() {
            return Ok(());
        }
        let dir = self.root().join(DIR);
        let name = file_name(rules);
        let entries = verdicts.merged();
        self.replace_dircache_file(&dir.join(&name), "verdicts", &|tmp| {
            write_file(tmp, rules, entries)
        })?;
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let other = entry.file_name();
                let other = other.to_string_lossy();
                if other.starts_with(PREFIX) && other != name {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        Ok(())
    }
}

fn write_file(
    path: &std::path::Path,
    rules: &[u8; 8],
    entries: &[(ObjectId, Box<[u8]>)],
) -> Result<(), StoreError> {
    let failed = |e| StoreError::io("write", path, e);
    let mut out = io::BufWriter::with_capacity(1 << 16, fs::File::create(path).map_err(failed)?);
    let mut sum = IdHasher::new();
    let mut put = |out: &mut io::BufWriter<fs::File>, bytes: &[u8]| {
        sum.update(bytes);
        out.write_all(bytes).map_err(failed)
    };
    put(&mut out, MAGIC)?;
    put(&mut out, rules)?;
    for (id, verdict) in entries {
        put(&mut out, id.as_bytes())?;
        put(&mut out, &(verdict.len() as u16).to_be_bytes())?;
        put(&mut out, verdict)?;
    }
    out.write_all(sum.finish().as_bytes()).map_err(failed)?;
    out.flush().map_err(failed)
}

/// The verdicts of a whole, checksummed file of `rules`; `None` for anything else.
fn read_file(file: fs::File, rules: &[u8; 8]) -> io::Result<Option<Verdicts>> {
    let len = file.metadata()?.len();
    let head = MAGIC.len() + rules.len();
    if len > MAX_FILE || len < (head + 32) as u64 {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut bytes)?;
    let (body, stored) = bytes.split_at(bytes.len() - 32);
    if ObjectId::of(body).as_bytes()[..] != stored[..]
        || body[..MAGIC.len()] != *MAGIC
        || body[MAGIC.len()..head] != rules[..]
    {
        return Ok(None);
    }
    let mut entries = Vec::new();
    let mut rest = &body[head..];
    while !rest.is_empty() {
        if rest.len() < 34 {
            return Ok(None);
        }
        let id = ObjectId::from_bytes(rest[..32].try_into().expect("32 bytes"));
        let n = usize::from(u16::from_be_bytes([rest[32], rest[33]]));
        let Some(verdict) = rest.get(34..34 + n) else {
            return Ok(None);
        };
        if entries.last().is_some_and(|(last, _)| *last >= id) {
            return Ok(None); // not in id order: not a file this module wrote
        }
        entries.push((id, verdict.to_vec().into_boxed_slice()));
        rest = &rest[34 + n..];
    }
    Ok(Some(Verdicts {
        entries,
        added: Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;

    #[test]
    fn verdicts_round_trip_per_rules_and_damage_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let (a, b, c) = (ObjectId::of(b"a"), ObjectId::of(b"b"), ObjectId::of(b"c"));
        assert!(store.catalog().load_verdicts(&[1; 8]).is_empty());
        let mut v = Verdicts::default();
        v.insert(b, vec![7, 8]);
        v.insert(a, vec![]);
        store.catalog().save_verdicts(&[1; 8], &mut v).unwrap();
        let mut loaded = store.catalog().load_verdicts(&[1; 8]);
        assert_eq!(
            (loaded.get(&a), loaded.get(&b)),
            (Some(&[][..]), Some(&[7, 8][..]))
        );
        assert!(
            store.catalog().load_verdicts(&[2; 8]).is_empty(),
            "other rules"
        );
        // Added later: merged in, a newer verdict on an id wins.
        loaded.insert(c, vec![1]);
        loaded.insert(b, vec![9]);
        store.catalog().save_verdicts(&[1; 8], &mut loaded).unwrap();
        let again = store.catalog().load_verdicts(&[1; 8]);
        assert_eq!(again.len(), 3);
        assert_eq!(again.get(&b), Some(&[9][..]));
        // Saving under new rules removes the old rules' file.
        let mut other = Verdicts::default();
        other.insert(a, vec![]);
        store.catalog().save_verdicts(&[2; 8], &mut other).unwrap();
        assert!(store.catalog().load_verdicts(&[1; 8]).is_empty());
        // Every flipped byte and every truncation reads as no verdicts.
        let path = store.root().join(DIR).join(file_name(&[2; 8]));
        let good = fs::read(&path).unwrap();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            fs::write(&path, &bad).unwrap();
            assert!(
                store.catalog().load_verdicts(&[2; 8]).is_empty(),
                "flip at {at}"
            );
            fs::write(&path, &good[..at]).unwrap();
            assert!(
                store.catalog().load_verdicts(&[2; 8]).is_empty(),
                "cut at {at}"
            );
        }
        fs::write(&path, &good).unwrap();
        assert_eq!(store.catalog().load_verdicts(&[2; 8]).len(), 1);
        // gc's clearing of the stat caches takes the verdicts with them.
        store.catalog().clear_dircaches().unwrap();
        assert!(store.catalog().load_verdicts(&[2; 8]).is_empty());
    }
}
