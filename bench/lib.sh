# Shared by the bench scripts (sourced): wrk runs and their figures.

# wrk_run URL [WRK OPTIONS...]: "req/s p50 p99 errors" of one run (latencies as wrk prints them);
# uses $connections and $duration. wrk prints "Requests/sec: N" and, with --latency, "50% 1.2ms".
wrk_run() {
    local url=$1 out rps p50 p99 errors
    shift
    out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency "$@" "$url")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
    echo "$rps $p50 $p99 ${errors:-none}"
}

# ms LATENCY: wrk's "850.00us", "1.20ms" or "1.05s" in milliseconds.
ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) print v/1000; else if (v ~ /ms$/) print v+0; else if (v ~ /s$/) print v*1000; else print v }'; }

# median: of the numbers on standard input, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# col FILE N: the median of column N of FILE.
col() { awk -v c="$2" '{ print $c }' "$1" | median; }

# reference_nginx WORK NGINX_PORT UPSTREAM_PORT LOCATIONS: starts the reference nginx (pid in
# WORK/nginx.pid): LOCATIONS served on NGINX_PORT, where `backend` is the JSON answer on
# UPSTREAM_PORT; PROXY_TO_BACKEND is the proxy_pass settings TokenGate's hop is compared with.
PROXY_TO_BACKEND='proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Authorization "Bearer upstream-token";'
reference_nginx() {
    local work=$1 nginx_port=$2 upstream_port=$3 locations=$4
    cat >"$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    upstream backend { server 127.0.0.1:$upstream_port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_port;
        $locations
    }
    server {
        listen 127.0.0.1:$upstream_port;
        location / { default_type application/json; return 200 '{"value":"hello, world!"}'; }
    }
}
NGINX
    nginx -p "$work" -c "$work/nginx.conf" -g "daemon on;"
}
