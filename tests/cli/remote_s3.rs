//! Remote stores through a real S3 server: `s3s-fs` (installed by scripts/setup.sh), started
//! on 127.0.0.1 with a port it picks itself, stopped by a guard. Pins the same paths as the
//! `file://` tests through S3's protocol (signed requests, multipart upload of a large pack,
//! prefixes): push/pull between hosts, concurrent pushes, a push killed after its pack, and
//! that the secret key reaches no output and no file of the store; and https through a TLS
//! front (Python's `ssl`) with certificates the `openssl` command makes. Under CI a missing
//! server fails the test instead of skipping it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::remote::{tree, Fleet};
use crate::util::{assert_nowhere, bytes, write, TestEnv};

const ACCESS_KEY: &str = "zcb-test-access";
const SECRET_KEY: &str = "zcb-test-secret-4b1d9e7f";

/// The `s3s-fs` binary: on PATH or in cargo's bin directory. `None` outside CI when missing
/// (the test says so and returns); under CI a missing server fails the test.
fn s3s_fs() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("s3s-fs"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        candidates.push(PathBuf::from(home).join("bin/s3s-fs"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".cargo/bin/s3s-fs"));
    }
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return Some(found);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "s3s-fs is not installed: the S3 remote tests need it under CI (scripts/setup.sh runs \
         `cargo install --locked s3s-fs@0.14.1 --features binary`)"
    );
    eprintln!("skipping: s3s-fs is not installed (scripts/setup.sh installs it)");
    None
}

/// A running s3s-fs; killed and reaped on drop.
pub(crate) struct Server {
    child: Child,
    pub(crate) endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts s3s-fs over `root` with one bucket, on 127.0.0.1 and a port of its choosing
    /// (port 0: no race for a free port), and waits until it says where it listens.
    fn start(bin: &PathBuf, root: &std::path::Path, bucket: &str) -> Server {
        std::fs::create_dir_all(root.join(bucket)).unwrap();
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", bin.display()));
        let mut server = Server {
            child,
            endpoint: String::new(),
        };
        let stdout = server.child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Reads the log to the end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("http://127.0.0.1:") {
                    let addr: String = line[at..]
                        .chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    let _ = tx.send(addr);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(addr) = rx.recv_timeout(Duration::from_millis(100)) {
                server.endpoint = addr;
                return server;
            }
            if let Ok(Some(st)) = server.child.try_wait() {
                panic!("s3s-fs exited before listening: {st}");
            }
            assert!(Instant::now() < deadline, "s3s-fs did not start listening");
        }
    }
}

/// A fleet whose remote `origin` is `s3://bucket/prefix` on a fresh server.
pub(crate) fn s3_fleet() -> Option<(Fleet, Server)> {
    let bin = s3s_fs()?;
    let env = TestEnv::new();
    let server = Server::start(&bin, &env.path("s3-root"), "bundles");
    let vars = vec![
        ("AWS_ACCESS_KEY_ID".to_string(), ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), SECRET_KEY.to_string()),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ("NO_PROXY".to_string(), "127.0.0.1".to_string()),
        ("no_proxy".to_string(), "127.0.0.1".to_string()),
    ];
    let fleet = Fleet {
        env,
        url: "s3://bundles/fleet/agents".to_string(),
        vars,
    };
    Some((fleet, server))
}

