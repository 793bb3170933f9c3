//! Signed snapshots. Pins: a signature made by this tool verifies with OpenSSH's own
//! `ssh-keygen -Y verify`, and one made by `ssh-keygen -Y sign` over the same message verifies
//! here (interop both ways, in namespace zeroclaw-bundle@snapshot); two signers on one
//! snapshot; `--require-signed` refuses an unsigned snapshot, a flipped byte, a signature over
//! another snapshot or over the snapshot's root tree id, another namespace, a key not in
//! allowed_signers and an expired `valid-before`, each with one error naming the snapshot and
//! before anything is visible;
//! signatures survive pack, unpack, push, pull, gc and reindex, and gc drops those of a
//! forgotten snapshot; a passphrase-protected key fails clearly without a terminal; no private
//! key bytes reach the store, a pack, a remote or any output; a key held only by ssh-agent
//! signs through `ssh-keygen -Y sign` when `--key` or git's `user.signingkey` gives its public
//! half.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::remote::Fleet;
use crate::util::{assert_nowhere, blake3_hex, contains, read_tree, write, Node, Run, TestEnv};

const NS: &str = "zeroclaw-bundle@snapshot";

/// A new ed25519 key `name` (comment `name`) under `dir`, protected by `passphrase` ("" for
/// none).
pub(crate) fn keygen(dir: &Path, name: &str, passphrase: &str) -> PathBuf {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-C", name, "-N", passphrase, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen is required (scripts/setup.sh installs openssh-client)");
    assert!(out.status.success(), "ssh-keygen failed: {out:?}");
    key
}

