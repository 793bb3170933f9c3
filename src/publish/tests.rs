//! Tests of the publish protocol. Each pins one promise of SPEC §7: what a publish writes
//! (bytes, modes, manifest last), each refusal (and that it leaves the destination and its
//! parent as they were), corrupt objects and a full disk, the races at `before-swap`, and a
//! `kill -9` at every step of both swap paths followed by `recover`.
//!
//! Anything that needs a test hook is in `hooked` (child processes, `test-hooks` builds).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use zeroclaw_bundle_store::{DestKey, EntryKind, ObjectId, Store, Tree, TreeEntry};

use super::*;

#[cfg(feature = "test-hooks")]
mod hooked;

// ---------------------------------------------------------------------------------------
// Fixtures

/// A file or directory of a test tree.
#[derive(Debug, Clone)]
enum Node {
    File(Vec<u8>, bool),
    Dir(BTreeMap<String, Node>),
}

/// Builds a tree description from `(path, bytes, exec)`; a path ending in `/` is an empty
/// directory.
fn spec(files: &[(&str, &[u8], bool)]) -> BTreeMap<String, Node> {
    let mut root = BTreeMap::new();
    for (path, bytes, exec) in files {
        let mut dir = &mut root;
        let parts: Vec<&str> = path.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                continue;
            }
            if i + 1 == parts.len() {
                dir.insert(part.to_string(), Node::File(bytes.to_vec(), *exec));
            } else {
                let next = dir
                    .entry(part.to_string())
                    .or_insert_with(|| Node::Dir(BTreeMap::new()));
                dir = match next {
                    Node::Dir(d) => d,
                    Node::File(..) => panic!("{path}: a file is in the way"),
                };
            }
        }
    }
    root
}

fn write_tree(store: &Store, dir: &BTreeMap<String, Node>) -> (ObjectId, u64) {
    let mut entries = Vec::new();
    for (name, node) in dir {
        let (kind, id, size) = match node {
            Node::File(bytes, exec) => {
                let (id, len) = store.objects().write_from(&mut &bytes[..]).unwrap();
                let kind = if *exec {
                    EntryKind::ExecFile
                } else {
                    EntryKind::File
                };
                (kind, id, len)
            }
            Node::Dir(sub) => {
                let (id, size) = write_tree(store, sub);
                (EntryKind::Dir, id, size)
            }
        };
        entries.push(TreeEntry {
            name: name.as_bytes().to_vec(),
            kind,
            mode: kind.implied_mode(),
            size,
            id,
        });
    }
    let tree = Tree::from_entries(entries).unwrap();
    (
        store.objects().write_tree(&tree).unwrap(),
        tree.total_size(),
    )
}

/// What a directory holds: relative path -> (mode, bytes or `None` for a directory).
type Listing = BTreeMap<String, (u32, Option<Vec<u8>>)>;

fn expected(dir: &BTreeMap<String, Node>) -> Listing {
    fn walk(dir: &BTreeMap<String, Node>, prefix: &str, out: &mut Listing) {
        for (name, node) in dir {
            let rel = format!("{prefix}{name}");
            match node {
                Node::File(bytes, exec) => {
                    let mode = if *exec { 0o755 } else { 0o644 };
                    out.insert(rel, (mode, Some(bytes.clone())));
                }
                Node::Dir(sub) => {
                    out.insert(rel.clone(), (0o755, None));
                    walk(sub, &format!("{rel}/"), out);
                }
            }
        }
    }
    let mut out = Listing::new();
    walk(dir, "", &mut out);
    out
}

fn listing(path: &Path) -> Listing {
    fn walk(dir: &Path, prefix: &str, out: &mut Listing) {
        for ent in fs::read_dir(dir).unwrap() {
            let ent = ent.unwrap();
            let name = ent.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let meta = fs::symlink_metadata(ent.path()).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                out.insert(rel.clone(), (mode, None));
                walk(&ent.path(), &format!("{rel}/"), out);
            } else if meta.is_file() {
                out.insert(rel, (mode, Some(fs::read(ent.path()).unwrap())));
            } else {
                out.insert(rel, (mode, Some(b"<not a file>".to_vec())));
            }
        }
    }
    let mut out = Listing::new();
    walk(path, "", &mut out);
    out
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn hidden(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".zeroclaw-export"))
        .collect()
}

