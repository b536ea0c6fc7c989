# Local services on free loopback ports, for tests, benchmarks and the demo. Source this file, then:
#   services_start_kafka      sets KAFKA_BOOTSTRAP (127.0.0.1:PORT)
#   services_start_postgres   sets POSTGRES_URL (postgresql://postgres@127.0.0.1:PORT/postgres)
#   services_stop             stops whatever was started; safe to call twice. Install it in a trap.
# State lives in one temporary folder, removed on stop.

SERVICES_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SERVICES_DIR="${SERVICES_DIR:-}"
TANSU_BIN="$SERVICES_ROOT/.deps/tools/tansu"

services_dir() {
    if [ -z "$SERVICES_DIR" ]; then
        # SERVICES_TMPDIR: where, when TMPDIR is deep (the test command's own directory): PostgreSQL's socket
        # path must stay under 107 bytes.
        SERVICES_DIR="$(mktemp -d "${SERVICES_TMPDIR:-${TMPDIR:-/tmp}}/receipt-worker-services.XXXXXX")"
        chmod 755 "$SERVICES_DIR"
    fi
}

free_port() {
    # Below the kernel's ephemeral range: see scripts/lib/free_port.py.
    python3 "$SERVICES_ROOT/scripts/lib/free_port.py"
}

# wait_for DESCRIPTION SECONDS COMMAND...: runs COMMAND until it succeeds or the time is up.
wait_for() {
    local what="$1" seconds="$2"; shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then echo "[services] $what not ready after ${seconds}s" >&2; return 1; fi
        sleep 0.1
    done
}

