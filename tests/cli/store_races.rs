//! gc against concurrent writers (issue 8, items 1 and 2). Pins: a gc can never delete an
//! object a running capture reuses; gc and captures never interleave into a catalog that
//! lists a snapshot whose record or objects are gone; two gcs serialize.
//!
//! The deterministic test stops a capture at the `before-commit` seam (after it has deduped
//! against an aged, unreachable object, before its record exists) and runs gc right there.
//! The stress test runs 8 writers, a forgetter and 2 gcs with `--grace 0` against one store
//! for a few rounds (`ZCB_LONG=1` for many more) and checks the store after each round.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::util::{run_command, write, Run, TestEnv, BIN};

/// Sets every object file's mtime to three hours ago (standing in for time passing).
fn age_objects(store: &Path) {
    for fan in std::fs::read_dir(store.join("objects")).unwrap() {
        for obj in std::fs::read_dir(fan.unwrap().path()).unwrap() {
            let st = Command::new("touch")
                .args(["-h", "-d", "3 hours ago"])
                .arg(obj.unwrap().path())
                .status()
                .unwrap();
            assert!(st.success());
        }
    }
}

#[test]
fn gc_at_the_commit_seam_cannot_delete_what_the_capture_reuses() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(
        &src.join("kept.md"),
        b"unchanged content the next capture dedups against",
    );
    write(&src.join("notes.md"), b"version one");
    let first = env.snapshot(&src);
    env.run(&["forget", &first]).ok();
    age_objects(&env.store);
    write(&src.join("notes.md"), b"version two");

    // At the seam the capture has stored notes.md and reused kept.md's aged, unreachable
    // blob. A gc run there must not delete it: it waits for the capture (here it gives up
    // after 300 ms, so the hook returns) and the store stays whole.
    let gc_out = env.path("gc-at-seam.txt");
    let hook = format!(
        "ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS=300 '{BIN}' gc >'{out}' 2>&1; echo \"exit $?\" >>'{out}'",
        out = gc_out.display()
    );
    let r = env
        .run_with(
            &["snapshot", "--dir", src.to_str().unwrap()],
            &[
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "before-commit"),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &hook),
            ],
        )
        .ok();
    let second = r.last_line();
    let gc_text = std::fs::read_to_string(&gc_out).expect("the hook ran gc");
    // What the operator sees first: the capture said it succeeded, so its data is there.
    let v = env.run(&["verify"]);
    assert!(
        v.out.status.success(),
        "gc at the seam said:\n{gc_text}\n{}",
        v.describe()
    );
    assert_eq!(
        env.cat(&second, "kept.md"),
        b"unchanged content the next capture dedups against"
    );
    assert!(
        gc_text.contains("store is busy") && gc_text.contains("exit 1"),
        "gc must wait for the capture, not sweep under it:\n{gc_text}"
    );
    // Once the capture committed, gc (any grace) keeps everything it references.
    env.run(&["gc", "--grace", "0"]).ok();
    env.run(&["verify"]).ok();
    env.run(&[
        "checkout",
        &second,
        "--out",
        env.path("out").to_str().unwrap(),
    ])
    .ok();
    assert_eq!(
        std::fs::read(env.path("out/notes.md")).unwrap(),
        b"version two"
    );
}

#[test]
fn two_gcs_serialize() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..50 {
        write(&src.join(format!("f{i}")), format!("file {i}").as_bytes());
    }
    let id = env.snapshot(&src);
    env.run(&["forget", &id]).ok();
    // A gc at the seam of a capture would deadlock; instead run two gcs at once, many times.
    for _ in 0..5 {
        write(
            &src.join("changing"),
            crate::util::bytes(rand_seed(), 64).as_slice(),
        );
        let id = env.snapshot(&src);
        env.run(&["forget", &id]).ok();
        let a = spawn(&env, &["gc", "--grace", "0"]);
        let b = spawn(&env, &["gc", "--grace", "0"]);
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        a.ok();
        b.ok();
    }
    env.run(&["verify"]).ok();
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        .into()
}

