#!/usr/bin/env bash
# zeroclaw-bundle benchmark: our tool against the tools a user would pick instead, on the same
# machine, in the same run, on the same seeded corpus. Prints markdown tables (seconds, max RSS,
# ratio ours/tool, target, PASS/FAIL) to stdout and writes them to target/bench/report.md.
#
# This is a measurement script, not a test: it never fails because a target is missed, and a
# peer that is missing or fails is reported as such without aborting the run.
#
# Usage:  scripts/bench.sh                      full size (~20,000 files, ~600 MiB)
#         BENCH_SCALE=0.02 scripts/bench.sh     small corpus for development
#
# Environment:
#   BENCH_SCALE=1.0          corpus scale (1.0 = ~20k files / ~600 MiB)
#   BENCH_SEED=42            corpus seed (same seed + scale = same tree)
#   BENCH_CORPUS_SCRIPT=     a generator with make-corpus.sh's interface to use instead of
#                            bench/gen_corpus.py (e.g. an independent harness's), so both
#                            measure one tree
#   BENCH_DIR=/tmp/zb-bench  work dir; removed and recreated at start
#   BENCH_REPEAT=3           timed repetitions of warm, repeatable operations (median reported;
#                            one untimed warm-up run precedes them)
#   BENCH_SECTIONS=store,mount,export,pack,remote   which sections to run (pack: pack/unpack
#                            against tar, sizes against tar|zstd and squashfs, --since; remote:
#                            push/pull through a local s3s-fs against restic on the same server);
#                            `scale` (not in the default)
#                            also runs scripts/scale.sh (300,000 files, a 100,000-entry
#                            directory, a 4 GiB sparse file: capture, no-op, checkout, mount,
#                            peak memory; its table goes to target/bench/scale.md)
#   BENCH_INSTALL=1          install missing peers (apt-get, pip for ratarmount); 0 = never
#   BENCH_SYNC=1             include `sync -f` in the timed region of bulk writes (initial
#                            capture, checkout, export), so tools that fsync and tools that leave
#                            dirty pages are compared on durable data; 0 = leave it out
#   BENCH_VERIFY=1           compare our checkout/export/mount output with the peers' (untimed)
#   ZB=path                  binary under test; default
#                            target/release/zeroclaw-bundle, built
#                            with `cargo build --release` from the repo root unless BENCH_BUILD=0;
#                            both are copied to BENCH_DIR/bin and run from there (install_ours)
#   BENCH_REPORT=path        default <repo>/target/bench/report.md
#   BENCH_TIMEOUT=1800       seconds before one timed command is killed (reported as failed)
#   MOUNT_READY_ROUNDS=5     cold mounts per tool for the "mount ready" row (median)
#   CHECKOUT_ROUNDS=3        cold checkouts per tool for our checkout and unsquashfs (median)
#   EXPORT_ROUNDS=3          cold first exports per tool for our export and rsync (median)
#   BENCH_KEEP=0             1 = keep repositories, checkouts and images under BENCH_DIR
#
# "cold" = `sync; echo 3 > /proc/sys/vm/drop_caches` right before the timed command (needs root).
# FUSE daemons keep their own in-process caches across a drop; that is what a user gets too.

set -euo pipefail
export LC_ALL=C

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)

BENCH_SCALE=${BENCH_SCALE:-1.0}
BENCH_SEED=${BENCH_SEED:-42}
BENCH_DIR=${BENCH_DIR:-/tmp/zb-bench}
BENCH_REPEAT=${BENCH_REPEAT:-3}
BENCH_SECTIONS=${BENCH_SECTIONS:-store,mount,export,pack,remote}
BENCH_INSTALL=${BENCH_INSTALL:-1}
BENCH_SYNC=${BENCH_SYNC:-1}
BENCH_VERIFY=${BENCH_VERIFY:-1}
BENCH_BUILD=${BENCH_BUILD:-1}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-1800}
MOUNT_READY_ROUNDS=${MOUNT_READY_ROUNDS:-5}
CHECKOUT_ROUNDS=${CHECKOUT_ROUNDS:-3}
EXPORT_ROUNDS=${EXPORT_ROUNDS:-3}
export R="" # the output suffix of a cold_alternating round
BENCH_KEEP=${BENCH_KEEP:-0}
REPORT=${BENCH_REPORT:-$ROOT/target/bench/report.md}
OURS=zeroclaw-bundle

if [[ -z ${ZB:-} ]]; then
	ZB=$ROOT/target/release/zeroclaw-bundle
	ZB_DEFAULT=1
else
	ZB_DEFAULT=0
fi

case $BENCH_DIR in
/ | /tmp | /tmp/ | /root | /home | /work | "") echo "error: refusing BENCH_DIR=$BENCH_DIR" >&2; exit 2 ;;
/*) ;;
*) echo "error: BENCH_DIR must be absolute: $BENCH_DIR" >&2; exit 2 ;;
esac
W=$BENCH_DIR
CORPUS=$W/corpus
RESULTS=$W/results.tsv
META=$W/meta.tsv
GEN=(python3 "$SCRIPT_DIR/bench/gen_corpus.py")
# Another corpus generator with make-corpus.sh's interface (`SCRIPT [--scale F] [--seed N] DIR`,
# `SCRIPT --mutate --percent P [--seed N] DIR`): so this bench and an independent harness
# measure one tree (their corpora differ in shape: directories, large files, and how much a
# "1% change" rewrites).
BENCH_CORPUS_SCRIPT=${BENCH_CORPUS_SCRIPT:-}
corpus_generate() {
	if [[ -n $BENCH_CORPUS_SCRIPT ]]; then
		"$BENCH_CORPUS_SCRIPT" --scale "$BENCH_SCALE" --seed "$BENCH_SEED" "$CORPUS" >/dev/null &&
			echo "corpus: $(find "$CORPUS" -type f | wc -l) files from $BENCH_CORPUS_SCRIPT (scale $BENCH_SCALE, seed $BENCH_SEED)"
	else
		"${GEN[@]}" generate --out "$CORPUS" --seed "$BENCH_SEED" --scale "$BENCH_SCALE"
	fi
}
corpus_mutate() { # seed
	if [[ -n $BENCH_CORPUS_SCRIPT ]]; then
		"$BENCH_CORPUS_SCRIPT" --mutate --percent 1 --seed "$1" "$CORPUS" >/dev/null &&
			echo "1% of files mutated by $BENCH_CORPUS_SCRIPT (seed $1)"
	else
		"${GEN[@]}" mutate --dir "$CORPUS" --seed "$1" --fraction 0.01
	fi
}

# Peers' environment (exported so the timed `bash -c` commands see it).
export W CORPUS ZB
export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR=$W/restic/cache
export BORG_PASSPHRASE="" BORG_BASE_DIR=$W/borg/base
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
GITC=(git --git-dir="$W/git/repo/.git" -c gc.auto=0 -c maintenance.auto=false)

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
want() { [[ ",$BENCH_SECTIONS," == *",$1,"* ]]; }
have() { command -v "$1" >/dev/null 2>&1; }
# first line of a file, tabs and pipes flattened, bounded length (for notes)
firstline() { { grep -v '^[[:space:]]*$' "$1" 2>/dev/null || true; } | head -n1 | tr '\t|' '  ' | cut -c1-160; }

IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1

# ---------------------------------------------------------------------------------------------
# mounts and processes this run started (cleaned on exit)

BG_PIDS=()
cleanup_mounts() {
	local m
	[[ -d $W ]] || return 0
	while read -r m; do
		[[ -n $m ]] || continue
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done < <(findmnt -rn -o TARGET 2>/dev/null | awk -v w="$W/" 'index($0, w) == 1' | sort -r)
}
on_exit() {
	local p
	cleanup_mounts
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap on_exit EXIT

# ---------------------------------------------------------------------------------------------
# results

record() { # section op tool secs rss_kib status note
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" "${5:-}" "${6:-ok}" "${7:-}" >>"$RESULTS"
}
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }

COLD_NOTE=""
drop_caches() {
	sync
	if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
		COLD_NOTE="caches NOT dropped (not root?)"
	fi
}

# run_timed CMD: runs `bash -c CMD` under /usr/bin/time; sets LAST_SECS and LAST_RSS (KiB).
# stdout -> $W/.out, stderr -> $W/.err. Returns the command's exit status.
LAST_SECS="" LAST_RSS=""
run_timed() {
	local t0 t1 rc=0
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%M' -o "$W/.time" timeout -k 10 "$BENCH_TIMEOUT" bash -c "$1" >"$W/.out" 2>"$W/.err" || rc=$?
	t1=$EPOCHREALTIME
	LAST_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
	LAST_RSS=$(tail -n1 "$W/.time" 2>/dev/null | tr -dc '0-9')
	return $rc
}

SYNC=""
[[ $BENCH_SYNC == 1 ]] && SYNC=' && sync -f "$W"'

# measure SECTION OP TOOL MODE CMD [PRE] [NOTE]
#   MODE: cold (drop caches, run once) | once (run once as is) | rep (one untimed warm-up,
#   then BENCH_REPEAT timed runs, median seconds, max RSS). PRE runs untimed before each run,
#   then an untimed `sync` (every mode), so no run pays for dirty pages it did not write.
# Returns non-zero if the command failed (already recorded as `fail`).
measure() {
	local section=$1 op=$2 tool=$3 mode=$4 cmd=$5 pre=${6:-} note=${7:-}
	local n=1 i secs=() rss=0 med
	[[ $mode == rep ]] && n=$BENCH_REPEAT
	if [[ $mode == rep ]]; then
		[[ -n $pre ]] && { bash -c "$pre" >/dev/null 2>&1 || true; }
		run_timed "$cmd" || true
	fi
	for ((i = 0; i < n; i++)); do
		if [[ -n $pre ]] && ! bash -c "$pre" >"$W/.pre" 2>&1; then
			record "$section" "$op" "$tool" "" "" fail "setup failed: $(firstline "$W/.pre")"
			return 1
		fi
		# Every timed run starts with nothing dirty: a tool that syncs (our captures end in one
		# syncfs) would otherwise pay for the writeback of whatever the tool before it, or the
		# corpus mutation, left in the page cache. Untimed; cold runs sync in drop_caches.
		if [[ $mode == cold ]]; then drop_caches; else sync; fi
		if ! run_timed "$cmd"; then
			record "$section" "$op" "$tool" "" "" fail "exit $(sed -n 's/.*non-zero status \([0-9]*\).*/\1/p' "$W/.time"): $(firstline "$W/.err")"
			log "  $tool: $op FAILED: $(firstline "$W/.err")"
			return 1
		fi
		secs+=("$LAST_SECS")
		[[ -n $LAST_RSS && $LAST_RSS -gt $rss ]] && rss=$LAST_RSS
	done
	med=$(printf '%s\n' "${secs[@]}" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
	[[ $mode == cold && -n $COLD_NOTE ]] && note="${note:+$note; }$COLD_NOTE"
	[[ $mode == rep ]] && note="${note:+$note; }median of $n"
	record "$section" "$op" "$tool" "$med" "$rss" ok "$note"
	log "  $tool: $op: ${med}s, max RSS $((rss / 1024)) MiB"
	return 0
}

