//! The stable-toolchain fuzzer: seeded random mutation of valid encodings, fed to the same
//! properties as the cargo-fuzz targets (`tests/fuzz/checks.rs`): the tree decoder, the
//! snapshot record decoder, the pack reader (layout and capped decoding) and the name
//! escaper/unescaper never panic, and what they accept
//! is canonical and round-trips.
//!
//! Short by default (20,000 inputs per decoder, in CI); `ZCB_FUZZ_ITERS=N` runs N per decoder,
//! `ZCB_FUZZ_SECS=T` runs each decoder for T seconds (until N, if both), and `ZCB_FUZZ_SEED=S`
//! picks the seed (scripts/fuzz.sh sets them). Built with the test profile, so integer
//! overflow panics too. A failure prints the
//! seed, the iteration and the input, so it replays exactly; every input found that way is
//! kept as a regression case in `regressions` below.

#[path = "../../tests/fuzz/checks.rs"]
mod checks;

use zeroclaw_bundle_store::{
    CaptureReport, EntryKind, ObjectId, Skipped, Snapshot, SnapshotKind, Tally, Tree, TreeEntry,
    MAX_SIZE,
};

#[path = "../../tests/fuzz/rng.rs"]
mod rng;
use rng::Rng;

const INTERESTING_U64: [u64; 9] = [
    0,
    1,
    6,
    255,
    65_535,
    MAX_SIZE,
    MAX_SIZE + 1,
    u64::MAX,
    1_000_000_000_000,
];

const INTERESTING_TEXT: [&str; 14] = [
    "\u{1b}[2J",
    "\u{85}",
    "\\x1é",
    "\\u{110000}",
    "\\",
    "agent/x",
    "deadbeefdeadbeef",
    "\u{202e}",
    "1000000000000000000000000000000",
    "-1000000000000000000000000000000",
    "null",
    "\"",
    "{}",
    "\u{0}",
];

fn seeds_tree() -> Vec<Vec<u8>> {
    let file =
        |name: &[u8], mode, size| TreeEntry::file(name.to_vec(), mode, size, ObjectId::of(name));
    let trees = [
        Tree::default(),
        Tree::from_entries(vec![file(b"a", 0o644, 6)]).unwrap(),
        Tree::from_entries(vec![
            file(b"caf\xe9", 0o600, 1),
            file("nel\u{85}".as_bytes(), 0o755, 2),
            TreeEntry::dir(b"sub".to_vec(), MAX_SIZE - 3, ObjectId::of(b"sub")),
            file(b"\\x41", 0o640, 0),
            file(b"none", 0, 0),
        ])
        .unwrap(),
    ];
    let mut seeds: Vec<Vec<u8>> = trees.iter().map(Tree::encode).collect();
    // A format-1 tree (no mode field), as older builds wrote: still read.
    seeds.push(v1_tree(&[
        (1, b"a.md", 3),
        (2, b"run.sh", 4),
        (3, b"sub", 7),
    ]));
    seeds
}

/// Format-1 tree bytes: `(kind code, name, size)` per entry, ids of the names.
fn v1_tree(entries: &[(u8, &[u8], u64)]) -> Vec<u8> {
    let mut out = b"ZCBT\x01".to_vec();
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (kind, name, size) in entries {
        out.push(*kind);
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(ObjectId::of(name).as_bytes());
    }
    out
}

fn seeds_record() -> Vec<Vec<u8>> {
    let base = Snapshot {
        root: ObjectId::of(b"root"),
        created_unix_ns: 1_700_000_000_123_456_789,
        host: "host-a".into(),
        kind: SnapshotKind::AgentBundle,
        source: "agent a at /srv".into(),
        agent: Some("a".into()),
        name: Some("release-1".into()),
        parent: Some(ObjectId::of(b"parent")),
        report: CaptureReport {
            trees: vec![Tally {
                label: "workspace".into(),
                files: 2,
                bytes: 10,
                ..Tally::default()
            }],
            skipped: vec![Skipped {
                path: "workspace/link".into(),
                reason: "symlink".into(),
            }],
        },
    };
    let mut plain = base.clone();
    plain.kind = SnapshotKind::Tree;
    plain.agent = None;
    plain.name = None;
    plain.parent = None;
    vec![base.encode(), plain.encode()]
}

