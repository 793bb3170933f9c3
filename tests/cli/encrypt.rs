//! Encrypted packs (`pack --encrypt-to`, `--identity` of the verbs that read one): a standard
//! age file that the `age` command opens and writes, keys made by `ssh-keygen` and
//! `age-keygen`, a wrong identity and every kind of changed byte refused with nothing
//! imported, a recipient that does not parse named.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{assert_same_tree, bytes, contains, write, TestEnv};

/// A marker planted in contents and in names: it must never appear in an encrypted file.
pub const MARKER: &[u8] = b"PLAINTEXT-MARKER-7c1e";

/// An age identity made by `age-keygen`: (identity file, its recipient).
pub fn age_key(env: &TestEnv, name: &str) -> (PathBuf, String) {
    let file = env.path(name);
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(&file)
        .output()
        .expect("age-keygen (apt-get install age)");
    assert!(out.status.success(), "{out:?}");
    let text = fs::read_to_string(&file).unwrap();
    let recipient = text
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("age-keygen names the public key")
        .to_string();
    (file, recipient)
}

/// An SSH key made by `ssh-keygen` (`kind`: ed25519 or rsa), no passphrase: (private key,
/// public key line).
pub fn ssh_key(env: &TestEnv, name: &str, kind: &str) -> (PathBuf, String) {
    let file = env.path(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", "test", "-f"])
        .arg(&file)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "{out:?}");
    let public = fs::read_to_string(format!("{}.pub", file.display())).unwrap();
    (file, public.trim().to_string())
}

