#!/usr/bin/env bash
# Builds every Tamp image from the repository root with BuildKit:
#   docker/build.sh [registry/prefix] [tag]     e.g. docker/build.sh ghcr.io/acme/tamp 0.1.0
# gives <prefix>-<service>:<tag>, the names the Helm chart expects (image.repository = prefix).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-tamp}"
tag="${2:-$(node -p "require('./package.json').version")}"
for service in gateway upload job billing webhook operator worker-text; do
  docker build -f docker/Dockerfile --build-arg "SERVICE=${service}" -t "${prefix}-${service}:${tag}" .
done
docker build -f docker/worker-image.Dockerfile -t "${prefix}-worker-image:${tag}" .
# The audio worker's static ffmpeg and ffprobe (scripts/infra/tools.json, `wheels`).
npm run --silent tools -- ffmpeg ffprobe
docker build -f docker/worker-audio.Dockerfile --build-context audio-tools=.tools/wheel-binaries \
  -t "${prefix}-worker-audio:${tag}" .
