#!/usr/bin/env bash
# A PostgreSQL primary and its streaming standby of their own, for the failover tests (FailoverEndToEndTests):
#   scripts/lib/pg-pair.sh start DIR sync|async   prints "PRIMARY_PORT STANDBY_PORT" once both run
#   scripts/lib/pg-pair.sh crash-primary DIR      the primary stops at once (pg_ctl -m immediate: no shutdown)
#   scripts/lib/pg-pair.sh promote DIR            the standby becomes the primary (pg_ctl promote)
#   scripts/lib/pg-pair.sh restart-old DIR        the crashed primary starts again alone, to read what it held
#   scripts/lib/pg-pair.sh stop DIR               stops both and removes DIR
# sync: synchronous_standby_names = '*', a commit returns once the standby has it; async: PostgreSQL's default.
# As root, the clusters belong to the postgres user (PostgreSQL refuses to run as root).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
action="$1" dir="$2"
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
ctl() { pg_run "$bin/pg_ctl" "$@" >/dev/null; }
case "$action" in
start)
    mode="$3"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    primary_port="$(free_port)" standby_port="$(free_port)"
    pg_run "$bin/initdb" -D "$dir/primary" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1
    standbys="''"; [ "$mode" = sync ] && standbys="'*'"
    pg_run "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w -t 30 -o "-c listen_addresses=127.0.0.1 \
        -p $primary_port -k $dir -c wal_level=replica -c max_wal_senders=4 -c synchronous_standby_names=$standbys" \
        start >/dev/null
    pg_run "$bin/pg_basebackup" -D "$dir/standby" -R -h 127.0.0.1 -p "$primary_port" -U postgres -X stream
    pg_run "$bin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w -t 30 -o "-c listen_addresses=127.0.0.1 \
        -p $standby_port -k $dir -c synchronous_standby_names=''" start >/dev/null
    echo "$primary_port" >"$dir/primary.port"
    # Streaming before the tests write: the standby shows up in pg_stat_replication.
    for _ in $(seq 100); do
        [ "$(psql -h 127.0.0.1 -p "$primary_port" -U postgres -qtAc "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && break
        sleep 0.1
    done
    echo "$primary_port $standby_port"
    ;;
crash-primary) ctl -D "$dir/primary" -m immediate stop ;;
promote) ctl -D "$dir/standby" -w promote ;;
restart-old)
    # As a primary of its own, never following the new one (no standby.signal), on its old port.
    ctl -D "$dir/primary" -l "$dir/primary-again.log" -w -t 30 -o "-c listen_addresses=127.0.0.1 \
        -p $(cat "$dir/primary.port") -k $dir -c synchronous_standby_names=''" start
    ;;
stop)
    ctl -D "$dir/primary" -m immediate stop 2>/dev/null || true
    ctl -D "$dir/standby" -m immediate stop 2>/dev/null || true
    rm -rf "$dir"
    ;;
*) echo "usage: pg-pair.sh start|crash-primary|promote|restart-old|stop DIR [sync|async]" >&2; exit 2 ;;
esac
