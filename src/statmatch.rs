//! The one rule for trusting a recorded stat instead of reading a file, shared by capture (its
//! stat cache: an unchanged source file skips hashing) and publish (its destination record: an
//! unchanged file of the previous tree is hard-linked instead of written).
//!
//! A record matches a file when dev, ino, size, mtime and ctime are all equal ([`matches()`]);
//! the caller adds what its own record also pins (capture: the exec bit; publish: one link and
//! the exact mode). A match is proof only when it is not *racy*: a file changed within the
//! timestamp granularity of the moment the record was taken can keep the recorded times, so
//! a record whose mtime or ctime is not older than that moment minus the granularity is not
//! trusted ([`Racy::trusts`]), and the file is read (capture) or hashed (publish) again.

use zeroclaw_bundle_store::StatEntry;

use crate::sys::Stat;

/// The timestamp granularity the racy rule assumes by default. Kernel timestamps come from a
/// coarse clock (a jiffy), and some filesystems store 1 s or 2 s; 2 s covers them all.
pub const RACY_NS: i64 = 2_000_000_000;

/// The granularity on a filesystem whose recorded times show sub-second precision: the kernel
/// stamps files from a clock that ticks at least every 10 ms, so a change after the record
/// cannot keep the recorded ctime once this much time separates them.
pub const FINE_RACY_NS: i64 = 100_000_000;

/// True when `st` has the identity, size and times `record` holds.
pub fn matches(record: &StatEntry, st: &Stat) -> bool {
    record.dev == st.dev
        && record.ino == st.ino
        && record.size == st.size
        && record.mtime_ns == st.mtime_ns
        && record.ctime_ns == st.ctime_ns
}

/// The racy cutoff of one set of records: times strictly older than it are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Racy {
    cutoff_ns: i64,
}

impl Racy {
    /// The cutoff for records checked against a capture that started at `start_ns`, with the
    /// coarse granularity [`RACY_NS`] (the filesystem is not known in advance).
    pub fn since(start_ns: i64) -> Racy {
        Racy {
            cutoff_ns: start_ns - RACY_NS,
        }
    }

    /// The cutoff for `records` taken at `recorded_at_ns`: [`FINE_RACY_NS`] when any recorded
    /// time shows sub-second precision, else [`RACY_NS`].
    #[cfg(test)]
    pub fn of_records<'a>(
        records: impl IntoIterator<Item = &'a StatEntry>,
        recorded_at_ns: i64,
    ) -> Racy {
        let fine = records
            .into_iter()
            .any(|e| e.mtime_ns % 1_000_000_000 != 0 || e.ctime_ns % 1_000_000_000 != 0);
        Racy::recorded_at(recorded_at_ns, fine)
    }

    /// The cutoff for records taken at `recorded_at_ns` whose times do (`fine`) or do not
    /// show sub-second precision (a packed record set answers that itself).
    pub fn recorded_at(recorded_at_ns: i64, fine: bool) -> Racy {
        Racy {
            cutoff_ns: recorded_at_ns - if fine { FINE_RACY_NS } else { RACY_NS },
        }
    }

    /// A cutoff that trusts nothing (no record to trust).
    pub fn never() -> Racy {
        Racy { cutoff_ns: 0 }
    }

    /// True when a file with these times is old enough for a matching stat to be proof.
    pub fn trusts(&self, mtime_ns: i64, ctime_ns: i64) -> bool {
        mtime_ns < self.cutoff_ns && ctime_ns < self.cutoff_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeroclaw_bundle_store::ObjectId;

    fn record(mtime_ns: i64, ctime_ns: i64) -> StatEntry {
        StatEntry {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns,
            ctime_ns,
            exec: false,
            id: ObjectId::of(b"x"),
        }
    }

    #[test]
    fn a_time_inside_the_window_is_racy() {
        let start = 100 * 1_000_000_000;
        let racy = Racy::since(start);
        assert!(racy.trusts(start - RACY_NS - 1, start - RACY_NS - 1));
        assert!(!racy.trusts(start - RACY_NS, 0), "mtime at the cutoff");
        assert!(!racy.trusts(0, start - 1), "ctime inside the window");
    }

    #[test]
    fn sub_second_records_get_the_fine_window() {
        let at = 100 * 1_000_000_000;
        let coarse = Racy::of_records(&[record(50 * 1_000_000_000, 50 * 1_000_000_000)], at);
        let fine = Racy::of_records(&[record(50 * 1_000_000_000 + 7, 50 * 1_000_000_000)], at);
        let t = at - FINE_RACY_NS - 1;
        assert!(!coarse.trusts(t, t));
        assert!(fine.trusts(t, t));
        assert!(!Racy::never().trusts(t, t));
    }
}