#[test]
fn s3_push_pull_between_hosts() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 50);
    // A pack over the single-request limit goes up as a multipart upload.
    write(&src.join("large.bin"), &bytes(51, 20_000_000));
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    let push = f.on("a", &["--json", "push", &id]).ok();
    let v = push.json();
    assert_eq!(v["objects"].as_u64(), Some(5 + 5), "{v}");
    assert!(v["pack_bytes"].as_u64().unwrap() > 16 << 20, "{v}");
    // The keys landed under the prefix, in the layout.
    let root = f.env.path("s3-root/bundles/fleet/agents");
    for dir in ["packs", "index", "snapshots"] {
        assert_eq!(
            std::fs::read_dir(root.join(dir))
                .map(|d| d.count())
                .unwrap_or(0),
            1,
            "{dir} under the prefix"
        );
    }
    f.host("b", &["--endpoint", &ep]);
    assert_eq!(f.remote_ids("b"), vec![id.clone()]);
    let pull = f
        .on("b", &["--json", "pull", &format!("origin/{}", &id[..10])])
        .ok();
    assert_eq!(pull.json()["snapshot"].as_str(), Some(id.as_str()));
    f.on("b", &["verify"]).ok();
    let out = f.env.path("co-b");
    f.on("b", &["checkout", &id, "--out", &out.to_string_lossy()])
        .ok();
    crate::util::assert_same_tree(&src, &out);

    // Two hosts at once, a third pulls both.
    let src_c = tree(&f.env.path("src-c"), 52);
    let src_d = tree(&f.env.path("src-d"), 53);
    f.host("c", &["--endpoint", &ep]);
    f.host("d", &["--endpoint", &ep]);
    let id_c = f.snapshot("c", &src_c);
    let id_d = f.snapshot("d", &src_d);
    let children: Vec<_> = [("c", &id_c), ("d", &id_d)]
        .into_iter()
        .map(|(h, id)| {
            let mut c = f.command(h, &["push", id]);
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    f.host("e", &["--endpoint", &ep]);
    assert_eq!(f.remote_ids("e").len(), 3);
    for (id, src) in [(&id_c, &src_c), (&id_d, &src_d)] {
        f.on("e", &["pull", &format!("origin/{id}")]).ok();
        let out = f.env.path(&format!("co-e-{}", &id[..8]));
        f.on("e", &["checkout", id, "--out", &out.to_string_lossy()])
            .ok();
        crate::util::assert_same_tree(src, &out);
    }
    f.on("e", &["verify"]).ok();

    // The secret is in no output and in no file of a store.
    for host in ["a", "b"] {
        let store_env = TestEnv {
            store: f.env.path(host),
            ..TestEnv::new()
        };
        assert_nowhere(&store_env, &[&push, &pull], SECRET_KEY.as_bytes(), host);
    }
    // A wrong secret fails with the server's refusal, and prints neither secret.
    let wrong = "wrong-secret-9c2e";
    let r = f.on_with(
        "b",
        &["list", "--remote", "origin"],
        &[("AWS_SECRET_ACCESS_KEY", wrong)],
    );
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(
        r.stderr()
            .contains("remote origin: could not list snapshots"),
        "{}",
        r.describe()
    );
    assert_eq!(
        r.stderr().matches("SignatureDoesNotMatch").count(),
        1,
        "said once: {}",
        r.describe()
    );
    for s in [wrong, SECRET_KEY] {
        assert!(
            !r.stderr().contains(s) && !r.stdout().contains(s),
            "{}",
            r.describe()
        );
    }
    // No credentials at all: said so, without asking for instance metadata.
    let mut c = f.command("b", &["list", "--remote", "origin"]);
    c.env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY");
    crate::util::run_command(c).fails(1, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    drop(server);
}

#[test]
fn s3_push_killed_after_its_pack_then_completed() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 60);
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    let r = f.on_with(
        "a",
        &["push", &id],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "remote-after-pack"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID"),
        ],
    );
    assert_eq!(r.out.status.code(), None, "killed: {}", r.describe());
    f.host("b", &["--endpoint", &ep]);
    assert!(f.remote_ids("b").is_empty());
    f.on("b", &["pull", &format!("origin/{id}")])
        .fails(1, "has no snapshot");
    f.on("a", &["push", &id]).ok();
    f.on("b", &["pull", &format!("origin/{id}")]).ok();
    f.on("b", &["verify"]).ok();
    drop(server);
}

/// The bucket prefix's directory on the server's disk.
fn prefix_root(f: &Fleet) -> std::path::PathBuf {
    f.env.path("s3-root/bundles/fleet/agents")
}

#[test]
fn s3_remote_diff_fetches_trees_only() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    crate::remote_read::remote_diff_fetches_trees_only(&f, &["--endpoint", &ep], &prefix_root(&f));
    drop(server);
}

#[test]
fn s3_remote_diff_without_trees_pack_reads_ranges() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    crate::remote_read::remote_diff_without_trees_pack(&f, &["--endpoint", &ep], &prefix_root(&f));
    drop(server);
}

#[test]
fn s3_remote_mount_fetches_what_it_reads() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    crate::remote_read::remote_mount_fetches_what_it_reads(
        &f,
        &["--endpoint", &ep],
        &prefix_root(&f),
    );
    drop(server);
}

