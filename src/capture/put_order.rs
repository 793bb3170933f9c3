//! The order in which a capture adds new records to the stat cache: walk order, not the order
//! the workers answer in.
//!
//! The next capture asks the cache for its records in walk order, and finds each one right
//! after the one before it without hashing its path (`CacheFile::get`'s cursor). A file's
//! record is made when its worker answers, and the workers (eight on two cores) answer out of
//! order: a million-file tree's first snapshot wrote its records with 420,000 descents, and
//! the cold no-op after it missed the cursor on 930,000 of its 1.2 million lookups, each a
//! search of the whole index (a third of the no-op's user time).
//!
//! So an answered file's record is held while any file sent before it is still at the
//! workers, and added once none is. At most [`HELD`] records are held: past it the earliest
//! is added anyway (one large file read for long would otherwise hold the records of every
//! small file answered meanwhile). The order only makes the next capture faster: every
//! record is added whatever its order, before the cache is written.

use std::collections::{BTreeMap, BTreeSet};

use zeroclaw_bundle_store::StatEntry;

/// Records held at most (about 100 bytes each).
const HELD: usize = 4096;

/// Files at the workers and the records answered after them, by walk number.
#[derive(Default)]
pub(crate) struct PutOrder {
    /// The walk numbers of the files at the workers.
    in_flight: BTreeSet<u64>,
    /// Records answered while a file sent before them was still at the workers.
    held: BTreeMap<u64, (String, StatEntry)>,
}

impl PutOrder {
    /// File `seq` went to the workers.
    pub(crate) fn sent(&mut self, seq: u64) {
        self.in_flight.insert(seq);
    }

    /// File `seq` was answered, with the record to add for it (none when it is not cached);
    /// gives each record that may now be added, in walk order.
    pub(crate) fn answered(
        &mut self,
        seq: u64,
        record: Option<(String, StatEntry)>,
        add: &mut dyn FnMut(&str, &StatEntry),
    ) {
        self.in_flight.remove(&seq);
        if let Some(record) = record {
            self.held.insert(seq, record);
        }
        let waiting_on = self.in_flight.first().copied().unwrap_or(u64::MAX);
        while let Some((&first, _)) = self.held.first_key_value() {
            if first > waiting_on && self.held.len() <= HELD {
                break;
            }
            if let Some((path, stat)) = self.held.remove(&first) {
                add(&path, &stat);
            }
        }
    }

    /// Every record still held, in walk order (the walk is over, or failed).
    pub(crate) fn flush(&mut self, add: &mut dyn FnMut(&str, &StatEntry)) {
        self.in_flight.clear();
        while let Some((_, (path, stat))) = self.held.pop_first() {
            add(&path, &stat);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeroclaw_bundle_store::ObjectId;

    fn record(n: u64) -> (String, StatEntry) {
        let stat = StatEntry {
            dev: 1,
            ino: n,
            size: n,
            mtime_ns: 0,
            ctime_ns: 0,
            exec: false,
            id: ObjectId::of(&n.to_be_bytes()),
        };
        (format!("f{n:05}"), stat)
    }

    /// Answers in any order come out in walk order; a file answered without a record (not
    /// cached) holds nothing back; past the bound the earliest goes out anyway; flush gives
    /// the rest.
    #[test]
    fn records_are_added_in_walk_order_whatever_order_the_answers_come_in() {
        let mut order = PutOrder::default();
        let mut added = Vec::new();
        for seq in [1, 2, 3, 5, 8] {
            order.sent(seq);
        }
        let answer = |order: &mut PutOrder, seq: u64, cached: bool| {
            let mut out = Vec::new();
            order.answered(seq, cached.then(|| record(seq)), &mut |p, _| {
                out.push(p.to_string())
            });
            out
        };
        assert!(
            answer(&mut order, 3, true).is_empty(),
            "1 and 2 are still out"
        );
        assert!(answer(&mut order, 8, true).is_empty());
        assert_eq!(answer(&mut order, 1, true), ["f00001"]);
        // 2 is not cached: 3 goes out; 8 waits for 5.
        assert_eq!(answer(&mut order, 2, false), ["f00003"]);
        assert_eq!(answer(&mut order, 5, true), ["f00005", "f00008"]);
        added.extend(answer(&mut order, 9, true));
        assert_eq!(added, ["f00009"], "a file never sent holds nothing back");

        // One file out for long: the records after it go out once more than HELD wait.
        order.sent(10);
        let mut out = Vec::new();
        for seq in 11..=(11 + HELD as u64) {
            order.sent(seq);
            order.answered(seq, Some(record(seq)), &mut |p, _| out.push(p.to_string()));
        }
        assert_eq!(out, [format!("f{:05}", 11)], "the earliest, past the bound");
        let mut rest = Vec::new();
        order.flush(&mut |p, _| rest.push(p.to_string()));
        assert_eq!(rest.len(), HELD);
        assert!(rest.windows(2).all(|w| w[0] < w[1]), "in walk order");
    }
}
