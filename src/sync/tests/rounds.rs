//! Random rounds: a base, a local and an incoming state generated from a seed, merged under
//! every policy, and the invariants checked. Files: no local change is lost unless a
//! conflict was resolved by taking the incoming side; a change made upstream only is always
//! taken outside a conflict; identical changes never conflict; refuse refuses exactly when
//! there is a conflict, with the list; paths no export carries are never touched; the merged
//! tree is a tree. Config: the same rules per key, checked on the parsed merged text.

use std::collections::{BTreeMap, BTreeSet};

use super::files::{f, id, side, stamp};
use super::Rng;
use crate::sync::config::{merge_config, ConfigMergeError, KeyAction};
use crate::sync::files::{plan, Entry, FilePlan, MergedFiles, Resolution, Side, Why};
use crate::sync::{ConflictKind, Conflicts};

const POLICIES: [Conflicts; 4] = [
    Conflicts::Refuse,
    Conflicts::KeepLocal,
    Conflicts::TakeIncoming,
    Conflicts::Copy,
];

/// Few names, so that the sides collide often: files against directories, dotfiles, names
/// that sort between `d` and `d/`.
const PATHS: [&str; 15] = [
    "a",
    "b.md",
    ".env",
    "d",
    "d-x",
    "d/a",
    "d/b.md",
    "d/e",
    "d/e/x",
    "d/e/y",
    "f",
    "f/g",
    "memory",
    "memory/notes",
    "memory/x/y",
];

fn uncarried(path: &[u8]) -> bool {
    path.starts_with(b"memory/")
}