fn seeds_names() -> Vec<Vec<u8>> {
    vec![
        b"plain".to_vec(),
        b"caf\xe9".to_vec(),
        "nel\u{85}".as_bytes().to_vec(),
        b"\\x85\\u{85}\\\\".to_vec(),
        b"\x1b[31mred".to_vec(),
        "\u{202e}\u{feff}".as_bytes().to_vec(),
    ]
}

/// One random mutation (several stacked by the caller).
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    let len = data.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next() as u8;
        }
        2 => {
            let i = rng.below(len + 1);
            data.insert(i, rng.next() as u8);
        }
        3 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below(8.min(len - i));
            data.drain(i..i + n);
        }
        4 if len >= 8 => {
            // An interesting integer, big-endian, anywhere (sizes, counts, lengths).
            let v = INTERESTING_U64[rng.below(INTERESTING_U64.len())].to_be_bytes();
            let width = [1usize, 2, 4, 8][rng.below(4)];
            let i = rng.below(len - width + 1);
            data[i..i + width].copy_from_slice(&v[8 - width..]);
        }
        5 => {
            // Interesting text spliced in (record JSON, names).
            let t = INTERESTING_TEXT[rng.below(INTERESTING_TEXT.len())].as_bytes();
            let i = rng.below(len + 1);
            data.splice(i..i, t.iter().copied());
        }
        6 if len > 0 => {
            // Duplicate a chunk (repeated entries, repeated fields).
            let i = rng.below(len);
            let n = 1 + rng.below(64.min(len - i));
            let chunk = data[i..i + n].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, chunk);
        }
        7 => {
            // Splice a piece of another seed.
            let other = &seeds[rng.below(seeds.len())];
            if !other.is_empty() {
                let i = rng.below(other.len());
                let n = 1 + rng.below(other.len() - i);
                let at = rng.below(len + 1);
                data.splice(at..at, other[i..i + n].iter().copied());
            }
        }
        _ if len > 0 => {
            data.truncate(rng.below(len));
        }
        _ => data.push(rng.next() as u8),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// (iteration cap, time budget): 20,000 and none unless the environment says otherwise.
fn budget() -> (u64, Option<std::time::Duration>) {
    let secs = env_u64("ZCB_FUZZ_SECS").map(std::time::Duration::from_secs);
    let default = if secs.is_some() { u64::MAX } else { 20_000 };
    (env_u64("ZCB_FUZZ_ITERS").unwrap_or(default), secs)
}

fn seed() -> u64 {
    env_u64("ZCB_FUZZ_SEED").unwrap_or(0x5eed_2026_1130)
}

fn run(name: &str, seeds: Vec<Vec<u8>>, check: fn(&[u8]) -> bool) {
    let (cap, time) = budget();
    let start = std::time::Instant::now();
    let seed = seed();
    let mut rng = Rng(seed | 1);
    for s in &seeds {
        assert!(check(s), "{name}: a seed must be accepted");
    }
    let mut accepted = 0u64;
    let mut iters = 0u64;
    for i in 0..cap {
        // The clock is read every 1024 inputs: a budget, not a timing assertion.
        if i % 1024 == 0 && time.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        iters += 1;
        let mut data = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(6) {
            mutate(&mut rng, &mut data, &seeds);
        }
        let outcome = std::panic::catch_unwind(|| check(&data));
        if let Ok(true) = outcome {
            accepted += 1;
        }
        if outcome.is_err() {
            panic!(
                "{name}: property broken at seed {seed}, iteration {i}; input ({} bytes): {:?}",
                data.len(),
                String::from_utf8_lossy(&data)
            );
        }
    }
    eprintln!("{name}: {iters} inputs from seed {seed} ({accepted} accepted), no property broken");
}

#[test]
fn fuzz_tree_decoder() {
    run("tree_decode", seeds_tree(), checks::tree_decode);
}

#[test]
fn fuzz_record_decoder() {
    run("record_decode", seeds_record(), checks::record_decode);
}

