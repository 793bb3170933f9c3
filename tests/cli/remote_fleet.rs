//! Remotes a fleet can trust (issue 18, remote side). Pins, each with the defect it catches:
//! stray files under `snapshots/` and `index/` are ignored and named, not fatal; a lying
//! index never makes `push` write a record nobody can pull, and a second push repairs one;
//! a FIFO or a device in a `file://` remote is refused at once, never waited on; remote refs by name and
//! `agent/<alias>` work in pull, checkout, diff and mount; the trees pack must be the
//! trees-only pack of its snapshot; a record is checked against its id (another snapshot's
//! valid record is refused); remote `forget` and `gc` delete only what no snapshot reaches,
//! after the grace period, even with a push paused at each step (the race helper also runs
//! on the S3 server, in `remote_s3`); a huge unrelated index does not inflate a pull.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::export::Install;
use crate::remote::{tree, Fleet};
use crate::util::{blake3_hex, bytes, write, BIN};

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Every JSON document in `text` (one per gc run).
fn docs(text: &str) -> Vec<serde_json::Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .map(|v| v.unwrap_or_else(|e| panic!("{e}: {text}")))
        .collect()
}

fn pack_names(f: &Fleet) -> Vec<String> {
    names(&f.env.path("remote/packs"))
}

fn packs_under(root: &Path) -> Vec<String> {
    names(&root.join("packs"))
}

#[test]
fn stray_files_are_ignored_and_named() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 50);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let remote = f.env.path("remote");
    write(
        &remote.join("snapshots/README"),
        b"this bucket holds bundles\n",
    );
    write(&remote.join("index/notes.txt"), b"notes\n");
    write(&remote.join("packs/old.tar"), b"junk\n");
    // A nested entry whose last component is a real id: not the record's key.
    write(&remote.join(format!("snapshots/sub/{id}")), b"junk\n");
    f.host("b", &[]);
    let r = f.on("b", &["list", "--remote", "origin"]).ok();
    assert!(r.stdout().contains(&id[..16]), "{}", r.describe());
    assert!(
        r.stderr()
            .contains("ignored snapshots/README: not named by a snapshot id"),
        "{}",
        r.describe()
    );
    let r = f.on("b", &["pull", &format!("origin/{}", &id[..12])]).ok();
    assert!(
        r.stderr()
            .contains("ignored index/notes.txt: not named <pack-id>.idx"),
        "{}",
        r.describe()
    );
    f.on("b", &["verify"]).ok();
}

/// A lying index (it lists objects its pack does not hold) is not trusted by push, and a
/// record already on the remote whose objects are gone is repaired by pushing again.
#[test]
fn a_lying_index_never_makes_push_write_an_unpullable_record() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 51);
    f.host("a", &[]);
    let first = f.snapshot("a", &src);
    f.on("a", &["push", &first]).ok();
    let remote = f.env.path("remote");
    let idx = remote.join("index").join(&names(&remote.join("index"))[0]);
    // A new file, and the first pack's index poisoned to claim it.
    let new = bytes(5151, 70_000);
    write(&src.join("new.bin"), &new);
    let second = f.snapshot("a", &src);
    let mut text = fs::read_to_string(&idx).unwrap();
    text.push_str(&format!("{}\n", blake3_hex(&new)));
    fs::write(&idx, &text).unwrap();
    let v = f.on("a", &["--json", "push", &second]).ok().json();
    assert!(
        v["objects"].as_u64().unwrap() >= 2,
        "new.bin and its tree go up: {v}"
    );
    f.host("b", &[]);
    f.pull_and_check("b", &second, &src);

    // The record is listed but what it reaches is gone (its pack and index deleted), and
    // the lying index still claims new.bin: the next push uploads again instead of answering
    // "already there".
    let first_pack = idx.file_stem().unwrap().to_string_lossy().into_owned();
    for p in pack_names(&f) {
        let pid = p.trim_end_matches(".zcpack").to_string();
        if pid != first_pack {
            fs::remove_file(remote.join("packs").join(&p)).unwrap();
            let _ = fs::remove_file(remote.join("index").join(format!("{pid}.idx")));
        }
    }
    f.host("c", &[]);
    f.on("c", &["pull", &format!("origin/{second}")])
        .fails(1, "no snapshot was added");
    let v = f.on("a", &["--json", "push", &second]).ok().json();
    assert_eq!(v["already"].as_bool(), Some(false), "{v}");
    f.pull_and_check("c", &second, &src);
    f.assert_consistent("probe");
}

