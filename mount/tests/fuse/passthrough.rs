//! Pins FUSE passthrough (the kernel reads a large whole object file itself, see the crate's
//! `passthrough` module): on this kernel, as root, the root's `user.zeroclaw.passthrough` says
//! `on`, a large raw object reads back exactly while the daemon hears no READ for it, and one
//! backing file serves every concurrent open of an inode; compressed, packed and small raw
//! objects on the same mount still read through the daemon; a corrupt large object fails its
//! open with EIO and is never handed to the kernel; turned off, the xattr says why and every
//! read goes through the daemon; a backing file the kernel refuses (a store on overlayfs:
//! ELOOP) turns passthrough off for the rest of the mount after one try, reads unharmed. Each of these fails should passthrough silently stop
//! (nothing asked at INIT, no backing file registered, reads falling back).

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use zeroclaw_bundle_mount::{MountOptions, Passthrough, XATTR_PASSTHROUGH};
use zeroclaw_bundle_store::{ObjectId, Tree, TreeEntry};

use crate::noise;
use crate::util::{errno_of, file, Env};

/// Large enough to be passed through (over 256 KiB, so always one raw object file).
const LARGE: usize = 5 * 1024 * 1024 + 17;

/// The mount root's passthrough attribute.
fn passthrough_xattr(root: &Path) -> String {
    let mut buf = [0u8; 512];
    let n = rustix::fs::getxattr(root, XATTR_PASSTHROUGH, &mut buf[..])
        .unwrap_or_else(|e| panic!("getxattr {XATTR_PASSTHROUGH} on {}: {e}", root.display()));
    String::from_utf8(buf[..n].to_vec()).expect("utf-8")
}