/// Credentials from the AWS files alone (no key in the environment): `~/.aws/credentials`
/// for the default profile, then `AWS_SHARED_CREDENTIALS_FILE` with `AWS_PROFILE`; the
/// environment wins over the files; the secret reaches no output and no store file.
#[test]
fn s3_credentials_from_the_aws_files() {
    let Some((mut f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    // Only the region and the proxy bypass stay in the environment.
    f.vars
        .retain(|(k, _)| !k.starts_with("AWS_ACCESS") && !k.starts_with("AWS_SECRET"));
    let home = f.env.path("home");
    write(
        &home.join(".aws/credentials"),
        format!(
            "[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        )
        .as_bytes(),
    );
    let src = tree(&f.env.path("src"), 80);
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    let push = f.on("a", &["-v", "push", &id]).ok();
    f.host("b", &["--endpoint", &ep]);
    let pull = f.on("b", &["-v", "pull", &format!("origin/{id}")]).ok();
    let diff = f
        .on("b", &["-v", "diff", &format!("origin/{id}"), &id])
        .ok();

    // A named profile in a file named by the environment; ~/.aws holds a wrong one.
    write(
        &home.join(".aws/credentials"),
        b"[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong-default-3f\n",
    );
    let other = f.env.path("creds-elsewhere");
    write(
        &other,
        format!(
            "[default]\naws_access_key_id = x\naws_secret_access_key = wrong-4e\n\
             [fleet]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        )
        .as_bytes(),
    );
    let other_s = other.to_string_lossy().into_owned();
    let wrong_default = f.on("b", &["list", "--remote", "origin"]);
    assert_eq!(wrong_default.code(), 1, "{}", wrong_default.describe());
    let named = f
        .on_with(
            "b",
            &["-v", "list", "--remote", "origin"],
            &[
                ("AWS_SHARED_CREDENTIALS_FILE", &other_s),
                ("AWS_PROFILE", "fleet"),
            ],
        )
        .ok();
    assert!(named.stdout().contains(&id[..16]), "{}", named.describe());
    // The environment wins over the files (a wrong key there fails even with a good file).
    let env_wins = f.on_with(
        "b",
        &["list", "--remote", "origin"],
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", &other_s),
            ("AWS_PROFILE", "fleet"),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", "wrong-env-secret-77"),
        ],
    );
    assert_eq!(env_wins.code(), 1, "{}", env_wins.describe());
    // A profile no file defines is named.
    let missing = f.on_with(
        "b",
        &["list", "--remote", "origin"],
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", &other_s),
            ("AWS_PROFILE", "nosuch"),
        ],
    );
    missing.fails(1, "profile \"nosuch\"");

    for (host, runs) in [
        ("a", vec![&push]),
        ("b", vec![&pull, &diff, &wrong_default, &named, &env_wins]),
    ] {
        let store_env = TestEnv {
            store: f.env.path(host),
            ..TestEnv::new()
        };
        for secret in [
            SECRET_KEY,
            "wrong-default-3f",
            "wrong-4e",
            "wrong-env-secret-77",
        ] {
            assert_nowhere(&store_env, &runs, secret.as_bytes(), host);
        }
    }
    drop(server);
}

/// Remote `forget` and `gc` through S3 (conditional marks with `If-None-Match`).
#[test]
fn s3_forget_then_gc() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    crate::remote_fleet::forget_then_gc(&f, &["--endpoint", &server.endpoint]);
}

/// A push paused at each step while `gc` runs on another store, through S3.
#[test]
fn s3_gc_races_a_paused_push() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let root = prefix_root(&f);
    crate::remote_fleet::gc_races_a_paused_push(&f, &root, &["--endpoint", &server.endpoint]);
}

/// Issue 22, item 15: what an operator gets wrong (the secret key, the bucket name, a server
/// that is not running) is said in one line naming what to check, never as S3's XML or the
/// client's retry details.
#[test]
fn s3_errors_say_what_to_check() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 60);
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    // A port nothing listens on: bound, then closed.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let add = |name: &str, url: &str, endpoint: &str| {
        f.on("a", &["remote", "add", name, url, "--endpoint", endpoint])
            .ok();
    };
    add("nobucket", "s3://no-such-bucket/p", &ep);
    add("down", "s3://bundles/p", &closed);
    // (arguments, environment, what stderr says)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 4] = [
        (
            &["push", &id, "origin"],
            &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
            &["check the secret key", "SignatureDoesNotMatch"],
        ),
        (
            &["list", "--remote", "origin"],
            &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
            &["check the secret key", "SignatureDoesNotMatch"],
        ),
        (
            &["push", &id, "nobucket"],
            &[],
            &[
                "no bucket no-such-bucket",
                "check the bucket name",
                "NoSuchBucket",
            ],
        ),
        (
            &["pull", "down/abcdef01"],
            &[],
            &["connection refused", "is the S3 server running", &closed],
        ),
    ];
    for (args, env, says) in cases {
        let r = f.on_with("a", args, env).fails(1, says[0]);
        let err = r.stderr();
        for s in says {
            assert!(err.contains(s), "{args:?}: {}", r.describe());
        }
        assert_eq!(err.lines().count(), 1, "one line: {}", r.describe());
        for noise in ["<?xml", "<Error>", "retries", "retry", "Generic S3 error"] {
            assert!(!err.contains(noise), "{args:?}: {noise}: {}", r.describe());
        }
    }
}