/// A FIFO where a pack or a record should be, or a symlink to `/dev/zero`: the pull
/// (which opens both by key; listings skip what is not a regular file) is refused at once, naming the file and what it is, instead of waiting in open(2)
/// for a writer (until a signal) or reading without end; nothing is imported and no
/// temporary file is left. Each run has a deadline, so a regression fails instead of hanging.
#[test]
fn a_fifo_or_device_in_a_file_remote_is_refused_at_once() {
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 52);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", &[]);
    let pack = pack_names(&f)[0].clone();
    let saved = f.env.path("saved");
    fs::create_dir_all(&saved).unwrap();
    let pull = ["pull".to_string(), format!("origin/{id}")];
    let diff = [
        "diff".to_string(),
        format!("origin/{id}"),
        src.to_string_lossy().into_owned(),
    ];
    let cases = [
        (format!("packs/{pack}"), "FIFO", &pull[..], 1),
        (format!("packs/{pack}"), "character device", &pull, 1),
        // diff's exit code for trouble is 2 (1 means "they differ").
        (format!("trees/{id}.zcpack"), "FIFO", &diff[..], 2),
    ];
    for (key, what, args, code) in cases {
        let at = f.env.path("remote").join(&key);
        let keep = saved.join("original");
        fs::rename(&at, &keep).unwrap();
        if what == "FIFO" {
            let st = std::process::Command::new("mkfifo")
                .arg(&at)
                .status()
                .unwrap();
            assert!(st.success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &at).unwrap();
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = crate::util::run_within(f.command("b", &args), Duration::from_secs(60)).fails(
            code,
            &format!("{}: it is a {what}, not a regular file", at.display()),
        );
        let listed = f.on("b", &["--json", "list"]).ok().json();
        assert_eq!(listed.as_array().unwrap().len(), 0, "{key}: {listed}");
        let left: Vec<_> = names(&f.env.path("b").join("tmp"))
            .into_iter()
            .filter(|n| n.starts_with("pull-"))
            .collect();
        assert!(left.is_empty(), "{key}: {left:?}\n{}", run.describe());
        fs::remove_file(&at).unwrap();
        fs::rename(&keep, &at).unwrap();
    }
    f.pull_and_check("b", &id, &src);
}

/// `NAME/<name>` and `NAME/agent/<alias>` (the newest snapshot of that agent on the remote)
/// in pull, checkout, diff and mount.
#[test]
fn remote_refs_by_name_and_agent() {
    let f = Fleet::file();
    let install = Install::new(&f.env);
    let inst = install.root.to_string_lossy().into_owned();
    f.host("a", &[]);
    let older = f
        .on("a", &["snapshot", "researcher", "--install", &inst])
        .ok()
        .last_line();
    write(
        &install.root.join("agents/researcher/workspace/later.md"),
        b"written later\n",
    );
    let newer = f
        .on("a", &["snapshot", "researcher", "--install", &inst])
        .ok()
        .last_line();
    assert_ne!(older, newer);
    let src = tree(&f.env.path("src"), 53);
    let named = f
        .on(
            "a",
            &[
                "snapshot",
                "--dir",
                &src.to_string_lossy(),
                "--name",
                "release-1",
            ],
        )
        .ok()
        .last_line();
    // Pushed newest first: the remote's order of arrival must not decide.
    for id in [&newer, &older, &named] {
        f.on("a", &["push", id]).ok();
    }
    f.host("b", &[]);
    let got = f.on("b", &["pull", "origin/release-1"]).ok().last_line();
    assert_eq!(got, named);
    let got = f
        .on("b", &["pull", "origin/agent/researcher"])
        .ok()
        .last_line();
    assert_eq!(got, newer);
    f.on("b", &["diff", "origin/release-1", &src.to_string_lossy()])
        .ok();
    f.on(
        "b",
        &[
            "diff",
            "origin/release-1:shared",
            &src.join("shared").to_string_lossy(),
        ],
    )
    .ok();
    f.host("c", &[]);
    let out = f.env.path("co-c");
    let r = f
        .on(
            "c",
            &[
                "checkout",
                "origin/agent/researcher",
                "--out",
                &out.to_string_lossy(),
            ],
        )
        .ok();
    assert_eq!(r.last_line(), newer);
    let found = walk(&out).into_iter().any(|p| p.ends_with("later.md"));
    assert!(found, "the newest export was checked out");
    if crate::mount::fuse_available() {
        crate::remote_read::with_remote_mount(&f, "origin/release-1", |mnt| {
            assert_eq!(
                fs::read(mnt.join("shared/notes.md")).unwrap(),
                b"shared notes\n"
            );
        });
    }
}