/// A temp dir with a store, an old and a new bundle tree.
struct Env {
    tmp: tempfile::TempDir,
    store: Store,
    old: BTreeMap<String, Node>,
    new: BTreeMap<String, Node>,
    old_id: ObjectId,
    new_id: ObjectId,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
        let old = spec(&[
            ("config.toml", b"# old config\n", false),
            ("leftover.toml", b"only in the old bundle\n", false),
            ("workspace/notes/gone.md", b"gone\n", false),
            ("workspace/IDENTITY.md", b"old identity\n", false),
            ("zeroclaw-agent.toml", b"# old manifest\n", false),
        ]);
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let new = spec(&[
            (
                "config.toml",
                b"# ZeroClaw agent bundle - config closure\n",
                false,
            ),
            ("workspace/IDENTITY.md", b"new identity\n", false),
            ("workspace/big.bin", &big, false),
            ("workspace/empty.txt", b"", false),
            ("workspace/empty-dir/", b"", false),
            (
                "skills/research/web_search/run.sh",
                b"#!/bin/sh\necho hi\n",
                true,
            ),
            (
                "skills/research/web_search/SKILL.md",
                b"# web search\n",
                false,
            ),
            (
                "zeroclaw-agent.toml",
                b"# ZeroClaw agent bundle manifest.\n",
                false,
            ),
            ("zz-sorts-after-the-manifest.md", b"late\n", false),
        ]);
        let (old_id, _) = write_tree(&store, &old);
        let (new_id, _) = write_tree(&store, &new);
        Env {
            tmp,
            store,
            old,
            new,
            old_id,
            new_id,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn publish(
        &self,
        root: &ObjectId,
        dest: &Path,
        force: bool,
    ) -> Result<Published, PublishError> {
        publish(
            &self.store.objects().reader(),
            root,
            &PublishRequest {
                dest,
                force,
                sources: &[],
                store: None,
                bundle: crate::export::BUNDLE,
            },
        )
    }

    /// `out/bundle` holding the old bundle; returns its path.
    fn with_old_bundle(&self) -> PathBuf {
        let dest = self.path("out/bundle");
        self.publish(&self.old_id, &dest, false).unwrap();
        assert_eq!(listing(&dest), expected(&self.old));
        dest
    }
}

// ---------------------------------------------------------------------------------------
// What a publish writes

#[test]
fn fresh_publish_is_byte_for_byte_with_modes() {
    let env = Env::new();
    let dest = env.path("out/bundle");
    let seen = std::sync::Mutex::new(Vec::new());
    let req = PublishRequest {
        dest: &dest,
        force: false,
        sources: &[],
        store: None,
        bundle: crate::export::BUNDLE,
    };
    let p = publish_with_progress(
        &env.store.objects().reader(),
        &env.new_id,
        &req,
        &|t: crate::progress::Totals| seen.lock().unwrap().push((t.files, t.bytes)),
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 8);
    assert_eq!(seen.last(), Some(&(p.files, p.bytes)));
    assert_eq!(listing(&dest), expected(&env.new));
    assert_eq!(
        fs::metadata(&dest).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    assert_eq!(p.files, 8);
    assert_eq!(
        p.bytes,
        expected(&env.new)
            .values()
            .filter_map(|(_, b)| b.as_ref().map(|b| b.len() as u64))
            .sum::<u64>()
    );
    assert!(!p.replaced_existing && !p.used_exchange);
    assert_eq!(
        p.dest,
        fs::canonicalize(env.path("out")).unwrap().join("bundle")
    );
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

/// A publish with a [`DestState`] records each file it writes with the stat it was staged
/// with: exactly what statting the published tree afterwards finds (a rename of the staging
/// directory changes no file's stat), taken by a time no earlier than any file's times. And
/// it reads the previous record only when there is a previous tree to reuse.
#[test]
fn the_record_taken_while_staging_is_what_the_published_tree_shows() {
    let env = Env::new();
    let dest = env.path("out/bundle");
    let admitted = check(&PublishRequest {
        dest: &dest,
        force: true,
        sources: &[],
        store: None,
        bundle: crate::export::BUNDLE,
    })
    .unwrap();
    let loads = std::cell::Cell::new(0);
    let load = || {
        loads.set(loads.get() + 1);
        None
    };
    let mut record = DestRecord::new(0);
    let p = publish_to(
        &env.store.objects().reader(),
        &env.new_id,
        &admitted,
        Some(DestState {
            load: &load,
            record: &mut record,
        }),
        &Silent,
    )
    .unwrap();
    assert_eq!(loads.get(), 0, "a new destination has no record to read");
    assert_eq!((p.files, p.reused), (8, 0));
    let after = record_destination(
        &env.store.objects().reader(),
        &env.new_id,
        &p.dest,
        &DestRecord::new,
    )
    .unwrap();
    let catalog = env.store.catalog();
    let (staged_key, after_key) = (DestKey::new(&env.path("a")), DestKey::new(&env.path("b")));
    catalog.store_dest_record(&staged_key, &record).unwrap();
    catalog.store_dest_record(&after_key, &after).unwrap();
    let staged = catalog.load_dest_record(&staged_key).unwrap().unwrap();
    let after = catalog.load_dest_record(&after_key).unwrap().unwrap();
    assert_eq!((staged.len(), after.len()), (8, 8));
    for (rel, (_, bytes)) in expected(&env.new) {
        if bytes.is_none() {
            continue;
        }
        let entry = staged
            .get(rel.as_bytes())
            .expect("every written file is recorded");
        assert_eq!(Some(entry), after.get(rel.as_bytes()), "{rel}");
        let st = sys::stat_path(&dest.join(&rel)).unwrap();
        assert!(
            entry.mtime_ns <= staged.recorded_at_ns() && entry.ctime_ns <= staged.recorded_at_ns(),
            "{rel}: stats taken before the record's time"
        );
        assert_eq!((entry.ino, entry.ctime_ns), (st.ino, st.ctime_ns), "{rel}");
    }
    assert!(staged.recorded_at_ns() <= after.recorded_at_ns());

    // Over the published tree, the record is read once.
    let mut again = DestRecord::new(0);
    publish_to(
        &env.store.objects().reader(),
        &env.new_id,
        &admitted,
        Some(DestState {
            load: &load,
            record: &mut again,
        }),
        &Silent,
    )
    .unwrap();
    assert_eq!(loads.get(), 1);
}

#[test]
fn publishes_into_an_empty_directory_without_force() {
    let env = Env::new();
    let dest = env.path("out/bundle");
    fs::create_dir_all(&dest).unwrap();
    let p = env.publish(&env.new_id, &dest, false).unwrap();
    assert!(p.replaced_existing);
    assert_eq!(listing(&dest), expected(&env.new));
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn non_empty_without_force_is_refused_and_untouched() {
    let env = Env::new();
    let dest = env.with_old_bundle();
    let err = env.publish(&env.new_id, &dest, false).unwrap_err();
    assert!(matches!(err, PublishError::DestNotEmpty { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(listing(&dest), expected(&env.old));
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn force_replaces_and_removes_what_the_new_bundle_lacks() {
    let env = Env::new();
    let dest = env.with_old_bundle();
    let p = env.publish(&env.new_id, &dest, true).unwrap();
    assert!(p.replaced_existing);
    assert!(p.used_exchange, "ext4/tmpfs support RENAME_EXCHANGE");
    assert_eq!(p.retired_left, None);
    assert_eq!(listing(&dest), expected(&env.new));
    assert!(!dest.join("leftover.toml").exists());
    assert!(!dest.join("workspace/notes").exists());
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

// ---------------------------------------------------------------------------------------
// Refusals before anything is written

#[test]
fn dest_symlink_is_refused_and_untouched() {
    let env = Env::new();
    let target = env.path("target");
    fs::create_dir_all(&target).unwrap();
    fs::write(target.join("keep.md"), "keep").unwrap();
    let link = env.path("link");
    symlink(&target, &link).unwrap();
    let err = env.publish(&env.new_id, &link, true).unwrap_err();
    assert!(matches!(err, PublishError::DestIsSymlink { .. }), "{err}");
    assert!(err.to_string().contains("is a symlink"), "{err}");
    assert_eq!(fs::read_link(&link).unwrap(), target);
    assert_eq!(names(&target), ["keep.md"]);
    assert!(hidden(env.tmp.path()).is_empty());
}

#[test]
fn dest_file_is_refused_and_untouched() {
    let env = Env::new();
    let file = env.path("bundle");
    fs::write(&file, "a file").unwrap();
    let err = env.publish(&env.new_id, &file, true).unwrap_err();
    assert!(
        matches!(err, PublishError::DestNotADirectory { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("not a directory"), "{err}");
    assert_eq!(fs::read(&file).unwrap(), b"a file");
    assert!(hidden(env.tmp.path()).is_empty());
}

#[test]
fn overlap_with_a_source_is_refused_both_ways() {
    let env = Env::new();
    let ws = env.path("home/workspace");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("IDENTITY.md"), "me").unwrap();
    let sources = [ws.clone()];
    let try_dest = |dest: &Path| {
        publish(
            &env.store.objects().reader(),
            &env.new_id,
            &PublishRequest {
                dest,
                force: true,
                sources: &sources,
                store: None,
                bundle: crate::export::BUNDLE,
            },
        )
        .unwrap_err()
    };
    let inside = try_dest(&ws.join("exports/bundle"));
    assert!(
        matches!(inside, PublishError::DestInsideSource { .. }),
        "{inside}"
    );
    let contains = try_dest(&env.path("home"));
    assert!(
        matches!(contains, PublishError::DestContainsSource { .. }),
        "{contains}"
    );
    let same = try_dest(&ws);
    assert!(
        matches!(same, PublishError::DestContainsSource { .. }),
        "{same}"
    );
    // Through a symlinked parent: the parent is canonicalized.
    symlink(&ws, env.path("link")).unwrap();
    let linked = try_dest(&env.path("link/bundle"));
    assert!(
        matches!(linked, PublishError::DestInsideSource { .. }),
        "{linked}"
    );
    assert_eq!(names(&ws), ["IDENTITY.md"]);
    assert!(!ws.join("exports").exists());
}

#[test]
fn dotdot_through_a_missing_directory_is_refused() {
    let env = Env::new();
    let home = env.path("home");
    fs::create_dir_all(home.join("workspace")).unwrap();
    let err = env
        .publish(&env.new_id, &home.join("missing/../workspace"), true)
        .unwrap_err();
    assert!(
        matches!(err, PublishError::DotDotThroughMissing { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("`..`"), "{err}");
    assert!(!home.join("missing").exists());
    assert_eq!(names(&home), ["workspace"]);
    // Through an existing directory `..` is fine.
    let p = env
        .publish(&env.new_id, &home.join("workspace/../bundle"), false)
        .unwrap();
    assert_eq!(p.dest, fs::canonicalize(&home).unwrap().join("bundle"));
    assert_eq!(listing(&home.join("bundle")), expected(&env.new));
}

// ---------------------------------------------------------------------------------------
// Failures while staging

#[test]
fn corrupt_object_fails_and_leaves_the_old_bundle() {
    let env = Env::new();
    let dest = env.with_old_bundle();
    // Corrupt the blob of run.sh (same length, other bytes).
    let content = b"#!/bin/sh\necho hi\n";
    let id = ObjectId::of(content);
    let path = env.store.objects().path_of(&id);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&path, b"#!/bin/sh\nrm -rf /\n").unwrap();
    let err = env.publish(&env.new_id, &dest, true).unwrap_err();
    assert!(matches!(err, PublishError::CorruptObject { .. }), "{err}");
    assert!(err.to_string().contains("run.sh"), "{err}");
    assert_eq!(listing(&dest), expected(&env.old));
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

/// Unmounts on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_disk_fails_and_leaves_the_old_bundle() {
    let env = Env::new();
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .output();
    if !matches!(&mounted, Ok(o) if o.status.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot mount a tmpfs here (needs root), and CI must run this test: {mounted:?}"
        );
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root): {mounted:?}");
        return;
    }
    let _guard = Mounted(mnt.clone());
    let dest = mnt.join("bundle");
    env.publish(&env.old_id, &dest, false).unwrap();
    let huge: Vec<u8> = (0..2_000_000u32).map(|i| (i % 253) as u8).collect();
    let (big_id, _) = write_tree(
        &env.store,
        &spec(&[
            ("workspace/huge.bin", &huge, false),
            ("zeroclaw-agent.toml", b"# manifest\n", false),
        ]),
    );
    let err = env.publish(&big_id, &dest, true).unwrap_err();
    let PublishError::Io { source, .. } = &err else {
        panic!("expected an I/O error, got {err}");
    };
    assert_eq!(source.raw_os_error(), Some(28), "ENOSPC: {err}");
    assert_eq!(listing(&dest), expected(&env.old));
    assert_eq!(names(&mnt), ["bundle"]);
}

// ---------------------------------------------------------------------------------------
// recover on hand-made leftovers

fn mkdir_with(path: &Path, file: &str) {
    fs::create_dir_all(path).unwrap();
    fs::write(path.join(file), file).unwrap();
}

#[test]
fn recover_restores_the_pair_and_removes_garbage() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("bundle");
    // Nothing to do.
    let rec = recover(&dest).unwrap();
    assert!(rec.nothing_done(), "{rec:?}");
    // Crash between the two renames: dest missing, matching pair.
    mkdir_with(&tmp.path().join(".zeroclaw-export-old-AbC123"), "old.md");
    mkdir_with(&tmp.path().join(".zeroclaw-export-AbC123"), "new.md");
    // Garbage of a completed publish elsewhere: unpaired staging and old trees.
    mkdir_with(&tmp.path().join(".zeroclaw-export-zzzzzz"), "x");
    mkdir_with(&tmp.path().join(".zeroclaw-export-old-yyyyyy"), "y");
    // Not ours.
    fs::write(tmp.path().join(".zeroclaw-export-notatoken"), "x").unwrap();
    let rec = recover(&dest).unwrap();
    assert!(rec.restored_from.is_some(), "{rec:?}");
    assert_eq!(names(&dest), ["old.md"]);
    assert_eq!(rec.removed_staging.len(), 2, "{rec:?}");
    assert_eq!(rec.removed_old.len(), 1, "{rec:?}");
    assert_eq!(names(tmp.path()), [".zeroclaw-export-notatoken", "bundle"]);
}

#[test]
fn recover_leaves_other_destinations_and_live_publishes_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("bundle");
    mkdir_with(&dest, "current.md");
    // Another destination's interrupted fallback: a pair, kept while `bundle` exists.
    mkdir_with(&tmp.path().join(".zeroclaw-export-old-AAAAAA"), "a");
    mkdir_with(&tmp.path().join(".zeroclaw-export-AAAAAA"), "a");
    // A live publish holds its staging tree's lock.
    let live = tmp.path().join(".zeroclaw-export-LIVE00");
    mkdir_with(&live, "partial");
    let fd = crate::sys::open_dir_path(&live).unwrap();
    assert!(crate::sys::try_lock_exclusive(&fd).unwrap());
    let rec = recover(&dest).unwrap();
    assert!(rec.nothing_done(), "{rec:?}");
    assert_eq!(rec.left_alone.len(), 3, "{rec:?}");
    assert_eq!(names(&dest), ["current.md"]);
    drop(fd);
    let rec = recover(&dest).unwrap();
    assert_eq!(rec.removed_staging, [live]);
}

#[test]
fn recover_refuses_to_guess_between_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    for t in ["AAAAAA", "BBBBBB"] {
        mkdir_with(&tmp.path().join(format!(".zeroclaw-export-old-{t}")), "o");
        mkdir_with(&tmp.path().join(format!(".zeroclaw-export-{t}")), "n");
    }
    let err = recover(&tmp.path().join("bundle")).unwrap_err();
    assert!(
        matches!(err, PublishError::RecoverAmbiguous { .. }),
        "{err}"
    );
    assert_eq!(names(tmp.path()).len(), 4);
}
