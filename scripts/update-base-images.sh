#!/usr/bin/env bash
# Moves docker/Dockerfile's base images to another dated Debian 12 snapshot: resolves
# debian:SNAPSHOT and debian:SNAPSHOT-slim (e.g. bookworm-20261020; the dated tags are listed on
# the registry's debian page) to their multi-platform index digests and rewrites both FROM lines
# as debian:TAG@sha256:DIGEST. Needs registry access and one of: docker buildx (imagetools),
# crane, skopeo. Without an argument it prints the pins in use.
#
# Usage: scripts/update-base-images.sh [bookworm-YYYYMMDD]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerfile="$root/docker/Dockerfile"

if [[ $# -eq 0 ]]; then
    grep -E '^FROM debian:' "$dockerfile"
    exit 0
fi
snapshot=$1
if [[ ! $snapshot =~ ^bookworm-[0-9]{8}$ ]]; then
    echo "update-base-images: expected a snapshot tag like bookworm-20261020, got '$snapshot'" >&2
    exit 2
fi

# The digest of the image index a tag names (what `docker pull debian@sha256:…` takes).
index_digest() {
    local ref=$1 digest=""
    if docker buildx version >/dev/null 2>&1; then
        digest=$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}' |
            sed -n 's/.*"digest":"\(sha256:[0-9a-f]\{64\}\)".*/\1/p' | head -n 1)
    elif command -v crane >/dev/null 2>&1; then
        digest=$(crane digest "$ref")
    elif command -v skopeo >/dev/null 2>&1; then
        digest="sha256:$(skopeo inspect --raw "docker://docker.io/library/$ref" | sha256sum | cut -d' ' -f1)"
    else
        echo "update-base-images: needs docker buildx, crane or skopeo" >&2
        exit 1
    fi
    if [[ ! $digest =~ ^sha256:[0-9a-f]{64}$ ]]; then
        echo "update-base-images: no digest for $ref (got '$digest')" >&2
        exit 1
    fi
    printf '%s\n' "$digest"
}

full=$(index_digest "debian:$snapshot")
slim=$(index_digest "debian:$snapshot-slim")
sed -i -E \
    -e "s|^FROM debian:bookworm-[0-9]{8}@sha256:[0-9a-f]{64} |FROM debian:$snapshot@$full |" \
    -e "s|^FROM debian:bookworm-[0-9]{8}-slim@sha256:[0-9a-f]{64} |FROM debian:$snapshot-slim@$slim |" \
    "$dockerfile"
grep -E '^FROM debian:' "$dockerfile"
echo "update-base-images: rebuild the image and run tests/deploy/docker.test.mjs (the runtime" \
    "stage's package list is checked against the binary's libraries)"
