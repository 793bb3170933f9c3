//! Real-mount tests of the read-only FUSE view (run as root or any user FUSE allows).
//!
//! Each module pins one promise: `tree` (the mount shows exactly what was stored), `readonly`
//! (every write fails with EROFS, safe mount options, noexec), `xattr` (object ids), `large`
//! (30,000 files list and read with a small tree cache), `damage` (EIO for corrupt or
//! missing objects, ENOENT for unknown names), `prefetch` (what the daemon hints to its
//! source, and when), `listing` (a listing carries every entry's attributes, so stat-ing
//! the listed entries asks the daemon nothing), `lifecycle` (unmount leaves nothing behind,
//! busy and stale mounts are explained), `expansion` (when the mount walks every tree before
//! it answers), `passthrough` (large raw objects are read by the kernel from the store's
//! files, verified first; the rest through the daemon; the root's xattr says which),
//! `records` (every entry reports exactly the kind, mode and size its tree records, through
//! listing, lookup and getattr alike: sizes past the inode table's packed 48 bits, 5,000
//! near-sorting names through a one-tree cache, format-1 trees), `page_cache` (a small
//! file's first open stores its verified bytes in the page cache, so no READ follows).

mod damage;
mod expansion;
mod large;
mod lifecycle;
mod listing;
mod page_cache;
mod passthrough;
mod prefetch;
mod readonly;
mod records;
mod tree;
mod util;
mod xattr;

use util::{dir, exec, file, Spec};

/// Deterministic pseudo-random bytes (xorshift), so big files are not all one value.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

pub const BIG: usize = 3 * 1024 * 1024;

/// The sample snapshot: files, an exec file, an empty file, nested and empty directories,
/// a non-UTF-8 name, a 3 MiB file.
pub fn sample() -> Vec<(Vec<u8>, Spec)> {
    vec![
        file("README.md", "# agent\n"),
        exec("run.sh", "#!/bin/sh\necho hi\n"),
        file("empty", ""),
        file(b"caf\xe9.txt", "a latin-1 name\n"),
        dir(
            "workspace",
            vec![
                file("notes.md", "notes\n"),
                dir(
                    "deep",
                    vec![dir("deeper", vec![file("leaf.txt", "leaf\n")])],
                ),
                dir("empty-dir", vec![]),
            ],
        ),
        dir(
            "skills",
            vec![
                file("big.bin", noise(BIG, 7)),
                exec("tool", "#!/bin/sh\nexit 0\n"),
                file("same-as-readme.md", "# agent\n"),
            ],
        ),
    ]
}
