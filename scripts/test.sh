#!/usr/bin/env bash
# What CI runs (.ci/run calls this): install what the tests need, then format check, clippy
# with warnings denied, docs with warnings denied, and every test (unit, integration with the
# test hooks compiled in, FUSE tests that mount for real, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --features test-hooks -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The library without the command line (what ZeroClaw links): it builds, and none of the CLI's
# crates is in its dependency tree.
cargo clippy --lib --no-default-features --quiet -- -D warnings
if cargo tree -e normal --no-default-features -p zeroclaw-bundle --prefix none \
  | grep -E '^(clap|indicatif|signal-hook) v'; then
  echo "the library without its cli feature links a CLI crate (above)" >&2
  exit 1
fi
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --features test-hooks --no-fail-fast
  cargo test --workspace --doc --quiet
else
  cargo test --workspace --features test-hooks --no-fail-fast
fi
# The linking example (tests/zeroclaw-link: how ZeroClaw embeds `zeroclaw bundle` through the
# public API), checked against the standalone binary; it shares this repository's target dir.
# `--locked`: its own Cargo.lock is committed; a stale one fails here instead of being rewritten
# (after a dependency change, run `cargo check --manifest-path tests/zeroclaw-link/Cargo.toml`
# once without it and commit the lock it writes).
link=tests/zeroclaw-link/Cargo.toml
cargo build --quiet --bins
cargo fmt --manifest-path "$link" --check
cargo clippy --manifest-path "$link" --target-dir target --all-targets --locked --quiet -- -D warnings
ZEROCLAW_BUNDLE_BIN="$PWD/target/debug/zeroclaw-bundle" \
  cargo test --manifest-path "$link" --target-dir target --locked --quiet
