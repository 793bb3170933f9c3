//! Remote `forget` and `gc`: removing what no snapshot on the remote reaches, while other
//! hosts push, with no lock (a lock file on object storage is only as good as its holder's
//! liveness, and a crashed holder blocks everyone).
//!
//! The roots are the records (`snapshots/<id>`). A pack is live when its index lists an
//! object some record reaches (through the record's verified trees pack). A pack that is
//! not live is first MARKED (`gc/<pack-id>`, a conditional create: `If-None-Match: *` on S3,
//! a no-replace link on a local directory, so a second gc never restarts the first one's
//! clock), and only a later gc deletes it, when the mark is older than the grace period by
//! the backend's own clock and the pack is still not live. A live pack's mark is removed.
//!
//! Why a concurrent push never loses a pack it needs. A push (`sync::push`) first lists the
//! marks (time `t0`), relies on no marked pack (and refuses to upload a pack whose name is
//! marked), and writes its record only if less than [`push_window`] has passed since `t0`.
//! The gc requires `grace >= 2 * push_window` and takes the backend's time `now` BEFORE it
//! lists marks and records. Suppose the gc deletes pack P that the push needs:
//! - P's mark was written at `tm <= now - grace`. If `tm < t0`, the push saw the mark and did
//!   not rely on P (nor upload P: same name). So `tm >= t0`.
//! - The push's record is written by `t0 + push_window <= tm + push_window < tm + grace <=
//!   now`, before the gc lists records (strongly consistent listings: S3 since 2020, a local
//!   directory always): the gc sees the record, P is live, and P is kept. Contradiction.
//! - A pack being uploaded right now (no index yet, or no record yet) is at most marked: its
//!   push's record appears within the window, before the mark is old enough.
//!
//! Indexes, trees packs and signatures follow their pack and record: an index goes right before its pack
//! (an index without its pack stands for nothing: a push checks the pack's own index, a pull
//! passes over a pack that is gone); a trees pack whose record is gone goes once it is older
//! than the grace period (a push writes it within the window before its record). Conditional
//! writes are an optimisation of liveness here, not the safety argument: a backend without
//! them (an old S3-compatible server) gets plain writes, and the argument above still holds.
//!
//! What gc holds: the ids every record reaches (one set for the whole remote) and one trees
//! pack at a time (an unnamed file in the store's `tmp/`).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use zeroclaw_bundle_store::{EntryKind, ObjectId, ObjectSource, Snapshot};

use super::client::parse_id;
use super::{Remote, RemoteError};

/// How long a push may take from reading the gc marks to writing its record.
const PUSH_WINDOW: Duration = Duration::from_secs(6 * 3600);
/// What `remote gc` keeps marked packs for unless told otherwise.
pub const DEFAULT_GRACE_SECS: u64 = 24 * 3600;

/// How long a push may take from reading the gc marks to writing its record (test builds:
/// `ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS`, so a test can age marks in seconds).
pub fn push_window() -> Duration {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return Duration::from_millis(ms);
    }
    PUSH_WINDOW
}

/// The shortest grace period `gc` accepts: twice the push window (see the module doc).
pub fn min_grace() -> Duration {
    push_window() * 2
}

/// What a remote gc did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// The remote's name.
    pub remote: String,
    /// Snapshots (records) on the remote: the roots.
    pub snapshots: u64,
    /// Objects they reach.
    pub reachable: u64,
    /// Packs kept because a snapshot reaches an object they hold.
    pub live_packs: u64,
    /// Packs no snapshot reaches, marked now.
    pub marked: u64,
    /// Packs marked earlier and still within the grace period.
    pub marked_young: u64,
    /// Marks removed because their pack is live again (or gone).
    pub unmarked: u64,
    /// Packs deleted (marked longer ago than the grace period, still unreachable).
    pub deleted_packs: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// Index files deleted (their pack was deleted, or is gone).
    pub deleted_indexes: u64,
    /// Trees packs deleted (their record is gone, older than the grace period).
    pub deleted_trees: u64,
    /// Records with no trees pack (pushed by an older build): every pack was kept.
    pub unwalked: u64,
    /// Signatures deleted (their record is gone, older than the grace period).
    pub deleted_signatures: u64,
}

/// Removes snapshot `id`'s record from the remote: it stops being listed and pulled; what
/// only it reached goes at the next `gc` runs (marked, then deleted after the grace period).
pub fn forget(remote: &Remote, id: &ObjectId) -> Result<(), RemoteError> {
    remote.delete(&format!("snapshots/{}", id.to_hex()))
}

