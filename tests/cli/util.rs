//! The test environment: a fresh temp dir per test with its own store, a runner for the real
//! `zeroclaw-bundle` binary whose failures show command, status, stdout and stderr, and tree
//! helpers (build fixtures in code, compare trees byte for byte and mode for mode).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_zeroclaw-bundle");

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
}

pub struct Run {
    pub cmd: String,
    pub out: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    /// The last line of stdout (where commands print the id they made).
    pub fn last_line(&self) -> String {
        self.stdout().lines().last().unwrap_or("").to_string()
    }
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {:?}\nstdout:\n{}\nstderr:\n{}",
            self.cmd,
            self.out.status,
            self.stdout(),
            self.stderr()
        )
    }
    #[track_caller]
    pub fn ok(self) -> Run {
        assert!(
            self.out.status.success(),
            "expected success\n{}",
            self.describe()
        );
        self
    }
    #[track_caller]
    pub fn fails(self, code: i32, needle: &str) -> Run {
        assert_eq!(self.code(), code, "wrong exit code\n{}", self.describe());
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", self.describe()))
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("store");
        TestEnv { dir, store }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("ZEROCLAW_BUNDLE_STORE", &self.store)
            .env_remove("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM")
            .env_remove("ZEROCLAW_BUNDLE_TEST_HOOK_PATH")
            .env_remove("ZEROCLAW_BUNDLE_TEST_HOOK_CMD")
            .env_remove("ZEROCLAW_CONFIG_DIR")
            .env_remove("ZEROCLAW_DATA_DIR")
            .env_remove("ZEROCLAW_WORKSPACE")
            .current_dir(self.dir.path());
        c
    }

    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run_with(args, &[])
    }

    pub fn run_with<S: AsRef<OsStr>>(&self, args: &[S], env: &[(&str, &str)]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        run_command(c)
    }

    /// `snapshot --dir DIR`, returning the id.
    pub fn snapshot(&self, dir: &Path) -> String {
        let r = self
            .run(&[OsStr::new("snapshot"), OsStr::new("--dir"), dir.as_os_str()])
            .ok();
        let id = r.last_line();
        assert_eq!(id.len(), 64, "{}", r.describe());
        id
    }
}

impl TestEnv {
    /// `snapshot --dir DIR` plus `extra` arguments, unchecked.
    pub fn snapshot_with(&self, dir: &Path, extra: &[&str]) -> Run {
        let mut args = vec![OsStr::new("snapshot"), OsStr::new("--dir"), dir.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        self.run(&args)
    }

    /// `--json snapshot --dir DIR`, checked, as JSON.
    pub fn snapshot_json(&self, dir: &Path) -> serde_json::Value {
        self.run(&[
            OsStr::new("--json"),
            OsStr::new("snapshot"),
            OsStr::new("--dir"),
            dir.as_os_str(),
        ])
        .ok()
        .json()
    }

    /// The bytes `cat SNAPSHOT:PATH` prints, checked.
    pub fn cat(&self, snapshot: &str, path: &str) -> Vec<u8> {
        self.run(&["cat".to_string(), format!("{snapshot}:{path}")])
            .ok()
            .out
            .stdout
    }

    /// How many snapshots `list` shows (0 when no store was ever created: `list` then
    /// fails with "no store at").
    pub fn snapshot_count(&self) -> usize {
        let r = self.run(&["--json", "list"]);
        if !self.store.exists() {
            r.fails(1, "no store at");
            return 0;
        }
        r.ok().json().as_array().map_or(0, Vec::len)
    }
}

/// Runs the binary as the unprivileged user `nobody` (setpriv drops privileges for this
/// child only; as a non-root user it runs as that user), with the env's store.
pub fn run_as_nobody<S: AsRef<OsStr>>(env: &TestEnv, args: &[S]) -> Run {
    let mut c = Command::new("setpriv");
    if is_root() {
        c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"]);
    }
    c.arg("--")
        .arg(BIN)
        .arg("--store")
        .arg(&env.store)
        .args(args);
    run_command(c)
}

pub fn run_command(mut c: Command) -> Run {
    let cmd = format!("{c:?}");
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd}: {e}"));
    Run { cmd, out }
}

/// Runs `c` (stdin empty) and waits at most `limit` for it: a child still running then is
/// killed and the test fails saying it hung, so a command that blocks (on a FIFO, a device)
/// fails the test instead of hanging the suite.
#[track_caller]
pub fn run_within(mut c: Command, limit: std::time::Duration) -> Run {
    use std::io::Read;
    use std::process::Stdio;
    let cmd = format!("{c:?}");
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not run {cmd}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = r.read_to_end(&mut out);
            out
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    };
    Run { cmd, out }
}