/// The temporary packs a pull left in host `host`'s store.
fn pull_temps(f: &Fleet, host: &str) -> Vec<String> {
    std::fs::read_dir(f.env.path(host).join("tmp"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("pull-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The one pack on the server's disk, and its key.
fn only_pack(f: &Fleet) -> (std::path::PathBuf, String) {
    let dir = prefix_root(f).join("packs");
    let packs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let name = packs[0].file_name().unwrap().to_string_lossy().into_owned();
    (packs[0].clone(), format!("packs/{name}"))
}

/// Small parts, so a test pack of a few hundred KiB is fetched as many ranged GETs.
const SMALL_PART: (&str, &str) = ("ZEROCLAW_BUNDLE_TEST_PULL_PART", "65536");

/// A pack is pulled as ranged GETs in parallel, each part written at its offset: the bytes
/// received are exactly the pack's (no whole-object GET besides), and the snapshot verifies
/// and checks out byte-identical.
#[test]
fn s3_pull_fetches_a_pack_in_ranged_parts() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 80);
    write(&src.join("big.bin"), &bytes(81, 700_000));
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let (pack, _) = only_pack(&f);
    let size = std::fs::metadata(&pack).unwrap().len();
    let parts = size.div_ceil(65536);
    assert!(parts >= 10, "{size}");
    f.host("b", &["--endpoint", &ep]);
    let r = f
        .on_with("b", &["-v", "pull", &format!("origin/{id}")], &[SMALL_PART])
        .ok();
    let t = crate::remote_read::traffic(&r.stderr());
    let (requests, received) = t["packs"];
    assert_eq!(received, size, "{t:?}\n{}", r.describe());
    assert!(requests > parts, "{t:?}\n{}", r.describe());
    assert!(pull_temps(&f, "b").is_empty());
    f.on("b", &["verify"]).ok();
    let out = f.env.path("co-b");
    f.on("b", &["checkout", &id, "--out", &out.to_string_lossy()])
        .ok();
    crate::util::assert_same_tree(&src, &out);
    drop(server);
}

/// One byte flipped in a middle part of the pack on the server: the pull is refused naming
/// the pack's key, imports nothing, leaves no temporary file; repaired, it pulls.
#[test]
fn s3_pull_refuses_a_corrupt_part() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 82);
    write(&src.join("big.bin"), &bytes(83, 700_000));
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    let (pack, key) = only_pack(&f);
    let good = std::fs::read(&pack).unwrap();
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x40;
    std::fs::write(&pack, &bad).unwrap();
    f.host("b", &["--endpoint", &ep]);
    let r = f.on_with("b", &["pull", &format!("origin/{id}")], &[SMALL_PART]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stderr().contains(&key), "{}", r.describe());
    assert!(pull_temps(&f, "b").is_empty());
    let listed = f.on("b", &["list"]).ok();
    assert!(
        !listed.stdout().contains(&id[..12]),
        "{}",
        listed.describe()
    );
    f.on("b", &["verify"]).ok();
    std::fs::write(&pack, &good).unwrap();
    f.on_with("b", &["pull", &format!("origin/{id}")], &[SMALL_PART])
        .ok();
    f.on("b", &["verify"]).ok();
    drop(server);
}