fn public(key: &Path) -> String {
    fs::read_to_string(key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

/// The message a snapshot signature signs: the id and a newline (what `echo ID` prints).
fn message(id: &str) -> Vec<u8> {
    format!("{id}\n").into_bytes()
}

/// `ssh-keygen -Y sign -n NS -f KEY` over `msg` (stdin), the armored signature.
fn ssh_sign(key: &Path, ns: &str, msg: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", ns, "-f"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(msg).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "ssh-keygen -Y sign failed: {out:?}");
    out.stdout
}

/// `ssh-keygen -Y verify` of `sig` over `msg` for `principal`: (success, its output).
fn ssh_verify(
    dir: &Path,
    allowed: &Path,
    principal: &str,
    sig: &[u8],
    msg: &[u8],
) -> (bool, String) {
    use std::io::Write;
    let sig_file = dir.join("to-verify.sig");
    fs::write(&sig_file, sig).unwrap();
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-n", NS, "-f"])
        .arg(allowed)
        .args(["-I", principal, "-s"])
        .arg(&sig_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(msg).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The signature files the store keeps for `id` (their bytes), sorted by name.
fn stored(store: &Path, id: &str) -> Vec<Vec<u8>> {
    let dir = store.join("signatures").join(id);
    let mut names: Vec<_> = match fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names.iter().map(|p| fs::read(p).unwrap()).collect()
}

/// Puts `bytes` among the signatures of `id` in `store` as a tampered store, pack or remote
/// would hold them (named by their blake3, as the store names them).
fn plant(store: &Path, id: &str, bytes: &[u8]) {
    let dir = store.join("signatures").join(id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(format!("{}.sig", blake3_hex(bytes))), bytes).unwrap();
}

fn tree(env: &TestEnv, name: &str, content: &str) -> PathBuf {
    let dir = env.path(name);
    write(&dir.join("workspace/notes.md"), content.as_bytes());
    write(&dir.join("config.toml"), b"[agent]\nname = \"x\"\n");
    dir
}

#[track_caller]
fn refused(run: Run, id: &str, reason: &str) {
    let run = run.fails(1, &format!("snapshot {id} refused"));
    assert!(
        run.stderr().contains(reason),
        "lacks {reason:?}\n{}",
        run.describe()
    );
    // One clear error: a single `error:` line.
    assert_eq!(
        run.stderr().matches("error:").count(),
        1,
        "{}",
        run.describe()
    );
}

#[test]
fn interop_with_ssh_keygen_both_ways_and_two_signers() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let bob = keygen(&keys, "bob", "");
    let id = env.snapshot(&tree(&env, "a", "one"));
    let allowed = env.path("allowed_signers");
    fs::write(
        &allowed,
        format!(
            "# the team\nalice@example.com {}\nbob@example.com namespaces=\"{NS}\" {}\n",
            public(&alice),
            public(&bob)
        ),
    )
    .unwrap();

    // This tool signs; OpenSSH verifies.
    let r = env
        .run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    assert_eq!(r.last_line(), id, "{}", r.describe());
    assert!(r.stdout().contains("SHA256:"), "{}", r.describe());
    let ours = stored(&env.store, &id);
    assert_eq!(ours.len(), 1);
    let (ok, out) = ssh_verify(
        &keys,
        &allowed,
        "alice@example.com",
        &ours[0],
        &message(&id),
    );
    println!("ssh-keygen -Y verify of a signature made by zeroclaw-bundle sign:\n{out}");
    assert!(ok, "ssh-keygen refused our signature: {out}");
    assert!(out.contains("Good \"zeroclaw-bundle@snapshot\" signature for alice@example.com"));
    // Not over another message, not in another namespace.
    let (ok, _) = ssh_verify(&keys, &allowed, "alice@example.com", &ours[0], b"other\n");
    assert!(
        !ok,
        "ssh-keygen accepted our signature over another message"
    );

    // Signing again with the same key is a no-op (ed25519 is deterministic).
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    assert_eq!(stored(&env.store, &id).len(), 1);

    // OpenSSH signs; this tool verifies (a second signer on the same snapshot).
    let theirs = ssh_sign(&bob, NS, &message(&id));
    fs::write(env.path("bob.sig"), &theirs).unwrap();
    env.run(&["sign", &id, "--signature", "bob.sig"]).ok();
    assert_eq!(stored(&env.store, &id).len(), 2);
    let show = env
        .run(&["show", &id, "--allowed-signers", "allowed_signers"])
        .ok();
    println!("show of a snapshot signed by both:\n{}", show.stdout());
    for who in ["alice@example.com", "bob@example.com"] {
        assert!(
            show.stdout().contains(&format!("signed by {who} (SHA256:")),
            "{}",
            show.describe()
        );
    }
    let json = env
        .run(&[
            "--json",
            "show",
            &id,
            "--allowed-signers",
            "allowed_signers",
        ])
        .ok()
        .json();
    let sigs = json["signatures"].as_array().unwrap();
    assert_eq!(sigs.len(), 2);
    assert!(sigs.iter().all(|s| s["status"] == "trusted"), "{json}");
    // Without trust configured, the keys are unknown (never trusted by default).
    let show = env.run(&["show", &id]).ok();
    assert_eq!(
        show.stdout()
            .matches("signed by an unknown key SHA256:")
            .count(),
        2
    );
    // list -v names them too.
    let list = env
        .run(&["list", "-v", "--allowed-signers", "allowed_signers"])
        .ok();
    assert!(
        list.stdout().contains("signatures: signed by"),
        "{}",
        list.describe()
    );

    // A signature made by ssh-keygen in another namespace, or over another message, is
    // refused when added (and says how to make a good one).
    fs::write(env.path("git.sig"), ssh_sign(&bob, "git", &message(&id))).unwrap();
    env.run(&["sign", &id, "--signature", "git.sig"])
        .fails(1, "namespace \"git\"");
    fs::write(env.path("other.sig"), ssh_sign(&bob, NS, b"not the id\n")).unwrap();
    env.run(&["sign", &id, "--signature", "other.sig"])
        .fails(1, "does not verify over snapshot");
    assert_eq!(stored(&env.store, &id).len(), 2);

    // The gate passes; the snapshot's id never changed (signatures live beside it).
    env.run(&[
        "checkout",
        &id,
        "--out",
        "out",
        "--require-signed",
        "--allowed-signers",
        "allowed_signers",
    ])
    .ok();
    env.run(&["verify"]).ok();
}

#[test]
fn require_signed_refuses_each_bad_case_before_anything_is_visible() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let mallory = keygen(&keys, "mallory", "");
    let expired = keygen(&keys, "expired", "");
    let allowed = env.path("allowed_signers");
    fs::write(
        &allowed,
        format!(
            "alice@example.com {}\nold@example.com valid-before=\"20200101Z\" {}\n",
            public(&alice),
            public(&expired)
        ),
    )
    .unwrap();
    let gate = ["--require-signed", "--allowed-signers", "allowed_signers"];
    let checkout = |id: &str, out: &str| {
        let mut args = vec!["checkout", id, "--out", out];
        args.extend(gate);
        env.run(&args)
    };
    let good_of = |id: &str| ssh_sign(&alice, NS, &message(id));

    // Unsigned.
    let id = env.snapshot(&tree(&env, "unsigned", "u"));
    refused(checkout(&id, "o1"), &id, "unsigned");
    assert!(
        !env.path("o1").exists(),
        "a refused checkout wrote its destination"
    );

    // A flipped byte in an otherwise good signature (inside the signature bytes: the base64
    // near the end of the armor).
    let id = env.snapshot(&tree(&env, "flipped", "f"));
    let mut sig = good_of(&id);
    let end = sig.windows(5).rposition(|w| w == b"-----").unwrap();
    let body_end = sig[..end].iter().rposition(|b| *b == b'\n').unwrap();
    let at = body_end - 8;
    sig[at] = if sig[at] == b'A' { b'B' } else { b'A' };
    plant(&env.store, &id, &sig);
    refused(checkout(&id, "o2"), &id, "bad signature");

    // A good signature, but over another snapshot.
    let other = env.snapshot(&tree(&env, "other", "o"));
    let id = env.snapshot(&tree(&env, "replayed", "r"));
    plant(&env.store, &id, &good_of(&other));
    refused(checkout(&id, "o3"), &id, "does not verify over snapshot");

    // A good signature over this snapshot's message in another namespace.
    let id = env.snapshot(&tree(&env, "namespace", "n"));
    plant(&env.store, &id, &ssh_sign(&alice, "file", &message(&id)));
    refused(checkout(&id, "o4"), &id, "namespace \"file\"");

    // A key not in allowed_signers.
    let id = env.snapshot(&tree(&env, "unknown", "k"));
    env.run(&["sign", &id, "--key", mallory.to_str().unwrap()])
        .ok();
    refused(checkout(&id, "o5"), &id, "unknown key");

    // A listed key whose entry expired.
    let id = env.snapshot(&tree(&env, "expired", "e"));
    env.run(&["sign", &id, "--key", expired.to_str().unwrap()])
        .ok();
    refused(checkout(&id, "o6"), &id, "valid-before=20200101Z");

    // The same through unpack: a pack carrying only a bad signature is refused before the
    // receiving store exists, and with an existing store before the snapshot is listed.
    let id = env.snapshot(&tree(&env, "packed", "p"));
    plant(&env.store, &id, &good_of(&other));
    env.run(&["pack", &id, "--out", "bad.zcpack"]).ok();
    let mut args = vec!["--store", "recv", "unpack", "bad.zcpack"];
    args.extend(gate);
    refused(env.run(&args), &id, "does not verify");
    assert!(
        !env.path("recv").exists(),
        "a refused unpack created a store"
    );
    env.run(&["--store", "recv", "remote", "add", "x", "file:///nowhere"])
        .ok();
    refused(env.run(&args), &id, "does not verify");
    let list = env.run(&["--store", "recv", "-q", "list"]).ok();
    assert!(!list.stdout().contains(&id), "{}", list.describe());
    // From stdin too.
    let mut c = env.cmd();
    c.args(["--store", "recv", "unpack", "-"]).args(gate);
    c.stdin(fs::File::open(env.path("bad.zcpack")).unwrap());
    refused(crate::util::run_command(c), &id, "does not verify");

    // Adding a good signature later makes it pass; the bad one stays reported.
    plant(&env.store, &id, &good_of(&id));
    env.run(&["pack", &id, "--out", "good.zcpack"]).ok();
    let mut args = vec!["--store", "recv", "unpack", "good.zcpack"];
    args.extend(gate);
    let r = env.run(&args).ok();
    assert!(
        r.stderr().contains("signed by alice@example.com"),
        "{}",
        r.describe()
    );
    let show = env
        .run(&[
            "--store",
            "recv",
            "show",
            &id,
            "--allowed-signers",
            "allowed_signers",
        ])
        .ok();
    assert!(
        show.stdout().contains("bad signature"),
        "{}",
        show.describe()
    );
    assert!(
        show.stdout().contains("signed by alice@example.com"),
        "{}",
        show.describe()
    );

    // --require-signed without an allowed_signers file says what is missing.
    env.run(&["checkout", &id, "--out", "o7", "--require-signed"])
        .fails(1, "no allowed_signers file is set");
    // The store setting makes it the default.
    env.run(&[
        "trust",
        "--allowed-signers",
        "allowed_signers",
        "--require-signed",
        "true",
    ])
    .ok();
    let unsigned = env.snapshot(&tree(&env, "later", "l"));
    refused(
        env.run(&["checkout", &unsigned, "--out", "o8"]),
        &unsigned,
        "unsigned",
    );
    env.run(&["checkout", &id, "--out", "o9"]).ok();
}

#[test]
fn signatures_survive_pack_unpack_gc_and_reindex() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let bob = keygen(&keys, "bob", "");
    let src = tree(&env, "a", "one");
    // --sign on snapshot.
    let r = env
        .snapshot_with(&src, &["--sign", "--key", alice.to_str().unwrap()])
        .ok();
    let id = r.last_line();
    assert!(r.stderr().contains("signed snapshot"), "{}", r.describe());
    // --sign on pack adds the second signer before packing.
    env.run(&[
        "pack",
        &id,
        "--out",
        "p.zcpack",
        "--sign",
        "--key",
        bob.to_str().unwrap(),
    ])
    .ok();
    assert_eq!(stored(&env.store, &id).len(), 2);
    let r = env.run(&["--store", "s2", "unpack", "p.zcpack"]).ok();
    assert_eq!(r.last_line(), id);
    let s2 = env.path("s2");
    assert_eq!(stored(&s2, &id), stored(&env.store, &id));
    // A pack's section is covered by its trailer: a flipped byte there fails verification.
    let mut bytes = fs::read(env.path("p.zcpack")).unwrap();
    let at = bytes.windows(8).position(|w| w == b"ZCBSIGS\0").unwrap() + 40;
    bytes[at] ^= 1;
    fs::write(env.path("broken.zcpack"), &bytes).unwrap();
    env.run(&["--store", "s3", "unpack", "broken.zcpack"])
        .fails(1, "trailer checksum");
    // gc and reindex keep them; the ids are unchanged.
    env.run(&["--store", "s2", "gc", "--grace", "0"]).ok();
    env.run(&["--store", "s2", "reindex"]).ok();
    assert_eq!(stored(&s2, &id).len(), 2);
    env.run(&["--store", "s2", "verify"]).ok();
    // A forgotten snapshot's signatures go with it at the next gc.
    env.run(&["--store", "s2", "forget", &id]).ok();
    let r = env.run(&["--store", "s2", "gc", "--grace", "0"]).ok();
    assert!(r.stdout().contains("2 signatures"), "{}", r.describe());
    assert!(stored(&s2, &id).is_empty());
    // A pack without signatures (a digest) still reads, diffs and unpacks.
    let plain = env.snapshot(&tree(&env, "b", "two"));
    env.run(&["pack", &plain, "--out", "plain.zcpack"]).ok();
    env.run(&["--store", "s4", "unpack", "plain.zcpack"]).ok();
    let d = env.run(&["diff", "p.zcpack", "plain.zcpack"]);
    assert_eq!(d.code(), 1, "{}", d.describe());
    assert!(d.stdout().contains("Signatures:"), "{}", d.describe());
    assert!(d.stdout().contains("unsigned"), "{}", d.describe());
}

#[test]
fn signatures_travel_through_push_and_pull() {
    let f = Fleet::file();
    f.host("a", &[]);
    f.host("b", &[]);
    let keys = f.env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let bob = keygen(&keys, "bob", "");
    let allowed = f.env.path("allowed_signers");
    fs::write(
        &allowed,
        format!(
            "alice@example.com {}\nbob@example.com {}\n",
            public(&alice),
            public(&bob)
        ),
    )
    .unwrap();
    let allowed = allowed.to_str().unwrap();
    let src = tree(&f.env, "src", "one");
    let id = f.snapshot("a", &src);
    // Unsigned on the remote: a gated pull refuses it and b lists nothing.
    f.on("a", &["push", &id]).ok();
    let r = f.on(
        "b",
        &[
            "pull",
            &format!("origin/{id}"),
            "--require-signed",
            "--allowed-signers",
            allowed,
        ],
    );
    refused(r, &id, "unsigned");
    assert!(!f.on("b", &["-q", "list"]).ok().stdout().contains(&id));
    // Signed and pushed again: the remote already has the snapshot, the signature is added.
    let r = f
        .on(
            "a",
            &["push", &id, "--sign", "--key", alice.to_str().unwrap()],
        )
        .ok();
    assert!(r.stderr().contains("added 1 signature"), "{}", r.describe());
    let remote_sigs = f.env.path("remote").join("signatures").join(&id);
    assert_eq!(fs::read_dir(&remote_sigs).unwrap().count(), 1);
    let r = f
        .on(
            "b",
            &[
                "pull",
                &format!("origin/{id}"),
                "--require-signed",
                "--allowed-signers",
                allowed,
            ],
        )
        .ok();
    assert!(
        r.stderr().contains("signed by alice@example.com"),
        "{}",
        r.describe()
    );
    // b countersigns and pushes: the remote keeps both; a pulls and gets the new one.
    f.on("b", &["sign", &id, "--key", bob.to_str().unwrap()])
        .ok();
    f.on("b", &["push", &id]).ok();
    assert_eq!(fs::read_dir(&remote_sigs).unwrap().count(), 2);
    f.on("a", &["pull", &format!("origin/{id}")]).ok();
    assert_eq!(stored(Path::new(&f.store("a")), &id).len(), 2);
    let show = f.on("a", &["show", &id, "--allowed-signers", allowed]).ok();
    for who in ["alice@example.com", "bob@example.com"] {
        assert!(show.stdout().contains(who), "{}", show.describe());
    }
    // A bad signature planted on the remote is refused, and does not hide the good ones.
    let bad = ssh_sign(&bob, "git", &message(&id));
    fs::write(remote_sigs.join(format!("{}.sig", blake3_hex(&bad))), &bad).unwrap();
    f.on("c", &["remote", "add", "origin", &f.url]).ok();
    f.on(
        "c",
        &[
            "pull",
            &format!("origin/{id}"),
            "--require-signed",
            "--allowed-signers",
            allowed,
        ],
    )
    .ok();
    // A remote snapshot whose only signature is bad is refused by a gated mount's check too
    // (the same gate); here a gated checkout of a remote ref, which pulls first.
    let other = f.snapshot("a", &tree(&f.env, "src2", "two"));
    f.on("a", &["push", &other]).ok();
    let dir = f.env.path("remote").join("signatures").join(&other);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(format!("{}.sig", blake3_hex(&bad))), &bad).unwrap();
    let r = f.on(
        "b",
        &[
            "checkout",
            &format!("origin/{other}"),
            "--out",
            &f.env.path("co").to_string_lossy(),
            "--require-signed",
            "--allowed-signers",
            allowed,
        ],
    );
    refused(r, &other, "namespace \"git\"");
    assert!(!f.on("b", &["-q", "list"]).ok().stdout().contains(&other));
}

