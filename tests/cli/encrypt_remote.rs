//! Encrypted remotes through the S3 server the remote tests start (`s3s-fs`): markers planted
//! in contents and names, then every byte the server keeps is searched for them and for the
//! blake3 ids of what was pushed; a pull with the right identity (an age key, or an ssh-keygen
//! key) gives the same tree and checks the signature carried inside; a wrong identity or none
//! fails clearly with nothing imported; a changed byte in any object is refused; a plaintext
//! remote entry never pushes to an encrypted bucket; recipients are added and removed.

use std::fs;
use std::path::{Path, PathBuf};

use crate::encrypt::{age_key, marked_tree, ssh_key, MARKER};
use crate::remote::Fleet;
use crate::remote_s3::s3_fleet;
use crate::util::{assert_same_tree, blake3_hex, bytes, contains, write};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Every file under `root`: (path relative to it, bytes).
fn all_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The objects of the remote under the prefix (the layout's files), by path.
fn objects(f: &Fleet) -> Vec<PathBuf> {
    let root = f.env.path("s3-root/bundles/fleet/agents");
    let mut out: Vec<PathBuf> = all_files(&root)
        .into_iter()
        .map(|(rel, _)| root.join(rel))
        .collect();
    out.sort();
    out
}

/// A host whose `origin` is the encrypted remote, opened with `identity` (recorded in its
/// remotes.toml with `Some`; with `None`, given only to `remote add`, through
/// `ZEROCLAW_BUNDLE_IDENTITY`, so later commands have none unless they are given one).
fn encrypted_host(f: &Fleet, host: &str, ep: &str, identity: Option<&Path>) {
    encrypted_host_with(f, host, ep, identity, None);
}

fn encrypted_host_with(
    f: &Fleet,
    host: &str,
    ep: &str,
    identity: Option<&Path>,
    env: Option<&Path>,
) {
    let mut args = vec![
        "remote",
        "add",
        "origin",
        &f.url,
        "--endpoint",
        ep,
        "--encrypted",
    ];
    let id;
    if let Some(p) = identity {
        id = s(p);
        args.extend(["--identity", &id]);
    }
    let env_value = env.map(s);
    let vars: Vec<(&str, &str)> = env_value
        .iter()
        .map(|v| ("ZEROCLAW_BUNDLE_IDENTITY", v.as_str()))
        .collect();
    f.on_with(host, &args, &vars).ok();
}

fn snapshot_count(f: &Fleet, host: &str) -> usize {
    let r = f.on(host, &["--json", "list"]);
    if r.code() != 0 {
        return 0;
    }
    r.json().as_array().map_or(0, Vec::len)
}

#[test]
fn s3_encrypted_remote_leaks_nothing_and_refuses_every_change() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let (age_id, age_recipient) = age_key(&f.env, "age.key");
    let (ssh_id, ssh_public) = ssh_key(&f.env, "id_ed25519", "ed25519");
    let (wrong, _) = age_key(&f.env, "wrong.key");
    let src = marked_tree(&f.env, "src");
    // Over the single-request limit: the pack goes up as an encrypted multipart upload.
    write(&src.join("large.bin"), &bytes(61, 17_000_000));
    let pub_file = f.env.path("recipients.txt");
    fs::write(&pub_file, format!("# the fleet\n{ssh_public}\n")).unwrap();
    f.on(
        "a",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypt-to",
            &age_recipient,
            &s(&pub_file),
            "--identity",
            &s(&age_id),
        ],
    )
    .ok();
    let id = f.snapshot("a", &src);
    f.on("a", &["sign", &id, "--key", &s(&ssh_id)]).ok();
    f.on("a", &["push", &id]).ok();

    // Every byte the server keeps, names included: no marker, no id of anything pushed.
    let mut needles: Vec<(String, Vec<u8>)> = vec![
        ("the marker".into(), MARKER.to_vec()),
        ("the snapshot id".into(), id.as_bytes().to_vec()),
    ];
    for (rel, content) in crate::util::files_under(&src) {
        needles.push((
            format!("the blake3 id of {rel}"),
            blake3_hex(&content).into_bytes(),
        ));
    }
    let kept = all_files(&f.env.path("s3-root"));
    assert!(kept.len() >= 6, "{kept:?}");
    for (rel, content) in &kept {
        for (what, needle) in &needles {
            assert!(!contains(rel.as_bytes(), needle), "{what} in the key {rel}");
            assert!(!contains(content, needle), "{what} in the bytes of {rel}");
        }
    }
    let objs = objects(&f);
    for o in &objs {
        let head = fs::read(o).unwrap();
        assert!(
            head.starts_with(b"age-encryption.org/v1\n"),
            "{o:?} is an age file"
        );
    }
    let kinds: Vec<String> = objs
        .iter()
        .map(|o| {
            let rel = o
                .strip_prefix(f.env.path("s3-root/bundles/fleet/agents"))
                .unwrap();
            rel.iter().next().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    for kind in ["keys", "packs", "index", "trees", "signatures", "snapshots"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }

    // The right identity (the ssh-keygen key, through the environment): the same tree, its
    // signature checked (carried inside the encryption).
    let allowed = f.env.path("allowed_signers");
    fs::write(&allowed, format!("ops@example.com {ssh_public}\n")).unwrap();
    encrypted_host_with(&f, "b", &ep, None, Some(&ssh_id));
    let env_id = [("ZEROCLAW_BUNDLE_IDENTITY", s(&ssh_id))];
    let env_id: Vec<(&str, &str)> = env_id.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = f
        .on_with(
            "b",
            &[
                "pull",
                &format!("origin/{id}"),
                "--require-signed",
                "--allowed-signers",
                &s(&allowed),
            ],
            &env_id,
        )
        .ok();
    assert_eq!(r.last_line(), id);
    let out = f.env.path("co-b");
    f.on("b", &["checkout", &id, "--out", &s(&out)]).ok();
    assert_same_tree(&src, &out);
    // Refs, listing and diff work on it too.
    let listed = f
        .on_with("b", &["--json", "list", "--remote", "origin"], &env_id)
        .ok();
    assert!(listed.stdout().contains(&id), "{}", listed.describe());
    f.on_with("b", &["diff", &id, &format!("origin/{id}")], &env_id)
        .ok();

    // A wrong identity, or none: a clear error, nothing imported (adding the remote with a
    // wrong identity is refused the same way).
    f.on(
        "c",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypted",
            "--identity",
            &s(&wrong),
        ],
    )
    .fails(1, "no identity given opens it");
    encrypted_host(&f, "c", &ep, Some(&age_id));
    f.on_with(
        "c",
        &["pull", &format!("origin/{id}")],
        &[("ZEROCLAW_BUNDLE_IDENTITY", &s(&wrong))],
    )
    .fails(1, "no identity given opens it");
    assert_eq!(snapshot_count(&f, "c"), 0);
    encrypted_host_with(&f, "d", &ep, None, Some(&age_id));
    f.on("d", &["pull", &format!("origin/{id}")])
        .fails(1, "identity");
    assert_eq!(snapshot_count(&f, "d"), 0);

    // A plaintext entry for the same bucket never pushes plaintext to it.
    f.on("e", &["remote", "add", "origin", &f.url, "--endpoint", &ep])
        .ok();
    let other = f.snapshot("e", &crate::remote::tree(&f.env.path("src-e"), 9));
    f.on("e", &["push", &other])
        .fails(1, "refusing to push plaintext");
    assert_eq!(objects(&f), objs, "nothing was written");

    // A changed byte anywhere in any object: refused, naming the object, nothing imported.
    // Three bytes of each object: in the age header, in the first chunk, the last byte.
    let mut probe = 0;
    for o in &objs {
        let good = fs::read(o).unwrap();
        let header_end = good.windows(4).position(|w| w == b"\n---").unwrap();
        for at in [header_end / 2, header_end + 60, good.len() - 1] {
            probe += 1;
            let host = format!("probe-{probe}");
            encrypted_host(&f, &host, &ep, Some(&age_id));
            let mut bad = good.clone();
            bad[at] ^= 0x04;
            fs::write(o, &bad).unwrap();
            let is_trees = o.to_string_lossy().contains("/trees/");
            let r = if is_trees {
                // Only a remote diff or mount reads the trees pack.
                f.on_with("b", &["diff", &id, &format!("origin/{id}")], &env_id)
            } else {
                f.on(
                    &host,
                    &[
                        "pull",
                        &format!("origin/{id}"),
                        "--require-signed",
                        "--allowed-signers",
                        &s(&allowed),
                    ],
                )
            };
            let err = r.stderr();
            assert!(
                r.code() != 0
                    && (err.contains("authentication failed")
                        || err.contains("no identity given opens it")
                        || err.contains("keys/keyring.age")),
                "byte {at} of {o:?} changed was not refused\n{}",
                r.describe()
            );
            assert_eq!(snapshot_count(&f, &host), 0, "byte {at} of {o:?}: imported");
            fs::write(o, &good).unwrap();
        }
    }
    drop(server);
}

