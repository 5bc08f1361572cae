# syntax=docker/dockerfile:1
#
# toolserverd container image: static binaries (toolserverd, toolserverctl) on a
# distroless base, running as uid 65532, state in the /var/lib/toolserverd volume.
#
#   docker build -t toolserverd .                       # minimal: no shell in the image
#   docker build --target shell -t toolserverd:shell .  # with bash, git and bubblewrap
#
# The minimal image has no bash, so execute_command cannot run there (the file, web,
# MCP-over-HTTP, OpenAPI and tool_chain tools work). Build the `shell` target to run
# commands. See README.md, "Deployment".
#
# deploy/dockerfile_test.go parses this file, checks its invariants and runs the
# `go build` line of the build stage verbatim (only -o points elsewhere), so keep that
# command on one RUN instruction.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/toolserverd ./cmd/toolserverctl
# The data directory, owned by the runtime user (distroless has no mkdir or chown).
RUN mkdir -p /out/data && chmod 0750 /out/data

# With a shell, for execute_command: bash, git, bubblewrap (sandbox.mode isolated, where
# the host allows user namespaces) and tini as PID 1 to reap commands' orphans.
FROM debian:bookworm-slim AS shell
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bash bubblewrap ca-certificates git tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 toolserverd \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/toolserverd --no-create-home --shell /usr/sbin/nologin toolserverd
COPY --from=build /out/toolserverd /out/toolserverctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/toolserverd
ENV TOOLSERVER_ADDR=0.0.0.0:8080 \
    TOOLSERVER_DATA_DIR=/var/lib/toolserverd \
    TOOLSERVER_URL=http://127.0.0.1:8080
USER 65532:65532
WORKDIR /var/lib/toolserverd
VOLUME ["/var/lib/toolserverd"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/toolserverctl", "health"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/toolserverd"]

# The default image: distroless static (CA certificates, /etc/passwd with nonroot,
# tzdata; no shell, no package manager).
FROM gcr.io/distroless/static-debian12:nonroot AS toolserverd
COPY --from=build /out/toolserverd /out/toolserverctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/toolserverd
# Off loopback the API always needs keys (auth.unauthenticated is refused there). With
# no key declared in auth.keys, the first start writes an admin key to
# /var/lib/toolserverd/admin.key and logs where it is.
ENV TOOLSERVER_ADDR=0.0.0.0:8080 \
    TOOLSERVER_DATA_DIR=/var/lib/toolserverd \
    TOOLSERVER_URL=http://127.0.0.1:8080
USER 65532:65532
WORKDIR /var/lib/toolserverd
VOLUME ["/var/lib/toolserverd"]
EXPOSE 8080
# toolserverctl health: GET $TOOLSERVER_URL/healthz, exit 0 on 200 (no curl here).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/toolserverctl", "health"]
ENTRYPOINT ["/usr/local/bin/toolserverd"]
