#!/usr/bin/env bash
# zeroclaw-bundle scale measurement: a tree of 300,000 small files, one directory of them
# holding 100,000 entries, plus one 4 GiB sparse file. Measures capture, no-op capture,
# checkout and the mount (`find`, `ls -l` over the 100,000-entry directory, and the same
# `ls -l` over the plain directory for comparison), each with wall seconds and peak RSS
# (/usr/bin/time %M; the mount daemon's VmHWM). Prints a markdown table and writes it to
# target/bench/scale.md.
#
# A measurement, not a test: it asserts nothing about time or memory. It fails only when a
# command under test fails (the figures would mean nothing then).
#
# Usage:  scripts/scale.sh                     (also: BENCH_SECTIONS=scale scripts/bench.sh)
# Environment:
#   ZB=path              binary; default target/release/zeroclaw-bundle (built unless
#                        SCALE_BUILD=0)
#   SCALE_DIR=/tmp/zb-scale   work dir; removed and recreated
#   SCALE_FILES=300000   total small files (SCALE_BIG of them in one directory)
#   SCALE_BIG=100000     entries of the one large directory
#   SCALE_SPARSE=4G      size of the sparse file (0 = none)
#   SCALE_COLD=1         drop the page cache before each capture/checkout/find (needs root)
#   SCALE_GIT=0          1 = also time `git add -A && git commit` on the same tree (first, and
#                        a cold no-op) for the capture ratio; the first git commit of this tree
#                        takes minutes (it hashes and compresses the 4 GiB file)
#   SCALE_KEEP=0         1 = keep the work dir

set -euo pipefail
export LC_ALL=C

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
W=${SCALE_DIR:-/tmp/zb-scale}
FILES=${SCALE_FILES:-300000}
BIG=${SCALE_BIG:-100000}
SPARSE=${SCALE_SPARSE:-4G}
COLD=${SCALE_COLD:-1}
REPORT=$ROOT/target/bench/scale.md

