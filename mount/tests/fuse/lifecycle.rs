//! Pins: every way of ending a mount (handle unmount, drop, `unmount(path)` while another
//! thread waits) leaves no mount behind; a busy mount refuses a clean unmount, and a dropped
//! busy handle detaches lazily; a mounted path and a stale mount (its process killed) are
//! refused with their own errors, and `unmount` clears the stale one.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zeroclaw_bundle_mount::{check_mountpoint, mount, unmount, MountError, MountOptions};

use crate::sample;
use crate::util::{is_mounted, mounts_at, skip_or_fail, Env};

#[test]
fn every_way_of_unmounting_leaves_no_mount_behind() {
    let env = Env::new();
    let (root, _) = env.build(sample());

    // 1. MountHandle::unmount.
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    assert!(is_mounted(&m.path));
    m.handle().unmount().unwrap();
    assert!(!is_mounted(&m.path));
    m.handle().unmount().unwrap(); // a no-op now
    let path = m.path.clone();
    drop(m);
    assert!(!is_mounted(&path));

    // 2. Drop.
    let m = env.mount(root, &MountOptions::default()).unwrap();
    let path = m.path.clone();
    drop(m);
    assert!(!is_mounted(&path));

    // 3. unmount(path) from another thread while this one waits.
    let mut m = env.mount(root, &MountOptions::default()).unwrap();
    let handle = m.handle.take().unwrap();
    let unmounter = handle.unmounter();
    let t = std::thread::spawn(move || unmounter.unmount());
    handle.wait().unwrap();
    t.join().unwrap().unwrap();
    assert!(!is_mounted(&m.path));
    let err = unmount(&m.path).unwrap_err();
    assert!(matches!(err, MountError::NotMounted(_)), "{err}");
}

#[test]
fn a_kept_lease_lives_until_unmount() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let leases = env.store.root().join("leases");
    let lease = env.store.maintenance().lease(&root, &root).unwrap();
    m.handle().keep_lease(lease);
    assert_eq!(fs::read_dir(&leases).unwrap().count(), 1);
    m.handle().unmount().unwrap();
    assert_eq!(fs::read_dir(&leases).unwrap().count(), 0);
}

#[test]
fn busy_mount_refuses_clean_unmount_and_drop_detaches_lazily() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let open = fs::File::open(m.path.join("README.md")).unwrap();
    let err = m.handle().unmount().unwrap_err();
    assert!(matches!(err, MountError::Busy(_)), "{err}");
    assert!(
        err.to_string().contains(&*m.path.to_string_lossy()),
        "{err}"
    );
    assert!(is_mounted(&m.path), "a refused unmount leaves the mount");
    drop(open);
    m.handle().unmount().unwrap();
    assert!(!is_mounted(&m.path));

    // Dropping the handle while a file is open: the mount leaves the namespace now and
    // the open file keeps reading.
    let mut m = env.mount(root, &MountOptions::default()).unwrap();
    let mut open = fs::File::open(m.path.join("README.md")).unwrap();
    drop(m.handle.take());
    assert!(!is_mounted(&m.path));
    let mut text = String::new();
    open.read_to_string(&mut text).unwrap();
    assert_eq!(text, "# agent\n");
}

#[test]
fn a_mounted_path_is_refused() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let err = check_mountpoint(&m.path).unwrap_err();
    assert!(matches!(err, MountError::AlreadyMounted { .. }), "{err}");
    assert!(err.to_string().contains("zeroclaw-bundle"), "{err}");
    let err = mount(
        Arc::new(env.store.objects().reader()),
        root,
        &m.path,
        &MountOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, MountError::AlreadyMounted { .. }), "{err}");
}

/// Kills the child on drop (so a failing test does not leave a serving process behind).
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CHILD_MOUNTPOINT: &str = "ZCB_TEST_STALE_MOUNTPOINT";
const CHILD_WORKDIR: &str = "ZCB_TEST_STALE_WORKDIR";

/// Not a test on its own: the child process of `a_stale_mount_is_explained_and_cleared`.
/// Mounts and then serves until it is killed. Ignored so it never counts as a pass; the
/// parent runs it with `--ignored`.
#[test]
#[ignore = "child-process entry point, run by a_stale_mount_is_explained_and_cleared"]
fn stale_child() {
    let (Some(mnt), Some(work)) = (
        std::env::var_os(CHILD_MOUNTPOINT),
        std::env::var_os(CHILD_WORKDIR),
    ) else {
        return;
    };
    let env = Env::new_in(Path::new(&work));
    let (root, _) = env.build(sample());
    match mount(
        Arc::new(env.store.objects().reader()),
        root,
        Path::new(&mnt),
        &MountOptions::default(),
    ) {
        Ok(handle) => {
            println!("CHILD MOUNTED");
            let _keep = handle;
            loop {
                std::thread::park();
            }
        }
        Err(e) => println!("CHILD FAILED: {e}"),
    }
}

