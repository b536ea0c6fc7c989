#!/usr/bin/env bash
# Builds the receipt-worker image on this machine with daemonless tools from Debian, and runs it against a local
# broker and the App Store simulator until it grants a purchase: the smoke test of the image.
#   scripts/image.sh [TAG]       (default localhost/receipt-worker:dev)
# No Docker engine and no registry here (docs: ../shared/ENVIRONMENT.md), so: the binary is built on the host
# (release, Swift runtime linked statically, as deploy/Dockerfile's build stage does); the base is Debian 12
# minbase made by mmdebstrap from the Debian mirror with the runtime libraries deploy/Dockerfile installs;
# buildah assembles deploy/Dockerfile.runtime on it (--isolation chroot) and runs the container
# (--network host). With a registry and an engine, deploy/Dockerfile builds the same image from source.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tag="${1:-localhost/receipt-worker:dev}"
# The runtime libraries deploy/Dockerfile installs; the base is named by them, so one made for another list is
# never taken for this one.
packages=ca-certificates,passwd,libcurl4,libssl3,libsqlite3-0,libpq5,libmicrohttpd12,zlib1g,libzstd1,liblz4-1,libjemalloc2
base="localhost/receipt-worker-base:bookworm-$(printf '%s' "$packages" | sha256sum | cut -c1-12)"
log() { printf '[image] %s\n' "$*" >&2; }

bash scripts/setup.sh
missing=()
for p in buildah mmdebstrap podman; do command -v "$p" >/dev/null || missing+=("$p"); done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

log "building the binary (release, static Swift runtime)"
swift build -c release --product receipt-worker --static-swift-stdlib --scratch-path .build/image >/dev/null
swift build -c release --product appstore-sim >/dev/null
rm -rf .build/image-context && mkdir -p .build/image-context
cp .build/image/release/receipt-worker .build/image-context/
cp -a .deps/librdkafka/lib/librdkafka.so* .build/image-context/
cp config/worker.properties .build/image-context/
cp LICENSE NOTICE .build/image-context/

if ! podman image exists "$base"; then
    log "making the base: Debian 12 minbase and the runtime libraries (mmdebstrap, about a minute)"
    mmdebstrap --variant=minbase --include="$packages" \
        bookworm .build/image-base.tar >/dev/null 2>&1
    podman import .build/image-base.tar "$base" >/dev/null
    rm -f .build/image-base.tar
fi
log "assembling $tag"
buildah build --isolation chroot --quiet -f deploy/Dockerfile.runtime --build-arg "BASE=$base" -t "$tag" \
    .build/image-context >/dev/null

log "smoke test: the image against a local broker and the simulator"
source scripts/lib/services.sh
work="$(mktemp -d)"; chmod 755 "$work"
container=""; sim_pid=""; run_pid=""
cleanup() {
    [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null || true
    [ -n "$container" ] && buildah rm "$container" >/dev/null 2>&1 || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT
services_start_kafka
for topic in receipt-jobs:2 receipt-results:1 receipt-dlq:1; do
    "$TANSU_BIN" topic create "${topic%%:*}" --partitions "${topic##*:}" --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null 2>&1
done
sim_port="$(free_port)"; sim="http://127.0.0.1:$sim_port"
.build/release/appstore-sim --port "$sim_port" >"$work/simulator.log" 2>&1 &
sim_pid=$!
wait_for "the simulator" 20 port_open "$sim_port"
.build/release/appstore-sim --print-test-root >"$work/root.pem"
metrics_port="$(free_port)"
cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
apple.root_certificates=/work/root.pem
apple.verify_receipt.production_url=$sim/production/verifyReceipt
apple.verify_receipt.sandbox_url=$sim/sandbox/verifyReceipt
apple.allow_insecure_urls=true
ledger.url=sqlite:/tmp/ledger.sqlite
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
metrics.listen=127.0.0.1:$metrics_port
PROPS
container="$(buildah from "$tag")"
buildah run --isolation chroot --network host --volume "$work:/work:ro" "$container" -- \
    /usr/local/bin/receipt-worker run --config /work/worker.properties >"$work/worker.log" 2>&1 &
run_pid=$!
ready() { curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null; }
wait_for "the container's worker (/readyz)" 90 ready || { tail -20 "$work/worker.log" >&2; exit 1; }
receipt="$(curl -sf -X POST "$sim/admin/purchases" -d '{"product_id":"coins_100"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["receipt"])')"
bin=.build/release/receipt-worker
[ -x "$bin" ] || bin=.build/image/release/receipt-worker
"$bin" enqueue --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" --order-id image-smoke --user-id p-1 \
    --product-id coins_100 --receipt "$receipt" >/dev/null
result="$("$bin" results --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" --from-beginning --order-id image-smoke \
    --count 1 --timeout 60 --json)"
if ! grep -q '"decision":"grant"' <<<"$result"; then
    log "no grant: $result"; tail -20 "$work/worker.log" >&2; exit 1
fi
size="$(buildah images --format '{{.Size}}' "$tag" | head -1)"
log "image $tag ($size): the container granted a purchase of the simulator"
