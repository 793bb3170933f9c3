#!/bin/sh
# Fuzz the store's decoders for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Targets: tree_decode, record_decode, unescape, pack_read (properties in tests/fuzz/checks.rs)
# and remote_parsers (the remote record check and index parser; nightly only, its properties
# live in the target; the stable path covers them with src/remote/client.rs unit tests).
# Runs the first of these that works:
#   1. cargo-fuzz (`cargo +nightly fuzz run`) on the targets in tests/fuzz/;
#   2. the same libFuzzer targets built by hand with a nightly toolchain (what cargo-fuzz
#      does: sanitizer-coverage flags, release, debug assertions and overflow checks);
#   3. on stable only (or with ZCB_FUZZ_STABLE=1): the seeded random-mutation harness
#      store/tests/fuzz_decoders.rs, with a fresh seed (printed; ZCB_FUZZ_SEED replays it).
# Crashes from 1 and 2 land in tests/fuzz/artifacts/. Every crash found becomes a regression
# test in store/tests/fuzz_decoders.rs (mod regressions).
# First, always: the config closure harness (src/agent/closure_fuzz.rs, stable), about
# SECONDS worth of mutated ZeroClaw configs planned and rendered (~500 a second here).
set -eu
cd "$(dirname "$0")/.."
secs="${1:-60}"

closure_seed="${ZCB_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
echo "fuzz.sh: config closure harness, $((secs * 500)) inputs, seed $closure_seed"
closure_log="$(mktemp)"
if ! ZCB_FUZZ_ITERS=$((secs * 500)) ZCB_FUZZ_SEED="$closure_seed" \
    cargo test --lib --quiet agent::closure_fuzz -- --nocapture >"$closure_log" 2>&1; then
    cat "$closure_log"
    echo "fuzz.sh: the config closure harness failed (seed $closure_seed)" >&2
    exit 1
fi
grep -E "config closure:" "$closure_log" || true
rm -f "$closure_log"
targets="tree_decode record_decode unescape pack_read remote_parsers"
fuzz_dir=tests/fuzz

if [ -z "${ZCB_FUZZ_STABLE:-}" ] && cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz, ${secs}s per target"
    cd "$fuzz_dir"
    for t in $targets; do
        mkdir -p "corpus/$t"
        cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs"
    done
    exit 0
fi

if [ -z "${ZCB_FUZZ_STABLE:-}" ] && rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: libFuzzer via nightly (no cargo-fuzz), ${secs}s per target"
    triple="$(rustc -vV | sed -n 's/^host: //p')"
    target_dir="$(pwd)/target/fuzz"
    (
        cd "$fuzz_dir"
        RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
            cargo +nightly build --release --bins --target "$triple" --target-dir "$target_dir"
    )
    mkdir -p "$fuzz_dir/artifacts"
    for t in $targets; do
        mkdir -p "$fuzz_dir/corpus/$t"
        "$target_dir/$triple/release/$t" "$fuzz_dir/corpus/$t" -max_total_time="$secs" \
            -artifact_prefix="$fuzz_dir/artifacts/" -print_final_stats=1 2>&1 |
            grep -E "^(Done|stat::number_of_executed_units|==|SUMMARY)|panicked|deadly" || true
    done
    if [ -n "$(ls -A "$fuzz_dir/artifacts" 2>/dev/null)" ]; then
        echo "fuzz.sh: crashes saved in $fuzz_dir/artifacts/" >&2
        exit 1
    fi
    exit 0
fi

seed="${ZCB_FUZZ_SEED:-$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')}"
echo "fuzz.sh: stable harness, ${secs}s per target, seed $seed"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
ZCB_FUZZ_SECS="$secs" ZCB_FUZZ_SEED="$seed" \
    cargo test -p zeroclaw-bundle-store --test fuzz_decoders -- --test-threads=3 --nocapture \
    >"$log" 2>&1 || status=$?
grep -E "inputs from seed|property broken|test result|panicked|^error" "$log" || cat "$log"
exit "$status"
