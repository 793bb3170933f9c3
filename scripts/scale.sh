#!/usr/bin/env bash
# zeroclaw-bundle scale measurement: trees of 300,000 small files in two layouts, each in a
# store of its own:
#   huge    one directory of 100,000 entries, the other 200,000 files in 200 directories of
#           1,000 (ten parents of 20), plus one 4 GiB sparse file;
#   medium  300 directories of 1,000 files (ten parents of 30), no large directory.
# Measures capture, no-op capture, checkout and the mount (`find`; for `huge` also `ls -l`
# over the 100,000-entry directory, and the same `ls -l` over the plain directory for
# comparison), each with wall seconds and peak RSS (/usr/bin/time %M; the mount daemon's
# VmHWM). Prints a markdown table and writes it to target/bench/scale.md.
#
# A measurement, not a test: it asserts nothing about time or memory. It fails only when a
# command under test fails (the figures would mean nothing then).
#
# Usage:  scripts/scale.sh                     (also: BENCH_SECTIONS=scale scripts/bench.sh)
# Environment:
#   ZB=path              binary; default
#                        target/release/zeroclaw-bundle (built unless
#                        SCALE_BUILD=0)
#   SCALE_DIR=/tmp/zb-scale   work dir; removed and recreated
#   SCALE_LAYOUTS="huge medium"   which layouts to build and measure, in this order
#   SCALE_FILES=300000   small files of each layout
#   SCALE_BIG=100000     entries of the one large directory (layout huge)
#   SCALE_PER=1000       files per directory outside the large one
#   SCALE_SPARSE=4G      size of the sparse file (0 = none)
#   SCALE_COLD=1         drop the page cache before each capture/checkout/find (needs root)
#   SCALE_GIT=0          1 = also time `git add -A && git commit` on the same tree (first, and
#                        a cold no-op) for the capture ratio; the first git commit of the huge
#                        tree takes minutes (it hashes and compresses the 4 GiB file)
#   SCALE_KEEP=0         1 = keep the work dir

set -euo pipefail
export LC_ALL=C

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
W=${SCALE_DIR:-/tmp/zb-scale}
FILES=${SCALE_FILES:-300000}
BIG=${SCALE_BIG:-100000}
PER=${SCALE_PER:-1000}
LAYOUTS=${SCALE_LAYOUTS:-huge medium}
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
for layout in $LAYOUTS; do
	case $layout in
	huge | medium) ;;
	*) echo "error: unknown layout in SCALE_LAYOUTS: $layout (huge, medium)" >&2; exit 2 ;;
	esac
done

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