case $W in
/ | /tmp | /tmp/ | /root | /home | /work | "") echo "error: refusing SCALE_DIR=$W" >&2; exit 2 ;;
/*) ;;
*) echo "error: SCALE_DIR must be absolute: $W" >&2; exit 2 ;;
esac
if [[ -z ${ZB:-} ]]; then
	ZB=$ROOT/target/release/zeroclaw-bundle
	if [[ ${SCALE_BUILD:-1} == 1 ]]; then
		(cd "$ROOT" && cargo build --release --quiet)
	fi
fi
[[ -x $ZB ]] || { echo "error: no binary at $ZB" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time is needed (apt-get install time)" >&2; exit 2; }

log() { printf '[scale %s] %s\n' "$(date +%T)" "$*" >&2; }
MNT=$W/mnt
MOUNT_PID=""
cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		"$ZB" umount "$MNT" >/dev/null 2>&1 || fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	[[ -n $MOUNT_PID ]] && kill "$MOUNT_PID" 2>/dev/null || true
	if [[ ${SCALE_KEEP:-0} != 1 ]]; then rm -rf "$W"; fi
}
trap cleanup EXIT

drop() { [[ $COLD == 1 ]] && sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

ROWS=()
# row OP SECONDS RSS_KIB NOTE
row() { ROWS+=("| $1 | $2 | $(awk -v k="$3" 'BEGIN { if (k == "") print "-"; else printf "%.1f", k / 1024 }') | $4 |"); }

declare -A SECS
# timed OP COLD(0|1) CMD...: runs CMD under /usr/bin/time, records seconds and max RSS.
timed() {
	local op=$1 cold=$2
	shift 2
	[[ $cold == 1 ]] && drop
	/usr/bin/time -f '%e %M' -o "$W/.time" "$@" >"$W/.out" 2>"$W/.err" || {
		log "$op failed:"
		cat "$W/.err" >&2
		exit 1
	}
	read -r secs rss <"$W/.time"
	SECS[$op]=$secs
	row "$op" "$secs" "$rss" "$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | cut -c1-80)"
	log "$op: ${secs}s, $((rss / 1024)) MiB"
}

rm -rf "$W"
mkdir -p "$W"
log "generating $FILES files ($BIG in one directory) and a $SPARSE sparse file under $W/src"
python3 - "$W/src" "$FILES" "$BIG" <<'EOF'
import os, sys
root, files, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(f"{root}/big")
for i in range(big):
    with open(f"{root}/big/entry-{i:06d}.txt", "w") as f:
        f.write(f"big entry {i}\n")
rest, per = files - big, 500
for i in range(rest):
    d = f"{root}/tree/d{i // (per * 20):03d}/s{(i // per) % 20:02d}"
    if i % per == 0:
        os.makedirs(d)
    with open(f"{d}/file-{i:06d}.md", "w") as f:
        f.write(f"small file {i}\n" * (1 + i % 7))
EOF
[[ $SPARSE != 0 ]] && truncate -s "$SPARSE" "$W/src/sparse.bin"

S=$W/store
timed "capture (first)" 1 "$ZB" --store "$S" snapshot --dir "$W/src"
ID=$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | awk '{ print $NF }')
timed "capture (no-op)" 1 "$ZB" --store "$S" snapshot --dir "$W/src"
timed "capture (no-op, warm)" 0 "$ZB" --store "$S" snapshot --dir "$W/src"
echo changed >"$W/src/big/entry-000001.txt"
timed "capture (one file changed)" 0 "$ZB" --store "$S" snapshot --dir "$W/src"
if [[ ${SCALE_GIT:-0} == 1 ]]; then
	G=(git --git-dir="$W/git" --work-tree="$W/src" -c user.name=scale -c user.email=scale@localhost)
	"${G[@]}" init -q
	timed "git add -A && git commit (first)" 1 sh -c '"$@" add -A && "$@" commit -q -m first' sh "${G[@]}"
	timed "git add -A && git commit (no-op)" 1 sh -c '"$@" add -A && "$@" commit -q --allow-empty -m noop' sh "${G[@]}"
	timed "capture (no-op, again)" 1 "$ZB" --store "$S" snapshot --dir "$W/src"
fi
timed "checkout" 1 "$ZB" --store "$S" checkout "$ID" --out "$W/co"
timed "ls -l plain 100k dir (warm)" 0 bash -c 'ls -l "$0" | wc -l' "$W/co/big"

mkdir -p "$MNT"
"$ZB" --store "$S" mount "$ID" "$MNT" >"$W/.mount.log" 2>&1 &
MOUNT_PID=$!
for _ in $(seq 2000); do mountpoint -q "$MNT" && break; sleep 0.01; done
mountpoint -q "$MNT" || { log "mount failed: $(cat "$W/.mount.log")"; exit 1; }
timed "mount: find, counted (cold)" 1 bash -c 'find "$0" | wc -l' "$MNT"
timed "mount: ls -l 100k dir (fresh mount)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
timed "mount: ls -l 100k dir (again)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status")
row "mount daemon peak (VmHWM)" "-" "$hwm" ""
"$ZB" umount "$MNT" >/dev/null
wait "$MOUNT_PID" || true
MOUNT_PID=""

# The same listing on a remount, without the earlier find having warmed its caches.
"$ZB" --store "$S" mount "$ID" "$MNT" >"$W/.mount.log" 2>&1 &
MOUNT_PID=$!
for _ in $(seq 2000); do mountpoint -q "$MNT" && break; sleep 0.01; done
timed "mount: ls -l 100k dir (first touch)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
"$ZB" umount "$MNT" >/dev/null
wait "$MOUNT_PID" || true
MOUNT_PID=""

mkdir -p "$(dirname "$REPORT")"
{
	echo "## scale: $FILES files ($BIG in one directory), $SPARSE sparse file"
	echo
	echo "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(findmnt -n -o FSTYPE --target "$W") at $W; $("$ZB" --version | head -n1), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); cold = drop_caches before"
	echo
	echo "| operation | seconds | peak MiB | last output line |"
	echo "|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
	echo
	ratio() { awk -v a="${SECS[$1]:-}" -v b="${SECS[$2]:-}" -v w="$3" 'BEGIN { if (a != "" && b > 0) printf "- %s: %.2fx\n", w, a / b }'; }
	ratio "mount: ls -l 100k dir (first touch)" "ls -l plain 100k dir (warm)" "ls -l mounted (first touch) / plain"
	ratio "mount: ls -l 100k dir (again)" "ls -l plain 100k dir (warm)" "ls -l mounted (again) / plain"
	ratio "capture (no-op, again)" "git add -A && git commit (no-op)" "cold no-op capture / git add -A && git commit"
	ratio "capture (first)" "git add -A && git commit (first)" "first capture / first git add -A && git commit"
} >"$REPORT"
cat "$REPORT"