/// The remote trees pack must be the trees-only pack of that snapshot: another snapshot's
/// trees pack, or the snapshot's own full pack, copied over it is refused, each for its own
/// reason.
#[test]
fn a_substituted_trees_pack_is_refused() {
    let f = Fleet::file();
    let one = tree(&f.env.path("one"), 54);
    let two = tree(&f.env.path("two"), 55);
    f.host("a", &[]);
    let a = f.snapshot("a", &one);
    let b = f.snapshot("a", &two);
    f.on("a", &["push", &a]).ok();
    f.on("a", &["push", &b]).ok();
    let trees = f.env.path("remote/trees");
    let target = trees.join(format!("{b}.zcpack"));
    fs::copy(trees.join(format!("{a}.zcpack")), &target).unwrap();
    f.host("b", &[]);
    let r = f
        .on(
            "b",
            &["diff", &format!("origin/{b}"), &two.to_string_lossy()],
        )
        .fails(2, "is not the trees-only pack of snapshot");
    assert!(
        r.stderr().contains(&format!("(it carries {})", &a[..12])),
        "{}",
        r.describe()
    );
    let full = f.env.path("full.zcpack");
    f.on("a", &["pack", &b, "--out", &full.to_string_lossy()])
        .ok();
    fs::copy(&full, &target).unwrap();
    let r = f
        .on(
            "b",
            &["diff", &format!("origin/{b}"), &two.to_string_lossy()],
        )
        .fails(2, "is not the trees-only pack of snapshot");
    assert!(
        r.stderr()
            .contains(&format!("(it carries {}, with blobs)", &b[..12])),
        "{}",
        r.describe()
    );
}

/// Another snapshot's valid record stored under an id is refused by the hash check (the
/// decoder alone would accept it), and nothing is imported.
#[test]
fn another_snapshots_record_under_an_id_is_refused() {
    let f = Fleet::file();
    let one = tree(&f.env.path("one"), 56);
    let two = tree(&f.env.path("two"), 57);
    f.host("a", &[]);
    let a = f.snapshot("a", &one);
    let b = f.snapshot("a", &two);
    f.on("a", &["push", &a]).ok();
    f.on("a", &["push", &b]).ok();
    let snaps = f.env.path("remote/snapshots");
    fs::copy(snaps.join(&a), snaps.join(&b)).unwrap();
    f.host("b", &[]);
    f.on("b", &["pull", &format!("origin/{b}")])
        .fails(1, &format!("snapshots/{b}: hashes to {}", &a[..12]));
    let r = f.on("b", &["list", "--remote", "origin"]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stdout().contains(&a[..16]) && !r.stdout().contains(&b[..16]));
    let listed = f.on("b", &["--json", "list"]).ok().json();
    assert_eq!(listed.as_array().unwrap().len(), 0, "{listed}");
}

const WINDOW_MS: &str = "1000";

/// Every snapshot the remote lists pulls into a fresh store `probe` and verifies there (what
/// `Fleet::assert_consistent` checks, with the remote's extra options).
fn consistent(f: &Fleet, probe: &str, extra: &[&str]) {
    let _ = fs::remove_dir_all(f.env.path(probe));
    f.host(probe, extra);
    for id in f.remote_ids(probe) {
        f.on(probe, &["pull", &format!("origin/{id}")]).ok();
    }
    f.on(probe, &["verify"]).ok();
}

fn gc_on(f: &Fleet, host: &str, grace: &str) -> serde_json::Value {
    f.on_with(
        host,
        &["--json", "remote", "gc", "origin", "--grace", grace],
        &[("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS", WINDOW_MS)],
    )
    .ok()
    .json()
}