/// Packs written by the store itself: one with a compressed blob, a digest pack.
fn seeds_pack() -> Vec<Vec<u8>> {
    use zeroclaw_bundle_store::{PackOptions, Store};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(dir.path()).unwrap();
    let file = |name: &[u8], bytes: &[u8]| TreeEntry {
        name: name.to_vec(),
        kind: EntryKind::File,
        mode: 0o644,
        size: bytes.len() as u64,
        id: store.objects().write_bytes(bytes).unwrap(),
    };
    let zeros = vec![0u8; 20_000];
    let root = Tree::from_entries(vec![file(b"a", b"hello\n"), file(b"z", &zeros)]).unwrap();
    let root = store.objects().write_tree(&root).unwrap();
    let snap = Snapshot {
        root,
        created_unix_ns: 1,
        host: "h".into(),
        kind: SnapshotKind::Tree,
        source: "s".into(),
        agent: None,
        name: None,
        parent: None,
        report: CaptureReport::default(),
    };
    let lock = store.write_lock().unwrap();
    let id = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
    drop(lock);
    [false, true]
        .iter()
        .map(|&trees_only| {
            let mut out = Vec::new();
            let options = PackOptions {
                since: None,
                trees_only,
            };
            store
                .packs()
                .write(&id, options, &mut out, &mut |_| {})
                .unwrap();
            out
        })
        .collect()
}

#[test]
fn fuzz_pack_reader() {
    run("pack_read", seeds_pack(), checks::pack_read);
}

#[test]
fn fuzz_name_unescaper() {
    run("unescape", seeds_names(), checks::unescape);
}

/// Inputs the fuzzers found (or the issue reported), replayed on every run.
mod regressions {
    use super::checks;

    #[test]
    fn issue_8_cat_path_slicing_inside_a_character() {
        checks::unescape("\\x1é".as_bytes());
        checks::unescape("\\xé".as_bytes());
    }

    #[test]
    fn issue_8_nel_is_not_the_byte_0x85() {
        checks::unescape("nel\u{85}".as_bytes());
        checks::unescape(b"nel\x85");
    }

    #[test]
    fn issue_8_directory_sizes_that_overflow_their_sum() {
        let mut bytes = b"ZCBT\x01\x00\x00\x00\x02".to_vec();
        for (name, size) in [(b"a", u64::MAX), (b"b", 2)] {
            bytes.push(3);
            bytes.extend_from_slice(&1u16.to_be_bytes());
            bytes.extend_from_slice(name);
            bytes.extend_from_slice(&size.to_be_bytes());
            bytes.extend_from_slice(&[0u8; 32]);
        }
        assert!(zeroclaw_bundle_store::Tree::decode(&bytes).is_err());
        checks::tree_decode(&bytes);
    }

    /// Issue 17 (file modes): a format-2 entry whose mode carries setuid, setgid, sticky or
    /// bits above them, disagrees with its kind, or gives a directory another mode is refused.
    #[test]
    fn issue_17_modes_outside_the_grammar() {
        use zeroclaw_bundle_store::Tree;
        let one = |kind: u8, mode: u16| {
            let mut bytes = b"ZCBT\x02\x00\x00\x00\x01".to_vec();
            bytes.push(kind);
            bytes.extend_from_slice(&mode.to_be_bytes());
            bytes.extend_from_slice(&1u16.to_be_bytes());
            bytes.push(b'x');
            bytes.extend_from_slice(&0u64.to_be_bytes());
            bytes.extend_from_slice(&[0u8; 32]);
            bytes
        };
        for (kind, mode) in [
            (1, 0o4644),
            (2, 0o2755),
            (1, 0o1644),
            (2, 0xFFFF),
            (1, 0o744),
            (2, 0o644),
            (3, 0o700),
            (3, 0o1755),
        ] {
            let bytes = one(kind, mode);
            assert!(Tree::decode(&bytes).is_err(), "kind {kind} mode {mode:o}");
            checks::tree_decode(&bytes);
        }
        for (kind, mode) in [(1, 0o600), (1, 0), (2, 0o100), (2, 0o777), (3, 0o755)] {
            let bytes = one(kind, mode);
            assert!(checks::tree_decode(&bytes), "kind {kind} mode {mode:o}");
        }
    }

    #[test]
    fn issue_8_timestamps_out_of_range() {
        let text = "ZCBS\x01\n{\"root\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"created_unix_ns\":1000000000000000000000000000000,\"host\":\"h\",\"kind\":\"tree\",\"source\":\"s\",\"agent\":null,\"name\":null,\"parent\":null,\"report\":{\"trees\":[],\"skipped\":[]}}";
        assert!(zeroclaw_bundle_store::Snapshot::decode(text.as_bytes()).is_err());
        checks::record_decode(text.as_bytes());
    }
}