#[test]
fn a_stale_mount_is_explained_and_cleared() {
    let work = tempfile::tempdir().unwrap();
    let mnt: PathBuf = work.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let mnt = fs::canonicalize(&mnt).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "lifecycle::stale_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_MOUNTPOINT, &mnt)
        .env(CHILD_WORKDIR, work.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = ChildGuard(child);
    // Kill only after `mount` returned in the child (it prints CHILD MOUNTED then): while its
    // own probe request is in flight, a SIGKILL leaves the probing thread waiting forever on
    // an answer its dead server thread cannot give (a FUSE self-deadlock, only cleared by
    // aborting the connection), so mountinfo alone is not the moment to kill.
    let stdout = child.0.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut out = String::new();
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let mounted = line.contains("CHILD MOUNTED");
            out.push_str(&line);
            out.push('\n');
            if mounted {
                let _ = tx.send((true, out.clone()));
            }
        }
        let _ = tx.send((false, out));
    });
    let start = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok((true, _)) => break,
            Ok((false, out)) => {
                let status = child.0.wait().unwrap();
                if out.contains("CHILD FAILED: FUSE is not available") {
                    skip_or_fail(&out);
                    return;
                }
                panic!("child exited ({status}) without mounting: {out}");
            }
            Err(_) => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "child did not mount"
        );
    }
    assert!(is_mounted(&mnt));
    // SIGKILL: no unmount runs, the kernel connection dies with the process.
    drop(child);

    // stat may still answer from the kernel's (never expiring) attribute cache; anything
    // that reaches the dead server fails with ENOTCONN.
    let err = fs::read_dir(&mnt).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN), "{err}");
    let err = rustix::fs::statfs(&mnt).unwrap_err();
    assert_eq!(err, rustix::io::Errno::NOTCONN);
    let err = check_mountpoint(&mnt).unwrap_err();
    assert!(matches!(err, MountError::StaleMount(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("fusermount3 -u"), "{text}");
    assert!(text.contains("not connected"), "{text}");

    unmount(&mnt).unwrap();
    assert!(!is_mounted(&mnt));
    check_mountpoint(&mnt).unwrap();
}

/// A mount's session that ends (its mount unmounted from outside, as `zeroclaw-bundle
/// umount` does) after a new mount took the same directory leaves the new mount alone.
/// fuser's own teardown unmounts by path, taking a dead connection for a live mount: in CI,
/// a `mount --daemon` right after `umount` of the same directory reported its mount and
/// lost it to the old server ending.
#[test]
fn an_ended_session_never_unmounts_the_next_mount_at_its_path() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("mnt");
    fs::create_dir(&at).unwrap();
    let source = || Arc::new(env.store.objects().reader());
    let first = match mount(source(), root, &at, &MountOptions::default()) {
        Ok(handle) => handle,
        Err(e) => return skip_or_fail(&e.to_string()),
    };
    unmount(&at).unwrap();
    let second = mount(source(), root, &at, &MountOptions::default()).unwrap();
    first.wait().unwrap();
    assert!(
        is_mounted(&at),
        "the old session's end unmounted the new mount"
    );
    assert_eq!(
        fs::read(at.join("README.md")).unwrap(),
        expected[&b"README.md".to_vec()].data.clone().unwrap()
    );
    drop(second);
    assert!(!is_mounted(&at));
}

#[test]
fn mounts_of_one_directory_at_once_make_one_mount() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("mnt");
    fs::create_dir(&at).unwrap();
    for round in 0..5 {
        let start = Arc::new(std::sync::Barrier::new(4));
        let results: Vec<_> = (0..4)
            .map(|_| {
                let (start, at, source) =
                    (Arc::clone(&start), at.clone(), env.store.objects().reader());
                std::thread::spawn(move || {
                    start.wait();
                    mount(Arc::new(source), root, &at, &MountOptions::default())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let mut handles = Vec::new();
        for result in results {
            match result {
                Ok(handle) => handles.push(handle),
                Err(MountError::AlreadyMounted { .. }) => {}
                Err(e) => return skip_or_fail(&e.to_string()),
            }
        }
        let listed = mounts_at(&at);
        assert_eq!(
            (handles.len(), listed),
            (1, 1),
            "round {round}: stacked mounts"
        );
        drop(handles);
        assert!(!is_mounted(&at));
    }
}

#[test]
fn a_lock_somebody_keeps_on_the_mountpoint_never_hangs_a_mount() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("mnt");
    fs::create_dir(&at).unwrap();
    // `flock DIR sleep ...` by another program: the mount waits a moment, then goes on.
    let held = fs::File::open(&at).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let handle = match mount(
        Arc::new(env.store.objects().reader()),
        root,
        &at,
        &MountOptions::default(),
    ) {
        Ok(handle) => handle,
        Err(e) => return skip_or_fail(&e.to_string()),
    };
    assert!(is_mounted(&at));
    drop(handle);
    assert!(!is_mounted(&at));
}