/// A store holding one large raw object, one compressed loose object, and (written while the
/// store packs) a packed compressed object and a packed raw one.
fn mixed(env: &Env) -> (ObjectId, Vec<(&'static str, Vec<u8>)>) {
    let large = noise(LARGE, 11);
    let compressed = "compressible line of text\n".repeat(4000).into_bytes();
    let packed_text = "packed and compressed\n".repeat(3000).into_bytes();
    let packed_raw = noise(3000, 5);
    // The packed two written while the store packs (as a capture does until it syncs), the
    // other two after, loose; the tree names all four.
    let objects = env.store.objects();
    objects.pack_until_sync();
    let mut ids = Vec::new();
    for data in [&packed_text, &packed_raw] {
        ids.push(objects.write_bytes(data).expect("write packed"));
    }
    objects.sync().expect("sync");
    for data in [&large, &compressed] {
        ids.push(objects.write_bytes(data).expect("write loose"));
    }
    let entry = |name: &str, data: &[u8], id: ObjectId| {
        TreeEntry::file(name.as_bytes().to_vec(), 0o644, data.len() as u64, id)
    };
    let tree = Tree::from_entries(vec![
        entry("packed.txt", &packed_text, ids[0]),
        entry("packed-raw.bin", &packed_raw, ids[1]),
        entry("large.bin", &large, ids[2]),
        entry("compressed.txt", &compressed, ids[3]),
    ])
    .expect("a valid tree");
    let root = objects.write_tree(&tree).expect("write the tree");
    let objects = env.store.objects().list().expect("list objects");
    let form = |data: &[u8]| {
        let id = ObjectId::of(data);
        let found: Vec<_> = objects.iter().filter(|o| o.id == id).collect();
        assert_eq!(found.len(), 1, "one copy of each object: {found:?}");
        (found[0].packed, found[0].compressed)
    };
    // The forms this test relies on, checked rather than assumed.
    assert_eq!(form(&large), (false, false), "large: a raw loose file");
    assert_eq!(form(&compressed), (false, true), "compressed: a loose .zst");
    assert_eq!(form(&packed_text), (true, true), "packed, compressed");
    assert_eq!(form(&packed_raw), (true, false), "packed, raw");
    (
        root,
        vec![
            ("large.bin", large),
            ("compressed.txt", compressed),
            ("packed.txt", packed_text),
            ("packed-raw.bin", packed_raw),
        ],
    )
}

#[test]
fn a_large_raw_object_is_read_by_the_kernel_and_the_rest_through_the_daemon() {
    let env = Env::new();
    let (root, files) = mixed(&env);
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    assert_eq!(passthrough_xattr(&m.path), "on");
    assert_eq!(m.handle().passthrough(), Passthrough::On);
    let large = &files[0].1;
    let path = m.path.join("large.bin");
    assert_eq!(&fs::read(&path).expect("read large.bin"), large);
    assert_eq!(
        m.handle().passed_through(),
        1,
        "large.bin was passed through"
    );
    assert_eq!(
        m.handle().read_requests(),
        0,
        "the daemon heard no READ for a passed-through file"
    );
    // Concurrent opens of one inode share its backing file; each reads everything.
    let mut opened: Vec<fs::File> = (0..3)
        .map(|_| fs::File::open(&path).expect("open large.bin"))
        .collect();
    for f in &mut opened {
        let mut got = Vec::new();
        f.read_to_end(&mut got).expect("read an open large.bin");
        assert!(
            got == *large,
            "large.bin read through a shared backing file"
        );
    }
    drop(opened);
    // After every open was released, a new open registers the file again.
    assert_eq!(&fs::read(&path).expect("read large.bin again"), large);
    assert_eq!(m.handle().passed_through(), 5);
    assert_eq!(m.handle().read_requests(), 0);
    // `cmp` (an independent reader) agrees with the bytes written.
    let plain = env.store.objects().tmp_dir().join("large.expected");
    fs::write(&plain, large).expect("write the expected bytes");
    let cmp = std::process::Command::new("cmp")
        .arg(&plain)
        .arg(&path)
        .output()
        .expect("run cmp");
    assert!(cmp.status.success(), "cmp: {cmp:?}");
    // The compressed and packed objects on the same mount are read through the daemon: their
    // bytes stored in the page cache at their first open, so no READ follows.
    for (name, data) in &files[1..] {
        let (reads, stored) = (m.handle().read_requests(), m.handle().stored_at_open());
        assert_eq!(&fs::read(m.path.join(name)).expect(name), data, "{name}");
        assert_eq!(
            (m.handle().read_requests(), m.handle().stored_at_open()),
            (reads, stored + 1),
            "{name} was stored by the daemon at its open"
        );
    }
    assert_eq!(m.handle().passed_through(), 6, "only large.bin (and cmp)");
    assert_eq!(
        passthrough_xattr(&m.path),
        "on",
        "nothing refused meanwhile"
    );
    assert!(m.handle().faults().is_empty(), "{:?}", m.handle().faults());
}

#[test]
fn a_corrupt_large_object_fails_its_open_and_is_never_passed_through() {
    let env = Env::new();
    let large = noise(LARGE, 3);
    let (root, _) = env.build(vec![
        file("large.bin", large.clone()),
        file("twin.bin", large.clone()),
    ]);
    let object = env.store.objects().path_of(&ObjectId::of(&large));
    let mut bytes = fs::read(&object).expect("read the object");
    bytes[LARGE / 2] ^= 0x01;
    fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).expect("chmod");
    fs::write(&object, bytes).expect("corrupt the object");
    fs::set_permissions(&object, fs::Permissions::from_mode(0o444)).expect("chmod");
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    assert_eq!(passthrough_xattr(&m.path), "on");
    for name in ["large.bin", "twin.bin", "large.bin"] {
        let errno = errno_of(
            &format!("open corrupt {name}"),
            fs::File::open(m.path.join(name)),
        );
        assert_eq!(errno, libc::EIO, "{name}");
    }
    assert_eq!(m.handle().passed_through(), 0, "never handed to the kernel");
    let faults = m.handle().faults().join("\n");
    assert!(faults.contains("corrupt"), "{faults}");
    assert_eq!(passthrough_xattr(&m.path), "on", "damage is not a refusal");
}

