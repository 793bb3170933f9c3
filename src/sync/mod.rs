//! The three-way merge of an update in place: what an update does to an agent that was
//! imported before and may have been changed here since. Pure decisions, no I/O: the caller
//! hands in the three states and gets back a plan, or a refusal that lists the conflicts.
//!
//! The three states are the base (the snapshot last imported, the merge base), the local
//! state (a capture of the agent as it is now) and the incoming one (the new bundle). Per
//! path of the workspace ([`files`]) and per key of the agent's config entries ([`config`]),
//! the same rules hold: changed on one side only, that side wins; changed the same way on both
//! sides, nothing to do; changed differently on both sides, a conflict, which the caller's
//! [`Conflicts`] policy resolves or refuses.
//!
//! This module owns the rules and the conflict-copy names. It does not read the store, the
//! install or the clock: the timestamp of a conflict copy is an input ([`Stamp`]).

// Wired by the update-in-place work (import of a newer bundle of an imported agent, `sync`);
// until then only the tests reach it.
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod config;
pub(crate) mod files;

/// What an update does with a conflict (`--conflicts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflicts {
    /// Refuse the whole update and list the conflicts (the default).
    Refuse,
    /// Keep the local side.
    KeepLocal,
    /// Take the incoming side (the local change is lost: the operator asked for it).
    TakeIncoming,
    /// Keep the local side and write the incoming file beside it under a conflict-copy name
    /// ([`files::conflict_name`]). A config key has no "beside": it keeps the local value.
    Copy,
}

/// How the two sides of a conflict differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConflictKind {
    /// Changed differently on both sides.
    BothModified,
    /// Absent from the base, added differently on both sides.
    BothAdded,
    /// Deleted here, changed upstream.
    DeletedLocally,
    /// Changed here, deleted upstream.
    DeletedUpstream,
    /// A file on one side where the other has a directory (at the path or above a path of
    /// the other side). Files only.
    FileDirectory,
}

impl ConflictKind {
    /// How a listing of conflicts names the kind.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ConflictKind::BothModified => "changed here and upstream",
            ConflictKind::BothAdded => "added here and upstream, differently",
            ConflictKind::DeletedLocally => "deleted here, changed upstream",
            ConflictKind::DeletedUpstream => "changed here, deleted upstream",
            ConflictKind::FileDirectory => "a file on one side, a directory on the other",
        }
    }
}

/// The time part of a conflict-copy name, `YYYYMMDD-HHMMSS` in UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp(String);

impl Stamp {
    /// The stamp of `secs` seconds since the epoch (UTC).
    pub(crate) fn from_unix_secs(secs: i64) -> Stamp {
        // "2026-12-04T23:15:00Z" -> "20261204" and "231500".
        let rfc = crate::clock::rfc3339_utc(i128::from(secs) * 1_000_000_000);
        let digits: String = rfc.chars().filter(char::is_ascii_digit).collect();
        let (date, time) = digits.split_at(digits.len().saturating_sub(6));
        Stamp(format!("{date}-{time}"))
    }

    /// The stamp as it appears in a name.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests;