/// Copies a tree with `cp -a` (modes, links and times kept).
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// Writes a file, creating parents.
pub fn write(path: &Path, content: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Deterministic pseudo-random bytes.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// What a tree looks like: relative path -> (kind, exec bit, content) for regular files and
/// dirs; symlinks and specials are recorded by kind only.
#[derive(Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { exec: bool, content: Vec<u8> },
    Other(String),
}

pub fn read_tree(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Node>) {
    for ent in fs::read_dir(dir).unwrap() {
        let ent = ent.unwrap();
        let path = ent.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.insert(rel, Node::Dir);
            walk(root, &path, out);
        } else if meta.is_file() {
            out.insert(
                rel,
                Node::File {
                    exec: meta.permissions().mode() & 0o111 != 0,
                    content: fs::read(&path).unwrap(),
                },
            );
        } else {
            out.insert(rel, Node::Other(format!("{:?}", meta.file_type())));
        }
    }
}

/// Asserts two trees hold the same names, kinds, exec bits and bytes.
#[track_caller]
pub fn assert_same_tree(a: &Path, b: &Path) {
    let ta = read_tree(a);
    let tb = read_tree(b);
    let names = |t: &BTreeMap<Vec<u8>, Node>| {
        t.keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&ta), names(&tb), "different names: {a:?} vs {b:?}");
    for (k, v) in &ta {
        assert!(
            tb.get(k) == Some(v),
            "{} differs",
            String::from_utf8_lossy(k)
        );
    }
}

/// Runs `f` only when `cond`; used to document root-only preconditions.
pub fn is_root() -> bool {
    rustix_uid() == 0
}

fn rustix_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(1)
}

/// Where object `hex` is stored, read from the store's files by this test code (not the
/// product's reader): a loose file, or an entry of an object pack (`objects/packs/*.pack`:
/// trailer `index offset u64 | blake3 [32] | "ZCBPEND\0"`, index `count u64` then per object
/// `id [32] | offset u64 | stored length u64 | length u64 | flags u8`, bit 0 zstd).
#[derive(Debug, Clone)]
pub enum StoredObject {
    /// A file of its own (`.zst` when compressed).
    Loose(PathBuf),
    /// An entry of a pack.
    Packed {
        pack: PathBuf,
        offset: u64,
        stored_len: u64,
        zstd: bool,
    },
}

impl StoredObject {
    /// Whether it is stored as a zstd frame.
    pub fn compressed(&self) -> bool {
        match self {
            StoredObject::Loose(p) => p.to_string_lossy().ends_with(".zst"),
            StoredObject::Packed { zstd, .. } => *zstd,
        }
    }

    /// Its bytes as stored (the raw bytes, or the frame).
    pub fn stored_bytes(&self) -> Vec<u8> {
        match self {
            StoredObject::Loose(p) => fs::read(p).unwrap(),
            StoredObject::Packed {
                pack,
                offset,
                stored_len,
                ..
            } => {
                let all = fs::read(pack).unwrap();
                all[*offset as usize..(*offset + *stored_len) as usize].to_vec()
            }
        }
    }

    /// Replaces its stored bytes in place with `f` applied to them (same length), making the
    /// file writable first.
    pub fn damage(&self, f: impl FnOnce(&mut [u8])) {
        let (path, start) = match self {
            StoredObject::Loose(p) => (p, 0usize),
            StoredObject::Packed { pack, offset, .. } => (pack, *offset as usize),
        };
        let mut all = fs::read(path).unwrap();
        let len = self.stored_bytes().len();
        f(&mut all[start..start + len]);
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(path, all).unwrap();
    }
}

/// Removes object `hex` from `store` by hand, wherever it is stored: a loose file is deleted;
/// a pack is rewritten by this test code without the entry (the other objects' bytes copied,
/// the index and trailer written again, its blake3 from `b3sum`). Panics when it is absent.
#[track_caller]
pub fn remove_stored(store: &Path, hex: &str) {
    let (pack, removed_offset) = match stored_object(store, hex).expect("the object is stored") {
        StoredObject::Loose(p) => return fs::remove_file(p).unwrap(),
        StoredObject::Packed { pack, offset, .. } => (pack, offset),
    };
    let bytes = fs::read(&pack).unwrap();
    let n = bytes.len();
    let u = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let index = u(n - 48) as usize;
    let mut out = bytes[..80].to_vec();
    let mut entries = Vec::new();
    for i in 0..u(index) as usize {
        let e = &bytes[index + 8 + i * 57..index + 8 + (i + 1) * 57];
        let (offset, stored_len) = (
            u(index + 8 + i * 57 + 32),
            u(index + 8 + i * 57 + 40) as usize,
        );
        if offset == removed_offset {
            continue;
        }
        let mut entry = e.to_vec();
        entry[32..40].copy_from_slice(&(out.len() as u64).to_le_bytes());
        out.extend_from_slice(&bytes[offset as usize..offset as usize + stored_len]);
        entries.push(entry);
    }
    let index_at = out.len() as u64;
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e);
    }
    let digest = hex_bytes(&blake3_hex(&out));
    out.extend_from_slice(&index_at.to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(b"ZCBPEND\0");
    fs::set_permissions(&pack, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&pack, out).unwrap();
}