#[test]
fn keys_never_leak_and_a_protected_key_needs_a_terminal() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let id = env.snapshot(&tree(&env, "a", "one"));
    let runs = [
        env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
            .ok(),
        env.run(&["--json", "sign", &id, "--key", alice.to_str().unwrap()])
            .ok(),
        env.run(&["pack", &id, "--out", "p.zcpack"]).ok(),
        env.run(&["show", &id]).ok(),
    ];
    // Every base64 line of the private key past the first two (which hold the header and
    // the public key) carries secret bytes: none may appear anywhere.
    let text = fs::read_to_string(&alice).unwrap();
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(body.len() > 3, "{text}");
    let pack = fs::read(env.path("p.zcpack")).unwrap();
    let refs: Vec<&Run> = runs.iter().collect();
    for line in body.iter().skip(2).filter(|l| l.len() >= 20) {
        assert_nowhere(&env, &refs, line.as_bytes(), "private key");
        assert!(
            !contains(&pack, line.as_bytes()),
            "the pack holds private key text"
        );
    }
    // And nothing under the store is a private key file.
    for (path, node) in read_tree(&env.store) {
        if let Node::File { content, .. } = node {
            assert!(
                !contains(&content, b"OPENSSH PRIVATE KEY"),
                "{}",
                String::from_utf8_lossy(&path)
            );
        }
    }
    // A passphrase-protected key without a terminal: a clear refusal, nothing signed.
    let locked = keygen(&keys, "locked", "correct horse");
    let other = env.snapshot(&tree(&env, "b", "two"));
    let r = env
        .run(&["sign", &other, "--key", locked.to_str().unwrap()])
        .fails(1, "protected by a passphrase and there is no terminal");
    assert!(
        r.stderr().contains(locked.to_str().unwrap()),
        "{}",
        r.describe()
    );
    assert!(stored(&env.store, &other).is_empty());
    // `--sign` opens the key before the work: a failed key makes no snapshot.
    let before = env.snapshot_count();
    env.snapshot_with(
        &tree(&env, "c", "three"),
        &["--sign", "--key", locked.to_str().unwrap()],
    )
    .fails(1, "passphrase");
    assert_eq!(env.snapshot_count(), before);
    // A missing default key says how to fix it (a public key given as --key signs through
    // ssh-keygen: `a_key_in_ssh_agent_signs_through_ssh_keygen`).
    let home = env.path("home");
    fs::create_dir_all(&home).unwrap();
    env.run_with(
        &["sign", &other],
        &[
            ("HOME", home.to_str().unwrap()),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ],
    )
    .fails(1, "id_ed25519: no such key file");
    // The key git signs with is the default (gpg.format = ssh, user.signingkey = FILE.pub).
    let gitconfig = env.path("gitconfig");
    fs::write(
        &gitconfig,
        format!(
            "[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = {}.pub\n",
            alice.display()
        ),
    )
    .unwrap();
    let r = env
        .run_with(
            &["sign", &other],
            &[
                ("HOME", home.to_str().unwrap()),
                ("GIT_CONFIG_GLOBAL", gitconfig.to_str().unwrap()),
            ],
        )
        .ok();
    assert!(r.stdout().contains("signed snapshot"), "{}", r.describe());
}

