#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2015  # single-quoted sh -c programs expand in the child; `A && B || true` is meant
# zeroclaw-bundle scale measurement: trees of many small files in three layouts, each in a
# store of its own:
#   huge     one directory of 100,000 entries, the other 200,000 files in 200 directories of
#            1,000 (ten parents of 20), plus one 4 GiB sparse file (300,000 files);
#   medium   300 directories of 1,000 files (ten parents of 30), no large directory;
#   million  1,000 directories of 1,000 files (ten parents of 100) plus one directory of
#            200,000: 1,200,000 files, every one of different content. Not in the default
#            layouts: it takes long (see below); select it with SCALE_LAYOUTS=million.
# For huge and medium: capture, no-op capture, checkout and the mount (`find`; for `huge` also
# `ls -l` over the 100,000-entry directory, and the same `ls -l` over the plain directory for
# comparison).
# For million, each phase beside its peer on the same tree, in the same run:
#   first snapshot (cold)                     git add -A && git commit (cold)
#   no-op snapshot (cold)                     git status (cold, after that commit)
#   snapshot after 1% of the files changed (cold; 12,000 files rewritten)
#   checkout of the first snapshot + sync -f (cold)   tar -x of a tar of the tree + sync -f (cold)
#   a mount's `find | wc -l` (cold; peak = the mount daemon's VmHWM)
#   diff of the first and the 1%-changed snapshots (cold)
# and a table of ratios ours/peer, with each phase's peak memory against the 64 MiB goal.
# Every row: wall seconds and peak RSS (/usr/bin/time %M, the largest process of the command;
# the mount daemon's VmHWM). Prints markdown tables and writes them to target/bench/scale.md.
#
# A measurement, not a test: it asserts nothing about time or memory (the 64 MiB goal is
# printed, not checked). It fails only when a command under test fails (the figures would
# mean nothing then).
#
# Run time and space: huge and medium take a few minutes each. million took 33 minutes on 2
# busy cores: generating the files 2, their tar 2, git add -A && git commit 7, removing git's
# 1.2 million loose objects 14 (untimed), tar -x 1, our phases under 3 together. It needs
# about 15 GB free at SCALE_DIR (the tree, its tar, git's loose objects, two checkouts; each
# is removed once measured) and about 2.5 million free inodes (two trees at a time).
#
# Usage:  scripts/scale.sh                     (also: BENCH_SECTIONS=scale scripts/bench.sh)
#         SCALE_LAYOUTS=million scripts/scale.sh
# Environment:
#   ZB=path              binary; default
#                        target/release/zeroclaw-bundle (built unless
#                        SCALE_BUILD=0)
#   SCALE_DIR=/tmp/zb-scale   work dir; removed and recreated
#   SCALE_LAYOUTS="huge medium"   which layouts to build and measure, in this order
#                        (huge, medium, million)
#   SCALE_FILES=300000   small files of each of huge and medium
#   SCALE_BIG=100000     entries of the one large directory (layout huge)
#   SCALE_PER=1000       files per directory outside the large one (every layout)
#   SCALE_SPARSE=4G      size of the sparse file (0 = none)
#   SCALE_MILLION_DIRS=1000    directories of SCALE_PER files (layout million)
#   SCALE_MILLION_BIG=200000   entries of the one large directory (layout million)
#   SCALE_COLD=1         drop the page cache before each capture/checkout/find (needs root)
#   SCALE_GIT=0          1 = also time `git add -A && git commit` on the same tree (first, and
#                        a cold no-op) for the capture ratio, for huge and medium; the first
#                        git commit of the huge tree takes minutes (it hashes and compresses
#                        the 4 GiB file). Layout million always runs its peers.
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
M_DIRS=${SCALE_MILLION_DIRS:-1000}
M_BIG=${SCALE_MILLION_BIG:-200000}
M_FILES=$((M_DIRS * PER + M_BIG))
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
	huge | medium | million) ;;
	*) echo "error: unknown layout in SCALE_LAYOUTS: $layout (huge, medium, million)" >&2; exit 2 ;;
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

declare -A SECS RSS
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
	RSS[$op]=$rss
	row "$op" "$secs" "$rss" "$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | cut -c1-80)"
	log "$op: ${secs}s, $((rss / 1024)) MiB"
}

