//! The crash campaign (issue 8, "what must also be tested"): `snapshot`, `export --force`,
//! `gc --grace 0` and `reindex` are SIGKILLed at random points (a seeded random delay within
//! each command's measured run time), in rotation, against one store and one destination.
//! After every kill: `recover` leaves the destination whole, either the bundle it held before
//! or the one a clean export of the same state gives (`exported_at` aside); `verify` passes;
//! every listed snapshot still lists in full (`ls -r`); the parent of the destination holds no
//! hidden leftovers.
//!
//! Short by default (24 kills, one seed); `ZCB_LONG=1` runs 8 seeds of 48 (384 kills).
//! `ZCB_CRASH_SEED=<n>` replays one seed. The counts of kills tried and of kills that landed
//! (the process died of SIGKILL rather than finishing first) are printed.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::export::{export, Install};
use crate::util::*;

#[path = "../fuzz/rng.rs"]
mod rng;
use rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Snapshot,
    Export,
    Gc,
    Reindex,
}

const OPS: [Op; 4] = [Op::Snapshot, Op::Export, Op::Gc, Op::Reindex];

/// The bundle at `dest` with the manifest's `exported_at` line dropped (the one byte range
/// two exports of the same state may differ in, SPEC §3).
fn bundle(dest: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut t = read_tree(dest);
    if let Some(Node::File { content, .. }) = t.get_mut(&b"zeroclaw-agent.toml"[..]) {
        let text = String::from_utf8_lossy(content);
        *content = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("exported_at"))
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes();
    }
    t
}

fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

struct Campaign {
    env: TestEnv,
    install: Install,
    dest: std::path::PathBuf,
    rng: Rng,
    /// Clean run time of each op, measured once: kills land in [0, 1.25 x this).
    base: BTreeMap<&'static str, Duration>,
    round: u64,
    tried: u64,
    landed: u64,
    /// Killed exports after which the destination was the old bundle / the new one.
    export_old: u64,
    export_new: u64,
    /// Kills that left a staging or retired tree beside the destination for `recover`.
    mid_publish: u64,
}

impl Campaign {
    fn new(seed: u64) -> Campaign {
        let env = TestEnv::new();
        let install = Install::new(&env);
        // Enough bytes and files that every command runs long enough to be hit mid-way.
        let ws = install.ws();
        for i in 0..200u64 {
            write(
                &ws.join(format!("data/d{}/f{i}.txt", i % 10)),
                &bytes(seed ^ i, 2_000 + (i as usize % 7) * 3_000),
            );
        }
        write(&ws.join("data/big.bin"), &bytes(seed, 3 << 20));
        let dest = env.path("out/bundle");
        std::fs::create_dir_all(env.path("out")).unwrap();
        let mut c = Campaign {
            env,
            install,
            dest,
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            base: BTreeMap::new(),
            round: 0,
            tried: 0,
            landed: 0,
            export_old: 0,
            export_new: 0,
            mid_publish: 0,
        };
        for op in OPS {
            c.change_state(op);
            let start = Instant::now();
            let r = c.run(op, None);
            assert!(r.0.success(), "clean {op:?} failed: {}", r.1);
            c.base.insert(op.name(), start.elapsed());
        }
        c
    }

    fn args(&self, op: Op) -> Vec<std::ffi::OsString> {
        let s = |v: &str| std::ffi::OsString::from(v);
        match op {
            Op::Snapshot => vec![s("snapshot"), s("--dir"), self.install.ws().into()],
            Op::Export => vec![
                s("export"),
                s("researcher"),
                s("--install"),
                self.install.root.clone().into(),
                s("--out"),
                self.dest.clone().into(),
                s("--force"),
            ],
            Op::Gc => vec![s("gc"), s("--grace"), s("0")],
            Op::Reindex => vec![s("reindex")],
        }
    }

