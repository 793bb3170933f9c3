//! The credential scan of a bundle's carried files: every text file below the bundle root (up
//! to [`SCAN_LIMIT`]) is read from the store and checked line by line with
//! [`crate::credentials::detect`], on the I/O worker pool. What a file's bytes hold never
//! changes under its id, so each file's findings are kept in the store as a verdict under a
//! digest of the scan's rules (this file's and the detector's source; see
//! `zeroclaw_bundle_store::Verdicts`): an unchanged file is not read again by the next export,
//! and a build with other rules reads none of them.

use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, OnceLock};

use anyhow::Result;
use zeroclaw_bundle_store::{escape_name, EntryKind, ObjectId, Store, StoreError, TreeEntry};

use crate::credentials::{CredentialFinding, CredentialReason};

/// Carried files larger than this are not scanned for credential-looking values.
const SCAN_LIMIT: u64 = 1 << 20;

/// A file with a NUL in its first this many bytes is binary and not scanned.
const BINARY_SNIFF: usize = 8192;

/// One finding in a file: its line (from 1) and why.
type Lines = Vec<(usize, CredentialReason)>;

/// The digest of the scan's rules: the source of this module and of the detector, so that a
/// verdict recorded by a build with other rules is never read as this one's.
fn rules() -> &'static [u8; 8] {
    static RULES: OnceLock<[u8; 8]> = OnceLock::new();
    RULES.get_or_init(|| {
        let source = [
            include_str!("credential_scan.rs"),
            include_str!("credentials.rs"),
        ]
        .concat();
        let mut out = [0u8; 8];
        out.copy_from_slice(&ObjectId::of(source.as_bytes()).as_bytes()[..8]);
        out
    })
}

/// Scans the carried text files of the bundle tree `root` (not the two bundle files at its
/// top: the closure was scanned by dotted path when planning) and returns the findings, sorted
/// by location. A file carried at several paths is scanned once and reported at each.
pub fn scan_files(store: &Store, root: &ObjectId) -> Result<Vec<CredentialFinding>> {
    let rules = rules();
    let mut known = store.catalog().load_verdicts(rules);
    let mut verdicts: HashMap<ObjectId, Lines> = HashMap::new();
    let mut unknown: Vec<ObjectId> = Vec::new();
    let mut seen = HashSet::new();
    walk_carried(store, root, &mut |_, entry| {
        if !seen.insert(entry.id) {
            return;
        }
        match known.get(&entry.id).and_then(decode) {
            Some(lines) => {
                verdicts.insert(entry.id, lines);
            }
            None => unknown.push(entry.id),
        }
    })?;
    let fresh = scan_objects(store, &unknown)?;
    if !fresh.is_empty() {
        for (id, lines) in &fresh {
            known.insert(*id, encode(lines));
        }
        // Only a cache: a verdict that cannot be saved is checked again next time.
        let _ = store.catalog().save_verdicts(rules, &mut known);
    }
    drop((known, seen));
    verdicts.extend(fresh);
    let mut findings = Vec::new();
    // Most bundles have no finding: then the paths are never needed, nor a second walk.
    if verdicts.values().all(Vec::is_empty) {
        return Ok(findings);
    }
    walk_carried(store, root, &mut |prefix, entry| {
        let lines = &verdicts[&entry.id];
        if lines.is_empty() {
            return;
        }
        let path = format!("{prefix}/{}", escape_name(&entry.name));
        for (line, reason) in lines {
            findings.push(CredentialFinding {
                location: format!("{path}:{line}"),
                reason: *reason,
            });
        }
    })?;
    findings.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(findings)
}

/// Calls `f` with the directory path (escaped, `/`-separated) and entry of every file the
/// scan covers: below the root's top level, at most [`SCAN_LIMIT`] bytes.
fn walk_carried(
    store: &Store,
    root: &ObjectId,
    f: &mut dyn FnMut(&str, &TreeEntry),
) -> Result<(), StoreError> {
    let mut stack = vec![(String::new(), *root)];
    while let Some((prefix, id)) = stack.pop() {
        let tree = store.objects().read_tree(&id)?;
        for entry in tree.entries() {
            match entry.kind {
                EntryKind::Dir => {
                    let name = escape_name(&entry.name);
                    let path = if prefix.is_empty() {
                        name
                    } else {
                        format!("{prefix}/{name}")
                    };
                    stack.push((path, entry.id));
                }
                _ if prefix.is_empty() || entry.size > SCAN_LIMIT => {}
                _ => f(&prefix, entry),
            }
        }
    }
    Ok(())
}

/// Reads and scans each object of `ids` on the worker pool.
fn scan_objects(store: &Store, ids: &[ObjectId]) -> Result<Vec<(ObjectId, Lines)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let (reply_tx, reply_rx) = mpsc::channel::<Result<(ObjectId, Lines), StoreError>>();
    crate::workers::with_pool(
        || reply_tx.clone(),
        |reply: &mut mpsc::Sender<_>, id: ObjectId, stopped| {
            if stopped {
                return;
            }
            let scanned = store
                .objects()
                .read_verified(&id)
                .map(|bytes| (id, scan_bytes(&bytes)));
            let _ = reply.send(scanned);
        },
        |jobs| -> Result<(), StoreError> {
            for id in ids {
                if jobs.send(*id).is_err() {
                    break;
                }
            }
            Ok(())
        },
    )?;
    drop(reply_tx);
    let mut out = Vec::with_capacity(ids.len());
    for reply in reply_rx {
        out.push(reply?);
    }
    Ok(out)
}

