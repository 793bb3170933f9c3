//! `sync` between two hosts sharing a remote (issue 39): host A develops agent `researcher`,
//! signs each export and pushes it; host B imported it once and keeps it in step with `sync`
//! while editing its own copy. Rounds are chosen at random (the seed is printed; set
//! `SYNC_ROUNDS_SEED` to replay one), over a `file://` remote and the S3 server the tests
//! start. Checked after every round:
//! - no local edit of B is lost: each file B wrote holds B's bytes, or (a conflict settled with
//!   `--conflicts copy`) B's bytes stay and the incoming ones sit beside as a
//!   `.sync-conflict-` copy; B's memory and B's local config key are never touched;
//! - ZeroClaw's loader accepts B's `config.toml`;
//! - a grant A added is never in B's config until B accepted it (`sync` holds it: exit 3);
//! - after an update, `rollback` restores B's files and `config.toml` byte for byte, and a
//!   second `rollback` (of the rollback) brings the update back byte for byte.
//!
//! Also: an unsigned bundle and one signed by a key outside allowed_signers are refused; an
//! agent up to date is left unwritten (mtimes unchanged) and a second sync at once is refused
//! naming the lock.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::Install;
use crate::import::{loads, onboarded};
use crate::remote::Fleet;
use crate::sign::keygen;
use crate::util::write;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A small deterministic generator (xorshift64*): no dependency, replayable by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Host A (the standard test install, store `a`) and host B (a fresh install, store `b`),
/// both with remote `origin`; B trusts alice's key; B imported A's first signed export.
struct Pair {
    f: Fleet,
    a: Install,
    b: PathBuf,
    alice: PathBuf,
    mallory: PathBuf,
}

impl Pair {
    fn new(f: Fleet, remote_args: &[&str]) -> Pair {
        let a = Install::new(&f.env);
        let keys = f.env.path("keys");
        fs::create_dir_all(&keys).unwrap();
        let alice = keygen(&keys, "alice", "");
        let mallory = keygen(&keys, "mallory", "");
        let allowed = f.env.path("allowed_signers");
        let public = fs::read_to_string(alice.with_extension("pub")).unwrap();
        fs::write(&allowed, format!("alice@example.com {}", public.trim())).unwrap();
        f.host("a", remote_args);
        f.host("b", remote_args);
        f.on("b", &["trust", "--allowed-signers", &s(&allowed)])
            .ok();
        let b = onboarded(&f.env, "b-install");
        let pair = Pair {
            f,
            a,
            b,
            alice,
            mallory,
        };
        pair.publish(Some(&pair.alice));
        pair.f
            .on(
                "b",
                &[
                    "import",
                    "origin/agent/researcher",
                    "--install",
                    &s(&pair.b),
                    "--yes",
                ],
            )
            .ok();
        pair
    }

    /// A exports its agent, signs the snapshot with `key` (none: unsigned) and pushes it.
    fn publish(&self, key: Option<&Path>) -> String {
        let out = self.f.env.path("a-bundle");
        let _ = fs::remove_dir_all(&out);
        let run = self
            .f
            .on(
                "a",
                &[
                    "--json",
                    "export",
                    "researcher",
                    "--install",
                    &s(&self.a.root),
                    "--out",
                    &s(&out),
                ],
            )
            .ok();
        let id = run.json()["snapshot"].as_str().unwrap().to_string();
        if let Some(key) = key {
            self.f.on("a", &["sign", &id, "--key", &s(key)]).ok();
        }
        self.f.on("a", &["push", &id]).ok();
        id
    }

    fn sync(&self, extra: &[&str]) -> crate::util::Run {
        let mut args = vec!["sync", "--install"];
        let b = s(&self.b);
        args.push(&b);
        args.extend(extra);
        self.f.on("b", &args)
    }

    fn b_ws(&self) -> PathBuf {
        self.b.join("agents/researcher/workspace")
    }
}