# generate DIR LAYOUT: the small files of a layout (see the header).
generate() {
	python3 - "$1" "$2" "$FILES" "$BIG" "$PER" <<'EOF'
import os, sys
root, layout, files, big, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
os.makedirs(root)
rest = files
if layout == "huge":
    os.makedirs(f"{root}/big")
    for i in range(big):
        with open(f"{root}/big/entry-{i:06d}.txt", "w") as f:
            f.write(f"big entry {i}\n")
    rest = files - big
dirs = -(-rest // per)
fan = max(1, -(-dirs // 10))
for i in range(rest):
    d = f"{root}/tree/d{i // (per * fan):03d}/s{(i // per) % fan:02d}"
    if i % per == 0:
        os.makedirs(d)
    with open(f"{d}/file-{i:06d}.md", "w") as f:
        f.write(f"small file {i}\n" * (1 + i % 7))
EOF
}

# mount_at SNAPSHOT STORE: starts a mount of SNAPSHOT at $MNT in the background.
mount_at() {
	mkdir -p "$MNT"
	"$ZB" --store "$2" mount "$1" "$MNT" >"$W/.mount.log" 2>&1 &
	MOUNT_PID=$!
	for _ in $(seq 2000); do mountpoint -q "$MNT" && break; sleep 0.01; done
	mountpoint -q "$MNT" || { log "mount failed: $(cat "$W/.mount.log")"; exit 1; }
}
unmount() {
	"$ZB" umount "$MNT" >/dev/null
	wait "$MOUNT_PID" || true
	MOUNT_PID=""
}

# measure_layout LAYOUT: builds the layout's tree under $W/LAYOUT, measures, then removes it.
measure_layout() {
	local L=$1 src=$W/$1/src S=$W/$1/store co=$W/$1/co id hwm
	log "$L: generating $FILES files under $src"
	generate "$src" "$L"
	if [[ $L == huge && $SPARSE != 0 ]]; then truncate -s "$SPARSE" "$src/sparse.bin"; fi
	local one=$src/tree/d000/s00/file-000001.md
	[[ $L == huge ]] && one=$src/big/entry-000001.txt

	timed "$L: capture (first)" 1 "$ZB" --store "$S" snapshot --dir "$src"
	id=$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | awk '{ print $NF }')
	timed "$L: capture (no-op)" 1 "$ZB" --store "$S" snapshot --dir "$src"
	timed "$L: capture (no-op, warm)" 0 "$ZB" --store "$S" snapshot --dir "$src"
	echo changed >"$one"
	timed "$L: capture (one file changed)" 0 "$ZB" --store "$S" snapshot --dir "$src"
	if [[ ${SCALE_GIT:-0} == 1 ]]; then
		local G=(git --git-dir="$W/$L/git" --work-tree="$src" -c user.name=scale -c user.email=scale@localhost)
		"${G[@]}" init -q
		timed "$L: git add -A && git commit (first)" 1 sh -c '"$@" add -A && "$@" commit -q -m first' sh "${G[@]}"
		timed "$L: git add -A && git commit (no-op)" 1 sh -c '"$@" add -A && "$@" commit -q --allow-empty -m noop' sh "${G[@]}"
		timed "$L: capture (no-op, again)" 1 "$ZB" --store "$S" snapshot --dir "$src"
	fi
	timed "$L: checkout" 1 "$ZB" --store "$S" checkout "$id" --out "$co"
	if [[ $L == huge ]]; then
		timed "$L: ls -l plain 100k dir (warm)" 0 bash -c 'ls -l "$0" | wc -l' "$co/big"
	fi

	mount_at "$id" "$S"
	timed "$L: mount: find, counted (cold)" 1 bash -c 'find "$0" | wc -l' "$MNT"
	if [[ $L == huge ]]; then
		timed "$L: mount: ls -l 100k dir (fresh mount)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
		timed "$L: mount: ls -l 100k dir (again)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
	fi
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status")
	row "$L: mount daemon peak (VmHWM)" "-" "$hwm" ""
	unmount

	if [[ $L == huge ]]; then
		# The same listing on a remount, without the earlier find having warmed its caches.
		mount_at "$id" "$S"
		timed "$L: mount: ls -l 100k dir (first touch)" 0 bash -c 'ls -l "$0" | wc -l' "$MNT/big"
		unmount
	fi
	if [[ ${SCALE_KEEP:-0} != 1 ]]; then rm -rf "${W:?}/$L"; fi
}

for layout in $LAYOUTS; do measure_layout "$layout"; done

mkdir -p "$(dirname "$REPORT")"
{
	echo "## scale: $FILES files per layout ($LAYOUTS; huge: $BIG in one directory and a $SPARSE sparse file; the rest in directories of $PER)"
	echo
	echo "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(findmnt -n -o FSTYPE --target "$W") at $W; $("$ZB" --version | head -n1), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); cold = drop_caches before"
	echo
	echo "| operation | seconds | peak MiB | last output line |"
	echo "|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
	echo
	ratio() { awk -v a="${SECS[$1]:-}" -v b="${SECS[$2]:-}" -v w="$3" 'BEGIN { if (a != "" && b > 0) printf "- %s: %.2fx\n", w, a / b }'; }
	ratio "huge: mount: ls -l 100k dir (first touch)" "huge: ls -l plain 100k dir (warm)" "ls -l mounted (first touch) / plain"
	ratio "huge: mount: ls -l 100k dir (again)" "huge: ls -l plain 100k dir (warm)" "ls -l mounted (again) / plain"
	for layout in $LAYOUTS; do
		ratio "$layout: capture (no-op, again)" "$layout: git add -A && git commit (no-op)" "$layout: cold no-op capture / git add -A && git commit"
		ratio "$layout: capture (first)" "$layout: git add -A && git commit (first)" "$layout: first capture / first git add -A && git commit"
	done
} >"$REPORT"
cat "$REPORT"
