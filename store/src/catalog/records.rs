//! Stat-cache records being collected: a capture's new and changed records, a publish's
//! destination record. They are in the catalog's `{path_len:u16 path entry}` encoding, kept
//! in memory up to [`IN_MEMORY`] bytes and beyond that appended to an unnamed temporary file
//! in the store's `tmp/` (`O_TMPFILE`: the kernel frees it when the fd closes, so a killed
//! process leaves nothing behind), then read back as whole records when they are written.
//! At 300,000 files they are about 30 MB: held in memory they were the largest part of a
//! first capture's and a checkout's peak (a first capture of 300,000 small files peaked at
//! 88 MiB; the vector alone reached 30 MB, plus the copy sorted for the catalog).
//!
//! A failure to spill (disk full, no `tmp/`) drops every record collected so far and ignores
//! the rest: a cache only saves work, and a file missing from it is read again next time.
//! Records come back in the order they were pushed; the loader sorts them (see
//! `SourceStatCache`), so the order is not part of the format.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::session::{push_record, record_at, StatEntry};
use crate::error::StoreError;

/// Records held in memory before they go to the spill file (and the size of each append).
const IN_MEMORY: usize = 1 << 20;
/// Bytes read back from the spill file at a time.
const READ_BACK: usize = 256 * 1024;

/// Records being collected (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Records {
    /// Records not spilled yet.
    buf: Vec<u8>,
    /// Where `buf` goes when it is full; `None` keeps everything in memory.
    spill_dir: Option<PathBuf>,
    /// The spill file and how many bytes of whole records it holds.
    spill: Option<(File, u64)>,
    /// Records pushed and kept.
    count: usize,
    /// A spill failed: everything was dropped and later records are ignored.
    lost: bool,
}

impl Records {
    /// Records spilled to an unnamed file in `dir` past [`IN_MEMORY`] bytes.
    pub(crate) fn spilling_into(dir: &Path) -> Records {
        Records {
            spill_dir: Some(dir.to_path_buf()),
            ..Records::default()
        }
    }

    /// Spills into `dir` from now on (records already held stay where they are).
    pub(crate) fn spill_into(&mut self, dir: &Path) {
        self.spill_dir = Some(dir.to_path_buf());
    }

    /// Appends one record; false when it was not kept (a path over 64 KiB, or after a
    /// failed spill).
    pub(crate) fn push(&mut self, path: &[u8], entry: &StatEntry) -> bool {
        if self.lost {
            return false;
        }
        let before = self.buf.len();
        push_record(&mut self.buf, path, entry);
        if self.buf.len() == before {
            return false;
        }
        self.count += 1;
        if self.buf.len() >= IN_MEMORY && self.spill_dir.is_some() && self.spill().is_err() {
            *self = Records {
                lost: true,
                ..Records::default()
            };
            return false;
        }
        true
    }

    /// Moves the records held in memory to the end of the spill file.
    fn spill(&mut self) -> io::Result<()> {
        if self.spill.is_none() {
            let dir = self
                .spill_dir
                .as_deref()
                .expect("spill() needs a spill dir");
            self.spill = Some((crate::sys::unnamed_file(dir)?, 0));
        }
        let (file, len) = self.spill.as_mut().expect("opened above");
        file.write_all(&self.buf)?;
        *len += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Records kept.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// True when no record is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Calls `f` with each whole record (`{path_len path entry}`), in push order.
    pub(crate) fn for_each(
        &self,
        f: &mut dyn FnMut(&[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let read_failed = |e| {
            let dir = self.spill_dir.clone().unwrap_or_default();
            StoreError::io("read back the stat-cache records spilled into", dir, e)
        };
        if let Some((file, len)) = &self.spill {
            let mut block = vec![0u8; READ_BACK];
            // Bytes at the start of `block` carried from the last read (a partial record).
            let mut carried = 0;
            let mut at = 0u64;
            while at < *len {
                if carried == block.len() {
                    // One record longer than the block (a path near 64 KiB): grow it.
                    block.resize(block.len() * 2, 0);
                }
                let want =
                    (block.len() - carried).min(usize::try_from(len - at).unwrap_or(usize::MAX));
                file.read_exact_at(&mut block[carried..carried + want], at)
                    .map_err(read_failed)?;
                at += want as u64;
                let filled = carried + want;
                let mut pos = 0;
                while let Some((_, _, end)) = record_at(&block[..filled], pos) {
                    f(&block[pos..end])?;
                    pos = end;
                }
                block.copy_within(pos..filled, 0);
                carried = filled - pos;
            }
            if carried != 0 {
                return Err(read_failed(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the spill file ends inside a record",
                )));
            }
        }
        let mut pos = 0;
        while let Some((_, _, end)) = record_at(&self.buf, pos) {
            f(&self.buf[pos..end])?;
            pos = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ObjectId;

    fn entry(i: u64) -> StatEntry {
        StatEntry {
            dev: 1,
            ino: i,
            size: i * 3,
            mtime_ns: 5,
            ctime_ns: 6,
            exec: i.is_multiple_of(2),
            id: ObjectId::of(&i.to_be_bytes()),
        }
    }

    fn collect(records: &Records) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        records
            .for_each(&mut |r| {
                out.push(r.to_vec());
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn spilled_records_come_back_whole_and_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let mut spilled = Records::spilling_into(tmp.path());
        let mut memory = Records::default();
        // Enough to spill a few times and to cross read-back blocks, with one path of the
        // format's largest length.
        let long = vec![b'x'; usize::from(u16::MAX)];
        for i in 0..40_000u64 {
            let path = if i == 20_001 {
                long.clone()
            } else {
                format!("dir{}/file-{i}", i % 97).into_bytes()
            };
            assert!(spilled.push(&path, &entry(i)));
            assert!(memory.push(&path, &entry(i)));
        }
        assert!(spilled.spill.is_some(), "spilled past IN_MEMORY");
        assert!(spilled.buf.len() < IN_MEMORY);
        assert_eq!(spilled.len(), 40_000);
        let back = collect(&spilled);
        assert_eq!(back.len(), 40_000);
        assert_eq!(back, collect(&memory));
        // Nothing of it is a named file in the directory.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_failed_spill_drops_everything() {
        let tmp = tempfile::tempdir().unwrap();
        let mut records = Records::spilling_into(&tmp.path().join("missing"));
        let mut kept = 0;
        for i in 0..30_000u64 {
            kept += usize::from(records.push(format!("f{i}").as_bytes(), &entry(i)));
        }
        assert!(kept > 0 && kept < 30_000);
        assert!(records.is_empty());
        assert!(collect(&records).is_empty());
    }
}