/// Where object `hex` is stored in `store`, if anywhere (see [`StoredObject`]).
pub fn stored_object(store: &Path, hex: &str) -> Option<StoredObject> {
    let file = object_file(store, hex);
    if file.exists() {
        return Some(StoredObject::Loose(file));
    }
    stored_objects(store)
        .into_iter()
        .find(|(id, s)| id == hex && matches!(s, StoredObject::Packed { .. }))
        .map(|(_, s)| s)
}

/// Every object stored in `store`, loose or packed, as (id hex, where), read from the files
/// by this test code (see [`StoredObject`]).
pub fn stored_objects(store: &Path) -> Vec<(String, StoredObject)> {
    let mut out = Vec::new();
    for fan in fs::read_dir(store.join("objects")).unwrap().flatten() {
        let fan_name = fan.file_name().to_string_lossy().into_owned();
        if fan_name == "packs" {
            for pack in fs::read_dir(fan.path()).unwrap().flatten() {
                let bytes = fs::read(pack.path()).unwrap();
                let n = bytes.len();
                let u = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                let index = u(n - 48) as usize;
                for i in 0..u(index) as usize {
                    let e = index + 8 + i * 57;
                    let hex: String = bytes[e..e + 32]
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    out.push((
                        hex,
                        StoredObject::Packed {
                            pack: pack.path(),
                            offset: u(e + 32),
                            stored_len: u(e + 40),
                            zstd: bytes[e + 56] & 1 != 0,
                        },
                    ));
                }
            }
            continue;
        }
        for obj in fs::read_dir(fan.path()).unwrap().flatten() {
            let name = obj.file_name().to_string_lossy().into_owned();
            let rest = name.strip_suffix(".zst").unwrap_or(&name);
            out.push((format!("{fan_name}{rest}"), StoredObject::Loose(obj.path())));
        }
    }
    out
}

/// Runs `program` with `input` on its stdin; its stdout (it must succeed).
#[track_caller]
pub fn run_with_stdin(program: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success(), "{program} failed: {out:?}");
    out.stdout
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The file of object `hex` in `store` when it is stored loose: `objects/ab/<62 hex>` (raw) or
/// `<62 hex>.zst` (a small object stored compressed); the raw path when neither exists.
pub fn object_file(store: &Path, hex: &str) -> PathBuf {
    let raw = store.join("objects").join(&hex[..2]).join(&hex[2..]);
    let zst = store
        .join("objects")
        .join(&hex[..2])
        .join(format!("{}.zst", &hex[2..]));
    if !raw.exists() && zst.exists() {
        zst
    } else {
        raw
    }
}

/// The blake3 of a file as the independent `b3sum` prints it. `b3sum` is required
/// (`scripts/setup.sh` installs it): a cross-check must not fall back to the product's own
/// hash, so a missing `b3sum` fails the test.
#[track_caller]
pub fn b3sum(path: &Path) -> String {
    let out = Command::new("b3sum")
        .arg("--no-names")
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("b3sum is required for this check (run scripts/setup.sh): {e}"));
    assert!(out.status.success(), "b3sum {path:?} failed: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `b3sum` of `data` (through its stdin), required like [`b3sum`].
#[track_caller]
pub fn blake3_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("b3sum")
        .arg("--no-names")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("b3sum is required for this check (run scripts/setup.sh): {e}"));
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "b3sum failed: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every regular file under `dir`, as (path, bytes).
pub fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    read_tree(dir)
        .into_iter()
        .filter_map(|(k, v)| match v {
            Node::File { content, .. } => Some((String::from_utf8_lossy(&k).into_owned(), content)),
            _ => None,
        })
        .collect()
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that `needle` reached no byte anywhere under the store (`objects/`, `catalog/`,
/// `tmp/`, everything) and no stdout or stderr of `runs`: what a capture refused or skipped
/// must leave no trace, not only no catalog entry.
#[track_caller]
pub fn assert_nowhere(env: &TestEnv, runs: &[&Run], needle: &[u8], what: &str) {
    let has = |hay: &[u8]| contains(hay, needle);
    if env.store.exists() {
        for (path, node) in read_tree(&env.store) {
            if let Node::File { content, .. } = node {
                assert!(
                    !has(&content),
                    "{what}: store file {} contains {:?}",
                    String::from_utf8_lossy(&path),
                    String::from_utf8_lossy(needle)
                );
            }
        }
    }
    for run in runs {
        assert!(
            !has(&run.out.stdout) && !has(&run.out.stderr),
            "{what}: output contains {:?}\n{}",
            String::from_utf8_lossy(needle),
            run.describe()
        );
    }
}