/// SIGINT (Ctrl-C) once the first part of the pack is in: the pull stops (exit 130) with
/// the other parts in flight, leaves no temporary pack and no snapshot; the next pull works.
#[test]
fn s3_pull_interrupted_between_parts_leaves_nothing() {
    let Some((f, server)) = s3_fleet() else {
        return;
    };
    let ep = server.endpoint.clone();
    let src = tree(&f.env.path("src"), 84);
    write(&src.join("big.bin"), &bytes(85, 700_000));
    f.host("a", &["--endpoint", &ep]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", &["--endpoint", &ep]);
    let r = f.on_with(
        "b",
        &["pull", &format!("origin/{id}")],
        &[
            SMALL_PART,
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "pull-part"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "@0"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -INT $PPID"),
        ],
    );
    assert_eq!(r.code(), 130, "{}", r.describe());
    assert!(r.stderr().contains("interrupted"), "{}", r.describe());
    assert!(pull_temps(&f, "b").is_empty());
    let listed = f.on("b", &["list"]).ok();
    assert!(
        !listed.stdout().contains(&id[..12]),
        "{}",
        listed.describe()
    );
    f.on("b", &["pull", &format!("origin/{id}")]).ok();
    f.on("b", &["verify"]).ok();
    drop(server);
}

/// A TLS front for `backend` (host:port): Python's `ssl` (OpenSSL) terminates TLS with
/// `cert`/`key` and forwards the bytes. It prints the port it listens on.
const TLS_FRONT: &str = r#"
import asyncio, ssl, sys
cert, key, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except Exception:
        pass
    finally:
        w.close()
async def handle(cr, cw):
    try:
        br, bw = await asyncio.open_connection(host, port)
    except Exception:
        cw.close()
        return
    await asyncio.gather(pipe(cr, bw), pipe(br, cw))
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await srv.serve_forever()
asyncio.run(main())
"#;

/// A certificate authority and a certificate for 127.0.0.1 it signed, made by the `openssl`
/// command in `dir`: (ca.pem, leaf.pem, leaf.key).
fn tls_certificates(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command runs");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509", "-new"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem"],
            &["-subj", "/CN=zeroclaw-bundle test CA", "-days", "2"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req", "-new"][..],
            &ec,
            &["-keyout", "leaf.key", "-out", "leaf.csr"],
            &["-subj", "/CN=127.0.0.1"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("leaf.pem"),
        dir.join("leaf.key"),
    )
}

/// S3 over https, through a TLS front on the real server: the client checks the server's
/// certificate against the trusted roots (`SSL_CERT_FILE` here). Push and pull work with the
/// test CA trusted; an untrusted issuer, a host name the certificate does not name, and an
/// https endpoint that speaks plain HTTP are each refused with what to check, and nothing is
/// sent.
#[test]
fn s3_over_https_checks_the_certificate() {
    let Some((mut f, server)) = s3_fleet() else {
        return;
    };
    let (ca, leaf, key) = tls_certificates(&f.env.path("tls"));
    let backend = server.endpoint.trim_start_matches("http://").to_string();
    let (host, port) = backend.rsplit_once(':').unwrap();
    let mut front = Command::new("python3")
        .args(["-c", TLS_FRONT])
        .args([leaf.as_os_str(), key.as_os_str()])
        .args([host, port])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(front.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let https = format!("https://127.0.0.1:{}", line.trim());
    let _front = Server {
        child: front,
        endpoint: https.clone(),
    };
    assert!(
        line.trim().parse::<u16>().is_ok(),
        "the TLS front says its port: {line:?}"
    );

    let src = tree(&f.env.path("src"), 70);
    f.host("untrusted", &["--endpoint", &https]);
    let id = f.snapshot("untrusted", &src);
    // Each refusal says what to check, in rustls's words, and nothing is sent.
    let refused = |remote: &str, env: &[(&str, &str)], says: &[&str]| {
        let run = f.on_with("untrusted", &["push", &id, remote], env);
        for needle in says {
            assert!(
                run.stderr().contains(needle),
                "{needle}: {}",
                run.describe()
            );
        }
        assert_eq!(run.code(), 1, "{}", run.describe());
    };
    // The machine's roots do not hold the test CA.
    let why = "the TLS certificate of https://127.0.0.1:";
    refused(
        "origin",
        &[],
        &[
            why,
            "(invalid peer certificate: UnknownIssuer)",
            "SSL_CERT_FILE",
        ],
    );
    // The CA is trusted, but the certificate names 127.0.0.1, not localhost.
    let ca_file = ca.to_string_lossy().into_owned();
    let by_name = https.replace("127.0.0.1", "localhost");
    f.on(
        "untrusted",
        &["remote", "add", "byname", &f.url, "--endpoint", &by_name],
    )
    .ok();
    let trusted = [
        ("SSL_CERT_FILE", ca_file.as_str()),
        ("NO_PROXY", "localhost,127.0.0.1"),
    ];
    refused(
        "byname",
        &trusted,
        &["certificate not valid for name \"localhost\""],
    );
    // https:// to a server that speaks plain HTTP.
    let plain = server.endpoint.replace("http://", "https://");
    f.on(
        "untrusted",
        &["remote", "add", "plain", &f.url, "--endpoint", &plain],
    )
    .ok();
    refused(
        "plain",
        &trusted,
        &["does not answer in TLS", "http:// endpoint"],
    );
    assert!(
        !f.env.path("s3-root/bundles/fleet").exists(),
        "nothing was pushed"
    );

    f.vars.push(("SSL_CERT_FILE".to_string(), ca_file));
    f.host("a", &["--endpoint", &https]);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", &["--endpoint", &https]);
    f.pull_and_check("b", &id, &src);
}
