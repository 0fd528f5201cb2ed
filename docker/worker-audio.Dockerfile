# syntax=docker/dockerfile:1.7
# The audio worker: the generic image plus ffmpeg and ffprobe, found on PATH
# (FFMPEG_PATH/FFPROBE_PATH unset). On amd64 they are the static builds scripts/infra/tools.json
# pins (`wheels`), the ones the tests and `npm start` run, given as the build context
# `audio-tools`; on arm64 Debian's 5.1. Build from the repository root (docker/build.sh does):
#
#   npm run tools -- ffmpeg ffprobe     # into .tools/wheel-binaries
#   docker build -f docker/worker-audio.Dockerfile \
#     --build-context audio-tools=.tools/wheel-binaries -t tamp-worker-audio:0.1.0 .

ARG NODE_IMAGE=node:24-bookworm-slim
ARG SERVICE=worker-audio
ARG TARGETARCH

# 1. The workspace manifests and the lockfile only: dependency layers stay cached until one
#    of them changes. npm ci needs every workspace's package.json (test/deploy checks the list).
FROM ${NODE_IMAGE} AS manifests
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY proto/package.json proto/
COPY client/package.json client/
COPY testcontainers/package.json testcontainers/
COPY scripts/package.json scripts/
COPY services/billing/package.json services/billing/
COPY services/gateway/package.json services/gateway/
COPY services/job/package.json services/job/
COPY services/kit/package.json services/kit/
COPY services/operator/package.json services/operator/
COPY services/upload/package.json services/upload/
COPY services/webhook/package.json services/webhook/
COPY services/worker-audio/package.json services/worker-audio/
COPY services/worker-image/package.json services/worker-image/
COPY services/worker-text/package.json services/worker-text/

# 2. Bundle the services (scripts/build/bundle.ts: esbuild, dev dependencies): our code becomes
#    dist/<service>/main.mjs; third-party packages stay imports resolved from node_modules.
FROM manifests AS build
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY proto/ proto/
COPY services/ services/
COPY scripts/ scripts/
RUN node --import tsx scripts/build/bundle.ts
ARG SERVICE
RUN test -f "dist/${SERVICE}/main.mjs" \
 || { echo "unknown service '${SERVICE}': set --build-arg SERVICE=<a services/ folder>" >&2; exit 1; }

# 3. Production dependencies of this one service (its own, kit's and proto's), without the
#    workspace links (their code is in the bundle). A package the service pins to another
#    version than the hoisted one sits in services/<service>/node_modules; it goes beside the
#    bundle, where Node's resolution finds it first, exactly as in the workspace.
FROM manifests AS deps
ARG SERVICE
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --no-audit --no-fund --workspace "services/${SERVICE}" \
 && rm -rf node_modules/@tamp \
 && if [ -d services/kit/node_modules ] || [ -d proto/node_modules ]; then \
      echo "kit/proto have nested node_modules: the bundle of ${SERVICE} could not resolve them" >&2; exit 1; \
    fi \
 && mkdir -p "services/${SERVICE}/node_modules"

# 4. Runtime: Node, ffmpeg, the production node_modules and the bundle. Debian's ffmpeg spends
#    ~60 ms of CPU loading 215 shared libraries per process, and an audio job starts six or
#    seven (services/worker-audio/README.md, "Cost per job"); the static builds start in ~1 ms.
FROM ${NODE_IMAGE} AS runtime-amd64
COPY --from=audio-tools ffmpeg ffprobe /usr/local/bin/

# No static ffprobe for arm64 is pinned.
FROM ${NODE_IMAGE} AS runtime-arm64
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg \
 && rm -rf /var/lib/apt/lists/*

FROM runtime-${TARGETARCH} AS runtime
ARG SERVICE
RUN ffmpeg -hide_banner -version | head -n 1 && ffprobe -hide_banner -version | head -n 1
WORKDIR /app
# A fixed numeric user, so Kubernetes can verify runAsNonRoot (the chart runs as 10001 too).
RUN groupadd --system --gid 10001 tamp \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tamp
COPY --from=deps /app/node_modules/ node_modules/
COPY --from=build /app/dist/${SERVICE}/ dist/${SERVICE}/
COPY --from=deps /app/services/${SERVICE}/node_modules/ dist/${SERVICE}/node_modules/
ENV NODE_ENV=production \
    TAMP_SERVICE=${SERVICE}
USER 10001:10001
# The ops port: /healthz, /readyz, /metrics (OPS_PORT).
EXPOSE 9090
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.OPS_PORT||9090)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# exec: node is PID 1 and receives SIGTERM itself (each service drains on it).
CMD ["/bin/sh", "-c", "exec node --enable-source-maps \"dist/${TAMP_SERVICE}/main.mjs\""]