# median N...: the middle of the numbers (the lower middle of an even count)
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# cold_alternating SECTION OP TOOL_A CMD_A TOOL_B CMD_B [NOTE_B]
#   Two cold, single-shot commands measured in alternating rounds (A B, then B A, ...),
#   CHECKOUT_ROUNDS each; median seconds, max RSS. This VM's disk changes speed from minute
#   to minute (and ext4 without a journal slows every create for minutes after a large
#   delete), so one run of each, a minute apart, moved the ratio of two checkouts from 0.8 to
#   1.2. A command writes below "$W/co/...$R": $R is empty in the first round (the output the
#   verification reads) and ".N" after. Nothing is deleted between rounds, so no round pays
#   for another's deletes. Returns non-zero if either failed (recorded as `fail`).
cold_alternating() {
	local section=$1 op=$2 note_b=${7:-}
	local -a tools=("$3" "$5") cmds=("$4" "$6")
	local -A times=() rss=()
	local round k med rounds=${ALT_ROUNDS:-$CHECKOUT_ROUNDS}
	for ((round = 1; round <= rounds; round++)); do
		for k in $(((round + 1) % 2)) $((round % 2)); do
			R=""
			((round > 1)) && R=".$round"
			export R
			drop_caches
			if ! run_timed "${cmds[k]}"; then
				record "$section" "$op" "${tools[k]}" "" "" fail "exit $(sed -n 's/.*non-zero status \([0-9]*\).*/\1/p' "$W/.time"): $(firstline "$W/.err")"
				log "  ${tools[k]}: $op FAILED: $(firstline "$W/.err")"
				return 1
			fi
			times[$k]+="$LAST_SECS "
			[[ -n $LAST_RSS && $LAST_RSS -gt ${rss[$k]:-0} ]] && rss[$k]=$LAST_RSS
		done
	done
	for k in 0 1; do
		med=$(median ${times[$k]})
		local note="cold, median of $rounds, rounds alternating with ${tools[1 - k]}"
		((k == 1)) && [[ -n $note_b ]] && note="$note_b; $note"
		[[ -n $COLD_NOTE ]] && note="$note; $COLD_NOTE"
		record "$section" "$op" "${tools[k]}" "$med" "${rss[$k]:-}" ok "$note"
		log "  ${tools[k]}: $op: ${times[$k]}"
	done
	R=""
}

na() { record "$1" "$2" "$3" "" "" na "$4"; }

