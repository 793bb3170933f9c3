//! Remote stores: stores standing in for hosts push and pull through a `file://` remote (and,
//! in `remote_s3`, a real S3 server). Pins: ids equal, checkouts byte-identical and `verify`
//! passing after a pull; a second push carries only new objects in one pack; two hosts pushing
//! at once (forced interleaving and free-running) never corrupt the remote and a third pulls
//! both; a push killed after its pack or after its index leaves no listed snapshot that misses
//! objects, and the next push completes it; a corrupt pack or record on the remote imports
//! nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{assert_same_tree, bytes, copy_tree, run_command, write, Run, TestEnv};

/// Hosts sharing one temp dir: each a store, all with the remote `origin` at `url`.
pub struct Fleet {
    pub env: TestEnv,
    pub url: String,
    /// Environment of every command (an S3 server's credentials).
    pub vars: Vec<(String, String)>,
}

impl Fleet {
    pub fn file() -> Fleet {
        let env = TestEnv::new();
        let url = format!("file://{}", env.path("remote").display());
        Fleet {
            env,
            url,
            vars: Vec::new(),
        }
    }

    pub fn store(&self, host: &str) -> String {
        self.env.path(host).to_string_lossy().into_owned()
    }

    /// Runs `args` on `host`'s store.
    pub fn on(&self, host: &str, args: &[&str]) -> Run {
        self.on_with(host, args, &[])
    }

    pub fn on_with(&self, host: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command(host, args);
        for (k, v) in env {
            c.env(k, v);
        }
        run_command(c)
    }

    pub fn command(&self, host: &str, args: &[&str]) -> Command {
        let mut c = self.env.cmd();
        c.arg("--store").arg(self.store(host)).args(args);
        // The machine's AWS profile never reaches a test: only what the test sets.
        c.env_remove("AWS_PROFILE")
            .env_remove("AWS_SHARED_CREDENTIALS_FILE")
            .env_remove("AWS_CONFIG_FILE")
            .env("HOME", self.env.path("home"));
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c
    }

    /// A host with the remote added and one snapshot of `dir`.
    pub fn host(&self, host: &str, extra: &[&str]) {
        let mut args = vec!["remote", "add", "origin", &self.url];
        args.extend(extra);
        self.on(host, &args).ok();
    }

    pub fn snapshot(&self, host: &str, dir: &Path) -> String {
        let r = self
            .on(host, &["snapshot", "--dir", &dir.to_string_lossy()])
            .ok();
        r.last_line()
    }

    /// Pulls `id` on `host` and checks what arrived: same id, verify passes, checkout equals
    /// `src`.
    pub fn pull_and_check(&self, host: &str, id: &str, src: &Path) -> serde_json::Value {
        let v = self
            .on(host, &["--json", "pull", &format!("origin/{}", &id[..12])])
            .ok()
            .json();
        assert_eq!(v["snapshot"].as_str(), Some(id), "{v}");
        self.on(host, &["verify"]).ok();
        let out = self.env.path(&format!("co-{host}-{}", &id[..12]));
        let _ = fs::remove_dir_all(&out);
        self.on(host, &["checkout", id, "--out", &out.to_string_lossy()])
            .ok();
        assert_same_tree(src, &out);
        v
    }

    /// The snapshot ids `list --remote origin` shows from `host`.
    pub fn remote_ids(&self, host: &str) -> Vec<String> {
        let v = self
            .on(host, &["--json", "list", "--remote", "origin"])
            .ok()
            .json();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot"].as_str().unwrap().to_string())
            .collect()
    }

    /// Every snapshot the remote lists pulls into a fresh store and verifies there: the
    /// remote's invariant.
    pub fn assert_consistent(&self, probe: &str) {
        let _ = fs::remove_dir_all(self.env.path(probe));
        self.host(probe, &[]);
        for id in self.remote_ids(probe) {
            self.on(probe, &["pull", &format!("origin/{id}")]).ok();
        }
        self.on(probe, &["verify"]).ok();
    }
}

