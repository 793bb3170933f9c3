//! Build script: records the git commit this binary is built from for `--version`
//! (`ZEROCLAW_BUNDLE_COMMIT`). An explicit `ZEROCLAW_BUNDLE_COMMIT` in the build environment
//! wins (a release build from a tarball can pass it); else `git rev-parse` in the source
//! tree; else "unknown commit" (not a git checkout, or no git). It never fails the build.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=ZEROCLAW_BUNDLE_COMMIT");
    let commit = match std::env::var("ZEROCLAW_BUNDLE_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs.
            for path in ["HEAD", "packed-refs"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    rerun_if_exists(&p);
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                    rerun_if_exists(&p);
                }
            }
            match git(&["rev-parse", "--short=12", "HEAD"]) {
                Some(c) => format!("commit {c}"),
                None => "unknown commit".to_string(),
            }
        }
    };
    println!("cargo:rustc-env=ZEROCLAW_BUNDLE_COMMIT={commit}");
}

fn rerun_if_exists(path: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