/// A snapshot of a small tree, signed with a new ed25519 key `alice`: the key and the id.
fn signed_by_alice(env: &TestEnv) -> (PathBuf, String) {
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let id = env.snapshot(&tree(env, "a", "one"));
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    (alice, id)
}

/// Mounts `id` as a daemon (with `extra` arguments) and returns what its root says of the
/// signatures (the `user.zeroclaw.signatures` attribute), unmounted again.
fn root_note(env: &TestEnv, id: &str, extra: &[&str]) -> String {
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let mut args = vec!["mount", id, mnt.to_str().unwrap(), "--daemon"];
    args.extend(extra);
    env.run(&args).ok();
    let got = Command::new("getfattr")
        .args(["--only-values", "-n", "user.zeroclaw.signatures"])
        .arg(&mnt)
        .output();
    env.run(&["umount", mnt.to_str().unwrap()]).ok();
    let got = got.expect("getfattr (attr package) is installed");
    String::from_utf8_lossy(&got.stdout).into_owned()
}

#[test]
fn a_signed_snapshot_shows_its_signers_at_the_mount_root() {
    if !crate::util::is_root() {
        return; // FUSE tests mount for real (root here); see tests/cli/mount.rs
    }
    let env = TestEnv::new();
    let (alice, id) = signed_by_alice(&env);
    fs::write(
        env.path("allowed_signers"),
        format!("alice@example.com {}\n", public(&alice)),
    )
    .unwrap();
    let value = root_note(
        &env,
        &id,
        &["--require-signed", "--allowed-signers", "allowed_signers"],
    );
    assert!(
        value.contains("signed by alice@example.com (SHA256:"),
        "{value:?}"
    );
    let mnt = env.path("mnt");
    // An unsigned snapshot is not mounted with --require-signed.
    let unsigned = env.snapshot(&tree(&env, "b", "two"));
    refused(
        env.run(&[
            "mount",
            &unsigned,
            mnt.to_str().unwrap(),
            "--require-signed",
            "--allowed-signers",
            "allowed_signers",
        ]),
        &unsigned,
        "unsigned",
    );
}

#[test]
fn a_signed_snapshot_mounted_without_trust_settings_shows_its_signatures_not_unsigned() {
    // The front binary serves unsigned snapshots itself and hands a signed one to the full
    // binary (it links no signature checks): the root must name the signature, never say
    // "unsigned", though nothing on the command line or in the store asks about trust.
    if !crate::util::is_root() {
        return; // FUSE tests mount for real (root here); see tests/cli/mount.rs
    }
    let env = TestEnv::new();
    let (_, id) = signed_by_alice(&env);
    let signed = root_note(&env, &id, &[]);
    assert!(signed.contains("signed by"), "{signed:?}");
    assert!(signed.contains("unknown key"), "{signed:?}");
    assert!(!signed.contains("unsigned"), "{signed:?}");
    let unsigned = env.snapshot(&tree(&env, "b", "two"));
    assert_eq!(root_note(&env, &unsigned, &[]), "unsigned");
}

