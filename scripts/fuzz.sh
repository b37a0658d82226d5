#!/usr/bin/env bash
# Fuzzes every parser of outside input (docs/testing.md):
#   scripts/fuzz.sh [SECONDS]   each target for SECONDS (default 30) with libFuzzer + AddressSanitizer
# First every target replays its committed seed corpus (fuzz/corpus/<name>) in a normal build;
# then each runs as a libFuzzer binary (own build folder .build-fuzz) starting from that corpus.
# New inputs the fuzzer finds go to a temporary folder, not into the repository. Any crash,
# failed check or AddressSanitizer report fails the run (leak detection is off, as in
# make test-sanitized); its input is kept in fuzz/findings/ and printed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
targets=(form jws token-response proxy-path)


for target in "${targets[@]}"; do
    swift build --product "tokengate-fuzz-$target" >/dev/null
    ".build/debug/tokengate-fuzz-$target" "fuzz/corpus/$target"
done

for target in "${targets[@]}"; do
    swift build --scratch-path .build-fuzz --product "tokengate-fuzz-$target" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING >/dev/null
done

work=$(mktemp -d /tmp/tokengate-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p fuzz/findings
status=0
for target in "${targets[@]}"; do
    mkdir -p "$work/$target"
    # Swift's own crash backtracer would wait on a crashing fuzz input: libFuzzer reports instead.
    if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 \
        ".build-fuzz/debug/tokengate-fuzz-$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="fuzz/findings/$target-" -print_final_stats=1 "$work/$target" "fuzz/corpus/$target" \
        >"$work/$target.log" 2>&1; then
        echo "fuzz: $target FAILED"
        tail -n 40 "$work/$target.log"
        status=1
    else
        echo "fuzz: $target ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/$target.log" | grep -o '[0-9]*$') inputs in ${seconds}s)"
    fi
done
exit $status
