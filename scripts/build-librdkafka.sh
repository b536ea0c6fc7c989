#!/usr/bin/env bash
# Builds librdkafka 2.8.0 from Debian's own source tarball (sha256 pinned) into PREFIX, with
# rdkafka_performance in PREFIX/bin. Idempotent: a stamp in PREFIX skips a second build.
# Used by scripts/setup.sh (PREFIX = .deps/librdkafka) and by deploy/Dockerfile.
#   scripts/build-librdkafka.sh PREFIX [WORKDIR]
set -euo pipefail
prefix="$1"
work="${2:-$(mktemp -d)}"
version=2.8.0
sha=5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25
stamp="$prefix/.installed-$version-$sha"
[ -f "$stamp" ] && exit 0

log() { printf '[librdkafka] %s\n' "$*" >&2; }
mkdir -p "$work/downloads" "$work/src"
tarball="$work/downloads/librdkafka_$version.orig.tar.gz"
if [ ! -f "$tarball" ] || ! echo "$sha  $tarball" | sha256sum -c --status; then
    log "downloading librdkafka_$version.orig.tar.gz"
    curl -sSfL --retry 3 -o "$tarball.part" "http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_$version.orig.tar.gz"
    mv "$tarball.part" "$tarball"
fi
echo "$sha  $tarball" | sha256sum -c --status || { log "sha256 mismatch for $tarball"; rm -f "$tarball"; exit 1; }

log "building librdkafka $version (about 30 s)"
src="$work/src/librdkafka-$version"
rm -rf "$src" "$prefix"
tar -xzf "$tarball" -C "$work/src"
(
    cd "$src"
    ./configure --prefix="$prefix" --disable-gssapi >"$work/src/librdkafka-configure.log" 2>&1
    make -j"$(nproc)" -C src >"$work/src/librdkafka-build.log" 2>&1
    make -C src install >>"$work/src/librdkafka-build.log" 2>&1
    # rdkafka_performance is the reference the Kafka benchmark compares against.
    make -C examples rdkafka_performance >>"$work/src/librdkafka-build.log" 2>&1
    install -D -m 755 examples/rdkafka_performance "$prefix/bin/rdkafka_performance"
) || { log "build failed; see $work/src/librdkafka-*.log"; exit 1; }
touch "$stamp"
