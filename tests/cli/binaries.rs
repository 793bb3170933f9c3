//! The two binaries (`src/cmd/entry.rs`). `zeroclaw-bundle` must link neither ZeroClaw's
//! schema nor the remote stack, nor clap, the catalog, signature checks or TOML: that is why it
//! exists (a cold mount reads its binary whole; 1.5 MB, not 37), and it hands every mount that
//! needs one of them to the full binary before anything is mounted.
//! Every other command runs in `zeroclaw-bundle-full` as the same process: its output, exit
//! codes and usage text are the ones a person sees. Without the full binary beside it, the
//! front still mounts, and every other command says what is missing and how to install it.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol, SymbolKind};

use crate::mount::{fuse_available, mount_daemon, mounted};
use crate::util::*;

fn full_binary() -> PathBuf {
    Path::new(BIN).with_file_name("zeroclaw-bundle-full")
}

/// Runs the binary at `bin` (a copy, or the full one) on `env`'s store.
fn run_binary<S: AsRef<OsStr>>(
    bin: &Path,
    env: &TestEnv,
    extra: &[(&str, &str)],
    args: &[S],
) -> Run {
    let mut c = std::process::Command::new(bin);
    c.env("ZEROCLAW_BUNDLE_STORE", &env.store)
        .envs(extra.iter().copied())
        .current_dir(env.dir.path())
        .args(args);
    run_command(c)
}

/// A copy of the front binary with no full binary beside it.
fn front_alone(env: &TestEnv) -> PathBuf {
    let alone = env.path("alone/zeroclaw-bundle");
    fs::create_dir_all(alone.parent().unwrap()).unwrap();
    fs::copy(BIN, &alone).unwrap();
    alone
}

/// The names of the functions a binary defines (its symbol table).
fn defined_functions(path: &Path) -> Vec<String> {
    let bytes = fs::read(path).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    file.symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect()
}

#[test]
fn the_front_links_neither_the_zeroclaw_schema_nor_the_remote_stack_nor_clap() {
    let front = defined_functions(Path::new(BIN));
    let full = defined_functions(&full_binary());
    for marker in [
        "zeroclaw_config",
        "object_store",
        "tokio",
        "rustls",
        "hyper",
        // What a mount of an unsigned snapshot by its full id does not need either: the
        // command line's clap definition, the catalog, signature checks and TOML settings.
        "clap_builder",
        "sled",
        "ssh_key",
        "toml_edit",
    ] {
        // The full binary has them: the symbols are there to be seen (not stripped).
        assert!(
            full.iter().any(|s| s.contains(marker)),
            "zeroclaw-bundle-full defines no {marker} function: are the symbols stripped?"
        );
        // A type's drop glue aside (the trust a mount is given can hold keys; a debug build
        // keeps the glue of a value the front never fills): no code of the crate.
        let linked: Vec<&String> = front
            .iter()
            .filter(|s| s.contains(marker) && !s.contains("drop_in_place"))
            .take(5)
            .collect();
        assert!(
            linked.is_empty(),
            "zeroclaw-bundle links {marker}, which only zeroclaw-bundle-full should: {linked:?}"
        );
    }
}

#[test]
fn other_commands_run_in_the_full_binary_with_its_output_and_exit_codes() {
    let env = TestEnv::new();
    let a = env.path("a");
    let b = env.path("b");
    write(&a.join("f"), b"one\n");
    write(&b.join("f"), b"two\n");
    // diff(1)'s codes: equal 0, different 1, error 2.
    env.run(&[OsStr::new("diff"), a.as_os_str(), a.as_os_str()])
        .ok();
    let different = env.run(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str()]);
    assert_eq!(different.code(), 1, "{}", different.describe());
    assert!(different.stdout().contains('f'), "{}", different.describe());
    env.run(&[
        OsStr::new("diff"),
        a.as_os_str(),
        env.path("nowhere").as_os_str(),
    ])
    .fails(2, "nowhere");
    // A store command, its error and hint.
    env.run(&["list"]).fails(1, "no store");
    // The usage text names the command a person typed, not the full binary.
    let help = env.run(&["export", "--help"]).ok();
    assert!(
        help.stdout()
            .contains("Usage: zeroclaw-bundle [--store DIR]"),
        "{}",
        help.describe()
    );
    assert!(
        !help.stdout().contains("zeroclaw-bundle-full"),
        "{}",
        help.describe()
    );
    env.run(&["expotr"]).fails(2, "unrecognized subcommand");
}