rm -rf "$W"
mkdir -p "$W"

# tree MODE DIR FILES BIG: MODE make writes the small files of a layout (see the header): BIG
# entries in DIR/big (none when 0), the other FILES - BIG in directories of $PER under
# DIR/tree (ten parents); every file's content is different. MODE change appends a line to
# every hundredth file of each part (1% of the files). Written directly by one process.
tree() {
	python3 - "$1" "$2" "$3" "$4" "$PER" <<'EOF'
import os, sys
mode, root, files, big, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rest = files - big
dirs = -(-rest // per)
fan = max(1, -(-dirs // 10))
def put(path, data, flags):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
if mode == "make":
    os.makedirs(root)
    new = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    if big:
        os.makedirs(f"{root}/big")
        for i in range(big):
            put(f"{root}/big/entry-{i:06d}.txt", f"big entry {i}\n".encode(), new)
    for i in range(rest):
        d = f"{root}/tree/d{i // (per * fan):03d}/s{(i // per) % fan:02d}"
        if i % per == 0:
            os.makedirs(d)
        put(f"{d}/file-{i:06d}.md", (f"small file {i}\n" * (1 + i % 7)).encode(), new)
elif mode == "change":
    app = os.O_WRONLY | os.O_APPEND
    for i in range(0, big, 100):
        put(f"{root}/big/entry-{i:06d}.txt", b"changed\n", app)
    for i in range(0, rest, 100):
        d = f"{root}/tree/d{i // (per * fan):03d}/s{(i // per) % fan:02d}"
        put(f"{d}/file-{i:06d}.md", b"changed\n", app)
else:
    sys.exit(f"tree: unknown mode {mode}")
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
	if [[ $L == huge ]]; then tree make "$src" "$FILES" "$BIG"; else tree make "$src" "$FILES" 0; fi
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

# measure_million: the million layout (see the header), each phase beside its peer.
measure_million() {
	local L=million d=$W/million
	local src=$d/src S=$d/store co=$d/co tco=$d/co-tar t0 id1 id2 hwm
	local G=(git --git-dir="$d/git" --work-tree="$src" -c user.name=scale -c user.email=scale@localhost)
	log "$L: generating $M_FILES files under $src ($M_DIRS directories of $PER, one of $M_BIG)"
	t0=$SECONDS
	tree make "$src" "$M_FILES" "$M_BIG"
	log "$L: generated in $((SECONDS - t0))s; writing the peer's tar (untimed)"
	tar -cf "$d/tree.tar" -C "$src" .

	timed "$L: snapshot (first)" 1 "$ZB" --store "$S" snapshot --dir "$src"
	id1=$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | awk '{ print $NF }')
	timed "$L: snapshot (no-op)" 1 "$ZB" --store "$S" snapshot --dir "$src"

	"${G[@]}" init -q
	timed "$L: git add -A && git commit (first)" 1 sh -c '"$@" add -A && "$@" commit -q -m first' sh "${G[@]}"
	timed "$L: git status (no-op)" 1 "${G[@]}" status --porcelain
	rm -rf "$d/git"

	log "$L: changing 1% of the files"
	tree change "$src" "$M_FILES" "$M_BIG"
	timed "$L: snapshot (1% changed)" 1 "$ZB" --store "$S" snapshot --dir "$src"
	id2=$(grep -v '^[[:space:]]*$' "$W/.out" | tail -n1 | awk '{ print $NF }')
	# diff exits 1 when the sides differ, as they do here.
	timed "$L: diff first, 1% changed" 1 sh -c '"$@" >/dev/null; s=$?; [ "$s" -le 1 ] && echo "exit $s"' sh "$ZB" --store "$S" diff "$id1" "$id2"

	timed "$L: checkout + sync -f" 1 sh -c '"$0" --store "$1" checkout "$2" --out "$3" && sync -f "$3"' "$ZB" "$S" "$id1" "$co"
	rm -rf "$co"
	timed "$L: tar -x + sync -f" 1 sh -c 'mkdir -p "$1" && tar -xf "$0" -C "$1" && sync -f "$1"' "$d/tree.tar" "$tco"
	rm -rf "$tco" "$d/tree.tar"

	mount_at "$id1" "$S"
	timed "$L: mount: find, counted" 1 bash -c 'find "$0" | wc -l' "$MNT"
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status")
	RSS["$L: mount daemon"]=$hwm
	row "$L: mount daemon peak (VmHWM)" "-" "$hwm" ""
	unmount
	if [[ ${SCALE_KEEP:-0} != 1 ]]; then rm -rf "$d"; fi
}

# million_table: one row per phase: ours, the peer, ratio ours/peer, and whether our peak is
# under the 64 MiB goal.
million_table() {
	local L=million
	echo "### million: $M_FILES files ($M_DIRS directories of $PER, one of $M_BIG); all cold; peak goal < 64 MiB"
	echo
	echo "| phase | seconds | peak MiB | < 64 MiB | peer | peer seconds | peer peak MiB | ratio ours/peer |"
	echo "|---|---|---|---|---|---|---|---|"
	# line PHASE OUR_OP OUR_RSS_KEY PEER_LABEL PEER_OP
	line() {
		local ps="" pk=""
		[[ -n $5 ]] && ps=${SECS[$5]:-} && pk=${RSS[$5]:-}
		awk -v ph="$1" -v s="${SECS[$2]:-}" -v k="${RSS[$3]:-}" -v pl="$4" -v ps="$ps" -v pk="$pk" '
			function mib(x) { return x == "" ? "-" : sprintf("%.1f", x / 1024) }
			BEGIN {
				goal = k == "" ? "-" : (k < 65536 ? "yes" : "**no**")
				ratio = (s != "" && ps > 0) ? sprintf("%.2f", s / ps) : "-"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", ph, s == "" ? "-" : s, mib(k), goal, pl == "" ? "-" : pl, ps == "" ? "-" : ps, mib(pk), ratio
			}'
	}
	line "first snapshot" "$L: snapshot (first)" "$L: snapshot (first)" "git add -A && git commit" "$L: git add -A && git commit (first)"
	line "no-op snapshot" "$L: snapshot (no-op)" "$L: snapshot (no-op)" "git status" "$L: git status (no-op)"
	line "snapshot after 1% changed" "$L: snapshot (1% changed)" "$L: snapshot (1% changed)" "" ""
	line "checkout + sync -f" "$L: checkout + sync -f" "$L: checkout + sync -f" "tar -x + sync -f" "$L: tar -x + sync -f"
	line "mount: find, counted (peak: daemon VmHWM)" "$L: mount: find, counted" "$L: mount daemon" "" ""
	line "diff first, 1% changed" "$L: diff first, 1% changed" "$L: diff first, 1% changed" "" ""
	echo
}

for layout in $LAYOUTS; do
	if [[ $layout == million ]]; then measure_million; else measure_layout "$layout"; fi
done

mkdir -p "$(dirname "$REPORT")"
{
	echo "## scale: layouts $LAYOUTS (huge, medium: $FILES files each; huge: $BIG in one directory and a $SPARSE sparse file; million: $M_FILES; the rest in directories of $PER)"
	echo
	echo "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(findmnt -n -o FSTYPE --target "$W") at $W; $("$ZB" --version | head -n1), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); cold = drop_caches before"
	echo
	echo "| operation | seconds | peak MiB | last output line |"
	echo "|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
	echo
	[[ " $LAYOUTS " == *" million "* ]] && million_table
	ratio() { awk -v a="${SECS[$1]:-}" -v b="${SECS[$2]:-}" -v w="$3" 'BEGIN { if (a != "" && b > 0) printf "- %s: %.2fx\n", w, a / b }'; }
	ratio "huge: mount: ls -l 100k dir (first touch)" "huge: ls -l plain 100k dir (warm)" "ls -l mounted (first touch) / plain"
	ratio "huge: mount: ls -l 100k dir (again)" "huge: ls -l plain 100k dir (warm)" "ls -l mounted (again) / plain"
	for layout in $LAYOUTS; do
		ratio "$layout: capture (no-op, again)" "$layout: git add -A && git commit (no-op)" "$layout: cold no-op capture / git add -A && git commit"
		ratio "$layout: capture (first)" "$layout: git add -A && git commit (first)" "$layout: first capture / first git add -A && git commit"
	done
} >"$REPORT"
cat "$REPORT"
