//! Admission: the rule of which snapshot records found among the objects are snapshots of this
//! store, and the catalog's rebuild from them.
//!
//! Which records are snapshots. A snapshot record is an object, and objects arrive from
//! other hosts: a file's bytes can be a record (a pack or a remote sends it as a blob of an
//! innocent snapshot). So a record found among the objects is not trusted for being there.
//! `gc`'s roots and `reindex`'s catalog are the same set ([`Catalog::admit_records`]): every
//! record the catalog lists (committed here, or received under `unpack`'s rules), plus each
//! other valid record that passes the received-record rules `unpack` applies: it is not the
//! content of a file of another snapshot, it is not dated more than a day in the future (it
//! would stay `agent/<alias>` over every later local export), and its name does not name
//! another snapshot the catalog lists. A lost catalog is rebuilt under the same rules before
//! gc marks, so a damaged catalog never makes gc delete a snapshot that reindex would list.

use std::collections::{HashMap, HashSet};
use std::io;

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::snapshot::{Snapshot, RECORD_PREFIX};
use crate::tree::EntryKind;

use super::{Catalog, CatalogSession};

/// What a rebuild of the catalog from the records did (`reindex` reports it).
#[derive(Default)]
pub(crate) struct Rebuilt {
    /// Snapshots in the rebuilt index.
    pub(crate) snapshots: u64,
    /// Records left out and names moved, one sentence each (already escaped).
    pub(crate) problems: Vec<String>,
}

/// What [`Catalog::admit_records`] decided.
#[derive(Default)]
pub(crate) struct Admission {
    /// The snapshots of this store: gc's roots, reindex's catalog.
    pub(crate) admitted: Vec<(ObjectId, Snapshot)>,
    /// Why each other record was left out, one sentence each.
    pub(crate) refused: Vec<String>,
    /// The names the catalog gave, and to which snapshot.
    pub(crate) held: HashMap<String, ObjectId>,
    /// Snapshots the catalog lists without the name their record carries: the name moved
    /// to a later snapshot (see [`CatalogSession::add_snapshot`]), and stays off them even once that
    /// later snapshot is forgotten.
    pub(crate) unnamed: HashSet<ObjectId>,
}

pub(crate) struct ScannedRecord {
    pub(crate) id: ObjectId,
    pub(crate) snap: Option<Snapshot>,
    pub(crate) problem: Option<String>,
}