/// A tree with the marker in a file's content and in a file's name.
pub fn marked_tree(env: &TestEnv, name: &str) -> PathBuf {
    let src = env.path(name);
    let mut note = b"private note: ".to_vec();
    note.extend_from_slice(MARKER);
    note.push(b'\n');
    write(&src.join("notes.md"), &note);
    let marked_name = format!("dir/{}.txt", String::from_utf8_lossy(MARKER));
    write(&src.join(marked_name), b"named\n");
    write(&src.join("data/big.bin"), &bytes(3, 300_000));
    src
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn an_encrypted_pack_is_an_age_file_both_ways() {
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let (age_id, age_recipient) = age_key(&env, "age.key");
    let (ssh_id, ssh_public) = ssh_key(&env, "id_ed25519", "ed25519");
    let sealed = env.path("p.zcpack.age");
    env.run(&[
        "pack",
        &id,
        "--out",
        &s(&sealed),
        "--encrypt-to",
        &age_recipient,
        &ssh_public,
    ])
    .ok();
    let bytes = fs::read(&sealed).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n"), "an age file");
    assert!(!contains(&bytes, MARKER), "the marker is encrypted");
    assert!(
        !contains(&bytes, id.as_bytes()),
        "the snapshot id is encrypted"
    );

    // By hand: `age -d -i KEY` gives a plain pack this tool reads, with no identity.
    let plain = env.path("plain.zcpack");
    let out = Command::new("age")
        .arg("-d")
        .arg("-i")
        .arg(&age_id)
        .arg("-o")
        .arg(&plain)
        .arg(&sealed)
        .output()
        .expect("age");
    assert!(out.status.success(), "{out:?}");
    let b = env.path("store-b");
    let r = env.run(&["--store", &s(&b), "unpack", &s(&plain)]).ok();
    assert_eq!(r.last_line(), id);

    // The tool itself, with the ssh-keygen key: unpack, diff and checkout agree.
    let c = env.path("store-c");
    let r = env
        .run(&[
            "--store",
            &s(&c),
            "unpack",
            &s(&sealed),
            "--identity",
            &s(&ssh_id),
        ])
        .ok();
    assert_eq!(r.last_line(), id);
    env.run(&["diff", &id, &s(&sealed), "--identity", &s(&age_id)])
        .ok();
    let out = env.path("co");
    env.run(&["--store", &s(&c), "checkout", &id, "--out", &s(&out)])
        .ok();
    assert_same_tree(&src, &out);

    // The other way: a pack the `age` command encrypted to an ssh-keygen RSA key opens here.
    let (rsa_id, _) = ssh_key(&env, "id_rsa", "rsa");
    let by_age = env.path("by-age.zcpack.age");
    let out = Command::new("age")
        .arg("-R")
        .arg(rsa_id.with_extension("pub"))
        .arg("-o")
        .arg(&by_age)
        .arg(&plain)
        .output()
        .expect("age");
    assert!(out.status.success(), "{out:?}");
    let d = env.path("store-d");
    let r = env
        .run(&[
            "--store",
            &s(&d),
            "unpack",
            &s(&by_age),
            "--identity",
            &s(&rsa_id),
        ])
        .ok();
    assert_eq!(r.last_line(), id);
}

#[test]
fn an_encrypted_pack_refuses_a_wrong_identity_and_any_changed_byte() {
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let (_, recipient) = age_key(&env, "right.key");
    let (wrong, _) = age_key(&env, "wrong.key");
    let sealed = env.path("p.zcpack.age");
    env.run(&[
        "pack",
        &id,
        "--out",
        &s(&sealed),
        "--encrypt-to",
        &recipient,
    ])
    .ok();
    let b = TestEnv::new();
    b.run(&["unpack", &s(&sealed), "--identity", &s(&wrong)])
        .fails(1, "no identity given opens it");
    assert!(!b.store.exists(), "nothing imported, no store made");
    // Without --identity: the default key (none here) is named, and nothing is imported.
    b.run_with(
        &["unpack", &s(&sealed)],
        &[("HOME", &s(&env.path("no-home")))],
    )
    .fails(1, "identity");
    assert!(!b.store.exists());

    // A changed byte in the header, the first chunk, a middle chunk, the last chunk, the
    // last byte: each refused as an authentication failure naming the file (a changed magic
    // line is no age file, and no pack either: refused naming the file too).
    let right = env.path("right.key");
    let good = fs::read(&sealed).unwrap();
    let header_end = good.windows(4).position(|w| w == b"\n---").unwrap();
    let n = good.len();
    for at in [10, header_end + 10, header_end + 200, n / 2, n - 100, n - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        let file = env.path(&format!("flipped-{at}.age"));
        fs::write(&file, &bad).unwrap();
        let r = b.run(&["unpack", &s(&file), "--identity", &s(&right)]);
        assert_eq!(r.code(), 1, "byte {at} of {n}: {}", r.describe());
        let err = r.stderr();
        assert!(
            err.contains(&s(&file))
                && (err.contains("authentication failed")
                    || err.contains("opens it")
                    || (at < 21 && err.contains("not a zeroclaw-bundle pack"))),
            "byte {at} of {n}: {}",
            r.describe()
        );
        assert!(!b.store.exists(), "byte {at}: nothing imported");
    }
    // And the untouched file still opens.
    b.run(&["unpack", &s(&sealed), "--identity", &s(&right)])
        .ok();
}

#[test]
fn a_recipient_that_does_not_parse_is_named_and_nothing_is_written() {
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let out = env.path("p.age");
    for bad in ["age1notarecipient", "ssh-ed25519 AAAAnotbase64", "hunter2"] {
        env.run(&["pack", &id, "--out", &s(&out), "--encrypt-to", bad])
            .fails(1, &format!("{bad:?}"));
        assert!(!out.exists(), "{bad}: no pack written");
    }
}

#[test]
fn a_passphrase_protected_key_without_a_terminal_is_refused_clearly() {
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let key = env.path("locked");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "correct horse", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let public = fs::read_to_string(key.with_extension("pub")).unwrap();
    let sealed = env.path("p.age");
    env.run(&[
        "pack",
        &id,
        "--out",
        &s(&sealed),
        "--encrypt-to",
        public.trim(),
    ])
    .ok();
    let b = TestEnv::new();
    b.run(&["unpack", &s(&sealed), "--identity", &s(&key)])
        .fails(1, "no terminal to ask for it on");
    assert!(!b.store.exists());
}

#[test]
fn an_encrypted_pack_mounts_with_its_identity() {
    if !crate::mount::fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let (key, recipient) = age_key(&env, "k");
    let sealed = env.path("p.age");
    env.run(&[
        "pack",
        &id,
        "--out",
        &s(&sealed),
        "--encrypt-to",
        &recipient,
    ])
    .ok();
    let empty = TestEnv::new();
    let mnt = empty.path("mnt");
    let arg = format!("{}", sealed.display());
    let _m = crate::mount::mount_daemon_with(&empty, &arg, &mnt, &["--identity", &s(&key)]);
    assert_same_tree(&src, &mnt);
}

/// `review` and `import` of an encrypted pack of an agent bundle: with the identity, the same
/// content id as the bundle and an import; with a wrong one, a clear error and the install
/// untouched.
#[test]
fn an_encrypted_agent_pack_reviews_and_imports_with_its_identity_only() {
    let env = TestEnv::new();
    let (_, bundle) = crate::import::our_bundle(&env);
    let v = env.run(&["--json", "review", &s(&bundle)]).ok().json();
    let (root, snapshot) = (
        v["root"].as_str().unwrap().to_string(),
        v["snapshot"].as_str().unwrap().to_string(),
    );
    let (key, recipient) = age_key(&env, "k.key");
    let (wrong, _) = age_key(&env, "wrong.key");
    let sealed = env.path("researcher.zcpack.age");
    env.run(&[
        "pack",
        &snapshot,
        "--out",
        &s(&sealed),
        "--encrypt-to",
        &recipient,
    ])
    .ok();
    let other = TestEnv::new();
    let v = other
        .run(&["--json", "review", &s(&sealed), "--identity", &s(&key)])
        .ok()
        .json();
    assert_eq!(v["root"].as_str(), Some(root.as_str()), "{v}");
    let y = crate::import::onboarded(&env, "y");
    let before = crate::import::state(&y);
    let fresh = TestEnv::new();
    fresh
        .run(&[
            "import",
            &s(&sealed),
            "--install",
            &s(&y),
            "--expect",
            &root,
            "--identity",
            &s(&wrong),
        ])
        .fails(1, "no identity given opens it");
    assert_eq!(crate::import::state(&y), before, "the install is untouched");
    assert_eq!(fresh.snapshot_count(), 0, "nothing captured");
    fresh
        .run(&[
            "import",
            &s(&sealed),
            "--install",
            &s(&y),
            "--expect",
            &root,
            "--identity",
            &s(&key),
        ])
        .ok();
    assert_ne!(crate::import::state(&y), before, "imported");
}

/// `pack --out - --encrypt-to` into `unpack -`: the encrypted stream is recognised by its
/// first bytes and decrypted as it is spooled; a wrong identity or a changed byte on the
/// stream is refused and nothing is imported.
#[test]
fn an_encrypted_pack_streams_through_stdin() {
    let env = TestEnv::new();
    let src = marked_tree(&env, "src");
    let id = env.snapshot(&src);
    let (key, recipient) = age_key(&env, "k.key");
    let (wrong, _) = age_key(&env, "wrong.key");
    let sealed = env.path("p.age");
    let out = env
        .cmd()
        .args(["pack", &id, "--out", "-", "--encrypt-to", &recipient])
        .stdout(fs::File::create(&sealed).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let good = fs::read(&sealed).unwrap();
    assert!(good.starts_with(b"age-encryption.org/v1\n"));
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x10;
    let unpack = |bytes: &[u8], identity: &Path| {
        let b = TestEnv::new();
        let input = env.path("stdin.age");
        fs::write(&input, bytes).unwrap();
        let mut c = b.cmd();
        c.args(["unpack", "-", "--identity", &s(identity)])
            .stdin(fs::File::open(&input).unwrap());
        let r = crate::util::run_command(c);
        let imported = b.store.exists() && b.snapshot_count() > 0;
        (r, imported)
    };
    let (r, imported) = unpack(&good, &key);
    assert_eq!(r.code(), 0, "{}", r.describe());
    assert_eq!(r.last_line(), id);
    assert!(imported);
    let (r, imported) = unpack(&good, &wrong);
    assert!(
        r.code() == 1 && r.stderr().contains("no identity given opens it"),
        "{}",
        r.describe()
    );
    assert!(!imported);
    let (r, imported) = unpack(&bad, &key);
    assert!(
        r.code() == 1 && r.stderr().contains("authentication failed"),
        "{}",
        r.describe()
    );
    assert!(!imported);
}
