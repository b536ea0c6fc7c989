#!/usr/bin/env bash
# Cuts a release of receipt-worker offline (docs/releasing.md):
#   scripts/release.sh VERSION          the release: VERSION in BuildInfo.version, the image tag and CHANGELOG.md's
#                                       heading, a commit and the tag vVERSION, then the artifacts and the image
#   scripts/release.sh --dry-run        the artifacts of the version main is heading for (BuildInfo.version without
#                                       its -dev), nothing edited, committed or tagged, no image: what the test
#                                       command runs
# The artifacts, in .build/release/VERSION (.build/release/dry-run for a dry run):
#   receipt-worker-VERSION-linux-x86_64.tar.gz  bin/receipt-worker (the Swift runtime linked in, its run path
#                                               $ORIGIN/../lib), lib/librdkafka.so.1, etc/worker.properties,
#                                               share/doc/receipt-worker (LICENSE, NOTICE, the release notes)
#   receipt-worker-VERSION.spdx.json           the SBOM (SPDX 2.3) of what is inside, and what it needs of Debian
#   RELEASE-NOTES.md                            the changelog's section of the release
#   SHA256SUMS                                  each artifact's SHA-256
# The binary is run before anything is kept: in a clean Debian 12 root made by mmdebstrap (minbase and the runtime
# packages alone, no Swift), `--version` must print the release and `check-config` must pass.
# Environment: RELEASE_BUILD_CONFIGURATION (release; the test command's dry run builds debug: the packaging and the
# clean root are what it checks, and a release build would double the test command's build time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[release] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The Debian 12 packages the binary needs at run time: deploy/Dockerfile's runtime stage installs the same.
runtime_packages=(ca-certificates libcurl4 libssl3 libsqlite3-0 libpq5 libmicrohttpd12 zlib1g libzstd1 liblz4-1 libjemalloc2)

dry_run=false
if [[ "${1:-}" == "--dry-run" ]]; then
    dry_run=true
    shift
fi
current="$(sed -n 's/^ *public static let version = "\(.*\)"$/\1/p' Sources/ReceiptWorker/BuildInfo.swift)"
[[ -n "$current" ]] || die "Sources/ReceiptWorker/BuildInfo.swift names no version"
if $dry_run; then
    version="${current%-dev}"
    out=.build/release/dry-run
