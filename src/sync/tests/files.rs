//! The file merge's rules, one case each: one-sided changes, add/add, modify/delete both
//! ways, mode-only changes, a file against a directory, a deleted directory, paths no export
//! carries, and the conflict-copy names.

use zeroclaw_bundle_store::ObjectId;

use crate::sync::files::{
    conflict_name, plan, Decision, Entry, MergedFiles, Refused, Resolution, Side, Unresolved, Why,
};
use crate::sync::{ConflictKind, Conflicts, Stamp};

pub(super) fn id(n: u8) -> ObjectId {
    ObjectId::of(&[n])
}

/// A regular file holding content `n`.
pub(super) fn f(n: u8) -> Entry {
    Entry::file(0o644, id(n))
}

/// An executable file holding content `n`.
fn x(n: u8) -> Entry {
    Entry::file(0o755, id(n))
}

pub(super) fn side(entries: &[(&str, Entry)]) -> Side {
    entries
        .iter()
        .map(|(p, e)| (p.as_bytes().to_vec(), *e))
        .collect()
}

pub(super) fn stamp() -> Stamp {
    Stamp::from_unix_secs(1_796_426_100)
}

fn nothing(_: &[u8]) -> bool {
    false
}

fn memory(path: &[u8]) -> bool {
    path.starts_with(b"memory/") || path == b"MEMORY_SNAPSHOT.md"
}

fn decision(plan: &crate::sync::files::FilePlan, path: &str) -> Decision {
    plan.paths[path.as_bytes()].clone()
}

fn merged(base: &Side, local: &Side, incoming: &Side, policy: Conflicts) -> MergedFiles {
    plan(base, local, incoming, &nothing)
        .resolve(policy, &stamp())
        .expect("the policy resolves every conflict")
}

fn copy_of(name: &str, content: u8) -> String {
    String::from_utf8(conflict_name(
        name.as_bytes(),
        &stamp(),
        &id(content).short(8),
        1,
    ))
    .expect("utf-8")
}

#[test]
fn conflict_names_put_the_tag_before_the_extension() {
    let name = |n: &str| String::from_utf8(conflict_name(n.as_bytes(), &stamp(), "1a2b3c4d", 1));
    assert_eq!(
        name("a.md").unwrap(),
        "a.sync-conflict-20261204-231500-1a2b3c4d.md"
    );
    assert_eq!(
        name("Makefile").unwrap(),
        "Makefile.sync-conflict-20261204-231500-1a2b3c4d"
    );
    assert_eq!(
        name(".env").unwrap(),
        ".env.sync-conflict-20261204-231500-1a2b3c4d"
    );
    assert_eq!(
        name(".env.local").unwrap(),
        ".env.sync-conflict-20261204-231500-1a2b3c4d.local"
    );
    assert_eq!(
        name("a.tar.gz").unwrap(),
        "a.tar.sync-conflict-20261204-231500-1a2b3c4d.gz"
    );
    assert_eq!(
        name("trailing.").unwrap(),
        "trailing..sync-conflict-20261204-231500-1a2b3c4d"
    );
    assert_eq!(
        String::from_utf8(conflict_name(b"a.md", &stamp(), "1a2b3c4d", 3)).unwrap(),
        "a.sync-conflict-20261204-231500-1a2b3c4d-3.md"
    );
}

#[test]
fn a_long_conflict_name_is_shortened_to_name_max_keeping_utf8_and_extension() {
    // 2-byte characters: a cut in the middle of one would not be UTF-8.
    let long = format!("{}.md", "é".repeat(126));
    assert_eq!(long.len(), 255);
    let out = conflict_name(long.as_bytes(), &stamp(), "1a2b3c4d", 1);
    assert!(out.len() <= 255, "{} bytes", out.len());
    assert!(
        out.len() >= 253,
        "shortened more than needed: {} bytes",
        out.len()
    );
    let out = String::from_utf8(out).expect("cut at a character boundary");
    assert!(
        out.ends_with(".sync-conflict-20261204-231500-1a2b3c4d.md"),
        "{out}"
    );
}