/// One change to a side.
#[derive(Clone, Copy)]
enum Op {
    Put(&'static str, Entry),
    Remove(&'static str),
    Chmod(&'static str),
}

fn random_entry(rng: &mut Rng) -> Entry {
    match rng.below(10) {
        0 => Entry::dir(),
        1 | 2 => Entry::file(0o755, id(rng.below(3) as u8)),
        _ => f(rng.below(3) as u8),
    }
}

fn random_op(rng: &mut Rng) -> Op {
    let path = PATHS[rng.below(PATHS.len())];
    match rng.below(5) {
        0 | 1 => Op::Put(path, random_entry(rng)),
        2 | 3 => Op::Remove(path),
        _ => Op::Chmod(path),
    }
}

fn below_prefix(path: &[u8]) -> Vec<u8> {
    let mut below = path.to_vec();
    below.push(b'/');
    below
}

/// Applies `op`, keeping `tree` a tree: a file replaces what was beneath it, and no file
/// stays above a new entry.
fn apply(tree: &mut Side, op: Op) {
    match op {
        Op::Put(path, entry) => {
            let path = path.as_bytes();
            let files_above: Vec<Vec<u8>> = tree
                .iter()
                .filter(|(p, e)| e.kind.is_file() && path.starts_with(&below_prefix(p)))
                .map(|(p, _)| p.clone())
                .collect();
            for p in files_above {
                tree.remove(&p);
            }
            if entry.kind.is_file() {
                apply(tree, Op::Remove(std::str::from_utf8(path).expect("ascii")));
            }
            tree.insert(path.to_vec(), entry);
        }
        Op::Remove(path) => {
            let below = below_prefix(path.as_bytes());
            tree.retain(|p, _| p != path.as_bytes() && !p.starts_with(&below));
        }
        Op::Chmod(path) => {
            if let Some(e) = tree.get_mut(path.as_bytes()) {
                if e.kind.is_file() {
                    *e = Entry::file(e.mode ^ 0o111, e.id);
                }
            }
        }
    }
}

/// A base, and local and incoming states derived from it.
fn sides(rng: &mut Rng) -> (Side, Side, Side) {
    let mut base = Side::new();
    for path in PATHS {
        if rng.chance(50) {
            apply(&mut base, Op::Put(path, random_entry(rng)));
        }
    }
    // The base came from a bundle: it never carries private paths.
    base.retain(|p, _| !uncarried(p));
    let (mut local, mut incoming) = (base.clone(), base.clone());
    for _ in 0..1 + rng.below(5) {
        apply(&mut local, random_op(rng));
    }
    for _ in 0..1 + rng.below(5) {
        apply(&mut incoming, random_op(rng));
    }
    for _ in 0..rng.below(3) {
        // The same change made on both sides.
        let op = random_op(rng);
        apply(&mut local, op);
        apply(&mut incoming, op);
    }
    if rng.chance(15) {
        incoming = local.clone();
    }
    if !rng.chance(20) {
        // Mostly, a bundle carries no private path; sometimes it does and must be ignored.
        incoming.retain(|p, _| !uncarried(p));
    }
    (base, local, incoming)
}

/// The sides of a round, for a failure message.
fn dump(sides: &[(&str, &Side)]) -> String {
    let mut out = String::new();
    for (name, side) in sides {
        out.push_str(&format!("\n{name}:"));
        for (path, e) in *side {
            let what = match e.kind {
                zeroclaw_bundle_store::EntryKind::Dir => "dir".to_string(),
                _ => format!("{:o}:{}", e.mode, e.id.short(4)),
            };
            out.push_str(&format!(" {}={what}", String::from_utf8_lossy(path)));
        }
    }
    out
}

fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a == b || (!a.kind.is_file() && !b.kind.is_file()),
        _ => false,
    }
}

fn at_or_under(path: &[u8], root: &[u8]) -> bool {
    path == root || path.starts_with(&below_prefix(root))
}

/// No file with anything at or beneath it other than itself, no file above an entry.
fn assert_is_tree(tree: &Side, round: u64) {
    for (path, entry) in tree {
        if entry.kind.is_file() {
            let below = below_prefix(path);
            assert!(
                !tree.keys().any(|q| q.starts_with(&below)),
                "round {round}: a file at {} has entries beneath it: {tree:?}",
                String::from_utf8_lossy(path)
            );
        }
    }
}

#[test]
fn file_merge_invariants_hold_over_random_rounds() {
    let mut rounds_with_conflicts = 0;
    for round in 0..3000u64 {
        let mut rng = Rng::new(round);
        let (base, local, incoming) = sides(&mut rng);
        let plan = plan(&base, &local, &incoming, &uncarried);
        let incoming = carried(&incoming);
        check_plan(round, &plan, &base, &local, &incoming);
        rounds_with_conflicts += usize::from(!plan.conflicts.is_empty());
        for policy in POLICIES {
            match plan.resolve(policy, &stamp()) {
                Err(refused) => {
                    let want: Vec<(&[u8], Why)> = plan
                        .conflicts
                        .iter()
                        .filter(|c| policy == Conflicts::Refuse || c.holds_uncarried)
                        .map(|c| {
                            let why = match policy {
                                Conflicts::Refuse => Why::Refused,
                                _ => Why::Uncarried,
                            };
                            (c.path.as_slice(), why)
                        })
                        .collect();
                    let got: Vec<(&[u8], Why)> = refused
                        .conflicts
                        .iter()
                        .map(|c| (c.path.as_slice(), c.why))
                        .collect();
                    assert!(!got.is_empty(), "round {round}: refused with no list");
                    assert_eq!(got, want, "round {round} {policy:?}");
                    assert!(
                        matches!(policy, Conflicts::Refuse | Conflicts::TakeIncoming),
                        "round {round}: {policy:?} refused"
                    );
                }
                Ok(merged) => {
                    if policy == Conflicts::Refuse {
                        assert!(plan.conflicts.is_empty(), "round {round}: refuse merged");
                    }
                    check_merged(round, policy, &plan, &merged, &base, &local, &incoming);
                }
            }
        }
    }
    // The generator must reach conflicts often, or the rounds check little.
    assert!(rounds_with_conflicts > 300, "{rounds_with_conflicts}");
}

/// What `side` has at `path`: its entry, or a directory when something lies beneath.
fn view(side: &Side, path: &[u8]) -> Option<Entry> {
    side.get(path)
        .copied()
        .or_else(|| has_below(side, path).then(Entry::dir))
}

fn has_below(side: &Side, path: &[u8]) -> bool {
    let below = below_prefix(path);
    side.range(below.clone()..)
        .next()
        .is_some_and(|(q, _)| q.starts_with(&below))
}

/// Every path of `sides` and every directory above one.
fn all_paths(sides: &[&Side]) -> BTreeSet<Vec<u8>> {
    let mut all = BTreeSet::new();
    for path in sides.iter().flat_map(|s| s.keys()) {
        for (i, b) in path.iter().enumerate() {
            if *b == b'/' {
                all.insert(path[..i].to_vec());
            }
        }
        all.insert(path.clone());
    }
    all
}

/// Whether some path at or beneath `root` differs from the base on `side`.
fn changed_under(side: &Side, base: &Side, root: &[u8]) -> bool {
    all_paths(&[side, base])
        .into_iter()
        .any(|p| at_or_under(&p, root) && !same(view(side, &p).as_ref(), view(base, &p).as_ref()))
}

/// The incoming side as the merge sees it: without the paths no export carries.
fn carried(side: &Side) -> Side {
    side.iter()
        .filter(|(p, _)| !uncarried(p))
        .map(|(p, e)| (p.clone(), *e))
        .collect()
}

fn check_plan(round: u64, plan: &FilePlan, base: &Side, local: &Side, incoming: &Side) {
    if carried(local) == *incoming {
        assert!(
            plan.conflicts.is_empty(),
            "round {round}: identical sides conflict"
        );
    }
    for conflict in &plan.conflicts {
        // A conflict needs a change on both sides within it.
        assert!(
            changed_under(local, base, &conflict.path)
                && changed_under(incoming, base, &conflict.path),
            "round {round}: conflict at {} without changes on both sides",
            String::from_utf8_lossy(&conflict.path)
        );
    }
    for (path, decision) in &plan.paths {
        let in_group = plan
            .conflicts
            .iter()
            .any(|c| c.kind == ConflictKind::FileDirectory && at_or_under(path, &c.path));
        let (l, i) = (view(local, path), view(incoming, path));
        if !uncarried(path) && same(l.as_ref(), i.as_ref()) && !in_group {
            assert_eq!(
                *decision,
                crate::sync::files::Decision::Same,
                "round {round}: {}",
                String::from_utf8_lossy(path)
            );
        }
    }
}

fn check_merged(
    round: u64,
    policy: Conflicts,
    plan: &FilePlan,
    merged: &MergedFiles,
    base: &Side,
    local: &Side,
    incoming: &Side,
) {
    let tree = &merged.tree;
    assert_is_tree(tree, round);
    // A file/directory conflict covers its subtree; any other, its path.
    let in_conflict = |p: &[u8]| {
        plan.conflicts.iter().any(|c| {
            c.path == p || (c.kind == ConflictKind::FileDirectory && at_or_under(p, &c.path))
        })
    };
    let copies: Vec<&Vec<u8>> = merged
        .resolved
        .iter()
        .filter_map(|r| match &r.how {
            Resolution::Copied { to } => Some(to),
            _ => None,
        })
        .collect();
    for path in all_paths(&[base, local, incoming, tree]) {
        if copies.iter().any(|c| at_or_under(&path, c)) {
            continue;
        }
        let name = format!(
            "{}{}",
            String::from_utf8_lossy(&path),
            dump(&[
                ("base", base),
                ("local", local),
                ("incoming", incoming),
                ("merged", tree)
            ])
        );
        let [b, l, i, r] = [base, local, incoming, tree].map(|side| view(side, &path));
        if uncarried(&path) {
            assert!(
                same(r.as_ref(), l.as_ref()),
                "round {round} {policy:?}: private {name} touched"
            );
            continue;
        }
        let conflicted = in_conflict(&path);
        let lost_to_incoming = policy == Conflicts::TakeIncoming && conflicted;
        // Directories: one made on one side stays (what is in them is checked below).
        let dir = |e: &Option<Entry>| e.is_some_and(|e| !e.kind.is_file());
        if dir(&l) && !dir(&b) && !lost_to_incoming {
            assert!(
                dir(&r),
                "round {round} {policy:?}: directory made here at {name} lost"
            );
        }
        if dir(&i) && !dir(&b) && same(l.as_ref(), b.as_ref()) && !conflicted {
            assert!(
                dir(&r),
                "round {round} {policy:?}: directory made upstream at {name} not taken"
            );
        }
        if dir(&l) && dir(&i) {
            assert!(
                dir(&r),
                "round {round} {policy:?}: directory at {name} lost"
            );
        }
        // Files: their content and mode.
        let [b, l, i, r] = [b, l, i, r].map(|e| e.filter(|e| e.kind.is_file()));
        let (b, l, i, r) = (b.as_ref(), l.as_ref(), i.as_ref(), r.as_ref());
        if !same(l, b) && !lost_to_incoming {
            assert!(
                same(r, l),
                "round {round} {policy:?}: local change at {name} lost"
            );
        }
        if same(l, b) && !same(i, b) && !conflicted {
            assert!(
                same(r, i),
                "round {round} {policy:?}: upstream change at {name} not taken"
            );
        }
        if same(l, i) {
            assert!(
                same(r, l),
                "round {round} {policy:?}: agreed {name} changed"
            );
        }
        if conflicted {
            let want = if policy == Conflicts::TakeIncoming {
                i
            } else {
                l
            };
            assert!(
                same(r, want),
                "round {round} {policy:?}: conflict at {name}"
            );
        }
    }
    check_copies(round, policy, plan, merged, local, incoming, &copies);
}

/// Every copy holds the incoming side of its conflict, and nothing else is new.
fn check_copies(
    round: u64,
    policy: Conflicts,
    plan: &FilePlan,
    merged: &MergedFiles,
    local: &Side,
    incoming: &Side,
    copies: &[&Vec<u8>],
) {
    let tree = &merged.tree;
    for (resolved, conflict) in merged.resolved.iter().zip(&plan.conflicts) {
        assert_eq!(resolved.path, conflict.path);
        let copied = matches!(resolved.how, Resolution::Copied { .. });
        assert_eq!(
            copied,
            policy == Conflicts::Copy && !conflict.incoming.is_empty(),
            "round {round}"
        );
        if let Resolution::Copied { to } = &resolved.how {
            for (path, entry) in &conflict.incoming {
                let mut at = to.clone();
                at.extend_from_slice(&path[conflict.path.len()..]);
                assert!(
                    same(view(tree, &at).as_ref(), Some(entry)),
                    "round {round}: copy"
                );
            }
        }
    }
    assert_eq!(merged.resolved.len(), plan.conflicts.len());
    for path in tree.keys() {
        assert!(
            view(local, path).is_some()
                || view(incoming, path).is_some()
                || copies.iter().any(|c| at_or_under(path, c)),
            "round {round} {policy:?}: {} came from nowhere",
            String::from_utf8_lossy(path)
        );
    }
}

#[test]
fn the_round_generator_reaches_every_kind_of_case() {
    // Guards the generator: a change in it that stopped producing a case would make the
    // rounds above pass vacuously.
    let mut kinds = BTreeSet::new();
    let mut uncarried_groups = 0;
    for round in 0..3000u64 {
        let mut rng = Rng::new(round);
        let (base, local, incoming) = sides(&mut rng);
        let plan = plan(&base, &local, &incoming, &uncarried);
        for c in &plan.conflicts {
            kinds.insert(format!("{:?}", c.kind));
            uncarried_groups += usize::from(c.holds_uncarried);
        }
    }
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    assert!(uncarried_groups > 0);
    // And the helpers agree with a hand-made case.
    assert_eq!(side(&[("a", f(1))]).len(), 1);
}

/// The config rounds: leaves of two entries, each present or absent on each side.
const LEAVES: [&str; 9] = [
    "agents.a.k0",
    "agents.a.k1",
    "agents.a.arr",
    "agents.a.inl",
    "agents.a.sub.s0",
    "agents.a.sub.s1",
    "providers.models.p.m.model",
    "providers.models.p.m.temperature",
    "mcp.servers.fs.command",
];

type Model = BTreeMap<&'static str, String>;

fn random_value(rng: &mut Rng, leaf: &str) -> String {
    let n = rng.below(3);
    match leaf.rsplit('.').next() {
        Some("arr") => format!("[{n}, {}]", n + 1),
        Some("inl") => format!("{{ x = {n}, y = {} }}", n % 2),
        Some("temperature") => format!("{n}.5"),
        _ if n == 2 => "true".to_string(),
        _ => format!("\"v{n}\""),
    }
}

fn random_model(rng: &mut Rng) -> Model {
    let mut model = Model::new();
    for leaf in LEAVES {
        if rng.chance(60) {
            model.insert(leaf, random_value(rng, leaf));
        }
    }
    model
}

fn mutate(rng: &mut Rng, model: &mut Model) {
    for _ in 0..1 + rng.below(4) {
        let leaf = LEAVES[rng.below(LEAVES.len())];
        match rng.below(4) {
            0 => {
                model.remove(leaf);
            }
            // Whole tables go too: the entry, or the sub-table.
            1 if rng.chance(30) => {
                let prefix = &leaf[..leaf.rfind('.').expect("dotted")];
                model.retain(|k, _| !k.starts_with(prefix));
            }
            _ => {
                model.insert(leaf, random_value(rng, leaf));
            }
        }
    }
}

/// Renders a model as a config. The local one also has a key and a comment of its own in
/// the entry and a table outside the entries, which must come through untouched.
fn render(model: &Model, local: bool) -> String {
    let mut out = String::from("schema_version = 3\n");
    if local {
        out.push_str("\n# the operator's gateway\n[gateway]\nport = 42617 # fixed\n");
    }
    let groups = [
        ("[agents.a]", "agents.a."),
        ("[agents.a.sub]", "agents.a.sub."),
        ("[providers.models.p.m]", "providers.models.p.m."),
        ("[[mcp.servers]]\nname = \"fs\"", "mcp.servers.fs."),
    ];
    for (header, prefix) in groups {
        let keys: Vec<(&str, &String)> = model
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && !k[prefix.len()..].contains('.'))
            .map(|(k, v)| (&k[prefix.len()..], v))
            .collect();
        if keys.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{header}\n"));
        for (key, value) in keys {
            if local {
                out.push_str(&format!("{key}   =   {value}   # local note on {key}\n"));
            } else {
                out.push_str(&format!("{key} = {value}\n"));
            }
        }
    }
    out
}