impl Catalog<'_> {
    /// Every snapshot record among the objects, each parsed (syntax only) and validated:
    /// `(id, parsed, why it fails validation)`. A record that does not even parse is skipped.
    pub(crate) fn scan_records(&self) -> Result<Vec<ScannedRecord>, StoreError> {
        let mut out = Vec::new();
        for listed in self.objects().list()? {
            let id = listed.id;
            if !listed.compressed && listed.stored_len < RECORD_PREFIX.len() as u64 {
                continue;
            }
            let head = match self.objects().peek(&id, RECORD_PREFIX.len()) {
                Ok(head) => head,
                // Forgotten since the listing (forget runs beside a verify or a reindex scan).
                Err(StoreError::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => {
                    continue
                }
                // A compressed object that does not decode: whatever it was, it is no readable
                // record (`verify` names it).
                Err(StoreError::Undecodable { .. }) => continue,
                Err(e) => return Err(e),
            };
            if head != RECORD_PREFIX {
                continue;
            }
            let bytes = match self.objects().read_verified(&id) {
                Ok(b) => b,
                Err(StoreError::MissingObject(_)) => continue,
                Err(e @ StoreError::CorruptObject { .. }) => {
                    out.push(ScannedRecord {
                        id,
                        snap: None,
                        problem: Some(e.to_string()),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            match Snapshot::parse(&bytes) {
                Ok(snap) => {
                    let problem = snap.validate().err().map(|e| e.to_string());
                    out.push(ScannedRecord {
                        id,
                        snap: Some(snap),
                        problem,
                    });
                }
                Err(e) => out.push(ScannedRecord {
                    id,
                    snap: None,
                    problem: Some(e.to_string()),
                }),
            }
        }
        Ok(out)
    }

    /// Replaces `catalog`'s index with one built from the records (the caller holds what
    /// keeps the records still: the exclusive lock, or the catalog itself while it is new).
    pub(crate) fn rebuild_index(&self, catalog: &CatalogSession) -> Result<Rebuilt, StoreError> {
        let mut report = Rebuilt::default();
        let admission = self.admit_records(catalog, self.scan_records()?)?;
        report.problems = admission.refused;
        let mut records = admission.admitted;
        // Newest last, so the newest holder of a name is the one that keeps it, unless the
        // catalog already gives the name to one of them (a local name stays where it is).
        records.sort_by_key(|r| (r.1.created_unix_ns, r.0));
        // A name that moved away from a snapshot never comes back to it: the catalog listed
        // it without the name (its record, immutable, still carries it), so it is no
        // candidate, even once the snapshot the name moved to is forgotten.
        let mut holder: HashMap<String, ObjectId> = HashMap::new();
        for (id, snap) in &records {
            if let (Some(name), false) = (&snap.name, admission.unnamed.contains(id)) {
                holder.insert(name.clone(), *id);
            }
        }
        for (name, id) in &admission.held {
            if records.iter().any(|(r, _)| r == id) {
                holder.insert(name.clone(), *id);
            }
        }
        catalog.clear_index()?;
        for (id, snap) in &mut records {
            if let Some(name) = &snap.name {
                let Some(&newest) = holder.get(name) else {
                    // Only snapshots the name moved away from carry it: none gets it back.
                    snap.name = None;
                    catalog.add_snapshot(*id, snap)?;
                    continue;
                };
                if newest != *id {
                    report.problems.push(format!(
                        "snapshot {} is also named {}: the name stays on {}",
                        id.short(16),
                        crate::escape::escape_text(name),
                        newest.short(16)
                    ));
                    snap.name = None;
                }
            }
            catalog.add_snapshot(*id, snap)?;
        }
        report.snapshots = records.len() as u64;
        Ok(report)
    }

    /// Sorts the scanned records into the snapshots of this store and the rest (see the
    /// module doc, "Which records are snapshots"): every valid record `catalog` lists, and
    /// every other valid one that passes the received-record rules. `refused` says, one
    /// sentence each (escaped), why each other record was left out.
    pub(crate) fn admit_records(
        &self,
        catalog: &CatalogSession,
        scanned: Vec<ScannedRecord>,
    ) -> Result<Admission, StoreError> {
        let listed = if catalog.is_fresh() {
            Vec::new()
        } else {
            catalog.snapshots()?
        };
        let listed_ids: HashSet<ObjectId> = listed.iter().map(|s| s.id).collect();
        let held: HashMap<String, ObjectId> = listed
            .iter()
            .filter_map(|s| Some((s.name.clone()?, s.id)))
            .collect();
        let unnamed: HashSet<ObjectId> = listed
            .iter()
            .filter(|s| s.name.is_none())
            .map(|s| s.id)
            .collect();
        let mut admission = Admission {
            held,
            unnamed,
            ..Admission::default()
        };
        let mut found = Vec::new();
        for rec in scanned {
            match (rec.snap, rec.problem) {
                (Some(snap), None) if listed_ids.contains(&rec.id) => {
                    admission.admitted.push((rec.id, snap))
                }
                (Some(snap), None) => found.push((rec.id, snap)),
                (_, problem) => admission.refused.push(format!(
                    "snapshot record {} left out: {}",
                    rec.id,
                    problem.unwrap_or_default()
                )),
            }
        }
        if found.is_empty() {
            return Ok(admission);
        }
        // Which found records are a file's content in some snapshot (one walk over every
        // valid record's trees, each tree once; only needed when a record is not listed).
        let found_ids: HashSet<ObjectId> = found.iter().map(|(id, _)| *id).collect();
        let mut content = HashSet::new();
        let mut seen = HashSet::new();
        let roots = admission.admitted.iter().chain(found.iter());
        let mut stack: Vec<ObjectId> = roots.map(|(_, s)| s.root).collect();
        while let Some(tree_id) = stack.pop() {
            if !seen.insert(tree_id) {
                continue;
            }
            let Ok(tree) = self.objects().read_tree(&tree_id) else {
                continue; // verify reports it
            };
            for e in tree.entries() {
                if e.kind == EntryKind::Dir {
                    stack.push(e.id);
                } else if found_ids.contains(&e.id) {
                    content.insert(e.id);
                }
            }
        }
        for (id, snap) in found {
            let why = if content.contains(&id) {
                Some(
                    "it is the content of a file in a snapshot, not a snapshot of this store"
                        .to_string(),
                )
            } else if crate::snapshot::future_dated(&snap) {
                Some(
                    "it is dated more than a day in the future and would shadow every later \
                     local snapshot of its agent"
                        .to_string(),
                )
            } else {
                snap.name.as_ref().and_then(|name| {
                    let local = admission.held.get(name).filter(|l| **l != id)?;
                    Some(format!(
                        "it is named {}, which already names snapshot {} in this store; a \
                         record found among the objects does not take over a local name",
                        crate::escape::escape_text(name),
                        local.short(16)
                    ))
                })
            };
            match why {
                Some(why) => admission
                    .refused
                    .push(format!("snapshot record {id} left out: {why}")),
                None => admission.admitted.push((id, snap)),
            }
        }
        Ok(admission)
    }
}
