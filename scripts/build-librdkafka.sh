#!/usr/bin/env bash
# Builds librdkafka 2.8.0 from Debian's own source tarball (sha256 pinned) into PREFIX: the library only, or,
# with --examples, also rdkafka_performance in PREFIX/bin (the Kafka benchmark's reference). Idempotent: a
# stamp named by the tarball's checksum skips a second build, so PREFIX may be a cache shared by clones.
# Used by scripts/setup.sh (PREFIX: a per-machine cache, linked as .deps/librdkafka), by
# scripts/bench-kafka.sh (--examples) and by deploy/Dockerfile.
#   scripts/build-librdkafka.sh PREFIX [WORKDIR] [--examples]
set -euo pipefail
prefix="$1"
work="${2:-$(mktemp -d)}"
examples="${3:-}"
version=2.8.0
sha=5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25
stamp="$prefix/.installed-$version-$sha"
if [ -f "$stamp" ] && { [ "$examples" != --examples ] || [ -x "$prefix/bin/rdkafka_performance" ]; }; then exit 0; fi

log() { printf '[librdkafka] %s\n' "$*" >&2; }
mkdir -p "$work/downloads" "$work/src"
tarball="$work/downloads/librdkafka_$version.orig.tar.gz"
if [ ! -f "$tarball" ] || ! echo "$sha  $tarball" | sha256sum -c --status; then
    log "downloading librdkafka_$version.orig.tar.gz"
    # Debian's pool drops a version once no release ships it; snapshot.debian.org keeps every one (a timestamp
    # from when 2.8.0 was in the pool). The sha256 below checks whichever answered.
    curl -sSfL --retry 3 -o "$tarball.part" "http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_$version.orig.tar.gz" ||
        curl -sSfL --retry 3 -o "$tarball.part" \
            "https://snapshot.debian.org/archive/debian/20250301T000000Z/pool/main/libr/librdkafka/librdkafka_$version.orig.tar.gz"
    mv "$tarball.part" "$tarball"
fi
echo "$sha  $tarball" | sha256sum -c --status || { log "sha256 mismatch for $tarball"; rm -f "$tarball"; exit 1; }

src="$work/src/librdkafka-$version"
if [ ! -f "$stamp" ]; then
    log "building librdkafka $version (about 30 s)"
    rm -rf "$src" "$prefix"
    tar -xzf "$tarball" -C "$work/src"
    (
        cd "$src"
        ./configure --prefix="$prefix" --disable-gssapi >"$work/src/librdkafka-configure.log" 2>&1
        make -j"$(nproc)" -C src >"$work/src/librdkafka-build.log" 2>&1
        make -C src install >>"$work/src/librdkafka-build.log" 2>&1
    ) || { log "build failed; see $work/src/librdkafka-*.log"; exit 1; }
    touch "$stamp"
fi
if [ "$examples" = --examples ] && [ ! -x "$prefix/bin/rdkafka_performance" ]; then
    log "building rdkafka_performance"
    if [ ! -f "$src/src/librdkafka.a" ]; then
        rm -rf "$src"
        tar -xzf "$tarball" -C "$work/src"
        (cd "$src" && ./configure --prefix="$prefix" --disable-gssapi && make -j"$(nproc)" -C src) \
            >"$work/src/librdkafka-examples.log" 2>&1 || { log "build failed; see $work/src/librdkafka-examples.log"; exit 1; }
    fi
    make -C "$src/examples" rdkafka_performance >>"$work/src/librdkafka-examples.log" 2>&1 \
        || { log "build failed; see $work/src/librdkafka-examples.log"; exit 1; }
    install -D -m 755 "$src/examples/rdkafka_performance" "$prefix/bin/rdkafka_performance"
fi