#[test]
fn s3_recipients_added_and_removed() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let (alice, alice_r) = age_key(&f.env, "alice.key");
    let (bob, bob_r) = ssh_key(&f.env, "bob.ssh", "ed25519");
    f.on(
        "a",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypt-to",
            &alice_r,
            "--identity",
            &s(&alice),
        ],
    )
    .ok();
    let src1 = crate::remote::tree(&f.env.path("src1"), 1);
    let old = f.snapshot("a", &src1);
    f.on("a", &["push", &old]).ok();
    // Bob cannot open it yet (adding the remote checks his identity opens it); added as a
    // recipient, he can, without anything being re-uploaded.
    f.on(
        "bob",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypted",
            "--identity",
            &s(&bob),
        ],
    )
    .fails(1, "no identity given opens it");
    let before = objects(&f).len();
    f.on("a", &["remote", "recipients", "add", "origin", &bob_r])
        .ok();
    assert_eq!(objects(&f).len(), before, "only the key file was rewritten");
    encrypted_host(&f, "bob", &ep, Some(&bob));
    f.pull_and_check("bob", &old, &src1);

    // Bob removed: what was there stays readable by alice; what is pushed from now on, bob
    // cannot read, even with the key file he may have kept.
    let kept_keys = fs::read(key_file(&f)).unwrap();
    f.on("a", &["remote", "recipients", "remove", "origin", &bob_r])
        .ok();
    let src2 = crate::remote::tree(&f.env.path("src2"), 2);
    let new = f.snapshot("a", &src2);
    f.on("a", &["push", &new]).ok();
    encrypted_host(&f, "alice2", &ep, Some(&alice));
    f.pull_and_check("alice2", &old, &src1);
    f.pull_and_check("alice2", &new, &src2);
    f.on("bob", &["pull", &format!("origin/{new}")])
        .fails(1, "no identity given opens it");
    // With the old key file put back (what a removed recipient may have kept), the old data
    // key still cannot open what was pushed after the removal.
    let now_keys = fs::read(key_file(&f)).unwrap();
    fs::write(key_file(&f), &kept_keys).unwrap();
    encrypted_host(&f, "bob2", &ep, Some(&bob));
    let r = f.on("bob2", &["pull", &format!("origin/{new}")]);
    assert_ne!(r.code(), 0, "{}", r.describe());
    assert_eq!(snapshot_count(&f, "bob2"), 0);
    fs::write(key_file(&f), &now_keys).unwrap();
    // A key file replaced by someone who can write to the bucket (encrypting to the
    // recipients needs only their public keys): refused by every host that pinned the key.
    let (evil, _) = age_key(&f.env, "evil.key");
    let evil_secret = fs::read_to_string(&evil)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .unwrap()
        .to_string();
    let forged_plain = f.env.path("forged.txt");
    fs::write(
        &forged_plain,
        format!("zeroclaw-bundle remote keys 1\nrecipient {alice_r}\nkey {evil_secret}\n"),
    )
    .unwrap();
    let out = std::process::Command::new("age")
        .args(["-r", &alice_r, "-o"])
        .arg(key_file(&f))
        .arg(&forged_plain)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let src3 = crate::remote::tree(&f.env.path("src3"), 3);
    let third = f.snapshot("a", &src3);
    f.on("a", &["push", &third]).fails(1, "was replaced");
    f.on("alice2", &["pull", &format!("origin/{new}")])
        .fails(1, "was replaced");
    fs::write(key_file(&f), &now_keys).unwrap();
    // Removing the last recipient is refused.
    f.on("a", &["remote", "recipients", "remove", "origin", &alice_r])
        .fails(1, "only recipient");
    drop(server);
}

