#!/bin/sh
# Fuzz the store's decoders for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Targets: tree_decode, record_decode, unescape (the properties live in tests/fuzz/checks.rs).
# With cargo-fuzz and a nightly toolchain, runs each cargo-fuzz target in tests/fuzz/ for the
# time given (crashes land in tests/fuzz/artifacts/). Otherwise (stable only, or
# ZCB_FUZZ_STABLE=1) runs the same properties through the seeded random-mutation harness
# store/tests/fuzz_decoders.rs for the time given per target, with a fresh seed (printed; set
# ZCB_FUZZ_SEED to replay). Either way: every crash found becomes a regression test in
# store/tests/fuzz_decoders.rs (mod regressions).
set -eu
cd "$(dirname "$0")/.."
secs="${1:-60}"
targets="tree_decode record_decode unescape"

if [ -z "${ZCB_FUZZ_STABLE:-}" ] && cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz (nightly), ${secs}s per target"
    cd tests/fuzz
    for t in $targets; do
        mkdir -p "corpus/$t"
        cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs"
    done
    exit 0
fi

seed="${ZCB_FUZZ_SEED:-$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')}"
echo "fuzz.sh: cargo-fuzz unavailable or ZCB_FUZZ_STABLE set: stable harness, ${secs}s per target, seed $seed"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
ZCB_FUZZ_SECS="$secs" ZCB_FUZZ_SEED="$seed" \
    cargo test -p zeroclaw-bundle-store --test fuzz_decoders -- --test-threads=3 --nocapture \
    >"$log" 2>&1 || status=$?
grep -E "inputs from seed|property broken|test result|panicked|^error" "$log" || cat "$log"
exit "$status"
