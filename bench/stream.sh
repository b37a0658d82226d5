#!/usr/bin/env bash
# Long streamed transfers through a real `tokengate serve`, read and sent slowly, on loopback.
#
#   bench/stream.sh [SECONDS] [RATE]        (defaults: 60 and 1M, curl's --limit-rate)
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, the upstream bench/stream_upstream.py and a
# release `tokengate serve` whose API has `timeout_seconds: 10`, logs in once, then:
#   download  GET of a 1 GiB answer through TokenGate (the cached path, on the event loop), read
#             at RATE for SECONDS by curl, which then stops by itself (--max-time);
#   upload    PUT of a 1 GiB body through TokenGate (a streamed upload: the async path), sent at
#             RATE for SECONDS, then stopped the same way.
# Each passes only when curl is the one that stopped (exit 28, not a transfer TokenGate cut at
# its 10 s timeout) and the bytes moved match RATE. TokenGate's resident memory is sampled every
# second: first sample, peak, last. Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
seconds=${1:-60}
rate=${2:-1M}
scripts/deps.sh

release_build tokengate

work=$(mktemp -d /tmp/tokengate-bench-stream.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_bench "$work" 25532
}
trap cleanup EXIT

UPSTREAM_PORT=18281 TG_PORT=18290 MOCK_PORT=18291

database_url=$(bench_database "$work" 25532)
python3 bench/stream_upstream.py $UPSTREAM_PORT >"$work/upstream.log" 2>&1 &
pids+=($!)
start_provider "$work" $MOCK_PORT

bench_log="level: info, access_log: true" bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "" \
    "name: files, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, timeout_seconds: 10, max_body_bytes: 2147483648"
start_tokengate "$work" $TG_PORT
token=$(login_token $TG_PORT)
# Warm: the upstream token is fetched once, so the download below takes the cached path.
warm=$(curl -s -H "Authorization: Bearer $token" --data-binary hello "http://127.0.0.1:$TG_PORT/api/files/sink")
[ "$warm" = 5 ] || { echo "bench: warm-up call answered '$warm'" >&2; tail -5 "$work/tg.log" >&2; exit 1; }
truncate -s 1G "$work/upload.bin"

rss() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$tg_pid/status"; }
# measure NAME CURL_ARGS...: one transfer at $rate for $seconds, RSS sampled each second.
measure() {
    local name=$1 out rc
    shift
    : >"$work/rss"
    (while kill -0 "$tg_pid" 2>/dev/null; do rss >>"$work/rss"; echo >>"$work/rss"; sleep 1; done) &
    local sampler=$!
    set +e
    out=$(curl -s -o /dev/null --limit-rate "$rate" --max-time "$seconds" -H "Authorization: Bearer $token" \
        -w '%{http_code} %{size_download} %{size_upload} %{time_total}' "$@")
    rc=$?
    set -e
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    read -r code down up took <<<"$out"
    local moved=$down
    [ "$name" = upload ] && moved=$up
    local first peak last
    first=$(grep -v '^$' "$work/rss" | head -n 1) peak=$(grep -v '^$' "$work/rss" | sort -g | tail -n 1) last=$(grep -v '^$' "$work/rss" | tail -n 1)
    local verdict="not cut: curl stopped it at --max-time (exit 28)"
    [ "$rc" = 28 ] || verdict="CUT OFF: curl exit $rc"
    printf '%-8s %6.1f MiB in %5.1f s (%.2f MiB/s), HTTP %s, %s; TokenGate RSS MiB first %s, peak %s, last %s\n' \
        "$name" "$(awk -v b="$moved" 'BEGIN{print b/1048576}')" "$took" "$(awk -v b="$moved" -v t="$took" 'BEGIN{print b/1048576/t}')" \
        "$code" "$verdict" "$first" "$peak" "$last"
    [ "$rc" = 28 ]
}
echo "1 GiB through TokenGate at $rate for ${seconds}s each way; the API's timeout_seconds is 10."
status=0
measure download "http://127.0.0.1:$TG_PORT/api/files/big" || status=1
measure upload -T "$work/upload.bin" "http://127.0.0.1:$TG_PORT/api/files/sink" || status=1
sleep 1
echo "upstream saw: $(tr '\n' ';' <"$work/upstream.log")"
if grep -qiE '"level":"(error|critical)"' "$work/tg.log"; then
    echo "TokenGate logged errors:"; grep -iE '"level":"(error|critical)"' "$work/tg.log" | tail -5
fi
exit $status
