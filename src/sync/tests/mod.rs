//! Tests of the three-way merge: the rules case by case (`files`, `config`) and random rounds
//! that check the invariants over many generated states (`rounds`).

mod config;
mod files;
mod rounds;

use super::{ConflictKind, Stamp};

/// A small deterministic PRNG (splitmix64): the rounds are the same on every run, and a
/// failing round names its seed.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[test]
fn stamp_is_utc_date_dash_time() {
    // 2026-12-04T23:15:00Z.
    assert_eq!(
        Stamp::from_unix_secs(1_796_426_100).as_str(),
        "20261204-231500"
    );
    assert_eq!(Stamp::from_unix_secs(0).as_str(), "19700101-000000");
}

#[test]
fn every_kind_has_its_own_words() {
    let kinds = [
        ConflictKind::BothModified,
        ConflictKind::BothAdded,
        ConflictKind::DeletedLocally,
        ConflictKind::DeletedUpstream,
        ConflictKind::FileDirectory,
    ];
    let words: std::collections::BTreeSet<_> = kinds.iter().map(|k| k.describe()).collect();
    assert_eq!(words.len(), kinds.len());
}