pub fn tree(root: &Path, seed: u64) -> PathBuf {
    write(&root.join("shared/lib.bin"), &bytes(1, 300_000));
    write(&root.join("shared/notes.md"), b"shared notes\n");
    write(&root.join(format!("own-{seed}.bin")), &bytes(seed, 50_000));
    write(
        &root.join("deep/a/b/c.txt"),
        format!("host {seed}\n").as_bytes(),
    );
    root.to_path_buf()
}

fn files_under(dir: &Path, sub: &str) -> Vec<PathBuf> {
    match fs::read_dir(dir.join(sub)) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn push_then_pull_on_another_host() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 2);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    let v = f.on("a", &["--json", "push", &id]).ok().json();
    // Record + 4 trees (root, shared, deep, deep/a, deep/a/b: 5) + 4 distinct blobs.
    assert_eq!(v["objects"].as_u64(), Some(5 + 4), "{v}");
    assert_eq!(v["already"].as_bool(), Some(false));
    let remote = f.env.path("remote");
    assert_eq!(files_under(&remote, "packs").len(), 1, "one pack per push");
    assert_eq!(files_under(&remote, "index").len(), 1);
    // Again: nothing written.
    let v = f.on("a", &["--json", "push", &id, "origin"]).ok().json();
    assert_eq!(v["already"].as_bool(), Some(true), "{v}");
    assert_eq!(files_under(&remote, "packs").len(), 1);

    f.host("b", &[]);
    assert_eq!(f.remote_ids("b"), vec![id.clone()]);
    let v = f.pull_and_check("b", &id, &src);
    assert_eq!(v["packs"].as_u64(), Some(1), "{v}");

    // One changed file: the next push carries that blob and the trees above it only.
    write(&src.join("deep/a/b/c.txt"), b"changed\n");
    let id2 = f.snapshot("a", &src);
    let v = f.on("a", &["--json", "push", &id2]).ok().json();
    assert_eq!(
        v["objects"].as_u64(),
        Some(4 + 1),
        "4 trees on the path + 1 blob: {v}"
    );
    let v = f.pull_and_check("b", &id2, &src);
    assert_eq!(v["packs"].as_u64(), Some(1), "only the new pack: {v}");
    assert!(v["bytes"].as_u64().unwrap() < 10_000, "{v}");
    // Pulled twice: a no-op that still succeeds.
    let v = f.pull_and_check("b", &id2, &src);
    assert_eq!(v["packs"].as_u64(), Some(0), "{v}");
    assert_eq!(
        f.on("b", &["--json", "list"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn operator_errors_name_what_is_wrong() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 3);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).fails(1, "no remote configured");
    f.on("a", &["remote", "add", "origin", "http://example.com/x"])
        .fails(1, "not a remote URL");
    f.on("a", &["remote", "add", "o/x", &f.url])
        .fails(1, "remote name");
    f.on("a", &["remote", "add", "s", "s3://k:secret@bucket/p"])
        .fails(1, "credentials do not belong");
    f.host("a", &[]);
    f.on("a", &["remote", "add", "origin", &f.url])
        .fails(1, "already configured");
    let r = f.on("a", &["remote", "list"]).ok();
    assert_eq!(r.stdout().trim(), format!("origin\t{}", f.url));
    f.on("a", &["push", &id, "nosuch"])
        .fails(1, "no remote named \"nosuch\"");
    f.on("a", &["pull", "origin"]).fails(1, "NAME/SNAPSHOT");
    f.on("a", &["pull", "origin/0123456789ab"])
        .fails(1, "nothing was pushed there yet");
    f.on("a", &["push", &id]).ok();
    f.on("a", &["pull", "origin/0123456789ab"])
        .fails(1, "has no snapshot 0123456789ab");
    // Not an id prefix: read as a snapshot name (none on the remote carries it).
    f.on("a", &["pull", "origin/xyz"])
        .fails(1, "has no snapshot xyz");
    f.on("a", &["pull", "origin/agent/nobody"])
        .fails(1, "has no snapshot agent/nobody");
    f.on("a", &["pull", "origin/bad name"])
        .fails(1, "is not a snapshot id, a prefix of 8 or more hex digits");
}

