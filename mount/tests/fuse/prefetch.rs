//! Pins when the daemon hints objects to its source: until a file is read, listing a
//! directory hints only its subdirectory trees (a cold `find` puts no file contents on the
//! disk queue); the first read of a file hints that file and the siblings after it, and from
//! then on a listing also hints the directory's files; each directory's files once. (A small
//! file's first read is its first open, which stores its bytes in the page cache.)

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zeroclaw_bundle_mount::MountOptions;
use zeroclaw_bundle_store::{Blob, ObjectId, ObjectSource, StoreError, StoreReader, Tree};

use crate::util::{dir, file, Env, Seen};

/// The store's reader, recording every id it is asked to prefetch.
struct Recording {
    inner: StoreReader,
    hinted: Mutex<Vec<ObjectId>>,
}

impl ObjectSource for Recording {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.inner.tree(id)
    }
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.inner.blob(id)
    }
    fn prefetch(&self, ids: &[ObjectId]) {
        self.hinted.lock().unwrap().extend_from_slice(ids);
    }
}

impl Recording {
    /// What was hinted so far, once the prefetch thread has had `want` ids (or 2 s passed:
    /// hints travel through a queue to their own thread).
    fn hinted(&self, want: usize) -> HashSet<ObjectId> {
        let start = Instant::now();
        loop {
            let got: HashSet<ObjectId> = self.hinted.lock().unwrap().iter().copied().collect();
            if got.len() >= want || start.elapsed() > Duration::from_secs(2) {
                return got;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn id_of(expected: &BTreeMap<Vec<u8>, Seen>, path: &str) -> ObjectId {
    expected[path.as_bytes()].id.parse().unwrap()
}

#[test]
fn listing_hints_subtrees_and_reading_hints_sibling_files() {
    let env = Env::new();
    let (root, expected) = env.build(vec![
        dir(
            "notes",
            vec![
                file("a.md", "alpha"),
                file("b.md", "bravo"),
                file("c.md", "charlie"),
                dir("deep", vec![file("d.md", "delta")]),
            ],
        ),
        dir("other", vec![file("e.md", "echo")]),
        dir("later", vec![file("f.md", "foxtrot")]),
    ]);
    let source = Arc::new(Recording {
        inner: env.store.objects().reader(),
        hinted: Mutex::new(Vec::new()),
    });
    let Some(m) = env.mount_source(source.clone(), root, &MountOptions::default()) else {
        return;
    };

    // A walk that never reads a file (all but `later/`): every listed directory's subtrees,
    // no file blob.
    for d in ["", "notes", "notes/deep", "other"] {
        assert!(fs::read_dir(m.path.join(d)).unwrap().count() > 0);
    }
    let trees: HashSet<ObjectId> = ["notes", "notes/deep", "other", "later"]
        .iter()
        .map(|p| id_of(&expected, p))
        .collect();
    let hinted = source.hinted(trees.len());
    assert_eq!(
        hinted, trees,
        "listing hints exactly the subdirectory trees"
    );

    // Opening b.md reads it (its bytes are stored in the page cache) and hints b.md and c.md
    // (its files from there on), not a.md, d.md or e.md.
    drop(fs::File::open(m.path.join("notes/b.md")).unwrap());
    let files: HashSet<ObjectId> = ["notes/b.md", "notes/c.md"]
        .iter()
        .map(|p| id_of(&expected, p))
        .collect();
    let hinted = source.hinted(trees.len() + files.len());
    assert_eq!(
        &hinted - &trees,
        files,
        "the first read hints the file and its later siblings"
    );
    assert_eq!(fs::read(m.path.join("notes/b.md")).unwrap(), b"bravo");

    // A second file read in the same directory hints nothing new.
    let before = source.hinted.lock().unwrap().len();
    assert_eq!(fs::read(m.path.join("notes/a.md")).unwrap(), b"alpha");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        source.hinted.lock().unwrap().len(),
        before,
        "one hint per directory"
    );

    // Now that files are being read, listing a directory hints its files too.
    assert_eq!(fs::read_dir(m.path.join("later")).unwrap().count(), 1);
    let hinted = source.hinted(trees.len() + files.len() + 1);
    assert!(
        hinted.contains(&id_of(&expected, "later/f.md")),
        "a listing after the first read hints the directory's files"
    );
}