fn leaf_of(doc: &toml::Table, leaf: &str) -> Option<toml::Value> {
    let segs: Vec<&str> = leaf.split('.').collect();
    let mut node = toml::Value::Table(doc.clone());
    for (n, seg) in segs.iter().enumerate() {
        node = match node {
            toml::Value::Table(mut t) => t.remove(*seg)?,
            toml::Value::Array(items) if n > 0 && segs[n - 1] == "servers" => items
                .into_iter()
                .find(|t| t.get("name").and_then(toml::Value::as_str) == Some(seg))?,
            _ => return None,
        };
    }
    Some(node)
}

fn value(text: &str) -> toml::Value {
    let table: toml::Table = toml::from_str(&format!("v = {text}")).expect("a value");
    table["v"].clone()
}

#[test]
fn config_merge_invariants_hold_over_random_rounds() {
    let entries = ["agents.a", "providers.models.p.m", "mcp.servers.fs"];
    let mut conflicted_rounds = 0;
    for round in 0..800u64 {
        let mut rng = Rng::new(round);
        let base = random_model(&mut rng);
        let (mut local, mut incoming) = (base.clone(), base.clone());
        mutate(&mut rng, &mut local);
        mutate(&mut rng, &mut incoming);
        if rng.chance(15) {
            incoming = local.clone();
        }
        let texts = (
            render(&base, false),
            render(&local, true),
            render(&incoming, false),
        );
        let leaves = Leaves::of(&base, &local, &incoming);
        conflicted_rounds += usize::from(!leaves.both.is_empty());
        for policy in POLICIES {
            let result = merge_config(&texts.0, &texts.1, &texts.2, &entries, policy);
            let merged = match result {
                Err(ConfigMergeError::Refused { conflicts }) => {
                    assert_eq!(policy, Conflicts::Refuse, "round {round}");
                    assert!(!conflicts.is_empty(), "round {round}: refused, no list");
                    let listed: Vec<String> = conflicts.iter().map(|c| c.path.join(".")).collect();
                    check_conflict_paths(round, &listed, &leaves);
                    continue;
                }
                Err(e) => panic!("round {round} {policy:?}: {e}\n{}", texts.1),
                Ok(merged) => merged,
            };
            let listed: Vec<String> = merged
                .decisions
                .iter()
                .filter(|d| matches!(d.action, KeyAction::Conflict { .. }))
                .map(|d| d.path.join("."))
                .collect();
            check_conflict_paths(round, &listed, &leaves);
            assert!(
                policy != Conflicts::Refuse || listed.is_empty(),
                "round {round}"
            );
            assert!(
                merged
                    .text
                    .contains("\n# the operator's gateway\n[gateway]\nport = 42617 # fixed\n"),
                "round {round}: the local table outside the entries changed:\n{}",
                merged.text
            );
            let doc: toml::Table = toml::from_str(&merged.text)
                .unwrap_or_else(|e| panic!("round {round} {policy:?}: {e}\n{}", merged.text));
            for leaf in LEAVES {
                let (b, l, i) = (base.get(leaf), local.get(leaf), incoming.get(leaf));
                let got = leaf_of(&doc, leaf);
                let is = |want: Option<&String>| got == want.map(|w| value(w));
                let conflicted = listed
                    .iter()
                    .any(|c| leaf == c || leaf.starts_with(&format!("{c}.")));
                let context = || {
                    format!(
                        "round {round} {policy:?} {leaf}: {}\n{}",
                        texts.1, merged.text
                    )
                };
                if l != b && (policy != Conflicts::TakeIncoming || !conflicted) {
                    assert!(is(l), "local change lost: {}", context());
                }
                if l == b && i != b && !conflicted {
                    assert!(is(i), "upstream change not taken: {}", context());
                }
                if l == i {
                    assert!(is(l), "agreed value changed: {}", context());
                }
                if conflicted && policy == Conflicts::TakeIncoming {
                    assert!(is(i), "conflict not taken: {}", context());
                }
            }
        }
    }
    // Rounds where a key changed differently on both sides (the generator reaches them).
    assert!(conflicted_rounds > 80, "{conflicted_rounds}");
}