#[test]
fn a_full_binary_of_another_build_refuses_what_a_front_hands_it() {
    let env = TestEnv::new();
    let r = run_binary(
        &full_binary(),
        &env,
        &[("ZEROCLAW_BUNDLE_FRONT_BUILD", "0.0.1 (commit 0123456789ab)")],
        &["list"],
    );
    assert_eq!(r.code(), 1, "{}", r.describe());
    for needle in [
        "0.0.1 (commit 0123456789ab)",
        "zeroclaw-bundle-full",
        "install both",
    ] {
        assert!(r.stderr().contains(needle), "{needle}: {}", r.describe());
    }
    // Through the front, the builds agree.
    env.run(&["list"]).fails(1, "no store");
}

#[test]
fn what_the_full_binary_runs_does_not_inherit_the_front_build() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("f"), b"x\n");
    let seen = env.path("env.txt");
    let cmd = format!("env > '{}'", seen.display());
    env.run_with(
        &["snapshot", "--dir", src.to_str().unwrap()],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "before-commit"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &cmd),
        ],
    )
    .ok();
    let seen = fs::read_to_string(&seen).unwrap();
    assert!(seen.contains("HOOK_SEAM=before-commit"), "{seen}");
    assert!(!seen.contains("ZEROCLAW_BUNDLE_FRONT_BUILD"), "{seen}");
}

#[test]
fn without_the_full_binary_the_front_mounts_and_every_other_command_says_what_is_missing() {
    let env = TestEnv::new();
    let id = crate::mount::sample(&env);
    let alone = front_alone(&env);
    let run_alone = |args: &[&OsStr]| run_binary(&alone, &env, &[], args);
    let list = run_alone(&[OsStr::new("list")]);
    assert_eq!(list.code(), 1, "{}", list.describe());
    for needle in ["zeroclaw-bundle-full", "cargo install"] {
        assert!(list.stderr().contains(needle), "{}", list.describe());
    }
    // A full binary that cannot be run for another reason gets advice for that reason.
    let noexec = env.path("noexec/zeroclaw-bundle");
    fs::create_dir_all(noexec.parent().unwrap()).unwrap();
    fs::copy(BIN, &noexec).unwrap();
    let full = noexec.with_file_name("zeroclaw-bundle-full");
    fs::copy(full_binary(), &full).unwrap();
    chmod(&full, 0o644);
    let denied = run_binary(&noexec, &env, &[], &["list"]);
    assert_eq!(denied.code(), 1, "{}", denied.describe());
    assert!(
        denied.stderr().contains("chmod +x"),
        "{}",
        denied.describe()
    );
    assert!(
        !denied.stderr().contains("install"),
        "{}",
        denied.describe()
    );
    // A remote snapshot is mounted by the full binary: handed over, and the same message.
    fs::write(
        env.store.join("remotes.toml"),
        format!(
            "[remote.origin]\nurl = \"file://{}\"\n",
            env.path("remote").display()
        ),
    )
    .unwrap();
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let remote = run_alone(&[
        OsStr::new("mount"),
        OsStr::new(&format!("origin/{id}")),
        mnt.as_os_str(),
    ]);
    assert_eq!(remote.code(), 1, "{}", remote.describe());
    assert!(
        remote.stderr().contains("zeroclaw-bundle-full"),
        "{}",
        remote.describe()
    );
    assert!(!mounted(&mnt));
    if !fuse_available() {
        return;
    }
    // A snapshot of the store mounts with the front alone (the daemon is the front too).
    let served = run_alone(&[
        OsStr::new("mount"),
        OsStr::new(&id),
        mnt.as_os_str(),
        OsStr::new("--daemon"),
    ]);
    assert_eq!(served.code(), 0, "{}", served.describe());
    let guard = MountedBy { mnt: &mnt };
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
    let umount = run_alone(&[OsStr::new("umount"), mnt.as_os_str()]);
    assert_eq!(umount.code(), 0, "{}", umount.describe());
    assert!(!mounted(&mnt));
    drop(guard);
    // The same binary pair through the usual path still mounts (nothing else changed).
    let _m = mount_daemon(&env, &id, &env.path("mnt2"));
}

