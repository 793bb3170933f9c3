//! # Tests, fuzzing and benchmarks
//!
//! `scripts/test.sh` runs everything CI runs (`.ci/run` calls it): it installs what is missing
//! (`scripts/setup.sh`), then `cargo fmt --check`, clippy with warnings denied, the docs with
//! warnings denied, every test, and the linking example in `tests/zeroclaw-link`.
//!
//! The full suite needs root and `/dev/fuse`: the FUSE tests mount for real, and the tests that
//! need an unprivileged user drop privileges for one child with `setpriv`. CI runs as root with
//! `CI` set, and there a FUSE test that cannot mount fails instead of passing silently. As a
//! non-root user (without `CI`), the FUSE tests print `SKIPPED` and the rest run (the
//! privilege-dropping tests then run as you); install `fuse3`, `attr`, `util-linux`, `b3sum`
//! and `openssh-client` yourself first, since `scripts/setup.sh` only reports what is missing
//! when it is not root. In a container, pass the device in (`docker run --device /dev/fuse
//! --cap-add SYS_ADMIN ...`).
//!
//! The integration tests (`tests/cli/`, one test binary) drive the real binary built with the
//! `test-hooks` feature: hooks at the race seams (between classify and open, between root
//! components, before and between publish and import steps) run a shell command from the
//! environment, so a test can swap an entry for a symlink or `kill -9` the process at an exact
//! step. In a normal build the hooks are empty functions. While iterating:
//!
//! ```text
//! cargo check --features test-hooks
//! cargo nextest run --features test-hooks -E 'test(/name_fragment/)'
//! ```
//!
//! The remote-store tests push and pull through a `file://` remote and through a real S3
//! server, `s3s-fs` (installed by `scripts/setup.sh` with `cargo install`), which each test
//! starts on 127.0.0.1 on a port the server picks and stops when it ends; under `CI` a missing
//! `s3s-fs` fails those tests. `ZCB_LONG=1` lengthens the crash and race campaigns
//! ([`super::reliability`]).
//!
//! Fuzzing: `scripts/fuzz.sh [SECONDS]` (nightly `cargo fuzz`, else a seeded mutation harness
//! on stable). Benchmarks: `scripts/bench.sh` against rsync, tar, git, ostree, restic, borg,
//! squashfuse and ratarmount on a seeded corpus, `scripts/scale.sh` at 300,000 files; how to
//! run them and the latest results are in `scripts/bench/README.md`. Benchmarks are never
//! timing assertions inside tests.
//!
//! ## The next ZeroClaw release
//!
//! Bump the pinned `zeroclaw-config` in `Cargo.toml` (and `ZEROCLAW_VERSION` in
//! `src/agent/schema.rs`), then run `scripts/test.sh`: the oracle test
//! (`tests/cli/oracle.rs`) names every difference the new release makes. A new config schema
//! version arrives that way: the agent module is an adapter, so a second version is a
//! contained change.