/// Every leaf changed differently on both sides lies under a listed conflict, and every
/// listed conflict holds a leaf changed here and one changed upstream (a table removed on one
/// side and changed inside on the other is one conflict).
fn check_conflict_paths(round: u64, listed: &[String], leaves: &Leaves) {
    let under = |leaf: &str, c: &str| leaf == c || leaf.starts_with(&format!("{c}."));
    for leaf in &leaves.both {
        assert!(
            listed.iter().any(|c| under(leaf, c)),
            "round {round}: {leaf} changed on both sides, not listed in {listed:?}"
        );
    }
    for c in listed {
        assert!(
            leaves.local.iter().any(|leaf| under(leaf, c))
                && leaves.incoming.iter().any(|leaf| under(leaf, c)),
            "round {round}: {c} listed without a change on both sides within it"
        );
    }
}

/// The leaves changed here, upstream, and on both sides differently.
struct Leaves {
    local: Vec<&'static str>,
    incoming: Vec<&'static str>,
    both: Vec<&'static str>,
}

impl Leaves {
    fn of(base: &Model, local: &Model, incoming: &Model) -> Leaves {
        let changed = |side: &Model| -> Vec<&'static str> {
            LEAVES
                .iter()
                .copied()
                .filter(|k| side.get(k) != base.get(k))
                .collect()
        };
        let (l, i) = (changed(local), changed(incoming));
        let both = l
            .iter()
            .copied()
            .filter(|k| i.contains(k) && local.get(k) != incoming.get(k))
            .collect();
        Leaves {
            local: l,
            incoming: i,
            both,
        }
    }
}