/// `remote forget` then `remote gc`: marked by the first run, deleted by a run after the
/// grace period; what other snapshots reach stays; a grace under twice the push window is
/// refused.
pub fn forget_then_gc(f: &Fleet, extra: &[&str]) {
    let src = tree(&f.env.path("src"), 58);
    f.host("a", extra);
    f.host("c", extra);
    let keep = f.snapshot("a", &src);
    f.on("a", &["push", &keep]).ok();
    write(&src.join("only-in-second.bin"), &bytes(582, 90_000));
    let gone = f.snapshot("a", &src);
    f.on("a", &["push", &gone]).ok();
    f.on_with(
        "c",
        &["remote", "gc", "origin", "--grace", "1"],
        &[("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS", WINDOW_MS)],
    )
    .fails(1, "grace period must be at least 2 s");
    let v = gc_on(f, "c", "2");
    assert_eq!(v["marked"].as_u64(), Some(0), "{v}");
    f.on("c", &["remote", "forget", "origin", &gone[..12]]).ok();
    // The forgotten record's trees pack goes by its own age (written at the push), not by a
    // mark: on a loaded machine the push is already past the grace period at the first run
    // after the forget, so it is counted over the runs, and must be gone by the last.
    let mut deleted_trees = 0;
    let v = gc_on(f, "c", "2");
    assert_eq!(v["marked"].as_u64(), Some(1), "{v}");
    assert_eq!(v["deleted_packs"].as_u64(), Some(0), "{v}");
    deleted_trees += v["deleted_trees"].as_u64().unwrap();
    let v = gc_on(f, "c", "2");
    assert_eq!(
        (v["marked"].as_u64(), v["marked_young"].as_u64()),
        (Some(0), Some(1)),
        "{v}"
    );
    deleted_trees += v["deleted_trees"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(2600));
    let v = gc_on(f, "c", "2");
    assert_eq!(v["deleted_packs"].as_u64(), Some(1), "{v}");
    assert_eq!(v["deleted_indexes"].as_u64(), Some(1), "{v}");
    deleted_trees += v["deleted_trees"].as_u64().unwrap();
    assert_eq!(
        deleted_trees, 1,
        "the forgotten record's trees pack, once: {v}"
    );
    f.on("c", &["pull", &format!("origin/{gone}")])
        .fails(1, "has no snapshot");
    consistent(f, "probe", extra);
    let v = gc_on(f, "c", "2");
    assert_eq!(v["deleted_packs"].as_u64(), Some(0), "{v}");
    assert_eq!(v["marked"].as_u64(), Some(0), "{v}");
}

#[test]
fn file_remote_forget_then_gc() {
    forget_then_gc(&Fleet::file(), &[]);
}