fn spawn(env: &TestEnv, args: &[&str]) -> std::thread::JoinHandle<Run> {
    let mut c = env.cmd();
    c.args(args);
    std::thread::spawn(move || run_command(c))
}

/// Checks the store after a round: verify passes, every listed snapshot's files read back,
/// and every snapshot a writer committed (and nobody forgot) is listed.
fn check_round(env: &TestEnv, committed: &BTreeSet<String>, round: usize) {
    env.run(&["verify"]).ok();
    let listed: BTreeSet<String> = env
        .run(&["--json", "list"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot"].as_str().unwrap().to_string())
        .collect();
    for id in committed {
        assert!(
            listed.contains(id),
            "round {round}: {id} was committed but is not listed"
        );
    }
    for id in &listed {
        let out = env.path(&format!("check-{round}-{}", &id[..12]));
        env.run(&["checkout", id, "--out", out.to_str().unwrap()])
            .ok();
        std::fs::remove_dir_all(&out).unwrap();
    }
}

#[test]
fn eight_writers_and_two_gcs_with_grace_zero_lose_nothing() {
    let long = std::env::var_os("ZCB_LONG").is_some();
    let rounds: usize = if long { 25 } else { 3 };
    let per_writer = if long { 6 } else { 3 };
    let env = Arc::new(TestEnv::new());
    // Shared content across writers (dedup) plus per-writer, per-round changes.
    for w in 0..8 {
        let src = env.path(&format!("src{w}"));
        for i in 0..20 {
            write(
                &src.join(format!("shared/{i}.md")),
                format!("shared {i}").as_bytes(),
            );
        }
    }
    // The store exists before the gcs start (gc, like every command that only changes what
    // exists, refuses to create one).
    zeroclaw_bundle_store::Store::open_or_create(&env.store).unwrap();
    let committed = Arc::new(Mutex::new(BTreeSet::new()));
    let mut races = 0;
    for round in 0..rounds {
        let mut threads = Vec::new();
        for w in 0..8 {
            let env = Arc::clone(&env);
            let committed = Arc::clone(&committed);
            threads.push(std::thread::spawn(move || {
                let src = env.path(&format!("src{w}"));
                let mut mine = Vec::new();
                for k in 0..per_writer {
                    write(
                        &src.join(format!("own/{k}.md")),
                        format!("writer {w} round {round} step {k}").as_bytes(),
                    );
                    // Content another writer had in the previous round: an old object that
                    // may be unreachable by now, exactly what a capture dedups against.
                    write(
                        &src.join("moving.md"),
                        format!("moving {} {}", (w + 1) % 8, round.saturating_sub(1)).as_bytes(),
                    );
                    let r = env.snapshot_with(&src, &[]);
                    let id = r.last_line();
                    assert!(r.out.status.success() && id.len() == 64, "{}", r.describe());
                    mine.push(id);
                }
                // Forget every snapshot but the last: garbage for the gcs.
                let keep = mine.pop().unwrap();
                for id in mine {
                    env.run(&["forget", &id]).ok();
                }
                committed.lock().unwrap().insert(keep);
            }));
        }
        let mut gcs = Vec::new();
        for _ in 0..2 {
            let env = Arc::clone(&env);
            gcs.push(std::thread::spawn(move || {
                for _ in 0..4 {
                    env.run(&["gc", "--grace", "0"]).ok();
                }
            }));
        }
        for t in threads {
            t.join().expect("a writer failed");
        }
        for t in gcs {
            t.join().expect("a gc failed");
        }
        races += 8 * per_writer + 8;
        // Previous rounds' kept snapshots are still committed; forget half of them now and
        // drop them from the expectation, so the gcs of the next round have more to collect.
        let mut all = committed.lock().unwrap();
        check_round(&env, &all, round);
        let drop: Vec<String> = all.iter().step_by(2).cloned().collect();
        for id in drop {
            env.run(&["forget", &id]).ok();
            all.remove(&id);
        }
    }
    eprintln!("{rounds} rounds, {races} captures and gcs raced, store verified after each round");
}