#[test]
fn one_sided_changes_win_and_identical_changes_agree() {
    let base = side(&[
        ("a", f(1)),
        ("b", f(1)),
        ("c", f(1)),
        ("d", f(1)),
        ("s", f(1)),
    ]);
    let local = side(&[
        ("a", f(2)),
        ("b", f(1)),
        ("d", f(1)),
        ("e", f(5)),
        ("s", f(9)),
    ]);
    let incoming = side(&[
        ("a", f(1)),
        ("b", f(3)),
        ("c", f(1)),
        ("f", f(6)),
        ("s", f(9)),
    ]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(decision(&p, "a"), Decision::Keep(f(2)));
    assert_eq!(decision(&p, "b"), Decision::Take(f(3)));
    assert_eq!(decision(&p, "c"), Decision::KeepLocalDeletion);
    assert_eq!(decision(&p, "d"), Decision::Delete);
    assert_eq!(decision(&p, "e"), Decision::Keep(f(5)));
    assert_eq!(decision(&p, "f"), Decision::Take(f(6)));
    assert_eq!(decision(&p, "s"), Decision::Same);
    assert!(p.conflicts.is_empty());
    let want = side(&[
        ("a", f(2)),
        ("b", f(3)),
        ("e", f(5)),
        ("f", f(6)),
        ("s", f(9)),
    ]);
    for policy in [
        Conflicts::Refuse,
        Conflicts::KeepLocal,
        Conflicts::TakeIncoming,
        Conflicts::Copy,
    ] {
        assert_eq!(
            merged(&base, &local, &incoming, policy).tree,
            want,
            "{policy:?}"
        );
    }
}

#[test]
fn add_add_is_the_same_or_a_conflict() {
    let base = Side::new();
    let local = side(&[("same", f(1)), ("diff", f(1))]);
    let incoming = side(&[("same", f(1)), ("diff", f(2))]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(decision(&p, "same"), Decision::Same);
    assert_eq!(
        decision(&p, "diff"),
        Decision::Conflict(ConflictKind::BothAdded)
    );
    assert_eq!(p.conflicts.len(), 1);
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::KeepLocal).tree,
        side(&[("same", f(1)), ("diff", f(1))])
    );
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::TakeIncoming).tree,
        side(&[("same", f(1)), ("diff", f(2))])
    );
    let copy = merged(&base, &local, &incoming, Conflicts::Copy);
    let name = copy_of("diff", 2);
    assert_eq!(
        copy.tree,
        side(&[("same", f(1)), ("diff", f(1)), (&name, f(2))])
    );
    assert_eq!(
        copy.resolved[0].how,
        Resolution::Copied {
            to: name.into_bytes()
        }
    );
}

#[test]
fn modify_delete_conflicts_both_ways() {
    let base = side(&[("dir/gone-here.md", f(1)), ("gone-upstream.md", f(1))]);
    let local = side(&[("gone-upstream.md", f(2))]);
    let incoming = side(&[("dir/gone-here.md", f(3))]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(
        decision(&p, "dir/gone-here.md"),
        Decision::Conflict(ConflictKind::DeletedLocally)
    );
    assert_eq!(
        decision(&p, "gone-upstream.md"),
        Decision::Conflict(ConflictKind::DeletedUpstream)
    );
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::KeepLocal).tree,
        local
    );
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::TakeIncoming).tree,
        incoming
    );
    // Copy keeps the local side (a deletion stays a deletion) and writes the incoming file
    // beside it; an upstream deletion has nothing to copy.
    let copy = merged(&base, &local, &incoming, Conflicts::Copy);
    let name = format!("dir/{}", copy_of("gone-here.md", 3));
    assert_eq!(
        copy.tree,
        side(&[("gone-upstream.md", f(2)), (&name, f(3))])
    );
    let hows: Vec<_> = copy.resolved.iter().map(|r| r.how.clone()).collect();
    assert_eq!(
        hows,
        [
            Resolution::Copied {
                to: name.into_bytes()
            },
            Resolution::KeptLocal
        ]
    );
}