fn key_file(f: &Fleet) -> PathBuf {
    f.env.path("s3-root/bundles/fleet/agents/keys/keyring.age")
}

#[test]
fn encrypted_remote_add_names_a_bad_recipient_and_writes_nothing() {
    let f = Fleet::file();
    f.on(
        "a",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--encrypt-to",
            "age1bogus",
        ],
    )
    .fails(1, "\"age1bogus\"");
    assert!(!f.env.path("remote/keys").exists());
    let r = f.on("a", &["remote", "list"]);
    assert!(!r.stdout().contains("origin"), "{}", r.describe());
}

/// A mount of an encrypted remote snapshot reads one file by ranged GETs of the age chunks
/// that hold it: the requests and bytes are counted, and the other large file is not fetched.
#[test]
fn s3_encrypted_remote_mount_reads_only_the_chunks_it_needs() {
    if !crate::mount::fuse_available() {
        return;
    }
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let (key, recipient) = age_key(&f.env, "k.key");
    let src = crate::remote::tree(&f.env.path("src"), 7);
    write(&src.join("big/one.bin"), &bytes(70, 400_000));
    write(&src.join("big/two.bin"), &bytes(71, 400_000));
    f.on(
        "a",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypt-to",
            &recipient,
        ],
    )
    .ok();
    let id = f.snapshot("a", &src);
    f.on_with(
        "a",
        &["push", &id],
        &[("ZEROCLAW_BUNDLE_IDENTITY", &s(&key))],
    )
    .ok();
    encrypted_host(&f, "b", &ep, Some(&key));
    let packs = f.env.path("s3-root/bundles/fleet/agents/packs");
    let pack: Vec<_> = fs::read_dir(&packs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(pack.len(), 1);
    let pack_size = fs::metadata(&pack[0]).unwrap().len();
    assert!(pack_size > 800_000);
    let reference = format!("origin/{}", &id[..12]);
    let run = crate::remote_read::with_remote_mount(&f, &reference, |mnt| {
        let got = fs::read(mnt.join("big/one.bin")).unwrap();
        assert!(
            got == bytes(70, 400_000),
            "big/one.bin differs when mounted"
        );
    });
    let t = crate::remote_read::traffic(&run.stderr());
    let (requests, from_packs) = t.get("packs").copied().unwrap_or_default();
    // The file's 400 000 bytes in whole 64 KiB chunks (7 of them, 8 when it straddles one
    // more), the first window of the pack (header and first chunk, read once), and the chunks
    // of the pack's header, trailer and index: far from the whole pack, and nothing of
    // big/two.bin.
    let chunk = 65_536 + 16;
    assert!(
        (400_000..=400_000 + 6 * chunk).contains(&from_packs),
        "read {from_packs} bytes in {requests} requests of a {pack_size}-byte pack for one \
         400000-byte file ({t:?})"
    );
    assert!(requests <= 8, "{requests} requests ({t:?})");
    with_remote_mount_check(&f, &reference, &src);
    drop(server);
}

fn with_remote_mount_check(f: &Fleet, reference: &str, src: &Path) {
    crate::remote_read::with_remote_mount(f, reference, |mnt| assert_same_tree(src, mnt));
}

/// `remote forget` and `remote gc` on an encrypted remote: the same rounds as on a plaintext
/// one (mark, age, delete; the kept snapshot still pulls), with every host opening the key
/// file made by a first one.
#[test]
fn s3_encrypted_remote_forget_then_gc() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let (key, recipient) = age_key(&f.env, "k.key");
    f.on(
        "seed",
        &[
            "remote",
            "add",
            "origin",
            &f.url,
            "--endpoint",
            &ep,
            "--encrypt-to",
            &recipient,
        ],
    )
    .ok();
    let key = s(&key);
    crate::remote_fleet::forget_then_gc(
        &f,
        &["--endpoint", &ep, "--encrypted", "--identity", &key],
    );
    for o in objects(&f) {
        let head = fs::read(&o).unwrap();
        assert!(
            head.starts_with(b"age-encryption.org/v1\n"),
            "{o:?} is an age file"
        );
    }
    drop(server);
}