/// The findings in one file's bytes, line by line; none in a binary file.
fn scan_bytes(bytes: &[u8]) -> Lines {
    let mut lines = Vec::new();
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return lines;
    }
    let text = String::from_utf8_lossy(bytes);
    for (index, line) in text.lines().enumerate() {
        if let Some(reason) = crate::credentials::detect(line) {
            lines.push((index + 1, reason));
        }
    }
    lines
}

/// A verdict as the catalog keeps it: per finding, its line (u32, little-endian) and reason.
fn encode(lines: &Lines) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() * 5);
    for (line, reason) in lines {
        out.extend_from_slice(&(*line as u32).to_le_bytes());
        out.push(reason.code());
    }
    out
}

/// A recorded verdict, or `None` when it cannot be read (then the file is scanned again).
fn decode(bytes: &[u8]) -> Option<Lines> {
    if !bytes.len().is_multiple_of(5) {
        return None;
    }
    bytes
        .chunks_exact(5)
        .map(|c| {
            let line = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
            Some((line, CredentialReason::from_code(c[4])?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_and_damage_is_not_a_verdict() {
        let lines: Lines = vec![
            (1, CredentialReason::Bearer),
            (70_000, CredentialReason::HighEntropyToken),
        ];
        assert_eq!(decode(&encode(&lines)), Some(lines.clone()));
        assert_eq!(decode(&[]), Some(vec![]));
        assert_eq!(decode(&encode(&lines)[..7]), None, "torn");
        assert_eq!(decode(&[1, 0, 0, 0, 250]), None, "unknown reason");
    }

    #[test]
    fn every_reason_has_its_own_code() {
        let all = CredentialReason::ALL;
        for (at, r) in all.into_iter().enumerate() {
            assert_eq!(usize::from(r.code()), at, "ALL is in declaration order");
            assert_eq!(CredentialReason::from_code(r.code()), Some(r));
        }
        let codes: HashSet<u8> = all.iter().map(|r| r.code()).collect();
        assert_eq!(codes.len(), all.len());
    }

    /// A bundle tree with `files` (name, bytes) in `workspace/`, and a top-level file.
    fn bundle(store: &Store, files: &[(&str, &[u8])]) -> ObjectId {
        let mut entries = Vec::new();
        let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
        for (name, bytes) in files {
            let id = store.objects().write_bytes(bytes).unwrap();
            let size = bytes.len() as u64;
            entries.push(TreeEntry::file(name.as_bytes().to_vec(), 0o644, size, id));
        }
        let ws = store
            .objects()
            .write_tree(&zeroclaw_bundle_store::Tree::from_entries(entries).unwrap())
            .unwrap();
        let top = b"Authorization: Bearer abcdefghijklmnop\n";
        let top_id = store.objects().write_bytes(top).unwrap();
        let tree = zeroclaw_bundle_store::Tree::from_entries(vec![
            TreeEntry::dir(b"workspace".to_vec(), total, ws),
            TreeEntry::file(b"manifest.toml".to_vec(), 0o644, top.len() as u64, top_id),
        ])
        .unwrap();
        store.objects().write_tree(&tree).unwrap()
    }

    #[test]
    fn verdicts_are_recorded_per_file_and_read_back_instead_of_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
        let secret = b"ok\nAuthorization: Bearer abcdefghijklmnop\n";
        let root = bundle(
            &store,
            &[("a.md", secret), ("b.md", secret), ("c.md", b"plain")],
        );
        let first = scan_files(&store, &root).unwrap();
        let at: Vec<_> = first.iter().map(|f| f.location.as_str()).collect();
        assert_eq!(
            at,
            ["workspace/a.md:2", "workspace/b.md:2"],
            "the top level is not scanned"
        );
        let (secret_id, plain_id) = (ObjectId::of(secret), ObjectId::of(b"plain"));
        let mut known = store.catalog().load_verdicts(rules());
        assert_eq!(
            known.get(&secret_id).and_then(decode),
            Some(vec![(2, CredentialReason::Bearer)])
        );
        assert_eq!(known.get(&plain_id), Some(&[][..]));
        // A recorded verdict is what the next scan reports, without reading the file: one
        // planted for the plain file shows.
        known.insert(plain_id, encode(&vec![(9, CredentialReason::Netrc)]));
        store.catalog().save_verdicts(rules(), &mut known).unwrap();
        let again = scan_files(&store, &root).unwrap();
        let at: Vec<_> = again.iter().map(|f| f.location.as_str()).collect();
        assert_eq!(
            at,
            ["workspace/a.md:2", "workspace/b.md:2", "workspace/c.md:9"]
        );
    }

    #[test]
    fn a_binary_file_has_no_findings_and_lines_count_from_one() {
        let text = b"plain\nAuthorization: Bearer abcdefghijklmnop\n";
        assert_eq!(scan_bytes(text), vec![(2, CredentialReason::Bearer)]);
        let mut binary = text.to_vec();
        binary.insert(0, 0);
        assert!(scan_bytes(&binary).is_empty());
    }
}
