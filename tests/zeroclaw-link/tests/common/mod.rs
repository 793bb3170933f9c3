//! What the link tests share: the standalone binary they compare with.

use std::path::{Path, PathBuf};

/// The standalone `zeroclaw-bundle`: `$ZEROCLAW_BUNDLE_BIN` (scripts/test.sh sets it), else the
/// repository's `target/debug/zeroclaw-bundle`.
pub fn standalone() -> PathBuf {
    let bin = std::env::var_os("ZEROCLAW_BUNDLE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/zeroclaw-bundle")
        });
    assert!(
        bin.is_file(),
        "the standalone binary {} is missing: build the repository first (cargo build)",
        bin.display()
    );
    bin
}
