#!/usr/bin/env bash
# Installs the system packages the tests and the demo need, when missing: fuse3 (fusermount3,
# for the FUSE mount tests, which mount for real), util-linux (setpriv, to drop privileges in
# tests that need an unprivileged user), attr (getfattr) and b3sum (to check object names
# against an independent blake3). Runs apt-get as root; as another user it only reports.
set -euo pipefail
need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v getfattr >/dev/null 2>&1 || need+=(attr)
command -v b3sum >/dev/null 2>&1 || need+=(b3sum)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # b3sum is optional (tests fall back to the library's blake3); the rest is required.
    apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
      apt-get install -y -qq $(printf '%s\n' "${need[@]}" | grep -v '^b3sum$') >/dev/null
  else
    echo "setup: missing ${need[*]}; install them (as root: apt-get install ${need[*]})" >&2
  fi
fi
if [ ! -e /dev/fuse ]; then
  echo "setup: /dev/fuse is missing: the mount tests will fail (load the fuse module)" >&2
fi
