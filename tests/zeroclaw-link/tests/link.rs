//! `zeroclaw bundle ...` through the public API gives what the standalone `zeroclaw-bundle`
//! gives: the same snapshot trees, bundles `diff` finds equal, the same changes, and a mount
//! serving the same bytes. The standalone binary is `$ZEROCLAW_BUNDLE_BIN` (scripts/test.sh
//! sets it), else the repository's `target/debug/zeroclaw-bundle`.

mod common;

use std::path::{Path, PathBuf};

use common::standalone;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("could not start the command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .trim()
        .to_string()
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A sample install (the README's built-in example) in a fresh directory.
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sample-install.sh");
        run(Command::new("bash")
            .arg(script)
            .arg(dir.path().join("install")));
        Env { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `zeroclaw --config-dir INSTALL bundle --store linked-store ARGS`.
    fn linked(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zeroclaw"));
        cmd.arg("--config-dir")
            .arg(self.path("install"))
            .arg("bundle")
            .arg("--store")
            .arg(self.path("linked-store"))
            .args(args);
        cmd
    }

    /// `zeroclaw-bundle --store STORE ARGS`.
    fn standalone(&self, store: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(standalone());
        cmd.arg("--store").arg(self.path(store)).args(args);
        cmd
    }

    /// The top-level entries of snapshot `id` as (path, object id), the manifest left out
    /// (it differs in its export time only).
    fn entries_of(&self, store: &str, id: &str) -> Vec<(String, String)> {
        let out = run(&mut self.standalone(store, &["--json", "ls", id]));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["path"].as_str().unwrap().to_string(),
                    e["object"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(path, _)| path != "zeroclaw-agent.toml")
            .collect()
    }
}

#[test]
fn snapshot_captures_the_same_tree_as_the_standalone_binary() {
    let env = Env::new();
    let linked = stdout(&run(&mut env.linked(&["snapshot", "researcher"])));
    let install = env.path("install");
    let mut own = env.standalone("own-store", &["snapshot", "researcher", "--install"]);
    let own = last_line(&run(own.arg(&install)));
    let entries = env.entries_of("linked-store", &linked);
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert_eq!(entries, env.entries_of("own-store", &own));
}

#[test]
fn export_writes_the_bundle_the_standalone_binary_writes() {
    let env = Env::new();
    let (a, b) = (env.path("linked-bundle"), env.path("own-bundle"));
    run(env.linked(&["export", "researcher", "--out"]).arg(&a));
    run(env
        .standalone("own-store", &["export", "researcher", "--install"])
        .arg(env.path("install"))
        .arg("--out")
        .arg(&b));
    // Equal up to the export time (which `diff` leaves out unless asked): exit 0.
    let out = env
        .standalone("own-store", &["diff"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the bundles differ: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn diff_finds_the_changes_the_standalone_binary_finds() {
    let env = Env::new();
    let before = stdout(&run(&mut env.linked(&["snapshot", "researcher"])));
    let ws = env.path("install/agents/researcher/workspace");
    std::fs::write(
        ws.join("IDENTITY.md"),
        "# Researcher\n\nNow also reviews.\n",
    )
    .unwrap();
    std::fs::write(ws.join("notes/new.md"), "new\n").unwrap();
    let bundle = env.path("bundle");
    run(env.linked(&["export", "researcher", "--out"]).arg(&bundle));
    let linked = stdout(&run(env.linked(&["diff", &before]).arg(&bundle)));
    let out = env
        .standalone("linked-store", &["diff", &before])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the standalone diff saw no change"
    );
    let mut own: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.len() > 2 && l.as_bytes()[1] == b'\t')
        .map(str::to_string)
        .collect();
    let mut linked: Vec<String> = linked
        .lines()
        .filter(|l| !l.starts_with('~'))
        .map(str::to_string)
        .collect();
    own.sort();
    linked.sort();
    assert_eq!(linked, own);
    assert!(
        linked.contains(&"M\tworkspace/IDENTITY.md".to_string()),
        "{linked:?}"
    );
    assert!(
        linked.contains(&"A\tworkspace/notes/new.md".to_string()),
        "{linked:?}"
    );
}

#[test]
fn mount_serves_what_a_checkout_writes() {
    let env = Env::new();
    let id = stdout(&run(&mut env.linked(&["snapshot", "researcher"])));
    let mnt = env.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut child = env.linked(&["mount", &id]).arg(&mnt).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let canonical = std::fs::canonicalize(&mnt).unwrap();
    while !String::from_utf8_lossy(&std::fs::read("/proc/self/mountinfo").unwrap())
        .contains(&format!(" {} ", canonical.display()))
    {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the mount exited before mounting: {status} (CI must be able to mount)");
        }
        assert!(
            Instant::now() < deadline,
            "the mount did not appear in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = env.path("checkout");
    run(env
        .standalone("linked-store", &["checkout", &id, "--out"])
        .arg(&out));
    for file in [
        "config.toml",
        "zeroclaw-agent.toml",
        "workspace/IDENTITY.md",
    ] {
        assert_eq!(
            std::fs::read(mnt.join(file)).unwrap(),
            std::fs::read(out.join(file)).unwrap(),
            "{file}"
        );
    }
    run(env.standalone("linked-store", &["umount"]).arg(&mnt));
    let status = child.wait().unwrap();
    assert!(status.success(), "the linked mount ended with {status}");
}

/// The id a command that makes something prints last.
fn last_line(out: &Output) -> String {
    stdout(out).lines().last().unwrap_or_default().to_string()
}