#[test]
fn import_requires_signatures_like_unpack_and_before_capturing() {
    // Import is an enforcing verb: `--require-signed` and the store's `require_signed` refuse
    // an unsigned pack, snapshot or directory before the install or the store's catalog see it.
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let allowed = env.path("allowed_signers");
    fs::write(&allowed, format!("alice@example.com {}\n", public(&alice))).unwrap();
    let install = crate::export::Install::new(&env);
    let bundle = env.path("bundle");
    let id = crate::export::export(&env, &install, &bundle, &[], &[]).json()["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    env.run(&["pack", &id, "--out", "unsigned.zcpack"]).ok();
    let target = crate::import::onboarded(&env, "target");
    let before = fs::read(target.join("config.toml")).unwrap();
    let import = |store: &str, source: &str, extra: &[&str]| {
        let mut args = vec!["--store", store, "import", source, "--install"];
        let target = target.to_str().unwrap();
        args.extend([target, "--yes"]);
        args.extend(extra);
        env.run(&args)
    };
    let gate = ["--require-signed", "--allowed-signers", "allowed_signers"];

    // An unsigned pack: refused before anything is unpacked.
    refused(import("recv", "unsigned.zcpack", &gate), &id, "unsigned");
    let list = env.run(&["--store", "recv", "-q", "list"]).ok();
    assert!(!list.stdout().contains(&id[..12]), "{}", list.describe());
    assert!(!env.path("recv/signatures").exists());
    // The same snapshot from the store, and the bundle directory, are refused too.
    refused(import("store", &id, &gate), &id, "unsigned");
    let before_list = env.run(&["-q", "list"]).ok().stdout().to_string();
    import("store", "bundle", &gate).fails(1, "a bundle directory carries none");
    assert_eq!(env.run(&["-q", "list"]).ok().stdout(), before_list);
    // The store setting makes it the default.
    env.run(&[
        "--store",
        "recv",
        "trust",
        "--allowed-signers",
        "allowed_signers",
        "--require-signed",
        "true",
    ])
    .ok();
    refused(import("recv", "unsigned.zcpack", &[]), &id, "unsigned");
    let list = env.run(&["--store", "recv", "-q", "list"]).ok();
    assert!(!list.stdout().contains(&id[..12]), "{}", list.describe());
    assert_eq!(fs::read(target.join("config.toml")).unwrap(), before);

    // Signed by a trusted key, it imports.
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    env.run(&["pack", &id, "--out", "signed.zcpack"]).ok();
    import("recv", "signed.zcpack", &[]).ok();
    assert_ne!(fs::read(target.join("config.toml")).unwrap(), before);
}

/// A signature over the snapshot's root tree id (its content id, what `review` prints) is not
/// one over the snapshot: the signed message is the snapshot id, which also binds when,
/// where and as what the content was captured. One made by hand with `echo <root> |
/// ssh-keygen -Y sign`, stored where the snapshot's signatures go, is refused by checkout,
/// import and unpack with `--require-signed`; one over the snapshot id passes.
#[test]
fn a_signature_over_the_root_tree_id_is_not_a_signature_of_the_snapshot() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let allowed = env.path("allowed_signers");
    fs::write(&allowed, format!("alice@example.com {}\n", public(&alice))).unwrap();
    let install = crate::export::Install::new(&env);
    let id = crate::export::export(&env, &install, &env.path("bundle"), &[], &[]).json()
        ["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let root = env.run(&["--json", "show", &id]).ok().json()["root"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(root, id);
    plant(&env.store, &id, &ssh_sign(&alice, NS, &message(&root)));
    let gate = ["--require-signed", "--allowed-signers", "allowed_signers"];

    let mut args = vec!["checkout", &id, "--out", "o"];
    args.extend(gate);
    refused(env.run(&args), &id, "does not verify over snapshot");
    assert!(!env.path("o").exists());

    let target = crate::import::onboarded(&env, "target");
    let before = fs::read(target.join("config.toml")).unwrap();
    let t = target.to_str().unwrap();
    let mut args = vec!["import", &id, "--install", t, "--yes"];
    args.extend(gate);
    refused(env.run(&args), &id, "does not verify over snapshot");
    assert_eq!(fs::read(target.join("config.toml")).unwrap(), before);

    env.run(&["pack", &id, "--out", "root-signed.zcpack"]).ok();
    let mut args = vec!["--store", "recv", "unpack", "root-signed.zcpack"];
    args.extend(gate);
    refused(env.run(&args), &id, "does not verify over snapshot");
    assert!(!env.path("recv").exists());

    // The same key over the snapshot id: accepted.
    plant(&env.store, &id, &ssh_sign(&alice, NS, &message(&id)));
    let mut args = vec!["checkout", &id, "--out", "o"];
    args.extend(gate);
    env.run(&args).ok();
}

/// The one signature stored for snapshot `id`: `ssh-keygen -Y verify` accepts it as
/// `principal` of `allowed`, and a checkout of `id` passes `--require-signed` with `allowed`.
#[track_caller]
fn one_signature_verifies(env: &TestEnv, allowed: &Path, principal: &str, id: &str) -> Vec<u8> {
    let sigs = stored(&env.store, id);
    assert_eq!(sigs.len(), 1, "{principal}");
    let (ok, out) = ssh_verify(env.dir.path(), allowed, principal, &sigs[0], &message(id));
    assert!(ok, "ssh-keygen refused the signature of {principal}: {out}");
    let out = env.path(&format!("out-{}", blake3_hex(&sigs[0])));
    env.run(&[
        "checkout",
        id,
        "--out",
        out.to_str().unwrap(),
        "--require-signed",
        "--allowed-signers",
        allowed.to_str().unwrap(),
    ])
    .ok();
    sigs[0].clone()
}

/// A new key of `ssh-keygen` type arguments `kind` (`["-t", "rsa", "-b", "2048"]`), no
/// passphrase.
fn keygen_of(dir: &Path, name: &str, kind: &[&str]) -> PathBuf {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-N", "", "-C", name])
        .args(kind)
        .arg("-f")
        .arg(&key)
        .output()
        .expect("ssh-keygen is required (scripts/setup.sh installs openssh-client)");
    assert!(out.status.success(), "ssh-keygen failed: {out:?}");
    key
}

#[test]
fn rsa_and_ecdsa_keys_sign_and_verify_both_ways() {
    // RSA (the most common key an operator has) and ECDSA P-256/P-384: this tool's signature
    // verifies with ssh-keygen, and ssh-keygen's with `--require-signed`. RSA signatures are
    // deterministic, so ours is byte for byte the one ssh-keygen makes.
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    for (name, kind, ours) in [
        ("rsa", &["-t", "rsa", "-b", "2048"][..], true),
        ("p256", &["-t", "ecdsa", "-b", "256"], true),
        ("p384", &["-t", "ecdsa", "-b", "384"], true),
        ("p521", &["-t", "ecdsa", "-b", "521"], true),
    ] {
        let key = keygen_of(&keys, name, kind);
        let allowed = env.path(&format!("allowed_{name}"));
        fs::write(&allowed, format!("{name}@example.com {}\n", public(&key))).unwrap();
        let gate = [
            "--require-signed",
            "--allowed-signers",
            allowed.to_str().unwrap(),
        ];
        if ours {
            let id = env.snapshot(&tree(&env, &format!("ours-{name}"), name));
            env.run(&["sign", &id, "--key", key.to_str().unwrap()]).ok();
            let principal = format!("{name}@example.com");
            let sig = one_signature_verifies(&env, &allowed, &principal, &id);
            if name == "rsa" {
                assert_eq!(
                    sig,
                    ssh_sign(&key, NS, &message(&id)),
                    "rsa-sha2-512 is deterministic"
                );
            }
        }
        let id = env.snapshot(&tree(&env, &format!("theirs-{name}"), name));
        fs::write(env.path("theirs.sig"), ssh_sign(&key, NS, &message(&id))).unwrap();
        env.run(&["sign", &id, "--signature", "theirs.sig"]).ok();
        let out = format!("out-theirs-{name}");
        let mut args = vec!["checkout", &id, "--out", &out];
        args.extend(gate);
        let r = env.run(&args).ok();
        assert!(
            r.stderr()
                .contains(&format!("signed by {name}@example.com")),
            "{}",
            r.describe()
        );
    }
}

#[test]
fn allowed_signers_lines_get_ssh_keygens_verdict() {
    // Each allowed_signers file: `--require-signed` accepts the signature exactly when
    // `ssh-keygen -Y verify` does (an unreadable file is refused, as ssh-keygen refuses it).
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let key = keygen(&keys, "p", "");
    let k = public(&key);
    let id = env.snapshot(&tree(&env, "t", "t"));
    env.run(&["sign", &id, "--key", key.to_str().unwrap()]).ok();
    let sig = stored(&env.store, &id).remove(0);
    let cases = [
        format!("p {k}"),
        format!("p {k}\r"),
        format!("  p {k} a comment"),
        format!("\"p\" {k}"),
        format!("p,q {k}"),
        format!("p valid-after=\"20200101\" {k}"),
        format!("p valid-after=20200101 {k}"),
        format!("p valid-before=\"20990101UTC\" {k}"),
        format!("p valid-before=\"209901011200utc\" {k}"),
        format!("p valid-before=\"20200101Z\" {k}"),
        format!("p VALID-AFTER=\"20990101Z\" {k}"),
        format!("p valid-after=\"20990101Z\",valid-before=\"20200101Z\" {k}"),
        format!("p namespaces=\"{NS}\" {k}"),
        format!("p namespaces={NS} {k}"),
        format!("p Namespaces=\"zeroclaw-bundle@*\" {k}"),
        format!("p namespaces=\"git,file\" {k}"),
        format!("p namespaces=\"a b,{NS}\" {k}"),
        format!("p namespaces=\"*,!{NS}\" {k}"),
        format!("p namespaces=\"\" {k}"),
        format!("p namespaces=\"{NS}\", {k}"),
        format!("p foo=\"bar\" {k}"),
        format!("p cert-authority {k}"),
    ];
    for (i, line) in cases.iter().enumerate() {
        let file = env.path(&format!("allowed_{i}"));
        fs::write(&file, format!("# case {i}\n\n{line}\n")).unwrap();
        let (theirs, text) = ssh_verify(&keys, &file, "p", &sig, &message(&id));
        let out = format!("o{i}");
        let ours = env.run(&[
            "checkout",
            &id,
            "--out",
            &out,
            "--require-signed",
            "--allowed-signers",
            file.to_str().unwrap(),
        ]);
        assert_eq!(
            ours.code() == 0,
            theirs,
            "line {line:?}: ssh-keygen says {text}\n{}",
            ours.describe()
        );
    }
}

#[test]
fn a_key_or_allowed_signers_file_too_large_is_refused_not_read_whole() {
    // A typo such as `--key /dev/zero` fails saying so instead of reading without end.
    let env = TestEnv::new();
    let id = env.snapshot(&tree(&env, "t", "t"));
    let big = env.path("big");
    fs::write(&big, vec![b'#'; (1 << 20) + 1]).unwrap();
    env.run(&["sign", &id, "--key", "big"]).fails(
        1,
        "key big: cannot be read: it is larger than 1048576 bytes",
    );
    // A device is refused by type, before any read.
    env.run(&["sign", &id, "--key", "/dev/zero"])
        .fails(1, "it is a character device, not a regular file");
    // An allowed_signers file is refused past 64 MiB (a sparse file: no disk used).
    let huge = fs::File::create(env.path("huge")).unwrap();
    huge.set_len((64 << 20) + 1).unwrap();
    env.run(&["show", &id, "--allowed-signers", "huge"])
        .fails(1, "more than an allowed_signers file can be");
}

#[test]
fn a_remote_stuffed_with_junk_signatures_costs_bounded_requests_and_notices() {
    // Whoever can write to a bucket can fill `signatures/<id>/` with junk: a pull downloads
    // at most as many as a snapshot carries, and names a bounded number of them.
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    fs::write(
        env.path("allowed_signers"),
        format!("alice@example.com {}\n", public(&alice)),
    )
    .unwrap();
    let id = env.snapshot(&tree(&env, "t", "t"));
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    let remote = env.path("remote");
    fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}", remote.display());
    env.run(&["remote", "add", "r", &url]).ok();
    env.run(&["push", &id, "r"]).ok();
    let dir = remote.join("signatures").join(&id);
    // Well-named (a signature id) whose bytes do not hash to the name, then badly named.
    for i in 0..300 {
        fs::write(dir.join(format!("{i:064x}.sig")), b"junk").unwrap();
    }
    for i in 0..3000 {
        fs::write(dir.join(format!("junk{i}")), b"junk").unwrap();
    }
    let recv = [
        "--store",
        "recv",
        "-v",
        "pull",
        &format!("r/{id}"),
        "--allowed-signers",
        "allowed_signers",
    ];
    env.run(&["--store", "recv", "remote", "add", "r", &url])
        .ok();
    let run = env.run(&recv).ok();
    let notices = run.stderr().matches("notice: ").count();
    assert!(notices <= 51, "{notices} notices\n{}", run.describe());
    assert!(
        run.stderr()
            .contains("more keys that are not part of the layout"),
        "{}",
        run.describe()
    );
    let fetched: usize = run
        .stderr()
        .split("signatures ")
        .nth(1)
        .and_then(|t| t.split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no traffic line\n{}", run.describe()));
    // One listing and at most 256 downloads.
    assert!(fetched <= 257, "{fetched} requests\n{}", run.describe());
}

#[test]
fn a_store_full_of_received_signatures_still_unpacks_the_snapshot() {
    // A pack stuffed with junk signatures, unpacked once, must not make every later unpack of
    // that snapshot fail: what is past the bound is left out with a notice naming where.
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    fs::write(
        env.path("allowed_signers"),
        format!("alice@example.com {}\n", public(&alice)),
    )
    .unwrap();
    let id = env.snapshot(&tree(&env, "t", "t"));
    for i in 0..256 {
        plant(&env.store, &id, format!("junk {i}").as_bytes());
    }
    env.run(&["pack", &id, "--out", "junk.zcpack"]).ok();
    fs::remove_dir_all(env.store.join("signatures").join(&id)).unwrap();
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    env.run(&["pack", &id, "--out", "good.zcpack"]).ok();
    env.run(&["--store", "recv", "unpack", "junk.zcpack"]).ok();
    let run = env
        .run(&[
            "--store",
            "recv",
            "unpack",
            "good.zcpack",
            "--require-signed",
            "--allowed-signers",
            "allowed_signers",
        ])
        .ok();
    assert!(
        run.stderr().contains("1 received signature(s) of snapshot")
            && run.stderr().contains("recv/signatures/"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_relative_allowed_signers_in_trust_toml_is_the_stores_not_the_working_directorys() {
    // A hand-edited trust.toml naming `allowed_signers` relatively: an operator unpacking from
    // a directory that holds an attacker's `allowed_signers` must not trust it.
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let mallory = keygen(&keys, "mallory", "");
    let id = env.snapshot(&tree(&env, "t", "t"));
    env.run(&["sign", &id, "--key", mallory.to_str().unwrap()])
        .ok();
    fs::write(
        env.store.join("allowed_signers"),
        format!("alice@example.com {}\n", public(&alice)),
    )
    .unwrap();
    fs::write(
        env.store.join("trust.toml"),
        "allowed_signers = \"allowed_signers\"\nrequire_signed = true\n",
    )
    .unwrap();
    // The working directory holds a file of the same name trusting mallory.
    fs::write(
        env.path("allowed_signers"),
        format!("mallory@example.com {}\n", public(&mallory)),
    )
    .unwrap();
    refused(
        env.run(&["checkout", &id, "--out", "o"]),
        &id,
        "unknown key",
    );
    assert!(!env.path("o").exists());
}

/// `review` says who signed what it reviewed (checked against `--allowed-signers` or the
/// store's trust), "unsigned" for an unsigned snapshot, and a pack's signatures count: they
/// came in with it.
#[test]
fn review_says_who_signed() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let alice = keygen(&keys, "alice", "");
    let id = env.snapshot(&tree(&env, "a", "one"));
    let unsigned = env.run(&["review", &id]).ok();
    assert!(
        unsigned.stdout().contains("Signed: unsigned\n"),
        "{}",
        unsigned.describe()
    );
    env.run(&["sign", &id, "--key", alice.to_str().unwrap()])
        .ok();
    let allowed = env.path("allowed_signers");
    fs::write(&allowed, format!("alice@example.com {}\n", public(&alice))).unwrap();
    let allowed = allowed.to_str().unwrap();
    let trusted = env.run(&["review", &id, "--allowed-signers", allowed]).ok();
    assert!(
        trusted
            .stdout()
            .contains("Signed: signed by alice@example.com (SHA256:"),
        "{}",
        trusted.describe()
    );
    let unknown = env.run(&["review", &id]).ok();
    assert!(
        unknown
            .stdout()
            .contains("Signed: signed by an unknown key"),
        "{}",
        unknown.describe()
    );
    // A pack reviewed in another store: its signatures came in with it.
    let pack = env.path("a.zbpack");
    env.run(&["pack", &id, "--out", pack.to_str().unwrap()])
        .ok();
    let other = env.path("other-store");
    let v = env
        .run(&[
            "--store",
            other.to_str().unwrap(),
            "--json",
            "review",
            pack.to_str().unwrap(),
            "--allowed-signers",
            allowed,
        ])
        .ok()
        .json();
    let sigs = v["signatures"].as_array().expect("signatures in --json");
    assert_eq!(sigs.len(), 1, "{v}");
    assert!(v.to_string().contains("alice@example.com"), "{v}");
}

/// ECDSA keys made by OpenSSH 9.2p1 (Debian 2+deb12u6) `ssh-keygen -t ecdsa`, picked out of
/// many for a private scalar OpenSSH wrote short (an mpint has no leading zero bytes: 31 of 32
/// bytes for P-256, 47 of 48 for P-384, 65 of 66 for P-521), which ssh-key 0.6.7 alone refuses.
/// The `-locked` ones are the same keys under the passphrase "correct horse" (`ssh-keygen -p`;
/// the P-256 one with `-Z aes256-gcm@openssh.com`, an authenticated cipher). Test keys only.
const SHORT_KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/keys");

/// The test key `name` copied under `dir` as 0600 (a checkout makes it 0644, and ssh-keygen
/// refuses a private key others can read), with its public key beside it.
fn short_key(dir: &Path, name: &str, public_of: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join(name);
    fs::copy(Path::new(SHORT_KEYS).join(name), &key).unwrap();
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
    let public = Path::new(SHORT_KEYS).join(format!("{public_of}.pub"));
    fs::copy(public, key.with_extension("pub")).unwrap();
    key
}

/// Signs snapshot `id` with `key` on a tmux terminal, typing `passphrase` at the prompt; the
/// screen once the command ended.
fn sign_on_a_terminal(env: &TestEnv, id: &str, key: &Path, passphrase: &str) -> Option<String> {
    use crate::ux::{screen_until, Tmux};
    let script = env.path("sign.sh");
    fs::write(
        &script,
        format!(
            "cd {dir}\nexport ZEROCLAW_BUNDLE_STORE={store}\n{bin} sign {id} --key {key}\n\
             echo \"EXIT=$?\"\n",
            dir = env.dir.path().display(),
            store = env.store.display(),
            bin = crate::util::BIN,
            key = key.display(),
        ),
    )
    .unwrap();
    let t = Tmux::start("passphrase", &script)?;
    screen_until(&t, |s| s.contains("Enter passphrase for"));
    for keys in [&["-l", passphrase][..], &["Enter"]] {
        let sent = t
            .command()
            .args(["send-keys", "-t", &t.name])
            .args(keys)
            .status()
            .unwrap();
        assert!(sent.success());
    }
    let done = screen_until(&t, |s| s.contains("EXIT="));
    assert!(
        !done.contains(passphrase),
        "the passphrase is never echoed: {done}"
    );
    Some(done)
}

#[test]
fn ecdsa_keys_openssh_wrote_with_a_short_scalar_sign_plain_and_behind_a_passphrase() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    // (the key file, the key it is, whether it is locked)
    let cases = [
        ("p256-short", "p256-short", false),
        ("p384-short", "p384-short", false),
        ("p521-short", "p521-short", false),
        ("p384-short-locked", "p384-short", true),
        ("p256-short-locked-gcm", "p256-short", true),
    ];
    for (file, of, locked) in cases {
        let key = short_key(&keys, file, of);
        let allowed = env.path(&format!("allowed_{file}"));
        fs::write(&allowed, format!("{of}@example.com {}\n", public(&key))).unwrap();
        let id = env.snapshot(&tree(&env, file, file));
        if locked {
            let Some(wrong) = sign_on_a_terminal(&env, &id, &key, "wrong horse") else {
                return;
            };
            assert!(wrong.contains("EXIT=1"), "{file}: {wrong}");
            assert!(wrong.contains("the passphrase is wrong"), "{file}: {wrong}");
            assert!(stored(&env.store, &id).is_empty(), "{file}");
            let done = sign_on_a_terminal(&env, &id, &key, "correct horse").unwrap();
            assert!(done.contains("EXIT=0"), "{file}: {done}");
        } else {
            env.run(&["sign", &id, "--key", key.to_str().unwrap()]).ok();
        }
        one_signature_verifies(&env, &allowed, &format!("{of}@example.com"), &id);
    }
    // A locked key of another type still opens on a terminal (ssh-key's own decryption).
    let locked = keygen(&keys, "locked-ed25519", "correct horse");
    let id = env.snapshot(&tree(&env, "ed", "ed"));
    let done = sign_on_a_terminal(&env, &id, &locked, "correct horse").unwrap();
    assert!(done.contains("EXIT=0"), "{done}");
    assert_eq!(stored(&env.store, &id).len(), 1);
}

/// An `ssh-agent` started for one test on its own socket, stopped (by its process) when
/// dropped.
struct Agent {
    child: std::process::Child,
    sock: PathBuf,
}

impl Agent {
    fn start(dir: &Path) -> Agent {
        let sock = dir.join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent is required (scripts/setup.sh installs openssh-client)");
        let agent = Agent { child, sock };
        for _ in 0..500 {
            if agent.sock.exists() {
                return agent;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("ssh-agent did not open {}", agent.sock.display());
    }

    fn add(&self, key: &Path) {
        let out = Command::new("ssh-add")
            .arg("-q")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.sock)
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-add failed: {out:?}");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key held only by ssh-agent (its private key file is gone) signs when `--key` names its
/// public key, or git's `user.signingkey` holds that key as text: the signing goes to
/// `ssh-keygen -Y sign`, as git's does, and the signature it makes is stored, verifies with
/// OpenSSH, and passes `--require-signed`. Without the agent, the refusal says where the key
/// was looked for, and nothing is stored.
#[test]
fn a_key_in_ssh_agent_signs_through_ssh_keygen() {
    let env = TestEnv::new();
    let keys = env.path("keys");
    fs::create_dir_all(&keys).unwrap();
    let carol = keygen(&keys, "carol", "");
    let agent = Agent::start(env.dir.path());
    agent.add(&carol);
    fs::remove_file(&carol).unwrap();
    let public_file = carol.with_extension("pub");
    let public_line = public(&carol);
    let sock = agent.sock.to_str().unwrap().to_string();
    let with_agent = [
        ("SSH_AUTH_SOCK", sock.as_str()),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ];
    let allowed = env.path("allowed_signers");
    fs::write(&allowed, format!("carol {public_line}\n")).unwrap();

    // --key naming the public key.
    let id = env.snapshot(&tree(&env, "a", "one"));
    let r = env
        .run_with(
            &[
                "--json",
                "sign",
                &id,
                "--key",
                public_file.to_str().unwrap(),
            ],
            &with_agent,
        )
        .ok();
    assert_eq!(r.json()["key_type"], "ssh-ed25519", "{}", r.describe());
    let sigs = stored(&env.store, &id);
    assert_eq!(sigs.len(), 1, "{}", r.describe());
    let (ok, said) = ssh_verify(
        env.dir.path(),
        &allowed,
        "carol",
        &sigs[0],
        format!("{id}\n").as_bytes(),
    );
    assert!(ok, "OpenSSH does not verify the stored signature: {said}");
    env.run(&[
        "checkout",
        &id,
        "--out",
        env.path("co").to_str().unwrap(),
        "--require-signed",
        "--allowed-signers",
        allowed.to_str().unwrap(),
    ])
    .ok();

    // `--sign` of another command, and git's user.signingkey holding the key as text.
    let gitconfig = env.path("gitconfig");
    fs::write(
        &gitconfig,
        format!("[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = key::{public_line}\n"),
    )
    .unwrap();
    let git = [
        ("SSH_AUTH_SOCK", sock.as_str()),
        ("GIT_CONFIG_GLOBAL", gitconfig.to_str().unwrap()),
    ];
    let b = env.path("b");
    write(&b.join("f"), b"two");
    let r = env
        .run_with(&["snapshot", "--dir", b.to_str().unwrap(), "--sign"], &git)
        .ok();
    let second = r.last_line();
    assert_eq!(stored(&env.store, &second).len(), 1, "{}", r.describe());
    let c = env.path("c");
    write(&c.join("f"), b"three");
    let third = env.snapshot(&c);
    env.run_with(&["sign", &third], &git).ok();
    assert_eq!(stored(&env.store, &third).len(), 1);

    // No agent: refused, saying where the key was looked for; nothing stored.
    drop(agent);
    let d = env.path("d");
    write(&d.join("f"), b"four");
    let fourth = env.snapshot(&d);
    env.run_with(
        &["sign", &fourth, "--key", public_file.to_str().unwrap()],
        &with_agent,
    )
    .fails(1, "ssh-agent");
    assert!(stored(&env.store, &fourth).is_empty());
}