    /// Runs `op`, SIGKILLing it after `kill_after` when given. Returns the status and stderr.
    fn run(&self, op: Op, kill_after: Option<Duration>) -> (std::process::ExitStatus, String) {
        let mut cmd = self.env.cmd();
        cmd.args(self.args(op))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(after) = kill_after {
            std::thread::sleep(after);
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Gives the next op something to do: new and changed files for a capture, a forgotten
    /// snapshot for gc (its unique objects become garbage).
    fn change_state(&mut self, op: Op) {
        let ws = self.install.ws();
        let n = self.round;
        write(&ws.join(format!("notes/round-{n}.md")), &bytes(n, 10_000));
        write(&ws.join("data/d0/f0.txt"), &bytes(n.wrapping_add(7), 3_000));
        if op == Op::Gc {
            let list = self.env.run(&["--json", "list"]).ok().json();
            let ids: Vec<String> = list
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["snapshot"].as_str().unwrap().to_string())
                .collect();
            if ids.len() > 2 {
                self.env.run(&["forget", &ids[0]]).ok();
            }
        }
    }

    fn kill_once(&mut self, op: Op) {
        self.round += 1;
        self.change_state(op);
        let before = self.dest.exists().then(|| bundle(&self.dest));
        let base = self.base[op.name()];
        let base_us = (base.as_micros() as u64).max(1_000);
        // Half the kills anywhere in the run; the other half in its last 40%, where the
        // commit of a capture, the deletions of gc and the publish of an export happen.
        let mut below = |n: u64| self.rng.below(n as usize) as u64;
        let after = Duration::from_micros(if below(2) == 0 {
            below(base_us * 5 / 4)
        } else {
            base_us * 6 / 10 + below(base_us / 2)
        });
        let (status, stderr) = self.run(op, Some(after));
        self.tried += 1;
        let killed = status.signal() == Some(9);
        if killed {
            self.landed += 1;
        } else {
            assert!(
                status.success(),
                "round {} {op:?}: failed without being killed: {stderr}",
                self.round
            );
        }
        let what = format!(
            "round {} {op:?} killed after {after:?} (landed: {killed})",
            self.round
        );
        self.check(op, before, &what);
    }

    fn check(&mut self, op: Op, before: Option<BTreeMap<Vec<u8>, Node>>, what: &str) {
        if !hidden(&self.env.path("out")).is_empty() {
            self.mid_publish += 1;
        }
        let env = &self.env;
        env.run(&[OsStr::new("recover"), self.dest.as_os_str()])
            .ok();
        assert!(
            hidden(&env.path("out")).is_empty(),
            "{what}: leftovers {:?}",
            hidden(&env.path("out"))
        );
        let v = env.run(&["verify"]);
        assert!(v.out.status.success(), "{what}: verify\n{}", v.describe());
        let list = env.run(&["--json", "list"]).ok().json();
        for s in list.as_array().unwrap() {
            let id = s["snapshot"].as_str().unwrap();
            let r = env.run(&["ls", "-r", id]);
            assert!(
                r.out.status.success(),
                "{what}: listed {id}\n{}",
                r.describe()
            );
        }
        if op == Op::Export {
            let have = bundle(&self.dest);
            // The new state's bundle: a clean export of the same install.
            let r = export(env, &self.install, &self.dest, &["--force"], &[]);
            assert!(
                r.out.status.success(),
                "{what}: re-export\n{}",
                r.describe()
            );
            let new = bundle(&self.dest);
            if Some(&have) == before.as_ref() {
                self.export_old += 1;
            } else if have == new {
                self.export_new += 1;
            } else {
                let differ =
                    |a: &BTreeMap<Vec<u8>, Node>, b: &BTreeMap<Vec<u8>, Node>| -> Vec<String> {
                        a.keys()
                            .chain(b.keys())
                            .filter(|k| a.get(*k) != b.get(*k))
                            .map(|k| String::from_utf8_lossy(k).into_owned())
                            .collect()
                    };
                panic!(
                    "{what}: the destination is neither the whole old nor the whole new bundle \
                     (differs from the old at {:?}, from the new at {:?})",
                    before.as_ref().map(|b| differ(&have, b)),
                    differ(&have, &new)
                );
            }
        }
    }
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Snapshot => "snapshot",
            Op::Export => "export",
            Op::Gc => "gc",
            Op::Reindex => "reindex",
        }
    }
}

#[test]
fn sigkill_at_random_points_leaves_a_verifiable_store_and_a_whole_bundle() {
    let long = std::env::var_os("ZCB_LONG").is_some();
    let seeds: Vec<u64> = match std::env::var("ZCB_CRASH_SEED") {
        Ok(s) => vec![s.parse().expect("ZCB_CRASH_SEED is a number")],
        Err(_) if long => (1..=8).collect(),
        Err(_) => vec![1],
    };
    let per_seed = if long { 48 } else { 24 };
    let (mut tried, mut landed, mut mid_publish) = (0, 0, 0);
    for seed in seeds {
        let mut c = Campaign::new(seed);
        for i in 0..per_seed {
            let op = OPS[i % OPS.len()];
            c.kill_once(op);
        }
        eprintln!(
            "crash campaign seed {seed}: {} kills tried, {} landed mid-run; after killed \
             exports the bundle was old {} times, new {} times; {} kills left a publish for \
             recover; clean run times {:?}",
            c.tried, c.landed, c.export_old, c.export_new, c.mid_publish, c.base
        );
        tried += c.tried;
        landed += c.landed;
        mid_publish += c.mid_publish;
    }
    eprintln!(
        "crash campaign: {tried} kills tried, {landed} landed mid-run, {mid_publish} mid-publish"
    );
    assert!(
        landed > 0,
        "no kill landed: the delays never hit a running command"
    );
}
