#!/usr/bin/env bash
# Interleaved A/B of two zeroclaw-bundle binaries on the bench corpus: the same phases run with
# A, then B, round after round, so drift of the machine (other load, page cache, thermal) falls
# on both alike. Prints one markdown row per phase: median seconds of A and B and B/A.
# A measurement, never a test: it fails only when a command fails.
#
# Usage:  scripts/bench/ab.sh OLD_BINARY NEW_BINARY
# Environment: AB_ROUNDS=5, BENCH_SCALE=0.25 (corpus size; 1.0 = ~20k files / ~600 MiB),
#              BENCH_SEED=42, AB_DIR=/tmp/zb-ab (removed and recreated).
# Phases (each on its own fresh store per round where it says "fresh"):
#   capture   snapshot --dir of the corpus into a fresh store (every file read and hashed)
#   no-op     snapshot --dir again, nothing changed (the stat cache)
#   checkout  checkout of that snapshot into a new directory
#   diff      diff of the snapshot against the corpus directory (a stat walk)
#   pack      pack of the snapshot to a file
#   mount     `mount NAME DIR --daemon` by the snapshot's name until `ls` of the mount answers,
#             caches dropped first when root can (what a person mounting to review feels)
set -euo pipefail
export LC_ALL=C
A=${1:?usage: ab.sh OLD_BINARY NEW_BINARY}
B=${2:?usage: ab.sh OLD_BINARY NEW_BINARY}
ROUNDS=${AB_ROUNDS:-5}
SCALE=${BENCH_SCALE:-0.25}
SEED=${BENCH_SEED:-42}
W=${AB_DIR:-/tmp/zb-ab}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"
mkdir -p "$W"
python3 "$here/gen_corpus.py" generate --out "$W/corpus" --seed "$SEED" --scale "$SCALE" >&2
sync

# seconds BIN PHASE: runs one phase with BIN in a fresh work dir, prints its wall seconds.
seconds() {
	local bin=$1 phase=$2 d=$W/run
	case $phase in
	capture)
		rm -rf "$d" && mkdir -p "$d" && sync
		timed "$bin" --store "$d/store" -q snapshot --dir "$W/corpus"
		;;
	no-op) timed "$bin" --store "$d/store" -q snapshot --dir "$W/corpus" ;;
	checkout)
		rm -rf "$d/out"
		timed "$bin" --store "$d/store" -q checkout "$(last "$bin" "$d")" --out "$d/out"
		;;
	diff) timed "$bin" --store "$d/store" -q diff "$(last "$bin" "$d")" "$W/corpus" ;;
	pack)
		rm -f "$d/p.zbpack"
		timed "$bin" --store "$d/store" -q pack "$(last "$bin" "$d")" --out "$d/p.zbpack"
		;;
	mount)
		"$bin" --store "$d/store" -q snapshot --dir "$W/corpus" --name ab-mount >/dev/null 2>&1 || true
		mkdir -p "$d/mnt"
		sync
		{ echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null || true
		timed bash -c '"$0" --store "$1" -q mount ab-mount "$2" --daemon && ls "$2" >/dev/null' \
			"$bin" "$d/store" "$d/mnt"
		"$bin" --store "$d/store" -q umount "$d/mnt" >/dev/null 2>&1 || umount "$d/mnt"
		;;
	esac
}

last() { "$1" --store "$2/store" -q list | tail -1; }

timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }

phases=(capture no-op checkout diff pack mount)
declare -A times
for ((r = 1; r <= ROUNDS; r++)); do
	# Alternate which binary goes first, so neither always gets the warmer cache.
	if ((r % 2)); then order=("A:$A" "B:$B"); else order=("B:$B" "A:$A"); fi
	for entry in "${order[@]}"; do
		side=${entry%%:*} bin=${entry#*:}
		for p in "${phases[@]}"; do
			times[$side.$p]+="$(seconds "$bin" "$p") "
		done
	done
	echo "round $r/$ROUNDS done" >&2
done
echo "| phase | A median s | B median s | B/A |"
echo "|---|---|---|---|"
for p in "${phases[@]}"; do
	a=$(tr ' ' '\n' <<<"${times[A.$p]}" | grep . | median)
	b=$(tr ' ' '\n' <<<"${times[B.$p]}" | grep . | median)
	printf '| %s | %s | %s | %.2f |\n' "$p" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
rm -rf "$W"