#[test]
fn turned_off_every_read_goes_through_the_daemon_and_the_xattr_says_why() {
    let env = Env::new();
    let large = noise(LARGE, 9);
    let (root, _) = env.build(vec![file("large.bin", large.clone())]);
    let opts = MountOptions {
        passthrough: Passthrough::Off("turned off for a comparison".into()),
        ..MountOptions::default()
    };
    let Some(mut m) = env.mount(root, &opts) else {
        return;
    };
    assert_eq!(
        passthrough_xattr(&m.path),
        "off: turned off for a comparison"
    );
    assert_eq!(
        fs::read(m.path.join("large.bin")).expect("read large.bin"),
        large
    );
    assert_eq!(m.handle().passed_through(), 0);
    assert!(m.handle().read_requests() > 0, "read through the daemon");
    // Listed on the root only, beside the object id.
    let mut list = [0u8; 256];
    let n = rustix::fs::listxattr(&m.path, &mut list[..]).expect("listxattr root");
    let names: Vec<&[u8]> = list[..n].split(|b| *b == 0).collect();
    assert!(names.contains(&XATTR_PASSTHROUGH.as_bytes()), "{names:?}");
    let n = rustix::fs::listxattr(m.path.join("large.bin"), &mut list[..]).expect("listxattr");
    assert!(!list[..n]
        .split(|b| *b == 0)
        .any(|name| name == XATTR_PASSTHROUGH.as_bytes()));
}

/// An overlayfs mount over temp directories, unmounted (lazily) on drop, its directories
/// removed only once it is gone.
struct Overlay {
    dir: Option<tempfile::TempDir>,
    merged: std::path::PathBuf,
}

impl Overlay {
    /// None (after printing why) where overlayfs cannot be mounted here, outside CI.
    fn new() -> Option<Overlay> {
        let dir = tempfile::tempdir().expect("temp dir");
        for d in ["lower", "upper", "work", "merged"] {
            fs::create_dir(dir.path().join(d)).expect("create overlay dirs");
        }
        let p = |d: &str| dir.path().join(d).display().to_string();
        let out = std::process::Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                p("lower"),
                p("upper"),
                p("work")
            ))
            .arg(p("merged"))
            .output()
            .expect("run mount");
        if !out.status.success() {
            crate::util::skip_or_fail(&format!("cannot mount overlayfs: {out:?}"));
            return None;
        }
        Some(Overlay {
            merged: dir.path().join("merged"),
            dir: Some(dir),
        })
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.merged)
            .status();
        if crate::util::is_mounted(&self.merged) {
            if let Some(dir) = self.dir.take() {
                eprintln!("leaving {} behind: still mounted", dir.keep().display());
            }
        }
    }
}

#[test]
fn a_backing_file_the_kernel_refuses_turns_passthrough_off_once_and_reads_still_work() {
    // A store on overlayfs (a stacked filesystem, depth 1) cannot back a passthrough file of
    // a mount that allows depth 1: the kernel refuses the registration (ELOOP). The first
    // large open meets that refusal and falls back; the mount says why from then on and
    // never asks again.
    let Some(overlay) = Overlay::new() else {
        return;
    };
    let env = Env::new_in(&overlay.merged);
    let first = noise(LARGE, 21);
    let second = noise(LARGE + 1, 22);
    let (root, _) = env.build(vec![
        file("first.bin", first.clone()),
        file("second.bin", second.clone()),
    ]);
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    assert_eq!(passthrough_xattr(&m.path), "on", "nothing refused yet");
    assert!(fs::read(m.path.join("first.bin")).expect("read first.bin") == first);
    let said = passthrough_xattr(&m.path);
    assert!(
        said.starts_with("off: ") && said.contains("ELOOP"),
        "{said}"
    );
    assert_eq!(m.handle().passthrough().to_string(), said);
    for _ in 0..2 {
        assert!(fs::read(m.path.join("second.bin")).expect("read second.bin") == second);
        assert!(fs::read(m.path.join("first.bin")).expect("read first.bin") == first);
    }
    assert_eq!(
        m.handle().passthrough_refusals(),
        1,
        "asked the kernel once"
    );
    assert_eq!(m.handle().passed_through(), 0);
    assert!(m.handle().read_requests() > 0, "read through the daemon");
}