else
    [[ $# -eq 1 ]] || die "usage: scripts/release.sh VERSION | scripts/release.sh --dry-run"
    version="$1"
    out=".build/release/$version"
fi
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$version is not a version (MAJOR.MINOR.PATCH)"
[[ "$current" == "$version-dev" ]] || die "main carries $current, not $version-dev: release the version main is heading for"
heading="$(grep -m1 '^## ' CHANGELOG.md)"
[[ "$heading" == "## $version-dev (unreleased)" ]] \
    || die "CHANGELOG.md's newest heading is \"$heading\", not \"## $version-dev (unreleased)\""
if ! $dry_run; then
    [[ -z "$(git status --porcelain)" ]] || die "the working tree has changes: commit or remove them first"
    git rev-parse -q --verify "refs/tags/v$version" >/dev/null && die "the tag v$version exists already"
fi

bash scripts/setup.sh
missing=()
for tool in mmdebstrap patchelf; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

rm -rf "$out" && mkdir -p "$out"
# The release notes: the changelog's section of the version (to the next heading of its level).
awk -v head="## $version-dev (unreleased)" '$0 == head { found = 1; next } found && /^## / { exit } found' \
    CHANGELOG.md >"$out/RELEASE-NOTES.md"
[[ -n "$(tr -d '[:space:]' <"$out/RELEASE-NOTES.md")" ]] || die "CHANGELOG.md's section of $version is empty"

if ! $dry_run; then
    today="$(date -u +%Y-%m-%d)"
    log "naming the release $version in BuildInfo.version, the image tag, the AsyncAPI documents and CHANGELOG.md"
    sed -i "s/^\( *public static let version = \)\"$version-dev\"$/\1\"$version\"/" Sources/ReceiptWorker/BuildInfo.swift
    sed -i "s/^\( *newTag: \)$version-dev$/\1$version/" deploy/kubernetes/kustomization.yaml
    sed -i "s/^\(  version: \)$version-dev$/\1$version/" docs/asyncapi.yaml docs/asyncapi-client.yaml
    sed -i "s/^## $version-dev (unreleased)$/## $version ($today)/" CHANGELOG.md
    git commit -q -am "Release $version" -m "$(cat "$out/RELEASE-NOTES.md")"
    git tag -a "v$version" -F "$out/RELEASE-NOTES.md"
fi

configuration="${RELEASE_BUILD_CONFIGURATION:-release}"
scratch=".build/release-$configuration"
log "building receipt-worker ($configuration, the Swift runtime linked in)"
swift build -c "$configuration" --product receipt-worker --static-swift-stdlib --scratch-path "$scratch" >/dev/null

name="receipt-worker-$version-linux-x86_64"
stage="$out/$name"
mkdir -p "$stage/bin" "$stage/lib" "$stage/etc" "$stage/share/doc/receipt-worker"
cp "$scratch/$configuration/receipt-worker" "$stage/bin/"
# librdkafka 2.8.0 as setup.sh builds it (Debian 12 ships 2.0.2), beside the binary: its run path says where.
cp -L .deps/librdkafka/lib/librdkafka.so.1 "$stage/lib/"
patchelf --set-rpath '$ORIGIN/../lib' "$stage/bin/receipt-worker"
cp config/worker.properties "$stage/etc/"
cp LICENSE NOTICE "$out/RELEASE-NOTES.md" "$stage/share/doc/receipt-worker/"
# Nothing of the build machine stays in it: no toolchain, no .deps path.
if readelf -d "$stage/bin/receipt-worker" | grep -E 'RUNPATH|RPATH' | grep -vq "\[\$ORIGIN/../lib\]"; then
    die "the binary's run path names another directory than \$ORIGIN/../lib"
fi
if readelf -d "$stage/bin/receipt-worker" | grep NEEDED | grep -qi swift; then
    die "the binary needs a Swift library at run time: the runtime must be linked in"
fi
# The same bytes from the same sources: sorted, dated by the commit, owned by nobody in particular.
epoch="$(git log -1 --format=%ct)"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$out" -czf "$out/$name.tar.gz" "$name"

log "checking it in a clean Debian 12 root with only the runtime packages: ${runtime_packages[*]}"
cache="${RECEIPT_WORKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/receipt-worker}"
mkdir -p "$cache"
packages="$(IFS=,; echo "${runtime_packages[*]}")"
root_tar="$cache/debian12-runtime-$(printf '%s' "$packages" | sha256sum | cut -c1-16).tar"
if [[ ! -f "$root_tar" ]]; then
    # mmdebstrap reads the format from the name: a .tar, written aside and moved when whole.
    partial="${root_tar%.tar}.partial.tar"
    rm -rf "$partial"
    mmdebstrap --variant=minbase --include="$packages" bookworm "$partial" >/dev/null 2>&1 \
        || die "mmdebstrap could not make a Debian 12 root (the Debian mirror unreachable?)"
    mv "$partial" "$root_tar"
fi
root="$(mktemp -d)"
trap 'umount "$root/proc" 2>/dev/null || true; rm -rf "$root"' EXIT
tar -xf "$root_tar" -C "$root"
# /proc, as every system has it: the loader reads the binary's own path there to resolve $ORIGIN.
mount -t proc proc "$root/proc" || die "cannot mount /proc in the clean root (run as root)"
[[ ! -e "$root/usr/bin/swift" ]] || die "the clean root has a Swift toolchain"
mkdir -p "$root/opt"
tar -xzf "$out/$name.tar.gz" -C "$root/opt"
said="$(chroot "$root" "/opt/$name/bin/receipt-worker" --version)" || die "--version failed in the clean root"
[[ "$said" == "receipt-worker $version"* ]] || [[ "$said" == "receipt-worker $current"* ]] \
    || die "--version in the clean root says \"$said\", not $version"
log "the clean root: $said"
checked="$(chroot "$root" "/opt/$name/bin/receipt-worker" check-config --config "/opt/$name/etc/worker.properties" \
    --set apple.bundle_id=com.example.game 2>&1)" || die "check-config failed in the clean root: $checked"
log "the clean root: check-config: $checked"

log "writing the SBOM and the checksums"
python3 scripts/lib/sbom.py "$version" "$name.tar.gz" "$out/$name.tar.gz" "${runtime_packages[@]}" \
    >"$out/receipt-worker-$version.spdx.json"
rm -rf "$stage"
(cd "$out" && sha256sum "$name.tar.gz" "receipt-worker-$version.spdx.json" RELEASE-NOTES.md >SHA256SUMS)

if ! $dry_run; then
    log "building the image localhost/receipt-worker:$version (buildah, scripts/image.sh)"
    bash scripts/image.sh "localhost/receipt-worker:$version"
fi
log "done: $out"
ls -l "$out" >&2