/// Host A stops after uploading its pack (before its index); host B pushes a snapshot sharing
/// most objects meanwhile, then A goes on. Also a free-running round: both at once.
#[test]
fn two_hosts_push_at_once_and_a_third_pulls_both() {
    let f = Fleet::file();
    let src_a = tree(&f.env.path("src-a"), 10);
    let src_b = tree(&f.env.path("src-b"), 11);
    f.host("a", &[]);
    f.host("b", &[]);
    let id_a = f.snapshot("a", &src_a);
    let id_b = f.snapshot("b", &src_b);
    let paused = f.env.path("a-paused");
    let go = f.env.path("go");
    let mut a = f.command("a", &["push", &id_a]);
    a.env("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "remote-after-pack")
        .env(
            "ZEROCLAW_BUNDLE_TEST_HOOK_CMD",
            format!(
                "touch '{}'; while [ ! -e '{}' ]; do sleep 0.02; done",
                paused.display(),
                go.display()
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = a.spawn().unwrap();
    while !paused.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A's pack is up but not indexed: B cannot count on it and uploads the shared objects too.
    let v = f.on("b", &["--json", "push", &id_b]).ok().json();
    assert_eq!(v["objects"].as_u64(), Some(9), "{v}");
    assert_eq!(f.remote_ids("b"), vec![id_b.clone()], "A is not listed yet");
    fs::write(&go, b"").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");

    f.host("c", &[]);
    let mut ids = f.remote_ids("c");
    ids.sort();
    let mut want = vec![id_a.clone(), id_b.clone()];
    want.sort();
    assert_eq!(ids, want);
    f.pull_and_check("c", &id_a, &src_a);
    f.pull_and_check("c", &id_b, &src_b);

    // Free-running: rounds of both hosts pushing a new snapshot at the same time.
    let rounds = 4;
    let mut expected = Vec::new();
    for round in 0..rounds {
        let mut children = Vec::new();
        for (host, src) in [("a", &src_a), ("b", &src_b)] {
            write(
                &src.join(format!("round-{round}.txt")),
                format!("{host} {round}\n").as_bytes(),
            );
            let id = f.snapshot(host, src);
            let mut c = f.command(host, &["push", &id]);
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            children.push((c.spawn().unwrap(), id, src.to_path_buf(), round));
        }
        for (child, id, src, round) in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            // Each host's tree at that round, to compare with the pull.
            let copy = f.env.path(&format!("expect-{}-{round}", &id[..8]));
            copy_tree(&src, &copy);
            expected.push((id, copy));
        }
    }
    let listed = f.remote_ids("c");
    assert_eq!(listed.len(), 2 + 2 * rounds, "{listed:?}");
    for (id, copy) in &expected {
        assert!(listed.contains(id));
        // The tree of a round may have moved on in src; check the recorded copy.
        let v = f
            .on("c", &["--json", "pull", &format!("origin/{id}")])
            .ok()
            .json();
        assert_eq!(v["snapshot"].as_str(), Some(id.as_str()));
        let out = f.env.path(&format!("co-c-{id}"));
        f.on("c", &["checkout", id, "--out", &out.to_string_lossy()])
            .ok();
        assert_same_tree(copy, &out);
    }
    f.on("c", &["verify"]).ok();
    f.assert_consistent("probe");
}

/// SIGKILL right after the pack is up, and right after the index is up: the remote lists no
/// snapshot, a pull of it fails naming it, and the next push completes it.
#[test]
fn push_killed_midway_leaves_the_remote_consistent() {
    for (seam, reuploads) in [("remote-after-pack", true), ("remote-after-index", false)] {
        let f = Fleet::file();
        let src = tree(&f.env.path("src"), 20);
        f.host("a", &[]);
        let id = f.snapshot("a", &src);
        let r = f.on_with(
            "a",
            &["push", &id],
            &[
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID"),
            ],
        );
        assert_eq!(
            r.out.status.code(),
            None,
            "killed by a signal at {seam}: {}",
            r.describe()
        );
        f.host("b", &[]);
        assert!(f.remote_ids("b").is_empty(), "{seam}: nothing listed");
        f.on("b", &["pull", &format!("origin/{id}")])
            .fails(1, "has no snapshot");
        assert_eq!(
            f.on("b", &["--json", "list"])
                .ok()
                .json()
                .as_array()
                .unwrap()
                .len(),
            0
        );
        f.assert_consistent("probe");

        let v = f.on("a", &["--json", "push", &id]).ok().json();
        let objects = v["objects"].as_u64().unwrap();
        if reuploads {
            // An unindexed pack counts for nothing: every object goes up again.
            assert_eq!(objects, 9, "{seam}: {v}");
        } else {
            // Indexed objects count: only the record was missing.
            assert_eq!(objects, 0, "{seam}: {v}");
        }
        f.pull_and_check("b", &id, &src);
        f.assert_consistent("probe");
    }
}

/// SIGKILL at random moments of a larger push (multipart upload), many runs: whatever the
/// remote lists pulls and verifies, and the last push completes.
#[test]
fn push_killed_at_random_points() {
    let f = Fleet::file();
    let src = f.env.path("src");
    for i in 0..6 {
        write(
            &src.join(format!("big-{i}.bin")),
            &bytes(100 + i, 6_000_000),
        );
    }
    for i in 0..200 {
        write(
            &src.join(format!("small/{i}.txt")),
            format!("{i}\n").as_bytes(),
        );
    }
    let id = f.snapshot("a", &src);
    let add = |name: &str| {
        let dir = f.env.path(name);
        // Made here, so a kill before the first write still leaves a remote to list.
        fs::create_dir_all(&dir).unwrap();
        f.on(
            "a",
            &["remote", "add", name, &format!("file://{}", dir.display())],
        )
        .ok();
        dir
    };
    // How long one whole push takes here, to spread the kills over it.
    add("calib");
    let started = std::time::Instant::now();
    f.on("a", &["push", &id, "calib"]).ok();
    let whole = started.elapsed();
    let runs = 12u32;
    let mut states = std::collections::BTreeMap::new();
    for run in 0..runs {
        // A fresh remote each run: once one lists the snapshot, a push there does nothing.
        let name = format!("r{run}");
        let dir = add(&name);
        let mut c = f.command("a", &["push", &id, &name]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        // Over 40% to 110% of a push: most of its start is local work (reading, compressing).
        std::thread::sleep(whole * 2 / 5 + whole * 7 * (run + 1) / (10 * (runs + 1)));
        let _ = child.kill();
        let killed = child.wait().unwrap().code().is_none();
        let state = (
            killed,
            files_under(&dir, "packs").len(),
            files_under(&dir, "index").len(),
            files_under(&dir, "snapshots").len(),
        );
        *states.entry(state).or_insert(0) += 1;
        // Whatever is listed pulls complete and verifies; nothing listed misses objects.
        let probe = format!("probe-{run}");
        f.on(
            &probe,
            &[
                "remote",
                "add",
                "origin",
                &format!("file://{}", dir.display()),
            ],
        )
        .ok();
        let v = f
            .on(&probe, &["--json", "list", "--remote", "origin"])
            .ok()
            .json();
        for s in v.as_array().unwrap() {
            f.on(
                &probe,
                &[
                    "pull",
                    &format!("origin/{}", s["snapshot"].as_str().unwrap()),
                ],
            )
            .ok();
            f.on(&probe, &["verify"]).ok();
        }
        // The next push completes it; a pull then gives the same tree.
        f.on("a", &["push", &id, &name]).ok();
        f.on(&probe, &["pull", &format!("origin/{id}")]).ok();
        f.on(&probe, &["verify"]).ok();
    }
    eprintln!("(killed, packs, indexes, records) after the kill -> runs: {states:?}");
    assert!(
        states.keys().any(|(killed, ..)| *killed),
        "no push was killed in {runs} runs: {states:?}"
    );
    f.host("b", &[]);
    f.on(
        "b",
        &[
            "remote",
            "add",
            "r0",
            &format!("file://{}", f.env.path("r0").display()),
        ],
    )
    .ok();
    f.on("b", &["pull", &format!("r0/{id}")]).ok();
    f.on("b", &["verify"]).ok();
    let out = f.env.path("co-b");
    f.on("b", &["checkout", &id, "--out", &out.to_string_lossy()])
        .ok();
    assert_same_tree(&src, &out);
}

#[test]
fn corrupt_remote_imports_nothing() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 30);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let remote = f.env.path("remote");
    let pack = files_under(&remote, "packs").pop().unwrap();
    let good = fs::read(&pack).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    fs::write(&pack, &bad).unwrap();
    f.host("b", &[]);
    let r = f
        .on("b", &["pull", &format!("origin/{id}")])
        .fails(1, "no snapshot was added");
    let key = format!("packs/{}", pack.file_name().unwrap().to_string_lossy());
    assert!(
        r.stderr().contains(&format!("remote origin: {key}")) && !r.stderr().contains("pull-"),
        "names the pack by its remote key, not its temporary file: {}",
        r.describe()
    );
    assert_eq!(
        f.on("b", &["--json", "list"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    f.on("b", &["verify"]).ok();
    fs::write(&pack, &good).unwrap();

    // A record whose bytes are not its id.
    let record = remote.join("snapshots").join(&id);
    let mut rec = fs::read(&record).unwrap();
    rec.push(b' ');
    fs::write(&record, &rec).unwrap();
    f.on("b", &["pull", &format!("origin/{id}")])
        .fails(1, "hashes to");
    rec.pop();
    fs::write(&record, &rec).unwrap();
    // An index that lists an object its pack lacks, for a snapshot that needs it.
    let idx = files_under(&remote, "index").pop().unwrap();
    let text = fs::read_to_string(&idx).unwrap();
    fs::write(&idx, "zeroclaw-bundle remote index 1\nnot-an-id\n").unwrap();
    f.on("b", &["pull", &format!("origin/{id}")])
        .fails(1, "line 2 is not an object id");
    fs::write(&idx, text).unwrap();
    f.pull_and_check("b", &id, &src);
}

/// A store's temporary files are gone after push and pull (success or failure).
#[test]
fn push_and_pull_leave_no_temporary_files() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 40);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", &[]);
    f.pull_and_check("b", &id, &src);
    for host in ["a", "b"] {
        let tmp = f.env.path(host).join("tmp");
        let left: Vec<_> = files_under(&tmp, "")
            .into_iter()
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with("push-") || n.starts_with("pull-")
            })
            .collect();
        assert!(left.is_empty(), "{host}: {left:?}");
    }
}

