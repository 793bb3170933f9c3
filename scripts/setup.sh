#!/usr/bin/env bash
# Installs the system packages the tests and the demo need, when missing: fuse3 (fusermount3,
# for the FUSE mount tests, which mount for real), util-linux (setpriv, to drop privileges in
# tests that need an unprivileged user), attr (getfattr) and b3sum (to check object names
# against an independent blake3), openssh-client (ssh-keygen: the signature tests check interop
# with OpenSSH), age (the encrypted-pack tests check interop with the `age` command), openssl
# and python3 (the https remote test's certificates and TLS front), and s3s-fs (cargo install:
# the S3 server of the remote-store tests). Runs
# apt-get as root; as another user it only reports.
# `setup.sh --demo` installs only what scripts/demo.sh uses (fuse3, attr): no b3sum, and no
# s3s-fs build (minutes of compiling a server the demo never starts).
set -euo pipefail
demo=false
[ "${1:-}" = --demo ] && demo=true
need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v getfattr >/dev/null 2>&1 || need+=(attr)
if ! $demo; then
  command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
  command -v b3sum >/dev/null 2>&1 || need+=(b3sum)
  command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
  command -v age >/dev/null 2>&1 || need+=(age)
  # The https remote test: openssl makes its certificates, python3's ssl serves them.
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # Every package is required: the blake3 cross-checks fail rather than trust the
    # product's own hash when b3sum is missing.
    apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "setup: missing ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
  fi
fi
if $demo; then
  [ -e /dev/fuse ] || echo "setup: /dev/fuse is missing: the demo's mounts will fail (load the fuse module)" >&2
  exit 0
fi
if ! command -v b3sum >/dev/null 2>&1 && command -v cargo >/dev/null 2>&1; then
  # No b3sum package (an older distribution): the reference implementation from crates.io.
  echo "setup: installing b3sum with cargo" >&2
  cargo install --locked b3sum >/dev/null
fi
if ! command -v s3s-fs >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs" ] \
  && command -v cargo >/dev/null 2>&1; then
  # The S3-compatible server the remote-store tests push to and pull from (bound to
  # 127.0.0.1 by the tests). 0.14.1 is the newest release that builds with this toolchain
  # (1.95; 0.17 needs 1.96). A few minutes on a fresh machine; cached after that.
  echo "setup: installing s3s-fs with cargo" >&2
  cargo install --locked s3s-fs@0.14.1 --features binary >/dev/null
fi
if [ ! -e /dev/fuse ]; then
  echo "setup: /dev/fuse is missing: the mount tests will fail (load the fuse module)" >&2
fi