/// A push paused at each step while `gc` runs on another store. Round 1: the pause lasts
/// past the grace period and two gc runs (mark, then delete) strike, including the pack the
/// push chose to rely on when it started: the push must then refuse to write its record, and
/// the remote stays consistent. Round 2: a gc deleting aged garbage strikes mid-push: the
/// push completes, its snapshot pulls, and its pack is never deleted.
pub fn gc_races_a_paused_push(f: &Fleet, remote_root: &Path, extra: &[&str]) {
    let seams = [
        "remote-after-marks",
        "remote-after-pack",
        "remote-after-index",
        "remote-after-trees",
    ];
    for (round, seam) in seams.iter().enumerate() {
        let _ = fs::remove_dir_all(f.env.path("src"));
        let src = tree(&f.env.path("src"), 60 + round as u64);
        let (a, c) = (format!("a{round}"), format!("c{round}"));
        f.host(&a, extra);
        f.host(&c, extra);
        // Garbage that shares objects with what `a` pushes next (unmarked yet).
        let old = f.snapshot(&a, &src);
        f.on(&a, &["push", &old]).ok();
        f.on(&c, &["remote", "forget", "origin", &old]).ok();
        write(&src.join("new.bin"), &bytes(600 + round as u64, 40_000));
        let new = f.snapshot(&a, &src);
        let log = f.env.path(&format!("gc-{round}.log"));
        let gc = format!(
            "ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS={WINDOW_MS} '{BIN}' --json --store '{}' remote gc origin --grace 2 >>'{}' 2>&1",
            f.store(&c),
            log.display()
        );
        let r = f.on_with(
            &a,
            &["push", &new],
            &[
                ("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS", WINDOW_MS),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
                (
                    "ZEROCLAW_BUNDLE_TEST_HOOK_CMD",
                    &format!("{gc}; sleep 2.6; {gc}"),
                ),
            ],
        );
        let runs = docs(&fs::read_to_string(&log).unwrap_or_default());
        assert_eq!(runs.len(), 2, "{seam}: {runs:?}");
        assert!(
            runs[1]["deleted_packs"].as_u64().unwrap() >= 1,
            "{seam}: the second gc deleted what the first marked: {runs:?}"
        );
        r.fails(
            1,
            "took longer than 1 s since it read the remote's gc marks",
        );
        consistent(f, &format!("probe{round}"), extra);
        // Pushed again, within the window: it completes and pulls.
        f.on_with(
            &a,
            &["push", &new],
            &[("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS", WINDOW_MS)],
        )
        .ok();
        f.pull_and_check(&format!("probe{round}"), &new, &src);

        // Round 2: aged garbage, then one gc mid-push.
        f.on(&c, &["remote", "forget", "origin", &new]).ok();
        gc_on(f, &c, "2");
        std::thread::sleep(Duration::from_millis(2600));
        write(&src.join("newer.bin"), &bytes(700 + round as u64, 40_000));
        let newer = f.snapshot(&a, &src);
        let r = f.on_with(
            &a,
            &["--json", "push", &newer],
            &[
                ("ZEROCLAW_BUNDLE_TEST_REMOTE_WINDOW_MS", "60000"),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &gc.replace(">>", ">")),
            ],
        );
        let runs = docs(&fs::read_to_string(&log).unwrap_or_default());
        assert_eq!(runs.len(), 1, "{seam}: {runs:?}");
        assert!(
            runs[0]["deleted_packs"].as_u64().unwrap() >= 1,
            "{seam}: {runs:?}"
        );
        let pushed = r.ok().json();
        let pack = pushed["pack"].as_str().unwrap().to_string();
        assert!(
            packs_under(remote_root).contains(&format!("{pack}.zcpack")),
            "{seam}: the pushing host's pack survived the gc"
        );
        f.pull_and_check(&format!("probe{round}"), &newer, &src);
        consistent(f, &format!("probe{round}"), extra);
    }
}

#[test]
fn file_remote_gc_races_a_paused_push() {
    let f = Fleet::file();
    let root = f.env.path("remote");
    gc_races_a_paused_push(&f, &root, &[]);
}

/// Peak RSS (KiB) of `args` on `host`, through /usr/bin/time.
fn peak_kib(f: &Fleet, host: &str, args: &[&str]) -> u64 {
    let mut c = std::process::Command::new("/usr/bin/time");
    c.args(["-f", "peak-kib=%M", BIN])
        .arg("--store")
        .arg(f.store(host))
        .args(args)
        .env_remove("AWS_PROFILE");
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("peak-kib="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr}"))
}

/// An index of 400,000 ids (26 MB) for an unrelated pack: a pull's peak memory grows by
/// less than 8 MiB (it streamed the index, keeping only ids it needed).
#[test]
fn a_huge_unrelated_index_does_not_inflate_pull() {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("skipping: no /usr/bin/time");
        return;
    }
    let f = Fleet::file();
    let src = tree(&f.env.path("src"), 59);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", &[]);
    let base = peak_kib(&f, "b", &["pull", &format!("origin/{id}")]);
    // The unrelated pack: any existing pack's bytes under another name, and a huge index.
    let packs = f.env.path("remote/packs");
    let other = blake3_hex(b"unrelated");
    fs::copy(
        packs.join(&pack_names(&f)[0]),
        packs.join(format!("{other}.zcpack")),
    )
    .unwrap();
    let mut idx = String::from("zeroclaw-bundle remote index 1\n");
    for i in 0..400_000u32 {
        // Well-formed ids (64 lowercase hex digits) that name nothing.
        idx.push_str(&format!("{i:064x}"));
        idx.push('\n');
    }
    write(
        &f.env.path(&format!("remote/index/{other}.idx")),
        idx.as_bytes(),
    );
    let _ = fs::remove_dir_all(f.env.path("b2"));
    f.host("b2", &[]);
    let big = peak_kib(&f, "b2", &["pull", &format!("origin/{id}")]);
    eprintln!("pull peak: {base} KiB without the huge index, {big} KiB with it");
    assert!(
        big < base + 8 * 1024,
        "pull peak grew from {base} KiB to {big} KiB with an unrelated 26 MB index"
    );
}
