//! Test-only hooks at the race seams: between classify and open, between root components,
//! before the publish swap, between publish steps, and before a capture commits its snapshot
//! (`before-commit`, where a concurrent gc would strike), and in the progress of transfers
//! (`push-packed`, `push-uploaded`, `import-verified` at `object-N`: where a test looks at
//! the bar, or interrupts an import midway), and between the steps of an agent import
//! (`import-step` at `trees`, `provenance`, `backup`, `config`: where a test kills it), and of
//! an update or rollback (`update-step` at `intent`, `trees`, `provenance`, `config`,
//! `states`), and in a mount's server before it mounts (`mount-daemon-before-mounting`: where
//! a test interrupts the waiting `mount --daemon`). In a build without the `test-hooks`
//! feature every hook is an empty inline function, so normal builds carry no hook code.
//!
//! With the feature, a hook whose seam matches `ZEROCLAW_BUNDLE_TEST_HOOK_SEAM` (and whose
//! path ends with `ZEROCLAW_BUNDLE_TEST_HOOK_PATH`, when set) runs
//! `sh -c "$ZEROCLAW_BUNDLE_TEST_HOOK_CMD"` and waits for it, with `HOOK_SEAM` and
//! `HOOK_PATH` in its environment. The command can swap an entry for a symlink, replace the
//! destination, or `kill -9 $PPID` to simulate a crash at exactly that step.
//!
//! Fault injection: [`fault`] sits in front of a system call whose failure must be handled
//! (creating the staging directory, each directory and file, each write, the chmod, the
//! syncfs, each rename of the swap). With the feature, when `ZEROCLAW_BUNDLE_TEST_FAULT`
//! names that step (and `ZEROCLAW_BUNDLE_TEST_FAULT_PATH`, when set, is a suffix of the path)
//! it returns the error `ZEROCLAW_BUNDLE_TEST_FAULT_ERRNO` (default EIO) instead of letting the
//! call run, so a test can fail each step in turn. Normal builds always return `Ok`.

/// Runs the test hook for `seam` at `path` (no-op in normal builds).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn seam(_seam: &str, _path: &str) {}

/// Runs the test hook for `seam` at `path` (no-op in normal builds).
#[cfg(feature = "test-hooks")]
pub fn seam(seam: &str, path: &str) {
    let Ok(want) = std::env::var("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM") else {
        return;
    };
    if want != seam {
        return;
    }
    if let Ok(suffix) = std::env::var("ZEROCLAW_BUNDLE_TEST_HOOK_PATH") {
        if !path.ends_with(&suffix) {
            return;
        }
    }
    let Ok(cmd) = std::env::var("ZEROCLAW_BUNDLE_TEST_HOOK_CMD") else {
        return;
    };
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .env("HOOK_SEAM", seam)
        .env("HOOK_PATH", path)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("test hook {seam} at {path} failed: {status:?}");
    }
}

/// An injected failure of `step` at `path` (never in normal builds).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn fault(_step: &str, _path: &str) -> std::io::Result<()> {
    Ok(())
}

/// An injected failure of `step` at `path` (never in normal builds).
#[cfg(feature = "test-hooks")]
pub fn fault(step: &str, path: &str) -> std::io::Result<()> {
    if std::env::var("ZEROCLAW_BUNDLE_TEST_FAULT").ok().as_deref() != Some(step) {
        return Ok(());
    }
    if let Ok(suffix) = std::env::var("ZEROCLAW_BUNDLE_TEST_FAULT_PATH") {
        if !path.ends_with(&suffix) {
            return Ok(());
        }
    }
    let errno = std::env::var("ZEROCLAW_BUNDLE_TEST_FAULT_ERRNO")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    Err(std::io::Error::from_raw_os_error(errno))
}
