//! Freeing large vectors without growing the process's memory afterwards: the one place
//! that knows how the C allocator under Rust's `System` allocator reacts to a large free.
//!
//! glibc serves an allocation above its mmap threshold (128 KiB at start) with a mapping of
//! its own, and the first `free` of such a mapping raises the threshold to that size (up to
//! 32 MiB) and the heap's trim threshold to twice it. From then on allocations up to that
//! size come from the heaps of the thread arenas (one per thread, up to 8 per core), and
//! each heap keeps up to twice it of freed memory. A capture of a directory of 200,000
//! entries frees vectors of 6 to 14 MB once it is written (its listing, its entries, its
//! encoding), and so does the commit's tree index, which reads it back; with the dozen
//! threads of a capture, a million-file first snapshot peaked at 87 MB instead of 52 MB.
//!
//! [`release`] shrinks a vector to one element before freeing it: `realloc` shrinks a
//! mapping in place (`mremap`), and freeing a one-page mapping moves no threshold. With
//! another allocator, or a vector that came from a heap, it costs one `realloc`. The
//! threshold itself is one `mallopt` call, which needs `unsafe`, forbidden here.

/// glibc's mmap threshold at start: a smaller allocation never had a mapping of its own.
const MAPPED_FROM: usize = 128 * 1024;

/// Frees `vector` (of any size) without raising the allocator's mmap threshold (see the
/// module doc). For vectors that may hold many megabytes: a directory's listing, entries
/// or encoding, a pack's index. A small one is simply dropped.
pub fn release<T>(mut vector: Vec<T>) {
    if vector.capacity().saturating_mul(size_of::<T>()) >= MAPPED_FROM {
        vector.clear();
        vector.shrink_to(1);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Set in the probe's own process: how it frees its large vector.
    const PROBE: &str = "ZEROCLAW_BUNDLE_HEAP_PROBE";

    /// Frees an 8 MiB vector as `$PROBE` says, then allocates 1 MiB and prints whether glibc
    /// gave it a mapping of its own (the threshold unmoved) or a place in an arena's heap.
    /// In a process of its own: the threshold is the process's, and other tests move it.
    #[test]
    #[ignore = "run by a_released_vector_leaves_the_mmap_threshold_where_it_was"]
    fn probe() {
        let Ok(how) = std::env::var(PROBE) else {
            return;
        };
        let large = std::hint::black_box(vec![1u8; 8 << 20]);
        match how.as_str() {
            "release" => release(large),
            _ => drop(large),
        }
        let after = std::hint::black_box(vec![1u8; 1 << 20]);
        // A mapped chunk starts a mapping, its 16-byte header before the bytes.
        let chunk = after.as_ptr() as usize - 16;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapped = maps.lines().any(|line| {
            line.split('-')
                .next()
                .and_then(|start| usize::from_str_radix(start, 16).ok())
                == Some(chunk)
        });
        println!("probe: mapped={mapped}");
    }

    /// Runs [`probe`] in a new process: whether the 1 MiB allocation after the free was
    /// mapped.
    fn mapped_after(how: &str) -> bool {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "heap::tests::probe", "--ignored", "--nocapture"])
            .env(PROBE, how)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "probe failed: {stdout}");
        match stdout
            .lines()
            .find_map(|l| l.strip_prefix("probe: mapped="))
        {
            Some(mapped) => mapped == "true",
            None => panic!("the probe printed no verdict: {stdout}"),
        }
    }

    #[test]
    fn a_released_vector_leaves_the_mmap_threshold_where_it_was() {
        assert!(
            !mapped_after("drop"),
            "dropped whole, a large vector raises the threshold past 1 MiB"
        );
        assert!(mapped_after("release"));
    }
}
