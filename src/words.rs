//! How counts and sizes read in messages (`1 file`, `3 entries`, `1.5 KiB`): one wording for
//! the command line and the library's own text (the review screen), public so that a
//! program linking the library words its own output the same way.

/// `n` and `noun`, plural when `n != 1` (`1 file`, `2 files`, `3 entries`).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else {
        format!("{n} {noun}s")
    }
}

/// Human-readable byte counts.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