# own_process_group CMD... &: runs CMD in a new process group, out of reach of the terminal's Ctrl-C (the
# script that started it stops it), keeping $! its pid: the backgrounded subshell execs perl, which
# execs CMD. Only ever call it with & (it execs). (setsid would fork and lose the pid.)
own_process_group() { exec perl -e 'setpgrp(0, 0); exec @ARGV or die "exec $ARGV[0]: $!\n"' -- "$@"; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

services_start_kafka() {
    services_dir
    local port; port="$(free_port)"
    # In a process group of its own: a Ctrl-C meant for the script must not stop the broker before the
    # script stops the rest.
    own_process_group "$TANSU_BIN" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        >"$SERVICES_DIR/tansu.log" 2>&1 &
    echo $! >"$SERVICES_DIR/tansu.pid"
    wait_for "Kafka broker on port $port" 20 port_open "$port" || { cat "$SERVICES_DIR/tansu.log" >&2; return 1; }
    export KAFKA_BOOTSTRAP="127.0.0.1:$port"
    echo "[services] Kafka broker (Tansu) on $KAFKA_BOOTSTRAP" >&2
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user.
pg_run() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

services_start_postgres() {
    services_dir
    local bin; bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$bin" ] || { echo "[services] PostgreSQL is not installed (run scripts/setup.sh)" >&2; return 1; }
    local data="$SERVICES_DIR/postgres" port; port="$(free_port)"
    mkdir -p "$data"
    [ "$(id -u)" -eq 0 ] && chown postgres "$data"
    pg_run "$bin/initdb" -D "$data" -U postgres -A trust --no-sync >"$SERVICES_DIR/initdb.log" 2>&1 \
        || { cat "$SERVICES_DIR/initdb.log" >&2; return 1; }
    pg_run "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c fsync=off -c max_connections=200 ${POSTGRES_OPTIONS:-}" start >/dev/null \
        || { cat "$data/server.log" >&2; return 1; }
    echo "$bin" >"$SERVICES_DIR/postgres.bin"
    wait_for "PostgreSQL on port $port" 20 "$bin/pg_isready" -h 127.0.0.1 -p "$port" -U postgres
    export POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "[services] PostgreSQL on 127.0.0.1:$port" >&2
}

# services_start_pgbouncer MODE: Debian's PgBouncer (1.18) in front of services_start_postgres's server, with its
# defaults (no ignore_startup_parameters, no protocol-level prepared statements) and pool_mode MODE (transaction
# or session); every database name passes through. Sets PGBOUNCER_URL (the same URL as POSTGRES_URL, on
# PgBouncer's port). As root it runs as the postgres user, as PostgreSQL does.
services_start_pgbouncer() {
    local mode="$1" port; port="$(free_port)"
    local dir="$SERVICES_DIR/pgbouncer-$mode" pg_port="${POSTGRES_URL##*:}"; pg_port="${pg_port%%/*}"
    mkdir -p "$dir"
    echo '"postgres" ""' >"$dir/users.txt"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
auth_user = postgres
auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename = \$1
pool_mode = $mode
max_client_conn = 2000
default_pool_size = 40
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
    pg_run /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" || { cat "$dir/pgbouncer.log" >&2; return 1; }
    wait_for "PgBouncer ($mode pooling) on port $port" 20 \
        "$(cat "$SERVICES_DIR/postgres.bin")/pg_isready" -h 127.0.0.1 -p "$port" -U postgres
    export PGBOUNCER_URL="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "[services] PgBouncer ($mode pooling) on 127.0.0.1:$port" >&2
}

# services_start_simulator DIR: the release build's App Store simulator on a free loopback port; sets SIM_URL
# and SIM_PID (the caller stops it), and writes the root its signed data chains to as DIR/root.pem.
services_start_simulator() {
    local dir="$1" bin="$SERVICES_ROOT/.build/release"
    "$bin/appstore-sim" --port 0 >"$dir/sim.out" &
    SIM_PID=$!
    for _ in $(seq 100); do grep -q listening "$dir/sim.out" && break; sleep 0.05; done
    SIM_URL="$(sed -n 's/^listening on //p' "$dir/sim.out")"
    "$bin/appstore-sim" --print-test-root >"$dir/root.pem"
}

# services_simulator_properties DIR: the worker's apple.* settings for the simulator of
# services_start_simulator DIR (its URLs, Apple's test API key, its test root), as properties lines.
services_simulator_properties() {
    cat <<PROPS
apple.verify_receipt.production_url=$SIM_URL/production/verifyReceipt
apple.verify_receipt.sandbox_url=$SIM_URL/sandbox/verifyReceipt
apple.api.production_url=$SIM_URL/production
apple.api.sandbox_url=$SIM_URL/sandbox
apple.api.key_id=keyId
apple.api.issuer_id=issuerId
apple.api.private_key_file=$SERVICES_ROOT/Tests/AppleClientTests/testSigningKey.p8
apple.allow_insecure_urls=true
apple.root_certificates=$1/root.pem
PROPS
}

# services_start_tls_front BACKEND_URL DIR: Apple as the worker meets it, TLS with HTTP/2 and HTTP/1.1 offered by
# ALPN, in front of a plain HTTP server (the simulator, http://HOST:PORT): nghttpx (scripts/setup.sh installs it)
# with a certificate for 127.0.0.1 made in DIR. Sets TLS_URL (https://127.0.0.1:PORT), TLS_PID and TLS_CA_FILE
# (DIR/tls-cert.pem, the certificate a client trusts: `http.ca_file`). Its backend connections are not limited, so
# each request the client sends in parallel reaches the backend at once. Its log: DIR/nghttpx.log.
services_start_tls_front() {
    local backend="$1" dir="$2"
    command -v nghttpx >/dev/null 2>&1 || { echo "[services] no nghttpx: run scripts/setup.sh" >&2; return 1; }
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=127.0.0.1" \
        -addext "subjectAltName=IP:127.0.0.1" -keyout "$dir/tls-key.pem" -out "$dir/tls-cert.pem" \
        >>"$dir/nghttpx.log" 2>&1 || { cat "$dir/nghttpx.log" >&2; return 1; }
    local port; port="$(free_port)"
    local hostport="${backend#http://}"; hostport="${hostport%%/*}"
    # --conf /dev/null: not the package's /etc/nghttpx/nghttpx.conf. Its output to the log, never to a caller's
    # pipe (a benchmark's $(...) would wait for it).
    nghttpx --conf=/dev/null --frontend="127.0.0.1,$port" --backend="${hostport%:*},${hostport##*:};;proto=http/1.1" \
        --workers=1 --backend-connections-per-host=65535 --no-ocsp --accesslog-file=/dev/null \
        --errorlog-file="$dir/nghttpx.log" "$dir/tls-key.pem" "$dir/tls-cert.pem" >>"$dir/nghttpx.log" 2>&1 &
    TLS_PID=$!
    TLS_URL="https://127.0.0.1:$port"
    TLS_CA_FILE="$dir/tls-cert.pem"
    # Any answer (the simulator has no page at /) says the front is up; a front that exited ends the wait at once.
    tls_front_up() { curl -s --noproxy '*' --cacert "$TLS_CA_FILE" -o /dev/null "$TLS_URL/"; }
    tls_front_up_or_exited() { tls_front_up || ! kill -0 "$TLS_PID" 2>/dev/null; }
    wait_for "the TLS front (nghttpx)" 10 tls_front_up_or_exited || true
    tls_front_up && return 0
    echo "[services] the TLS front (nghttpx) did not start; its log:" >&2
    cat "$dir/nghttpx.log" >&2
    return 1
}

services_stop() {
    [ -n "$SERVICES_DIR" ] && [ -d "$SERVICES_DIR" ] || return 0
    if [ -f "$SERVICES_DIR/tansu.pid" ]; then
        kill "$(cat "$SERVICES_DIR/tansu.pid")" 2>/dev/null || true
        wait "$(cat "$SERVICES_DIR/tansu.pid")" 2>/dev/null || true
    fi
    local pidfile
    for pidfile in "$SERVICES_DIR"/pgbouncer-*/pgbouncer.pid; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    if [ -f "$SERVICES_DIR/postgres.bin" ]; then
        pg_run "$(cat "$SERVICES_DIR/postgres.bin")/pg_ctl" -D "$SERVICES_DIR/postgres" -m immediate stop \
            >/dev/null 2>&1 || true
    fi
    rm -rf "$SERVICES_DIR"
    SERVICES_DIR=""
}