#[test]
fn a_mode_only_change_is_a_change() {
    let base = side(&[
        ("run.sh", f(1)),
        ("tool", f(1)),
        ("both", f(1)),
        ("same", f(1)),
    ]);
    let local = side(&[
        ("run.sh", x(1)),
        ("tool", f(1)),
        ("both", x(1)),
        ("same", x(1)),
    ]);
    let incoming = side(&[
        ("run.sh", f(1)),
        ("tool", x(1)),
        ("both", f(2)),
        ("same", x(1)),
    ]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(decision(&p, "run.sh"), Decision::Keep(x(1)));
    assert_eq!(decision(&p, "tool"), Decision::Take(x(1)));
    assert_eq!(
        decision(&p, "both"),
        Decision::Conflict(ConflictKind::BothModified)
    );
    assert_eq!(decision(&p, "same"), Decision::Same);
    // Permission bits beyond the execute bit are a change too.
    let p = plan(
        &base,
        &side(&[("tool", Entry::file(0o600, id(1)))]),
        &base,
        &nothing,
    );
    assert_eq!(
        decision(&p, "tool"),
        Decision::Keep(Entry::file(0o600, id(1)))
    );
}

#[test]
fn a_file_against_a_directory_is_one_conflict_resolved_as_a_unit() {
    // Here `notes` became a directory; upstream changed the file.
    let base = side(&[("notes", f(1)), ("other", f(1))]);
    let local = side(&[("notes/a.md", f(2)), ("notes/b.md", f(3)), ("other", f(1))]);
    let incoming = side(&[("notes", f(4)), ("other", f(5))]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(p.conflicts.len(), 1);
    assert_eq!(p.conflicts[0].path, b"notes");
    assert_eq!(p.conflicts[0].kind, ConflictKind::FileDirectory);
    for path in ["notes", "notes/a.md", "notes/b.md"] {
        assert_eq!(
            decision(&p, path),
            Decision::Conflict(ConflictKind::FileDirectory),
            "{path}"
        );
    }
    assert_eq!(decision(&p, "other"), Decision::Take(f(5)));
    let keep = merged(&base, &local, &incoming, Conflicts::KeepLocal);
    assert_eq!(
        keep.tree,
        side(&[("notes/a.md", f(2)), ("notes/b.md", f(3)), ("other", f(5))])
    );
    let take = merged(&base, &local, &incoming, Conflicts::TakeIncoming);
    assert_eq!(take.tree, incoming);
    let copy = merged(&base, &local, &incoming, Conflicts::Copy);
    let name = copy_of("notes", 4);
    assert_eq!(
        copy.tree,
        side(&[
            ("notes/a.md", f(2)),
            ("notes/b.md", f(3)),
            (&name, f(4)),
            ("other", f(5))
        ])
    );
}

#[test]
fn an_incoming_directory_against_a_local_file_is_copied_as_a_directory() {
    let base = side(&[("d/x", f(1))]);
    let local = side(&[("d", f(9))]);
    let incoming = side(&[("d/x", f(2)), ("d/y", f(3)), ("d-sibling", f(1))]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(p.conflicts.len(), 1, "{:?}", p.conflicts);
    assert_eq!(p.conflicts[0].path, b"d");
    // `d-sibling` sorts between `d` and `d/`: it is not part of the conflict.
    assert_eq!(decision(&p, "d-sibling"), Decision::Take(f(1)));
    let copy = merged(&base, &local, &incoming, Conflicts::Copy);
    let Resolution::Copied { to } = &copy.resolved[0].how else {
        panic!("{:?}", copy.resolved)
    };
    let to = String::from_utf8(to.clone()).unwrap();
    assert!(to.starts_with("d.sync-conflict-20261204-231500-"), "{to}");
    assert_eq!(
        copy.tree,
        side(&[
            ("d", f(9)),
            ("d-sibling", f(1)),
            (&format!("{to}/x"), f(2)),
            (&format!("{to}/y"), f(3)),
        ])
    );
}

#[test]
fn a_one_sided_file_directory_swap_is_no_conflict() {
    let base = side(&[("d/x", f(1)), ("e", f(1)), ("empty", Entry::dir())]);
    let same = base.clone();
    let incoming = side(&[("d", f(2)), ("e/y", f(3)), ("empty", f(4))]);
    let p = plan(&base, &same, &incoming, &nothing);
    assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
    assert_eq!(
        merged(&base, &same, &incoming, Conflicts::Refuse).tree,
        incoming
    );
    // The same swap made here and nowhere else.
    let p = plan(&base, &incoming, &same, &nothing);
    assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
    assert_eq!(
        merged(&base, &incoming, &same, Conflicts::Refuse).tree,
        incoming
    );
}

#[test]
fn a_removal_against_a_file_directory_swap_is_no_conflict() {
    // Removed here; upstream the file became a directory, or the directory a file. A
    // directory has no content of its own: nothing removed here comes back, nothing is lost.
    let base = side(&[("notes", f(1)), ("d/x", f(1))]);
    let incoming = side(&[("notes/a.md", f(2)), ("d", f(3))]);
    let p = plan(&base, &Side::new(), &incoming, &nothing);
    assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
    assert_eq!(decision(&p, "notes"), Decision::Take(Entry::dir()));
    assert_eq!(decision(&p, "d"), Decision::Take(f(3)));
    assert_eq!(decision(&p, "d/x"), Decision::Same);
    assert_eq!(
        merged(&base, &Side::new(), &incoming, Conflicts::Refuse).tree,
        incoming
    );
    // The same the other way round.
    let p = plan(&base, &incoming, &Side::new(), &nothing);
    assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
    assert_eq!(
        merged(&base, &incoming, &Side::new(), Conflicts::Refuse).tree,
        incoming
    );
}

#[test]
fn an_empty_directory_against_a_file_is_a_conflict() {
    let base = Side::new();
    let local = side(&[("x", Entry::dir())]);
    let incoming = side(&[("x", f(1))]);
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(
        decision(&p, "x"),
        Decision::Conflict(ConflictKind::FileDirectory)
    );
    assert_eq!(p.conflicts.len(), 1);
    // Two directories are the same whatever their tree id.
    let other_dir = Entry {
        id: id(7),
        ..Entry::dir()
    };
    let p = plan(&base, &local, &side(&[("x", other_dir)]), &nothing);
    assert_eq!(decision(&p, "x"), Decision::Same);
}

#[test]
fn paths_under_a_directory_deleted_on_one_side() {
    // Upstream deleted `d`; here `d/a` changed and `d/c` is new.
    let base = side(&[("d/a", f(1)), ("d/b", f(1))]);
    let local = side(&[("d/a", f(2)), ("d/b", f(1)), ("d/c", f(3))]);
    let incoming = Side::new();
    let p = plan(&base, &local, &incoming, &nothing);
    assert_eq!(
        decision(&p, "d/a"),
        Decision::Conflict(ConflictKind::DeletedUpstream)
    );
    assert_eq!(decision(&p, "d/b"), Decision::Delete);
    assert_eq!(decision(&p, "d/c"), Decision::Keep(f(3)));
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::KeepLocal).tree,
        side(&[("d/a", f(2)), ("d/c", f(3))])
    );
    assert_eq!(
        merged(&base, &local, &incoming, Conflicts::TakeIncoming).tree,
        side(&[("d/c", f(3))])
    );
    // The other way round: `d` deleted here, `d/b` changed upstream.
    let p = plan(
        &base,
        &Side::new(),
        &side(&[("d/a", f(1)), ("d/b", f(4))]),
        &nothing,
    );
    assert_eq!(decision(&p, "d/a"), Decision::KeepLocalDeletion);
    assert_eq!(
        decision(&p, "d/b"),
        Decision::Conflict(ConflictKind::DeletedLocally)
    );
}

#[test]
fn paths_no_export_carries_are_never_touched() {
    let base = side(&[("AGENTS.md", f(1))]);
    let local = side(&[
        ("AGENTS.md", f(1)),
        ("MEMORY_SNAPSHOT.md", f(2)),
        ("memory/notes", f(3)),
    ]);
    // A bundle that carries them anyway (it should not): ignored.
    let incoming = side(&[
        ("AGENTS.md", f(4)),
        ("memory/notes", f(5)),
        ("memory/new", f(6)),
    ]);
    let p = plan(&base, &local, &incoming, &memory);
    for path in ["MEMORY_SNAPSHOT.md", "memory/notes"] {
        assert_eq!(decision(&p, path), Decision::Untouched, "{path}");
    }
    // What only the bundle has there is not even considered.
    assert!(!p.paths.contains_key(&b"memory/new"[..]));
    assert!(p.conflicts.is_empty());
    let out = p.resolve(Conflicts::TakeIncoming, &stamp()).unwrap();
    assert_eq!(
        out.tree,
        side(&[
            ("AGENTS.md", f(4)),
            ("MEMORY_SNAPSHOT.md", f(2)),
            ("memory/notes", f(3)),
        ])
    );
}

#[test]
fn an_incoming_file_over_a_kept_private_directory_is_not_taken() {
    // Upstream adds a file `memory` where the agent keeps `memory/notes` (never exported).
    let base = Side::new();
    let local = side(&[("memory/notes", f(3))]);
    let incoming = side(&[("memory", f(1))]);
    let p = plan(&base, &local, &incoming, &memory);
    assert_eq!(p.conflicts.len(), 1);
    assert!(p.conflicts[0].holds_uncarried);
    assert_eq!(decision(&p, "memory/notes"), Decision::Untouched);
    assert_eq!(
        p.resolve(Conflicts::TakeIncoming, &stamp()),
        Err(Refused {
            conflicts: vec![Unresolved {
                path: b"memory".to_vec(),
                kind: ConflictKind::FileDirectory,
                why: Why::Uncarried,
            }]
        })
    );
    assert_eq!(
        p.resolve(Conflicts::KeepLocal, &stamp()).unwrap().tree,
        local
    );
    let copy = p.resolve(Conflicts::Copy, &stamp()).unwrap();
    let name = copy_of("memory", 1);
    assert_eq!(copy.tree, side(&[("memory/notes", f(3)), (&name, f(1))]));
}

#[test]
fn refuse_lists_every_conflict_and_nothing_else() {
    let base = side(&[("a", f(1)), ("b", f(1)), ("c", f(1))]);
    let local = side(&[("a", f(2)), ("b", f(2)), ("c", f(1))]);
    let incoming = side(&[("a", f(3)), ("c", f(3))]);
    let p = plan(&base, &local, &incoming, &nothing);
    let refused = p.resolve(Conflicts::Refuse, &stamp()).unwrap_err();
    assert_eq!(
        refused.conflicts,
        [
            Unresolved {
                path: b"a".to_vec(),
                kind: ConflictKind::BothModified,
                why: Why::Refused
            },
            Unresolved {
                path: b"b".to_vec(),
                kind: ConflictKind::DeletedUpstream,
                why: Why::Refused
            },
        ]
    );
    // Without a conflict, refuse merges.
    let p = plan(&base, &base, &incoming, &nothing);
    assert_eq!(
        p.resolve(Conflicts::Refuse, &stamp()).unwrap().tree,
        incoming
    );
}

#[test]
fn a_taken_copy_name_moves_to_the_next_one_unless_it_holds_the_same_file() {
    let base = side(&[("a.md", f(1))]);
    let incoming = side(&[("a.md", f(3))]);
    let first = copy_of("a.md", 3);
    // Here a file of another content already has the first name.
    let local = side(&[("a.md", f(2)), (&first, f(8))]);
    let out = merged(&base, &local, &incoming, Conflicts::Copy);
    let second = String::from_utf8(conflict_name(b"a.md", &stamp(), &id(3).short(8), 2)).unwrap();
    assert_eq!(
        out.tree,
        side(&[("a.md", f(2)), (&first, f(8)), (&second, f(3))])
    );
    // The same copy made earlier (the same second): kept, not copied again.
    let local = side(&[("a.md", f(2)), (&first, f(3))]);
    let out = merged(&base, &local, &incoming, Conflicts::Copy);
    assert_eq!(out.tree, local);
    assert_eq!(
        out.resolved[0].how,
        Resolution::Copied {
            to: first.into_bytes()
        }
    );
}