/// B's workspace files, the files of the skill bundle its import added and `config.toml`,
/// path -> bytes (what rollback must restore).
fn state_of(b: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    out.insert(
        PathBuf::from("config.toml"),
        fs::read(b.join("config.toml")).unwrap(),
    );
    let ws = b.join("agents/researcher/workspace");
    let skills = b.join("shared/skills/research_tools");
    for entry in walk(&ws).into_iter().chain(walk(&skills)) {
        out.insert(
            entry.strip_prefix(b).unwrap().to_path_buf(),
            fs::read(&entry).unwrap(),
        );
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn edit_config(file: &Path, key_line_prefix: &str, new_line: &str) {
    let text = fs::read_to_string(file).unwrap();
    let mut done = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if !done && l.starts_with(key_line_prefix) {
                done = true;
                new_line.to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(
        done,
        "{} lacks {key_line_prefix:?}:\n{text}",
        file.display()
    );
    fs::write(file, lines.join("\n") + "\n").unwrap();
}

/// What B wrote and must never lose: file -> bytes.
type Kept = BTreeMap<PathBuf, Vec<u8>>;

fn check_kept(p: &Pair, kept: &Kept, round: usize) {
    for (file, bytes) in kept {
        let now = fs::read(file)
            .unwrap_or_else(|e| panic!("round {round}: B's file {} is gone: {e}", file.display()));
        assert_eq!(
            &now,
            bytes,
            "round {round}: B's edit of {} was lost",
            file.display()
        );
    }
    let config = fs::read_to_string(p.b.join("config.toml")).unwrap();
    loads(&p.b);
    let _ = config;
}

/// The rounds: A edits (a workspace file, a config key, sometimes a skill or a grant), signs,
/// pushes; B edits its copy (memory, a file of its own, sometimes a skill of its own or the
/// file A edits) and syncs.
fn rounds(p: &Pair, rounds: usize) {
    let seed = std::env::var("SYNC_ROUNDS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("SYNC_ROUNDS_SEED={seed}");
    let mut rng = Rng(seed);
    let mut kept = Kept::new();
    // B's own config key: the fallback provider's model, never edited by A.
    let b_config = p.b.join("config.toml");
    let (mut granted_a, mut accepted_b) = (0usize, 0usize);
    let (mut updated, mut held_grants, mut held_conflicts, mut copies) = (0, 0, 0, 0);
    for round in 1..=rounds {
        // A.
        write(
            &p.a.ws().join(format!("upstream/{round}.md")),
            format!("upstream {round}\n").as_bytes(),
        );
        let a_notes = rng.chance(25);
        if a_notes {
            write(
                &p.a.ws().join("notes.md"),
                format!("notes by A, round {round}\n").as_bytes(),
            );
        }
        if rng.chance(25) {
            write(
                &p.a.skills().join("web_search/SKILL.md"),
                format!("# web search, round {round}\n").as_bytes(),
            );
        }
        edit_config(
            &p.a.root.join("config.toml"),
            "model = \"claude-opus",
            &format!("model = \"claude-opus-{round}\""),
        );
        if rng.chance(20) {
            granted_a += 1;
            let tools: Vec<String> = (1..=granted_a).map(|i| format!("\"tool{i}\"")).collect();
            let text = fs::read_to_string(p.a.root.join("config.toml")).unwrap();
            let text = match text.contains("auto_approve = [") {
                true => {
                    let start = text.find("auto_approve = [").unwrap();
                    let end = start + text[start..].find('\n').unwrap();
                    format!(
                        "{}auto_approve = [{}]{}",
                        &text[..start],
                        tools.join(", "),
                        &text[end..]
                    )
                }
                false => text.replacen(
                    "level = \"supervised\"",
                    &format!(
                        "level = \"supervised\"\nauto_approve = [{}]",
                        tools.join(", ")
                    ),
                    1,
                ),
            };
            fs::write(p.a.root.join("config.toml"), text).unwrap();
        }
        p.publish(Some(&p.alice));

        // B.
        let memory = p.b_ws().join("memory/b-brain.db");
        write(&memory, format!("B's memory, round {round}").as_bytes());
        kept.insert(memory.clone(), fs::read(&memory).unwrap());
        let own = p.b_ws().join(format!("b-notes/{round}.md"));
        write(&own, format!("B's own notes {round}\n").as_bytes());
        kept.insert(own.clone(), fs::read(&own).unwrap());
        if rng.chance(30) {
            let skill =
                p.b.join(format!("shared/skills/research_tools/b-{round}/SKILL.md"));
            write(&skill, format!("# B's own skill {round}\n").as_bytes());
            kept.insert(skill.clone(), fs::read(&skill).unwrap());
        }
        let b_notes = rng.chance(20);
        if b_notes {
            let notes = p.b_ws().join("notes.md");
            write(&notes, format!("notes by B, round {round}\n").as_bytes());
            kept.insert(notes.clone(), fs::read(&notes).unwrap());
        }
        if rng.chance(30) {
            edit_config(
                &b_config,
                "model = \"gpt-",
                &format!("model = \"gpt-local-{round}\""),
            );
        }
        let before = state_of(&p.b);
        let run = p.sync(&[]);
        let code = run.code();
        match code {
            0 => {}
            3 | 4 => {
                // Held: nothing written.
                assert_eq!(
                    state_of(&p.b),
                    before,
                    "round {round}: a held sync wrote\n{}",
                    run.describe()
                );
                if code == 3 {
                    held_grants += 1;
                    assert!(run.stdout().contains("auto_approve"), "{}", run.describe());
                } else {
                    held_conflicts += 1;
                }
                // The operator settles it most of the time.
                if rng.chance(70) {
                    let mut args = vec!["update", "origin/agent/researcher", "--install"];
                    let b = s(&p.b);
                    args.push(&b);
                    args.extend(["--conflicts", "copy"]);
                    let accept = rng.chance(60);
                    if accept {
                        args.push("--accept-grants");
                    }
                    let settled = p.f.on("b", &args);
                    match settled.code() {
                        0 => {
                            if accept {
                                accepted_b = granted_a;
                            }
                        }
                        3 => assert!(!accept, "{}", settled.describe()),
                        other => panic!(
                            "round {round}: update exited {other}\n{}",
                            settled.describe()
                        ),
                    }
                }
            }
            other => panic!("round {round}: sync exited {other}\n{}", run.describe()),
        }
        if code == 0 && run.stdout().contains("updated from") {
            updated += 1;
            // Rollback restores the state before the update byte for byte, and rolling the
            // rollback back restores the update.
            if rng.chance(35) {
                let after = state_of(&p.b);
                p.f.on("b", &["rollback", "researcher", "--install", &s(&p.b)])
                    .ok();
                assert_eq!(state_of(&p.b), before, "round {round}: rollback");
                p.f.on("b", &["rollback", "researcher", "--install", &s(&p.b)])
                    .ok();
                assert_eq!(
                    state_of(&p.b),
                    after,
                    "round {round}: rollback of the rollback"
                );
            }
        }
        // Invariants.
        check_kept(p, &kept, round);
        let config = fs::read_to_string(&b_config).unwrap();
        for i in accepted_b + 1..=granted_a {
            assert!(
                !config.contains(&format!("\"tool{i}\"")),
                "round {round}: grant tool{i} applied without acceptance:\n{config}"
            );
        }
        let conflict_copies = walk(&p.b_ws())
            .iter()
            .filter(|f| f.to_string_lossy().contains(".sync-conflict-"))
            .count();
        copies = conflict_copies;
    }
    println!(
        "{rounds} rounds: {updated} updated by sync, {held_grants} held for grants, \
         {held_conflicts} held for conflicts, {copies} conflict copies, grants {accepted_b} of \
         {granted_a} accepted"
    );
    assert!(updated > 0, "no round updated: the rounds test nothing");
}

/// A signed update syncs; an unsigned one and one signed by mallory are refused and change
/// nothing; an agent up to date is left unwritten.
fn refusals_and_up_to_date(p: &Pair) {
    // Up to date right after the import: nothing written (mtimes too).
    let mtimes = |b: &Path| -> Vec<_> {
        walk(b)
            .into_iter()
            .filter(|f| !f.to_string_lossy().contains(".zeroclaw-bundle"))
            .map(|f| (f.clone(), fs::metadata(&f).unwrap().modified().unwrap()))
            .collect()
    };
    let before = mtimes(&p.b);
    let run = p.sync(&[]).ok();
    assert!(run.stdout().contains("up to date"), "{}", run.describe());
    assert_eq!(mtimes(&p.b), before, "an up-to-date sync writes nothing");
    // Up to date costs one request of the remote: its listing (the record is held here).
    let v =
        p.f.on("b", &["--json", "sync", "--install", &s(&p.b)])
            .ok()
            .json();
    let listing = v["listings"]["origin"].as_str().unwrap_or_default();
    assert!(listing.starts_with("1 requests,"), "{v}");
    assert_eq!(v["agents"][0]["outcome"], "up-to-date", "{v}");
    // A new export with nothing changed is a new version all the same (its manifest's export
    // time differs), with nothing to take: up to date, only the version recorded (no backup,
    // no state, no rewrite), then one request per sync.
    let again = p.publish(Some(&p.alice));
    let sync_json = || {
        p.f.on("b", &["--json", "sync", "--install", &s(&p.b)])
            .ok()
            .json()
    };
    let v = sync_json();
    assert_eq!(v["agents"][0]["outcome"], "up-to-date", "{v}");
    assert_eq!(
        v["agents"][0]["plan"]["taken"],
        serde_json::json!([]),
        "{v}"
    );
    assert_eq!(
        mtimes(&p.b),
        before,
        "nothing of the agent rewritten, no backup"
    );
    let v = sync_json();
    assert_eq!(v["agents"][0]["outcome"], "up-to-date", "{v}");
    assert_eq!(v["agents"][0]["snapshot"], again.as_str(), "{v}");
    let listing = v["listings"]["origin"].as_str().unwrap_or_default();
    assert!(listing.starts_with("1 requests,"), "{v}");
    assert_eq!(mtimes(&p.b), before, "an up-to-date sync writes nothing");

    write(&p.a.ws().join("unsigned.md"), b"pushed unsigned\n");
    p.publish(None);
    let state = state_of(&p.b);
    let refused = p.sync(&[]);
    assert_eq!(refused.code(), 1, "{}", refused.describe());
    assert!(
        refused.stderr().contains("not synced"),
        "{}",
        refused.describe()
    );
    assert_eq!(state_of(&p.b), state);
    p.publish(Some(&p.mallory));
    let refused = p.sync(&[]);
    assert_eq!(refused.code(), 1, "{}", refused.describe());
    assert_eq!(state_of(&p.b), state);
    // Another sync holding the install's lock: refused, naming it.
    let lock = p.b.join(".zeroclaw-bundle/sync.lock");
    let held = fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .unwrap();
    held.lock().unwrap();
    p.sync(&[]).fails(1, "another sync of");
    drop(held);
    // A killed update pending in the install: the sync refuses until `recover --install`.
    let pending = p.b.join(".zeroclaw-bundle/updates/researcher/pending");
    write(&pending, b"planted");
    p.sync(&[]).fails(1, "recover --install");
    fs::remove_file(&pending).unwrap();
    p.publish(Some(&p.alice));
    let run = p.sync(&[]).ok();
    assert!(run.stdout().contains("updated from"), "{}", run.describe());
    assert_eq!(
        fs::read(p.b_ws().join("unsigned.md")).unwrap(),
        b"pushed unsigned\n"
    );
}

#[test]
fn sync_over_a_file_remote_keeps_b_in_step_through_random_rounds() {
    let p = Pair::new(Fleet::file(), &[]);
    refusals_and_up_to_date(&p);
    rounds(&p, 30);
}

#[test]
fn sync_over_s3_keeps_b_in_step_through_random_rounds() {
    let Some((f, server)) = crate::remote_s3::s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let p = Pair::new(f, &["--endpoint", &ep]);
    refusals_and_up_to_date(&p);
    rounds(&p, 30);
    drop(server);
}
