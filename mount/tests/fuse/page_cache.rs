//! Pins: the first open of a file the daemon reads itself (smaller than a passed-through
//! one) stores its verified bytes in the kernel's page cache, so reading it sends no READ;
//! a later open stores nothing again; once the kernel has dropped those pages, reads come
//! through READ with the same bytes; an empty file stores nothing; a damaged blob stores
//! nothing and reads EIO, every time.

use std::fs::{self, File};

use rustix::fs::{fadvise, Advice};
use zeroclaw_bundle_mount::MountOptions;

use crate::noise;
use crate::util::{corrupt, errno_of, file, Env};

/// The largest file the daemon reads itself: one byte short of a passed-through one.
const LARGEST_READ_BY_THE_DAEMON: usize = 256 * 1024;

#[test]
fn a_small_files_first_open_stores_its_bytes_and_no_read_follows() {
    let env = Env::new();
    let files = [
        ("one-byte", vec![b'x']),
        ("one-block", noise(4096, 1)),
        ("compressible", b"line of text\n".repeat(800)),
        ("incompressible", noise(100_000, 2)),
        ("largest", noise(LARGEST_READ_BY_THE_DAEMON, 3)),
        ("empty", Vec::new()),
        ("damaged", noise(9_000, 4)),
    ];
    let (root, expected) = env.build(files.iter().map(|(n, d)| file(*n, d.clone())).collect());
    corrupt(&env, &expected[&b"damaged"[..]].id);
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let readable = &files[..6];
    for (name, data) in readable {
        assert!(fs::read(m.path.join(name)).unwrap() == *data, "{name}");
    }
    assert_eq!(
        (m.handle().read_requests(), m.handle().stored_at_open()),
        (0, 5),
        "every non-empty file stored at its first open, and not one READ"
    );
    // A second open finds the pages cached: nothing stored again, still no READ.
    for (name, data) in readable {
        assert!(
            fs::read(m.path.join(name)).unwrap() == *data,
            "{name} again"
        );
    }
    assert_eq!(
        (m.handle().read_requests(), m.handle().stored_at_open()),
        (0, 5)
    );
    // Once the kernel drops the pages, the same bytes come through READ.
    for (name, data) in &readable[..5] {
        let p = m.path.join(name);
        let f = File::open(&p).unwrap();
        fadvise(&f, 0, None, Advice::DontNeed).unwrap();
        drop(f);
        let reads = m.handle().read_requests();
        assert!(
            fs::read(&p).unwrap() == *data,
            "{name} after its pages were dropped"
        );
        assert!(
            m.handle().read_requests() > reads,
            "{name} read through READ"
        );
    }
    assert_eq!(m.handle().stored_at_open(), 5);
    // A damaged blob stores nothing: its reads fail, at the first open and after.
    for _ in 0..2 {
        assert_eq!(
            errno_of("read damaged", fs::read(m.path.join("damaged"))),
            libc::EIO
        );
    }
    assert_eq!(m.handle().stored_at_open(), 5);
    assert!(!m.handle().faults().is_empty());
}