annotate_last() { # append text to the note of the last results row
	local last note head
	last=$(tail -n1 "$RESULTS")
	note=${last##*$'\t'}
	head=${last%$'\t'*}
	head -n -1 "$RESULTS" >"$RESULTS.tmp"
	printf '%s\t%s\n' "$head" "${note:+$note; }$1" >>"$RESULTS.tmp"
	mv "$RESULTS.tmp" "$RESULTS"
}

# ---------------------------------------------------------------------------------------------
# peers: install what is missing

install_peers() {
	local pairs=(rsync:rsync tar:tar git:git ostree:ostree restic:restic borg:borgbackup
		mksquashfs:squashfs-tools squashfuse_ll:squashfuse fusermount3:fuse3 b3sum:b3sum
		/usr/bin/time:time mountpoint:util-linux findmnt:util-linux pgrep:procps)
	local missing=() p cmd pkg
	for p in "${pairs[@]}"; do
		cmd=${p%%:*} pkg=${p#*:}
		have "$cmd" || missing+=("$pkg")
	done
	# borg mount needs a FUSE binding for the python borg runs on.
	if have borg; then
		local py
		py=$(head -n1 "$(command -v borg)" | sed -n 's/^#!\s*//p' | awk '{ print $1 }')
		[[ -x ${py:-} ]] && ! "$py" -c 'import llfuse' 2>/dev/null && ! "$py" -c 'import pyfuse3' 2>/dev/null &&
			missing+=(python3-llfuse)
	else
		missing+=(python3-llfuse)
	fi
	if ((${#missing[@]})); then
		if [[ $BENCH_INSTALL == 1 && $IS_ROOT == 1 ]] && have apt-get; then
			log "installing missing peers: ${missing[*]}"
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$W/apt.log" 2>&1 || log "apt-get update failed (see $W/apt.log)"
			for pkg in $(printf '%s\n' "${missing[@]}" | sort -u); do
				DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >>"$W/apt.log" 2>&1 ||
					log "could not install $pkg (see $W/apt.log)"
			done
		else
			log "missing peers, not installing (BENCH_INSTALL=$BENCH_INSTALL, root=$IS_ROOT): ${missing[*]}"
		fi
	fi
	if ! have ratarmount && [[ $BENCH_INSTALL == 1 ]]; then
		log "installing ratarmount from PyPI"
		python3 -m pip install -q ratarmount >"$W/pip.log" 2>&1 || log "pip install ratarmount failed (see $W/pip.log)"
		hash -r
	fi
	if [[ ! -x /usr/bin/time ]]; then
		echo "error: /usr/bin/time is required (package: time)" >&2
		exit 1
	fi
}

peer_versions() {
	local v=()
	have rsync && v+=("rsync $(rsync --version | head -n1 | awk '{ print $3 }')")
	have tar && v+=("tar $(tar --version | head -n1 | awk '{ print $NF }')")
	have git && v+=("git $(git --version | awk '{ print $3 }')")
	have ostree && v+=("ostree $(ostree --version | sed -n "s/.*Version: '\(.*\)'/\1/p")")
	have restic && v+=("restic $(restic version | awk '{ print $2 }')")
	have borg && v+=("borg $(borg --version | awk '{ print $2 }')")
	have mksquashfs && v+=("squashfs-tools $(mksquashfs -version 2>&1 | head -n1 | awk '{ print $3 }')")
	have squashfuse_ll && v+=("squashfuse $(dpkg-query -W -f '${Version}' squashfuse 2>/dev/null || echo '?')")
	have ratarmount && v+=("ratarmount $(ratarmount --version 2>/dev/null | awk 'NR == 1 { print $2 }')")
	have b3sum && v+=("b3sum $(b3sum --version | awk '{ print $2 }')")
	local IFS=,
	echo "${v[*]}" | sed 's/,/, /g'
}

# ---------------------------------------------------------------------------------------------
# our binary

build_ours() {
	if [[ $ZB_DEFAULT == 1 && $BENCH_BUILD == 1 ]]; then
		if have cargo; then
			log "building: cargo build --release (log: $W/build.log)"
			(cd "$ROOT" && cargo build --release) >"$W/build.log" 2>&1 || log "cargo build --release failed (see $W/build.log)"
		else
			log "cargo not found; not building"
		fi
	fi
}

# install_ours: copies the binary under test into $W/bin, as an install puts it in a
#   directory (the peers run from /usr/bin), and runs that copy: a
#   cold start then looks up one directory the store's path walks anyway, not the build tree
#   (target/release is four directories deep, each a cold inode and directory-block read: 1 ms
#   of a 20 ms cold mount, measured in alternating rounds).
install_ours() {
	[[ -x $ZB ]] || return 0
	mkdir -p "$W/bin"
	cp "$ZB" "$W/bin/zeroclaw-bundle" || return 0
	log "ours: $ZB, run as its copy in $W/bin"
	ZB=$W/bin/zeroclaw-bundle
}

# zb_has SUBCOMMAND [FLAG]: the subcommand exists (its --help prints a usage) and mentions FLAG.
zb_has() {
	local out
	[[ -x $ZB ]] || return 1
	out=$("$ZB" "$1" --help 2>&1) || return 1
	grep -qi 'usage' <<<"$out" || return 1
	[[ -z ${2:-} ]] || grep -q -- "$2" <<<"$out"
}

ZB_SNAPSHOT=0 ZB_CHECKOUT=0 ZB_EXPORT=0 ZB_MOUNT=0
probe_ours() {
	zb_has snapshot --dir && ZB_SNAPSHOT=1
	zb_has checkout --out && ZB_CHECKOUT=1
	zb_has export --install && ZB_EXPORT=1
	zb_has mount --daemon && zb_has umount && ZB_MOUNT=1
	log "ours: $ZB snapshot=$ZB_SNAPSHOT checkout=$ZB_CHECKOUT export=$ZB_EXPORT mount=$ZB_MOUNT"
}
ZB_NA="not implemented in this build"

# ---------------------------------------------------------------------------------------------
# 1. store: capture and checkout

OUR_STORE=$W/ours/store
# Move the snapshot tree indexes aside and back (rows "zeroclaw-bundle (no tree index)").
NO_INDEX="if [ -d '$OUR_STORE/trees' ]; then mv '$OUR_STORE/trees' '$OUR_STORE/trees.off'; fi"
INDEX_BACK="if [ -d '$OUR_STORE/trees.off' ]; then mv '$OUR_STORE/trees.off' '$OUR_STORE/trees'; fi"
OUR_ID_INITIAL="" OUR_ID_LAST="" GIT_C1="" OSTREE_C1="" RESTIC_S1=""

last_line() { { grep -v '^[[:space:]]*$' "$W/.out" || true; } | tail -n1 | awk '{ print $NF }'; }

ours_snapshot() { # op mode
	if [[ $ZB_SNAPSHOT != 1 ]]; then na store "$1" "$OURS" "snapshot --dir $ZB_NA"; return 1; fi
	local sync=""
	[[ $1 == "initial capture" ]] && sync=$SYNC
	measure store "$1" "$OURS" "$2" '"$ZB" --store "'"$OUR_STORE"'" snapshot --dir "$CORPUS"'"$sync" || return 1
	OUR_ID_LAST=$(last_line)
}

section_store() {
	log "== store: capture and checkout"
	mkdir -p "$W/ours" "$W/rsync" "$W/tar" "$W/git" "$W/ostree" "$W/restic" "$W/borg/base" "$W/co"

	# untimed setup of the peers' repositories
	have git && { git init -q "$W/git/repo" && "${GITC[@]}" config core.worktree "$CORPUS"; } >/dev/null 2>&1 || true
	have ostree && ostree --repo="$W/ostree/repo" init --mode=bare-user >/dev/null 2>&1 || true
	have restic && restic -r "$W/restic/repo" init >"$W/restic/init.log" 2>&1 || true
	have borg && borg init -e none "$W/borg/repo" >"$W/borg/init.log" 2>&1 || true
	local G='git --git-dir="$W/git/repo/.git" --work-tree="$CORPUS" -c gc.auto=0 -c maintenance.auto=false'
	local OST='ostree --repo="$W/ostree/repo"' RST='restic -r "$W/restic/repo"' BRG='borg'

	# --- initial capture (cold) ---
	local op="initial capture"
	log "-- $op"
	ours_snapshot "$op" cold && OUR_ID_INITIAL=$OUR_ID_LAST || true
	have rsync && measure store "$op" "rsync -a" cold 'rsync -a "$CORPUS/" "$W/rsync/copy/"'"$SYNC" || true
	have tar && measure store "$op" "tar -cf" cold 'tar -cf "$W/tar/full.tar" -C "$CORPUS" .'"$SYNC" || true
	have tar && measure store "$op" "tar level-0 incremental" cold \
		'tar --listed-incremental="$W/tar/level0.snar" -cf "$W/tar/level0.tar" -C "$CORPUS" .'"$SYNC" || true
	if have git; then
		measure store "$op" "git add -A && git commit" cold "$G add -A && $G commit -q -m initial$SYNC" &&
			GIT_C1=$("${GITC[@]}" rev-parse HEAD) || true
	fi
	if have ostree; then
		measure store "$op" "ostree commit" cold "$OST commit --branch=bench -s initial --tree=dir=\"\$CORPUS\"$SYNC" &&
			OSTREE_C1=$(ostree --repo="$W/ostree/repo" rev-parse bench) || true
	fi
	if have restic; then
		measure store "$op" "restic backup" cold "$RST backup -q --host bench --tag initial \"\$CORPUS\"$SYNC" &&
			RESTIC_S1=$(restic -r "$W/restic/repo" snapshots -q --tag initial --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["short_id"])') || true
	fi
	have borg && measure store "$op" "borg create" cold "cd \"\$CORPUS\" && $BRG create \"\$W/borg/repo::initial\" .$SYNC" || true
	# untimed: a squashfs image of the initial tree (zstd, the stronger peer: it unpacks
	# faster than the default gzip), for unsquashfs in the checkout rows
	have mksquashfs && mkdir -p "$W/sq" &&
		{ mksquashfs "$CORPUS" "$W/sq/initial.sqsh" -comp zstd -noappend -quiet -no-progress >"$W/sq/mk.log" 2>&1 ||
			rm -f "$W/sq/initial.sqsh"; }
	have b3sum && measure store "$op" "b3sum of every file (hash floor)" cold \
		'find "$CORPUS" -type f -print0 | xargs -0 b3sum >/dev/null' "" "informational: read + hash only, nothing stored" || true

	# --- no-op capture: warm (median) then cold ---
	local mode
	for mode in rep cold; do
		if [[ $mode == rep ]]; then op="no-op capture (warm)"; else op="no-op capture (cold)"; fi
		log "-- $op"
		ours_snapshot "$op" "$mode" || true
		have rsync && measure store "$op" "rsync -a" "$mode" 'rsync -a "$CORPUS/" "$W/rsync/copy/"' || true
		have tar && measure store "$op" "tar level-1 incremental" "$mode" \
			'tar --listed-incremental="$W/tar/level1.snar" -cf "$W/tar/level1.tar" -C "$CORPUS" .' \
			'cp "$W/tar/level0.snar" "$W/tar/level1.snar"' || true
		if have git; then
			measure store "$op" "git status" "$mode" "$G status --porcelain >/dev/null" || true
			measure store "$op" "git add -A && git commit" "$mode" "$G add -A && $G commit -q --allow-empty -m noop" || true
		fi
		have ostree && measure store "$op" "ostree commit" "$mode" "$OST commit --branch=bench -s noop --tree=dir=\"\$CORPUS\"" || true
		have restic && measure store "$op" "restic backup" "$mode" "$RST backup -q --host bench \"\$CORPUS\"" || true
		have borg && measure store "$op" "borg create" "$mode" "cd \"\$CORPUS\" && $BRG create \"\$W/borg/repo::noop-\$(date +%s%N)\" ." || true
	done

	# --- 1% of files changed (cold: each tool reads the changed tree from disk) ---
	op="capture after 1% changed"
	local mline
	mline=$(corpus_mutate "$BENCH_SEED")
	log "-- $op: $mline"
	meta "1% change" "$mline"
	ours_snapshot "$op" cold || true
	have rsync && measure store "$op" "rsync -a" cold 'rsync -a "$CORPUS/" "$W/rsync/copy/"' || true
	# tar with the same sync as ours (a capture ends in one syncfs), as the peer harness has it
	have tar && measure store "$op" "tar level-1 incremental" cold \
		'tar --listed-incremental="$W/tar/level1.snar" -cf "$W/tar/level1.tar" -C "$CORPUS" . && sync -f "$W/tar/level1.tar"' \
		'cp "$W/tar/level0.snar" "$W/tar/level1.snar"' || true
	have git && measure store "$op" "git add -A && git commit" cold "$G add -A && $G commit -q -m changed" || true
	have ostree && measure store "$op" "ostree commit" cold "$OST commit --branch=bench -s changed --tree=dir=\"\$CORPUS\"" || true
	have restic && measure store "$op" "restic backup" cold "$RST backup -q --host bench --tag changed \"\$CORPUS\"" || true
	have borg && measure store "$op" "borg create" cold "cd \"\$CORPUS\" && $BRG create \"\$W/borg/repo::changed\" ." || true

	section_diff_after_change

	# --- store sizes: each repository after the same captures (initial, no-ops, 1% change) ---
	# Before the checkouts: a checkout of ours adds its destination record to the catalog
	# (what a later --force publish reuses files by), which is not a capture's.
	local d
	for d in "$OURS:$OUR_STORE" "git:$W/git/repo/.git" "ostree (bare-user):$W/ostree/repo" \
		"restic:$W/restic/repo" "borg (-e none):$W/borg/repo" "rsync copy:$W/rsync/copy"; do
		[[ -d ${d#*:} ]] || continue
		record store "store size after all captures (MiB)" "${d%%:*}" "$(du -sm "${d#*:}" | awk '{ print $1 }')" "" ok \
			"MiB (in the seconds column)"
	done

	# --- checkout of the initial capture into a new dir (cold) ---
	op="checkout into new dir"
	log "-- $op"
	local our_co="\"\$ZB\" --store \"$OUR_STORE\" checkout $OUR_ID_INITIAL --out \"\$W/co/ours\$R\"$SYNC"
	local sq_co='unsquashfs -q -d "$W/co/squashfs$R" "$W/sq/initial.sqsh" >/dev/null'"$SYNC"
	local sq_note="image of the initial tree, -comp zstd"
	local sq_measured=0
	if [[ $ZB_CHECKOUT == 1 && -n $OUR_ID_INITIAL && -f $W/sq/initial.sqsh ]]; then
		# The two closest rows, measured in alternating rounds.
		cold_alternating store "$op" "$OURS" "$our_co" unsquashfs "$sq_co" "$sq_note" && CHECK_OURS_CO=1
		sq_measured=1
	elif [[ $ZB_CHECKOUT == 1 && -n $OUR_ID_INITIAL ]]; then
		if measure store "$op" "$OURS" cold "$our_co"; then
			CHECK_OURS_CO=1
		fi
	elif [[ $ZB_CHECKOUT != 1 ]]; then
		na store "$op" "$OURS" "checkout $ZB_NA"
	else
		na store "$op" "$OURS" "no initial snapshot to check out"
	fi
	have tar && [[ -f $W/tar/full.tar ]] &&
		measure store "$op" "tar -x" cold 'mkdir -p "$W/co/tar" && tar -xf "$W/tar/full.tar" -C "$W/co/tar"'"$SYNC" || true
	[[ $sq_measured == 0 && -f $W/sq/initial.sqsh ]] &&
		measure store "$op" "unsquashfs" cold "$sq_co" "" "$sq_note" || true
	have rsync && [[ -d $W/rsync/copy ]] &&
		measure store "$op" "rsync -a (copy back)" cold 'rsync -a "$W/rsync/copy/" "$W/co/rsync/"'"$SYNC" "" "informational" || true
	have git && [[ -z $GIT_C1 ]] && record store "$op" "git checkout" "" "" fail "no commit from the initial capture"
	[[ -n $GIT_C1 ]] && measure store "$op" "git checkout" cold \
		"mkdir -p \"\$W/co/git\" && GIT_INDEX_FILE=\"\$W/git/co.index\" git --git-dir=\"\$W/git/repo/.git\" --work-tree=\"\$W/co/git\" checkout -q -f $GIT_C1 -- :/$SYNC" || true
	have ostree && [[ -z $OSTREE_C1 ]] && record store "$op" "ostree checkout --force-copy" "" "" fail "no commit from the initial capture"
	if [[ -n $OSTREE_C1 ]]; then
		measure store "$op" "ostree checkout --force-copy" cold "$OST checkout -U --force-copy $OSTREE_C1 \"\$W/co/ostree\"$SYNC" || true
		measure store "$op" "ostree checkout (hardlinks)" cold "$OST checkout -U $OSTREE_C1 \"\$W/co/ostree-hl\"$SYNC" "" \
			"informational: shares inodes with the repo" || true
	fi
	have restic && [[ -z $RESTIC_S1 ]] && record store "$op" "restic restore" "" "" fail "no snapshot from the initial backup"
	[[ -n $RESTIC_S1 ]] && measure store "$op" "restic restore" cold "$RST restore -q $RESTIC_S1 --target \"\$W/co/restic\"$SYNC" || true
	have borg && [[ -d $W/borg/repo ]] && measure store "$op" "borg extract" cold \
		"mkdir -p \"\$W/co/borg\" && cd \"\$W/co/borg\" && $BRG extract \"\$W/borg/repo::initial\"$SYNC" || true

	if [[ $BENCH_VERIFY == 1 && ${CHECK_OURS_CO:-0} == 1 && -d $W/co/tar ]]; then
		if diff -r --no-dereference "$W/co/ours" "$W/co/tar" >"$W/co/verify.log" 2>&1; then
			meta "checkout verification" "our checkout of the initial snapshot equals tar -x of the initial tree"
		else
			meta "checkout verification" "MISMATCH between our checkout and tar -x: $(firstline "$W/co/verify.log")"
		fi
	fi
}

# ---------------------------------------------------------------------------------------------
# 1b. diff: the initial tree against the tree after 1% changed, in each tool's own repository
# (run from section_store, right after the 1% change was captured by every tool)

section_diff_after_change() {
	local op G='git --git-dir="$W/git/repo/.git" --work-tree="$CORPUS" -c gc.auto=0 -c maintenance.auto=false'
	local OST='ostree --repo="$W/ostree/repo"' RST='restic -r "$W/restic/repo"'
	# `diff` exits 1 when the sides differ (diff(1)); only 2 and up is a failure here.
	local ZBD='"$ZB" --store "'"$OUR_STORE"'" diff'
	for mode in cold rep; do
		if [[ $mode == cold ]]; then op="diff after 1% changed (cold)"; else op="diff after 1% changed (warm)"; fi
		log "-- $op"
		if [[ -n $OUR_ID_INITIAL && -n $OUR_ID_LAST ]] && zb_has diff --stat; then
			measure diff "$op" "$OURS" "$mode" "$ZBD --stat $OUR_ID_INITIAL $OUR_ID_LAST >/dev/null; [ \$? -le 1 ]" || true
			# The same diff with the snapshot tree indexes moved aside: the objects-only path
			# (a store written before the index existed), so the index's gain is a ratio of
			# one run.
			if [[ -d $OUR_STORE/trees ]]; then
				measure diff "$op" "$OURS (no tree index)" "$mode" "$ZBD --stat $OUR_ID_INITIAL $OUR_ID_LAST >/dev/null; [ \$? -le 1 ]" "$NO_INDEX" || true
				bash -c "$INDEX_BACK"
			fi
		else
			na diff "$op" "$OURS" "diff $ZB_NA"
		fi
		[[ -n $GIT_C1 ]] && measure diff "$op" "git diff --stat" "$mode" "$G diff --stat $GIT_C1 HEAD >/dev/null" || true
		[[ -n $OSTREE_C1 ]] && measure diff "$op" "ostree diff" "$mode" "$OST diff $OSTREE_C1 bench >/dev/null" || true
		[[ -n $RESTIC_S1 ]] && measure diff "$op" "restic diff" "$mode" \
			"$RST diff -q $RESTIC_S1 \$($RST snapshots -q --tag changed --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0][\"short_id\"])') >/dev/null" || true
		have borg && [[ -d $W/borg/repo ]] && measure diff "$op" "borg diff" "$mode" 'borg diff "$W/borg/repo::initial" changed >/dev/null' || true
	done
	if [[ -n $OUR_ID_INITIAL && -n $OUR_ID_LAST ]] && zb_has diff --stat; then
		"$ZB" --store "$OUR_STORE" --json diff "$OUR_ID_INITIAL" "$OUR_ID_LAST" 2>/dev/null | tail -n1 >"$W/diff-summary.json" || true
		meta "diff after 1% changed" "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%d trees read, %d modified, %d added, %d deleted, %d renamed" % (s["trees_read"], s["modified"], s["added"], s["deleted"], s["renamed"]))' "$W/diff-summary.json" 2>/dev/null || echo 'summary not available')"
	fi
	# The live directory against the snapshot of it (what `git status` answers for git). Warm:
	# the first diff fills the directory's stat cache, as `git status` has its index.
	op="directory vs its snapshot (warm)"
	log "-- $op"
	if [[ -n $OUR_ID_LAST ]] && zb_has diff --stat; then
		measure diff "$op" "$OURS" rep "$ZBD $OUR_ID_LAST \"\$CORPUS\" >/dev/null; [ \$? -le 1 ]" || true
	else
		na diff "$op" "$OURS" "diff $ZB_NA"
	fi
	have git && [[ -n $GIT_C1 ]] && measure diff "$op" "git status" rep "$G status --porcelain >/dev/null" || true
}

# ---------------------------------------------------------------------------------------------
# 3. mount

MNT=$W/mnt
mnt_pids() { # pids whose argv has an element equal to $1
	local f p
	for f in /proc/[0-9]*/cmdline; do
		p=${f#/proc/}
		p=${p%/cmdline}
		[[ $p == "$$" || $p == "$BASHPID" ]] && continue
		{ tr '\0' '\n' <"$f"; } 2>/dev/null | grep -Fxq -- "$1" && echo "$p"
	done
	return 0
}
vmhwm_kib() { # max VmHWM over the pids holding mountpoint $1 in argv
	local p v max=0
	for p in $(mnt_pids "$1"); do
		v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
		[[ -n $v && $v -gt $max ]] && max=$v
	done
	echo "$max"
}
wait_mounted() { # mountpoint timeout_s [path that must exist] [pid that must stay alive]
	local deadline=$((SECONDS + $2))
	while ((SECONDS < deadline)); do
		if mountpoint -q "$1" 2>/dev/null && [[ -z ${3:-} || -e ${3:-} ]]; then return 0; fi
		[[ -n ${4:-} ]] && ! kill -0 "$4" 2>/dev/null && return 1
		sleep 0.005
	done
	return 1
}

mount_dir() { # TOOL: its mountpoint under $MNT
	local m=$MNT/${1%% *}
	echo "${m//[^A-Za-z0-9_\/.-]/_}"
}

# Tools whose "mount ready" ready_alternating measured (mount_one then mounts them once).
declare -A READY_MEASURED=()

# ready_alternating TOOL_A START_A UMOUNT_A TOOL_B START_B UMOUNT_B
#   "mount ready" of two daemonizing tools (START returns once mounted; the mount root is the
#   tree), measured in alternating rounds (A B, then B A, ...), MOUNT_READY_ROUNDS each, cold,
#   with mount_one's wait: this VM's disk changes speed from minute to minute, and each
#   tool's rounds measured a minute apart moved a ratio of two ~25 ms figures by several
#   percent. Each round mounts and unmounts; mount_one mounts again for the reads.
ready_alternating() {
	local -a tools=("$1" "$4") starts=("$2" "$5") umounts=("$3" "$6")
	local -A times=()
	local round k i m t0 t1 rc
	log "-- mount ready, alternating: $1 / $4"
	for ((round = 1; round <= MOUNT_READY_ROUNDS; round++)); do
		for k in $(((round + 1) % 2)) $((round % 2)); do
			m=$(mount_dir "${tools[k]}")
			mkdir -p "$m"
			export M=$m
			drop_caches
			rc=0
			t0=$EPOCHREALTIME
			timeout -k 10 "$BENCH_TIMEOUT" bash -c "${starts[k]}" >"$W/.mount.log" 2>&1 || rc=$?
			if [[ $rc != 0 ]] || ! wait_mounted "$m" 300 "$m"; then
				log "  ${tools[k]}: mount FAILED: $(firstline "$W/.mount.log")"
				bash -c "${umounts[k]}" >/dev/null 2>&1 || true
				return 1
			fi
			t1=$EPOCHREALTIME
			times[$k]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }') "
			bash -c "${umounts[k]}" >/dev/null 2>&1 || fusermount3 -uz "$m" 2>/dev/null || true
			for i in $(seq 50); do mountpoint -q "$m" 2>/dev/null || break; sleep 0.1; done
		done
	done
	for k in 0 1; do
		record mount "mount ready" "${tools[k]}" "$(median ${times[$k]})" "" ok \
			"cold, median of $MOUNT_READY_ROUNDS, rounds alternating with ${tools[1 - k]}"
		log "  ${tools[k]}: mount ready: ${times[$k]}"
		READY_MEASURED[${tools[k]}]=1
	done
}

# mount_one TOOL START_CMD ROOT UMOUNT_CMD [BACKGROUND=0|1] [NOTE]
#   START_CMD returns once mounted (daemonizing tools) or, with BACKGROUND=1, runs in the
#   foreground and is started with &. ROOT is the tree inside the mount to read.
mount_one() {
	local tool=$1 start=$2 root=$3 umount_cmd=$4 bg=${5:-0} note=${6:-}
	local m t0 t1 rc=0 pid=""
	m=$(mount_dir "$tool")
	mkdir -p "$m"
	export M=$m MROOT=${root//@M@/$m}
	log "-- mount: $tool"
	# Mount ready is cold for every tool (caches dropped before each start: the binary, the
	# image or store), the median of MOUNT_READY_ROUNDS mounts; the last one stays for the reads.
	# A tool ready_alternating measured is mounted once, for the reads.
	local round i times=() ok=1 rounds=$MOUNT_READY_ROUNDS
	[[ -n ${READY_MEASURED[$tool]:-} ]] && rounds=1
	for ((round = 1; round <= rounds; round++)); do
		drop_caches
		rc=0 pid=""
		t0=$EPOCHREALTIME
		if [[ $bg == 1 ]]; then
			bash -c "$start" >"$W/.mount.log" 2>&1 &
			pid=$!
			BG_PIDS+=("$pid")
		else
			timeout -k 10 "$BENCH_TIMEOUT" bash -c "$start" >"$W/.mount.log" 2>&1 || rc=$?
		fi
		if [[ $rc == 0 ]] && wait_mounted "$m" 300 "$MROOT" "$pid"; then
			t1=$EPOCHREALTIME
			times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')")
		else
			ok=0
			break
		fi
		if ((round < rounds)); then
			bash -c "$umount_cmd" >/dev/null 2>&1 || fusermount3 -uz "$m" 2>/dev/null || true
			if [[ -n $pid ]]; then
				for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			fi
			for i in $(seq 50); do mountpoint -q "$m" 2>/dev/null || break; sleep 0.1; done
		fi
	done
	if [[ $ok == 1 && -n ${READY_MEASURED[$tool]:-} ]]; then
		: # recorded by ready_alternating
	elif [[ $ok == 1 ]]; then
		record mount "mount ready" "$tool" "$(median "${times[@]}")" "" ok \
			"cold, median of ${#times[@]}${note:+; $note}"
	else
		record mount "mount ready" "$tool" "" "" fail "$(firstline "$W/.mount.log")"
		log "  $tool: mount FAILED: $(firstline "$W/.mount.log")"
		bash -c "$umount_cmd" >/dev/null 2>&1 || true
		[[ -n $pid ]] && kill "$pid" 2>/dev/null || true
		return 1
	fi
	read_tree mount "$tool"
	local hwm
	hwm=$(vmhwm_kib "$m")
	if [[ $hwm == 0 && $tool == "$OURS" ]]; then # the daemon may not keep the mountpoint in argv
		local p v
		for p in $(pgrep -f -- "$(basename "$ZB").* mount " || true); do
			v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
			[[ -n $v && $v -gt $hwm ]] && hwm=$v
		done
	fi
	if [[ $hwm -gt 0 ]]; then
		record mount "daemon peak memory (VmHWM)" "$tool" "" "$hwm" ok ""
	else
		record mount "daemon peak memory (VmHWM)" "$tool" "" "" fail "daemon pid not found"
	fi
	bash -c "$umount_cmd" >"$W/.umount.log" 2>&1 || {
		log "  $tool: unmount failed: $(firstline "$W/.umount.log"); lazy unmount"
		fusermount3 -uz "$m" 2>/dev/null || true
	}
	if [[ -n $pid ]]; then
		local i
		for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill "$pid" 2>/dev/null || true
	fi
	return 0
}

# read_tree SECTION TOOL: find and full read of $MROOT, cold and warm. Entry and byte counts
# go to the notes so a tool that shows a different tree is visible.
read_tree() {
	local tool=$2
	measure mount "find | wc -l (cold)" "$tool" cold 'find "$MROOT" | wc -l' &&
		annotate_last "$(tr -dc 0-9 <"$W/.out") entries" || true
	measure mount "find | wc -l (warm)" "$tool" rep 'find "$MROOT" | wc -l' || true
	measure mount "tar -cf - | wc -c (cold)" "$tool" cold 'tar -cf - -C "$MROOT" . | wc -c' &&
		annotate_last "$(tr -dc 0-9 <"$W/.out") bytes" || true
	measure mount "tar -cf - | wc -c (warm)" "$tool" rep 'tar -cf - -C "$MROOT" . | wc -c' || true
}

MOUNT_OPS=("mount ready" "find | wc -l (cold)" "find | wc -l (warm)" "tar -cf - | wc -c (cold)"
	"tar -cf - | wc -c (warm)" "daemon peak memory (VmHWM)")
na_mount_ops() { # tool note
	local op
	for op in "${MOUNT_OPS[@]}"; do na mount "$op" "$1" "$2"; done
}

ensure_ours_snapshot() {
	[[ -n $OUR_ID_LAST || $ZB_SNAPSHOT != 1 ]] && return 0
	"$ZB" --store "$OUR_STORE" snapshot --dir "$CORPUS" >"$W/.out" 2>"$W/.err" && OUR_ID_LAST=$(last_line) || true
}

section_mount() {
	log "== mount"
	mkdir -p "$MNT" "$W/mount"

	# the plain directory, same reads
	export MROOT=$CORPUS
	log "-- plain dir"
	read_tree mount "plain dir"

	# squashfuse_ll's image (-comp zstd, as the peer harness builds it), built first: the
	# "mount ready" of ours and squashfuse_ll is measured in alternating rounds
	local sq_image=0
	if have mksquashfs && have squashfuse_ll; then
		measure info "build image for the mount peers" "mksquashfs" once \
			'mksquashfs "$CORPUS" "$W/mount/tree.sqsh" -comp zstd -noappend -quiet -no-progress' "" "-comp zstd" &&
			sq_image=1
	fi
	local sq_start='squashfuse_ll "$W/mount/tree.sqsh" "$M"' sq_umount='fusermount3 -u "$M"'
	local our_start our_umount='"$ZB" umount "$M"'
	[[ $ZB_MOUNT == 1 ]] && ensure_ours_snapshot
	# By the name a user types (the snapshot's catalog name), as the peer harness mounts.
	[[ -n $OUR_ID_LAST ]] && "$ZB" --store "$OUR_STORE" -q snapshot --dir "$CORPUS" --name bench-last >/dev/null 2>&1 || true
	our_start="\"\$ZB\" --store \"$OUR_STORE\" mount bench-last \"\$M\" --daemon"
	if [[ $ZB_MOUNT == 1 && -n $OUR_ID_LAST && $sq_image == 1 ]]; then
		ready_alternating "$OURS" "$our_start" "$our_umount" squashfuse_ll "$sq_start" "$sq_umount" || true
	fi

	# ours
	if [[ $ZB_MOUNT == 1 ]]; then
		if [[ -n $OUR_ID_LAST ]]; then
			mount_one "$OURS" "$our_start" @M@ "$our_umount" 0 "mount --daemon returned" || true
			# The same mount served from the objects: the tree index is moved aside while the
			# mount opens its snapshot (it reads the index then or never).
			if [[ -d $OUR_STORE/trees ]]; then
				mount_one "$OURS (no tree index)" "$NO_INDEX; \"\$ZB\" --store \"$OUR_STORE\" mount $OUR_ID_LAST \"\$M\" --daemon; rc=\$?; $INDEX_BACK; exit \$rc" @M@ \
					"\"\$ZB\" umount \"\$M\"" 0 "mount --daemon returned; tree index moved aside" || true
			fi
		else
			na_mount_ops "$OURS" "no snapshot to mount: $(firstline "$W/.err")"
		fi
	else
		na_mount_ops "$OURS" "mount --daemon $ZB_NA"
	fi

	# squashfuse_ll on the squashfs image
	if have mksquashfs && have squashfuse_ll; then
		if [[ $sq_image == 1 ]]; then
			mount_one squashfuse_ll "$sq_start" @M@ "$sq_umount" || true
		else
			na_mount_ops squashfuse_ll "mksquashfs failed"
		fi
	else
		na_mount_ops squashfuse_ll "squashfs-tools or squashfuse not installed"
	fi

	# ratarmount on a tar of the same tree
	if have ratarmount; then
		if measure info "build image for the mount peers" "tar -cf (for ratarmount)" once 'tar -cf "$W/mount/tree.tar" -C "$CORPUS" .'; then
			mount_one ratarmount 'ratarmount "$W/mount/tree.tar" "$M"' @M@ 'fusermount3 -u "$M"' 0 \
				"includes building the sqlite index on first mount" || true
		fi
	else
		na_mount_ops ratarmount "not installed (pip install ratarmount failed or disabled)"
	fi

	# restic mount (foreground process; the tree is under snapshots/latest/<absolute path>)
	if have restic; then
		if [[ ! -d $W/restic/repo ]]; then
			mkdir -p "$W/restic"
			restic -r "$W/restic/repo" init >/dev/null 2>&1 && restic -r "$W/restic/repo" backup -q --host bench "$CORPUS" >/dev/null 2>&1 || true
		fi
		mount_one "restic mount" 'exec restic -r "$W/restic/repo" mount "$M"' "@M@/snapshots/latest$CORPUS" \
			'fusermount3 -u "$M"' 1 "until snapshots/latest/<path> appears" || true
	else
		na_mount_ops "restic mount" "restic not installed"
	fi

	# borg mount (daemonizes by default)
	if have borg; then
		if [[ ! -d $W/borg/repo ]]; then
			mkdir -p "$W/borg/base"
			borg init -e none "$W/borg/repo" >/dev/null 2>&1 && (cd "$CORPUS" && borg create "$W/borg/repo::changed" .) >/dev/null 2>&1 || true
		fi
		local last
		last=$(borg list --short "$W/borg/repo" 2>/dev/null | tail -n1)
		if [[ -n $last ]]; then
			mount_one "borg mount" "borg mount \"\$W/borg/repo::$last\" \"\$M\"" @M@ 'borg umount "$M"' || true
		else
			na_mount_ops "borg mount" "no borg archive"
		fi
	else
		na_mount_ops "borg mount" "borg not installed"
	fi
}

# ---------------------------------------------------------------------------------------------
# 2. export

section_export() {
	log "== export"
	local inst=$W/install ws
	ws=$inst/agents/bench/workspace
	mkdir -p "$inst/agents/bench" "$W/export"
	# The corpus becomes the agent's workspace (a move: no hard links, which capture skips).
	mv "$CORPUS" "$ws"
	cat >"$inst/config.toml" <<'EOF'
# minimal ZeroClaw install for the benchmark: one agent, one model provider
schema_version = 3

[providers.models.openai.main]
model = "gpt-4o"

[risk_profiles.guarded]
level = "supervised"

[agents.bench]
enabled = true
model_provider = "openai.main"
risk_profile = "guarded"
EOF
	export INSTALL=$inst WS=$ws
	local out=$W/export/out ES=$W/export/store
	export EOUT=$out ES
	# Ours and rsync in alternating cold rounds (like the checkout): each round into a fresh
	# store and directory, nothing deleted between, so no round pays for another's deletes.
	# The re-export below replaces round 1's bundle.
	local ours_export='"$ZB" --store "$ES$R" export bench --install "$INSTALL" --out "$EOUT$R"'"$SYNC"
	local rsync_export='rsync -a "$WS/" "$W/export/rsync$R/"'"$SYNC"
	if [[ $ZB_EXPORT == 1 ]] && have rsync; then
		ALT_ROUNDS=$EXPORT_ROUNDS cold_alternating export "export (first)" "$OURS" "$ours_export" \
			"rsync -a" "$rsync_export" "workspace only" || true
	else
		[[ $ZB_EXPORT == 1 ]] || na export "export (first)" "$OURS" "export $ZB_NA"
		[[ $ZB_EXPORT == 1 ]] && measure export "export (first)" "$OURS" cold "$ours_export" "" "fresh store" || true
		have rsync && measure export "export (first)" "rsync -a" cold "$rsync_export" "" "workspace only" || true
	fi
	if [[ $ZB_EXPORT == 1 && -d $out ]]; then
		if ! measure export "re-export (unchanged, --force)" "$OURS" cold \
			'"$ZB" --store "$ES" export bench --install "$INSTALL" --out "$EOUT" --force'"$SYNC"; then
			# still show what an unchanged re-export costs, into a new directory
			measure export "re-export (unchanged, new out dir)" "$OURS" cold \
				'"$ZB" --store "$ES" export bench --install "$INSTALL" --out "$EOUT.2"'"$SYNC" "" \
				"informational: measured because --force into the same dir failed" || true
		fi
		if [[ $BENCH_VERIFY == 1 ]]; then
			if diff -r --no-dereference "$out/workspace" "$ws" >"$W/export/verify.log" 2>&1; then
				meta "export verification" "bundle workspace/ equals the agent workspace"
			else
				meta "export verification" "MISMATCH between bundle workspace/ and the agent workspace: $(firstline "$W/export/verify.log")"
			fi
		fi
	else
		na export "re-export (unchanged, --force)" "$OURS" "export $ZB_NA"
	fi
	mv "$ws" "$CORPUS"
}

# ---------------------------------------------------------------------------------------------
# 4. pack: pack and unpack against tar, pack size against tar | zstd and squashfs, --since

# bytes of a file in MiB, 3 decimals
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.3f", b / 1048576 }'; }

section_pack() {
	log "== pack: pack, unpack, sizes, --since"
	local id base since_id
	export PK=$W/pack PS=$W/pack/store
	mkdir -p "$PK"
	if ! zb_has pack --since || ! zb_has unpack; then
		na pack "pack (cold)" "$OURS" "pack $ZB_NA"
		return 0
	fi
	if ! "$ZB" --store "$PS" snapshot --dir "$CORPUS" >"$PK/snap.out" 2>"$PK/snap.err"; then
		record pack "pack (cold)" "$OURS" "" "" fail "snapshot failed: $(firstline "$PK/snap.err")"
		return 0
	fi
	id=$(tail -n1 "$PK/snap.out")
	export PACK_ID=$id
	# Blobs are stored with zstd level 3 (zstd's default) when that saves space; the peers
	# that compress use the same level.
	measure pack "pack (cold)" "$OURS" cold '"$ZB" --store "$PS" pack "$PACK_ID" --out "$PK/full.zcpack"'"$SYNC" \
		'rm -f "$PK/full.zcpack"' "zstd level 3; reads, hashing and zstd on worker threads" || true
	have tar && measure pack "pack (cold)" "tar -c" cold 'tar -cf "$PK/full.tar" -C "$CORPUS" .'"$SYNC" \
		'rm -f "$PK/full.tar"' || true
	have tar && have zstd && measure pack "pack (cold)" "tar | zstd -3" cold \
		'tar -cf - -C "$CORPUS" . | zstd -q -3 -T1 -o "$PK/full.tar.zst"'"$SYNC" 'rm -f "$PK/full.tar.zst"' \
		"informational; one zstd thread" || true
	# Warm (page cache), without sync: what the pipeline costs in CPU, against tar's copying.
	measure pack "pack (warm)" "$OURS" rep '"$ZB" --store "$PS" pack "$PACK_ID" --out "$PK/warm.zcpack"' \
		'rm -f "$PK/warm.zcpack"' "no sync" || true
	have tar && measure pack "pack (warm)" "tar -c" rep 'tar -cf "$PK/warm.tar" -C "$CORPUS" .' \
		'rm -f "$PK/warm.tar"' "no sync" || true
	have tar && have zstd && measure pack "pack (warm)" "tar | zstd -3" rep \
		'tar -cf - -C "$CORPUS" . | zstd -q -3 -T1 -o "$PK/warm.tar.zst"' 'rm -f "$PK/warm.tar.zst"' \
		"no sync; one zstd thread" || true
	rm -f "$PK/warm.zcpack" "$PK/warm.tar" "$PK/warm.tar.zst"
	have mksquashfs && measure pack "pack (cold)" "mksquashfs -comp zstd" cold \
		'mksquashfs "$CORPUS" "$PK/full.sqsh" -comp zstd -noappend -quiet -no-progress'"$SYNC" 'rm -f "$PK/full.sqsh"' \
		"informational; default level (15), all cores" || true

	measure pack "unpack (cold)" "$OURS" cold '"$ZB" --store "$PK/store2" unpack "$PK/full.zcpack"'"$SYNC" \
		'rm -rf "$PK/store2"' "into a new store; every object verified" || true
	[[ -f $PK/full.tar ]] && measure pack "unpack (cold)" "tar -x" cold \
		'mkdir -p "$PK/x" && tar -xf "$PK/full.tar" -C "$PK/x"'"$SYNC" 'rm -rf "$PK/x"' || true

	[[ -f $PK/full.zcpack ]] && record pack "size (MiB)" "$OURS" "$(mib "$PK/full.zcpack")" "" ok "MiB in the seconds column"
	[[ -f $PK/full.tar.zst ]] && record pack "size (MiB)" "tar | zstd -3" "$(mib "$PK/full.tar.zst")" "" ok "MiB"
	[[ -f $PK/full.sqsh ]] && record pack "size (MiB)" "mksquashfs -comp zstd" "$(mib "$PK/full.sqsh")" "" ok "MiB"
	[[ -f $PK/full.tar ]] && record pack "size (MiB)" "tar (uncompressed)" "$(mib "$PK/full.tar")" "" ok "MiB; informational"

	# --since after 1% of files changed (a different seed than the store section's change).
	local mline
	mline=$(corpus_mutate "$((BENCH_SEED + 1))")
	meta "pack: 1% change" "$mline"
	if "$ZB" --store "$PS" snapshot --dir "$CORPUS" >"$PK/snap2.out" 2>"$PK/snap2.err"; then
		export PACK_ID2
		PACK_ID2=$(tail -n1 "$PK/snap2.out")
		measure pack "pack --since (1% changed, cold)" "$OURS" cold \
			'"$ZB" --store "$PS" pack "$PACK_ID2" --since "$PACK_ID" --out "$PK/since.zcpack"'"$SYNC" || true
		if [[ -f $PK/since.zcpack && -f $PK/full.zcpack ]]; then
			record pack "incremental pack size (MiB)" "$OURS" "$(mib "$PK/since.zcpack")" "" ok "pack --since after 1% changed"
			record pack "incremental pack size (MiB)" "full pack" "$(mib "$PK/full.zcpack")" "" ok "the full pack above"
		fi
	else
		record pack "pack --since (1% changed, cold)" "$OURS" "" "" fail "snapshot failed: $(firstline "$PK/snap2.err")"
	fi
	rm -rf "$PK/x" "$PK/store2" "$PK/full.tar" "$PK/full.sqsh"
}

# ---------------------------------------------------------------------------------------------
# 5. remote: push and pull through a local S3 server (s3s-fs) against restic on the same server

s3s_bin() {
	if have s3s-fs; then command -v s3s-fs; elif [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs ]]; then
		echo "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs"; fi
}

section_remote() {
	log "== remote: push and pull through s3s-fs"
	local bin ep="" i pid
	bin=$(s3s_bin)
	if [[ -z $bin ]]; then
		na remote "push (cold)" "$OURS" "s3s-fs not installed (scripts/setup.sh)"
		return 0
	fi
	if ! zb_has push; then
		na remote "push (cold)" "$OURS" "push $ZB_NA"
		return 0
	fi
	export RM=$W/remote
	mkdir -p "$RM/s3/bench"
	RUST_LOG=info NO_COLOR=1 "$bin" --host 127.0.0.1 --port 0 --access-key bench-access \
		--secret-key bench-secret-key "$RM/s3" >"$RM/s3.log" 2>&1 &
	pid=$!
	BG_PIDS+=("$pid")
	for ((i = 0; i < 300; i++)); do
		ep=$(grep -o 'http://127.0.0.1:[0-9]*' "$RM/s3.log" | head -n1 || true)
		[[ -n $ep ]] && break
		sleep 0.1
	done
	if [[ -z $ep ]]; then
		na remote "push (cold)" "$OURS" "s3s-fs did not start: $(firstline "$RM/s3.log")"
		return 0
	fi
	meta "remote server" "s3s-fs $($bin --version 2>/dev/null | awk '{ print $2 }') at $ep, data on $(findmnt -n -o FSTYPE --target "$RM")"
	export AWS_ACCESS_KEY_ID=bench-access AWS_SECRET_ACCESS_KEY=bench-secret-key AWS_REGION=us-east-1
	export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 EP=$ep
	export RSTORE=$RM/store
	"$ZB" --store "$RSTORE" remote add origin s3://bench/zb --endpoint "$ep" >/dev/null 2>&1
	if ! "$ZB" --store "$RSTORE" snapshot --dir "$CORPUS" >"$RM/snap.out" 2>"$RM/snap.err"; then
		record remote "push (cold)" "$OURS" "" "" fail "snapshot failed: $(firstline "$RM/snap.err")"
		return 0
	fi
	export RID
	RID=$(tail -n1 "$RM/snap.out")
	measure remote "push (cold)" "$OURS" cold '"$ZB" --store "$RSTORE" push "$RID" origin' || true
	measure remote "pull (cold)" "$OURS" cold '"$ZB" --store "$RM/store2" pull "origin/$RID"'"$SYNC" \
		'rm -rf "$RM/store2" && "$ZB" --store "$RM/store2" remote add origin s3://bench/zb --endpoint "$EP"' \
		"into a new store; every object verified" || true
	measure remote "pull + checkout (cold)" "$OURS" cold \
		'"$ZB" --store "$RM/store2" pull "origin/$RID" && "$ZB" --store "$RM/store2" checkout "$RID" --out "$RM/co-ours"'"$SYNC" \
		'rm -rf "$RM/store2" "$RM/co-ours" && "$ZB" --store "$RM/store2" remote add origin s3://bench/zb --endpoint "$EP"' \
		"informational: a tree on disk, as restic restore leaves" || true
	if have restic; then
		export RRR="s3:$ep/bench/restic"
		if restic -r "$RRR" init >"$RM/restic-init.log" 2>&1; then
			measure remote "push (cold)" "restic backup" cold 'restic -r "$RRR" backup -q --host bench "$CORPUS"' || true
			measure remote "pull (cold)" "restic restore" cold 'restic -r "$RRR" restore -q latest --target "$RM/co-restic"'"$SYNC" \
				'rm -rf "$RM/co-restic"' || true
			measure remote "pull + checkout (cold)" "restic restore" cold \
				'restic -r "$RRR" restore -q latest --target "$RM/co-restic"'"$SYNC" 'rm -rf "$RM/co-restic"' || true
		else
			na remote "push (cold)" "restic backup" "restic init on s3s-fs failed: $(firstline "$RM/restic-init.log")"
		fi
	else
		na remote "push (cold)" "restic backup" "restic not installed"
	fi
	record info "remote bytes on the server" "$OURS" "" "" ok "$(du -sm "$RM/s3/bench/zb" 2>/dev/null | awk '{ print $1 }') MiB"
	[[ -d $RM/s3/bench/restic ]] && record info "remote bytes on the server" "restic" "" "" ok "$(du -sm "$RM/s3/bench/restic" | awk '{ print $1 }') MiB"
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	rm -rf "$RM/store2" "$RM/co-ours" "$RM/co-restic"
}

# ---------------------------------------------------------------------------------------------
# main

main() {
	cleanup_mounts
	rm -rf "$W"
	mkdir -p "$W"
	: >"$RESULTS"
	: >"$META"
	install_peers
	build_ours
	local built=$ZB
	install_ours
	probe_ours

	log "generating corpus (seed $BENCH_SEED, scale $BENCH_SCALE)"
	local corpus_line
	corpus_line=$(corpus_generate)
	log "$corpus_line"

	meta "date" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	meta "machine" "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, kernel $(uname -r), $(findmnt -n -o FSTYPE --target "$W") at $W"
	meta "corpus" "$corpus_line"
	local zbv="not available"
	if [[ -x $ZB ]]; then
		zbv="$built, run as its copy $ZB ($("$ZB" --version 2>/dev/null | head -n1 || true))"
		zbv=${zbv/ ()/}
		[[ $ZB_DEFAULT == 1 ]] && zbv="$zbv, built from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
	fi
	meta "ours" "$zbv"
	meta "peers" "$(peer_versions)"
	meta "method" "wall clock per command (bash EPOCHREALTIME around /usr/bin/time); max RSS from /usr/bin/time %M (largest process of the command); cold = sync + drop_caches before the command; warm = one untimed warm-up then median of $BENCH_REPEAT; bulk writes $([[ $BENCH_SYNC == 1 ]] && echo 'include sync -f in the timing' || echo 'exclude sync')"

	want store && section_store
	want mount && section_mount
	want export && section_export
	want pack && section_pack
	want remote && section_remote
	if want scale; then
		ZB=$ZB SCALE_BUILD=0 SCALE_DIR=$W/scale "$SCRIPT_DIR/scale.sh" || log "scale: failed (see above)"
	fi

	if [[ $BENCH_KEEP != 1 ]]; then
		cleanup_mounts
		find "$W" -mindepth 1 -maxdepth 1 ! -name '*.tsv' ! -name '*.log' -exec rm -rf {} +
	fi
	mkdir -p "$(dirname "$REPORT")"
	python3 "$SCRIPT_DIR/bench/report.py" "$RESULTS" "$META" >"$REPORT"
	cp "$RESULTS" "$(dirname "$REPORT")/results.tsv"
	cat "$REPORT"
	log "report: $REPORT"
}

main "$@"