/// Every object snapshot `id` reaches, added to `into`: from its verified trees pack. `false`
/// when the remote has no trees pack for it (nothing added).
fn reach(
    remote: &Remote,
    id: &ObjectId,
    tmp: &Path,
    into: &mut HashSet<ObjectId>,
) -> Result<bool, RemoteError> {
    let key = format!("snapshots/{}", id.to_hex());
    let record = remote
        .record(id)?
        .ok_or_else(|| remote.corrupt(&key, "was listed, then gone (another gc or forget?)"))?;
    let snap = Snapshot::decode(&record)
        .map_err(|e| remote.corrupt(&key, format!("not a snapshot record: {e}")))?;
    let Some(trees) = super::view::RemoteView::fetch_trees(remote, id, tmp)? else {
        return Ok(false);
    };
    into.insert(*id);
    into.insert(snap.root);
    let mut stack = vec![snap.root];
    while let Some(t) = stack.pop() {
        let tree = trees.tree(&t)?;
        for e in tree.entries() {
            if into.insert(e.id) && e.kind == EntryKind::Dir {
                stack.push(e.id);
            }
        }
    }
    Ok(true)
}

/// Collects the remote's garbage (see the module doc); `tmp` is the local store's `tmp/`.
pub fn gc(remote: &Remote, tmp: &Path, grace: Duration) -> Result<GcReport, RemoteError> {
    if grace < min_grace() {
        return Err(RemoteError::Invalid {
            name: remote.name().to_string(),
            why: format!(
                "a remote gc's grace period must be at least {} s (twice the {} s a push may \
                 take: see README, remote gc)",
                min_grace().as_secs(),
                push_window().as_secs()
            ),
        });
    }
    let mut report = GcReport {
        remote: remote.name().to_string(),
        ..GcReport::default()
    };
    // The order matters (module doc): the clock, then marks, indexes, packs, records.
    let now = remote.clock_ms()?;
    let old_enough = now - i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let marks = remote.marks()?;
    let index_files: HashMap<String, _> = remote.index_files()?.into_iter().collect();
    let packs = remote.packs()?;
    let trees = remote.list("trees")?;
    let signatures = remote.all_signatures()?;
    crate::hooks::seam("remote-gc-listed", remote.name());
    let records: HashSet<ObjectId> = remote.snapshots()?.into_iter().collect();
    report.snapshots = records.len() as u64;
    let mut reachable = HashSet::new();
    for id in &records {
        remote.check_cancel()?;
        if !reach(remote, id, tmp, &mut reachable)? {
            report.unwalked += 1;
        }
    }
    report.reachable = reachable.len() as u64;
    let scan = remote.scan_indexes(&|o| reachable.contains(o), None)?;
    let live: HashSet<&String> = scan.found.values().flatten().collect();
    crate::hooks::seam("remote-gc-marked", remote.name());
    for (pack, entry) in &packs {
        remote.check_cancel()?;
        let mark_key = format!("gc/{pack}");
        if report.unwalked > 0 || live.contains(pack) {
            report.live_packs += 1;
            if marks.contains_key(pack) {
                remote.delete(&mark_key)?;
                report.unmarked += 1;
            }
            continue;
        }
        match marks.get(pack) {
            None => {
                remote.put_new(&mark_key, b"zeroclaw-bundle remote gc mark 1\n".to_vec())?;
                report.marked += 1;
            }
            Some(mark) if mark.modified_ms > old_enough => report.marked_young += 1,
            Some(_) => {
                crate::hooks::seam("remote-gc-delete", pack);
                if index_files.contains_key(pack) {
                    remote.delete(&format!("index/{pack}.idx"))?;
                    report.deleted_indexes += 1;
                }
                remote.delete(&format!("packs/{pack}.zcpack"))?;
                remote.delete(&mark_key)?;
                report.deleted_packs += 1;
                report.deleted_bytes += entry.size;
            }
        }
    }
    // Indexes listed before the packs whose pack was not listed: the pack was deleted.
    for pack in index_files.keys() {
        if !packs.contains_key(pack) {
            remote.delete(&format!("index/{pack}.idx"))?;
            report.deleted_indexes += 1;
        }
    }
    for pack in marks.keys() {
        if !packs.contains_key(pack) {
            remote.delete(&format!("gc/{pack}"))?;
            report.unmarked += 1;
        }
    }
    for entry in &trees {
        let Some(id) = entry.name.strip_suffix(".zcpack").and_then(parse_id) else {
            continue;
        };
        if !records.contains(&id) && entry.modified_ms <= old_enough {
            // Listed before the records: only a record older than the push window is missing.
            remote.delete(&format!("trees/{}", entry.name))?;
            report.deleted_trees += 1;
        }
    }
    // Signatures follow their record like trees packs: a push writes them within the window
    // before its record, so only those of a record gone longer than the grace period go.
    for (id, key, modified_ms) in &signatures {
        if !records.contains(id) && *modified_ms <= old_enough {
            remote.delete(key)?;
            report.deleted_signatures += 1;
        }
    }
    Ok(report)
}