/// SIGINT (Ctrl-C) during a push stops it at the next step: exit 130, its temporary pack is
/// gone, the remote lists nothing, and the next push completes.
#[test]
fn push_interrupted_stops_cleanly() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 70);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    let r = f.on_with(
        "a",
        &["push", &id],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "remote-after-pack"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -INT $PPID"),
        ],
    );
    assert_eq!(r.code(), 130, "{}", r.describe());
    assert!(r.stderr().contains("interrupted"), "{}", r.describe());
    let left: Vec<_> = files_under(&f.env.path("a"), "tmp")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("push-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(files_under(&f.env.path("remote"), "index").is_empty());
    f.host("b", &[]);
    assert!(f.remote_ids("b").is_empty());
    f.on("a", &["push", &id]).ok();
    f.pull_and_check("b", &id, &src);
}

/// A gc started while a push uploads or a pull downloads waits for it ("busy" with a short
/// lock timeout) instead of deleting its temporary pack; both then complete.
#[test]
fn gc_waits_for_a_push_and_a_pull() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 40);
    f.host("a", &[]);
    f.host("b", &[]);
    let id = f.snapshot("a", &src);
    for (host, seam, args) in [
        (
            "a",
            "remote-after-pack",
            vec!["push".to_string(), id.clone()],
        ),
        (
            "b",
            "remote-after-fetch",
            vec!["pull".to_string(), format!("origin/{id}")],
        ),
    ] {
        let out = f.env.path(&format!("gc-{host}.out"));
        let cmd = format!(
            "ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS=300 '{}' --store '{}' gc --grace 0 >'{}' 2>&1; echo \"rc=$?\" >>'{}'",
            crate::util::BIN,
            f.store(host),
            out.display(),
            out.display()
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        f.on_with(
            host,
            &args,
            &[
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &cmd),
            ],
        )
        .ok();
        let gc = fs::read_to_string(&out).unwrap();
        assert!(
            gc.contains("busy") && gc.contains("rc=1"),
            "{seam}: gc must wait: {gc}"
        );
    }
    f.on("b", &["verify"]).ok();
    f.assert_consistent("probe");
}