#[test]
fn the_front_hands_the_full_binary_every_mount_it_cannot_judge_before_mounting() {
    // Alone (no full binary beside it), the front must refuse, not serve, what it links no
    // code to judge: a reference only the catalog resolves, a signed snapshot (signature
    // checks), trust asked for on the command line or set in the store (TOML), and help.
    let env = TestEnv::new();
    let id = crate::mount::sample(&env);
    let alone = front_alone(&env);
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let handed_over = |args: &[&OsStr], why: &str| {
        let run = run_binary(&alone, &env, &[], args);
        assert_eq!(run.code(), 1, "{why}: {}", run.describe());
        assert!(
            run.stderr().contains("zeroclaw-bundle-full"),
            "{why}: {}",
            run.describe()
        );
        assert!(!mounted(&mnt), "{why}: mounted");
        assert!(
            fs::read_dir(env.store.join("leases"))
                .map(|d| d.count() == 0)
                .unwrap_or(true),
            "{why}: a lease was left"
        );
    };
    let m = mnt.as_os_str();
    let daemon = OsStr::new("--daemon");
    let short = &id[..12];
    // Too short an id prefix for the front to look up: the catalog's (the full binary's).
    handed_over(
        &[OsStr::new("mount"), OsStr::new(&id[..6]), m, daemon],
        "short prefix",
    );
    handed_over(
        &[
            OsStr::new("mount"),
            OsStr::new(&id),
            m,
            OsStr::new("--require-signed"),
        ],
        "--require-signed",
    );
    handed_over(
        &[
            OsStr::new("mount"),
            OsStr::new(&id),
            m,
            OsStr::new("--help"),
        ],
        "--help",
    );
    handed_over(
        &[
            OsStr::new("mount"),
            OsStr::new(&id),
            m,
            OsStr::new("--deamon"),
        ],
        "typo",
    );
    let trust = env.store.join("trust.toml");
    fs::write(&trust, "require_signed = true\n").unwrap();
    handed_over(
        &[OsStr::new("mount"), OsStr::new(&id), m, daemon],
        "trust.toml",
    );
    fs::remove_file(&trust).unwrap();
    // A signature file the store lists (named by its bytes' hash). Whether its bytes are a
    // good signature is the full binary's to check: the front links no signature checks.
    let sigs = env.store.join("signatures").join(&id);
    fs::create_dir_all(&sigs).unwrap();
    let bytes = b"not checked by the front";
    fs::write(sigs.join(format!("{}.sig", blake3_hex(bytes))), bytes).unwrap();
    handed_over(&[OsStr::new("mount"), OsStr::new(&id), m, daemon], "signed");
    fs::remove_dir_all(&sigs).unwrap();
    // A pack that carries a signature (signed with ssh-keygen's key, packed by the full
    // binary): handed over too.
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let key = crate::sign::keygen(&keys, "k", "");
    let other = env.path("other");
    write(&other.join("notes.md"), b"signed\n");
    let signed = env.snapshot(&other);
    env.run(&["sign", &signed, "--key", key.to_str().unwrap()])
        .ok();
    env.run(&["pack", &signed, "--out", "signed.zcpack"]).ok();
    handed_over(
        &[OsStr::new("mount"), OsStr::new("signed.zcpack"), m, daemon],
        "signed pack",
    );
    if !fuse_available() {
        return;
    }
    // An id prefix as `list` shows it: the front alone finds it (no catalog) and serves it.
    let served = run_binary(
        &alone,
        &env,
        &[],
        &[OsStr::new("mount"), OsStr::new(short), m, daemon],
    );
    assert_eq!(served.code(), 0, "{}", served.describe());
    let guard = MountedBy { mnt: &mnt };
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
    let umount = run_binary(&alone, &env, &[], &[OsStr::new("umount"), m]);
    assert_eq!(umount.code(), 0, "{}", umount.describe());
    drop(guard);
    // With the full binary beside it, a prefix the front declines mounts (handed over).
    let _m = mount_daemon(&env, &id[..8], &mnt);
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
}

/// Lazily unmounts on drop if a test failed with the mount up.
struct MountedBy<'a> {
    mnt: &'a Path,
}

impl Drop for MountedBy<'_> {
    fn drop(&mut self) {
        if mounted(self.mnt) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.mnt)
                .status();
        }
    }
}