/// An index whose pack is gone stands for nothing: the next push uploads those objects again
/// and the snapshot it lists pulls.
#[test]
fn push_ignores_an_index_whose_pack_is_gone() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 41);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let remote = f.env.path("remote");
    for sub in ["packs", "trees", "snapshots"] {
        for p in files_under(&remote, sub) {
            fs::remove_file(p).unwrap();
        }
    }
    assert_eq!(files_under(&remote, "index").len(), 1);
    let v = f.on("a", &["--json", "push", &id]).ok().json();
    assert_eq!(v["objects"].as_u64(), Some(9), "every object again: {v}");
    f.host("b", &[]);
    f.pull_and_check("b", &id, &src);
}

/// URLs carrying a query, fragment or control character are refused (nothing stored); `remote
/// remove` drops an entry without touching the remote's data.
#[test]
fn remote_urls_with_secrets_are_refused_and_remove_works() {
    let f = Fleet::file();
    f.host("a", &[]);
    for (url, endpoint) in [
        ("s3://bkt/p?x-amz-security-token=SECRET", None),
        ("s3://bkt/p#SECRET", None),
        ("s3://bkt/p", Some("http://h/?token=SECRET")),
        ("s3://bkt/p\x1b[2J", None),
    ] {
        let mut args = vec!["remote", "add", "x", url];
        if let Some(ep) = endpoint {
            args.extend(["--endpoint", ep]);
        }
        let r = f.on("a", &args).fails(1, "remote x");
        assert!(
            !r.stderr().contains("=SECRET") && !r.stderr().contains("#SECRET"),
            "{}",
            r.describe()
        );
        assert!(!r.stderr().contains('\x1b'), "{}", r.describe());
    }
    let listed = f.on("a", &["remote", "list"]).ok();
    assert_eq!(listed.stdout().lines().count(), 1, "{}", listed.describe());
    let src = tree(&f.env.path("src"), 42);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let r = f.on("a", &["remote", "remove", "origin"]).ok();
    assert!(
        r.stderr().contains("nothing on the remote"),
        "{}",
        r.describe()
    );
    assert_eq!(f.on("a", &["remote", "list"]).ok().stdout(), "");
    f.on("a", &["remote", "remove", "origin"])
        .fails(1, "no remote named");
    // An entry written by hand with a token is removed without printing it.
    fs::write(
        f.env.path("a").join("remotes.toml"),
        "[remote.x]\nurl = \"s3://b/p?token=SECRET\"\n",
    )
    .unwrap();
    let r = f.on("a", &["remote", "remove", "x"]).ok();
    assert!(!r.stderr().contains("=SECRET"), "{}", r.describe());
    // The data is still there for another host.
    f.host("b", &[]);
    assert_eq!(f.remote_ids("b"), vec![id]);
}

/// One corrupt record under snapshots/ hides nothing: the good ones are listed, the bad one
/// named on stderr, exit 1.
#[test]
fn list_remote_names_a_corrupt_record_and_lists_the_rest() {
    let f = Fleet::file();
    f.host("a", &[]);
    let one = f.snapshot("a", &tree(&f.env.path("s1"), 43));
    let two = f.snapshot("a", &tree(&f.env.path("s2"), 44));
    f.on("a", &["push", &one]).ok();
    f.on("a", &["push", &two]).ok();
    let record = f.env.path("remote").join("snapshots").join(&two);
    fs::write(&record, b"garbage").unwrap();
    let r = f
        .on("a", &["--json", "list", "--remote", "origin"])
        .fails(1, &two);
    let ids: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec![one.clone()], "{}", r.describe());
    let r = f.on("a", &["list", "--remote", "origin"]).fails(1, &two);
    assert!(r.stdout().contains(&one[..16]), "{}", r.describe());
}
