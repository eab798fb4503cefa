# hitl's container image: the manager (the entrypoint), the MCP server and
# the web inbox, static binaries on a distroless base, running as the
# non-root user 65532.
#   docker build -t ghcr.io/hitl-dev/hitl:dev .
# `make image` builds the same image without a Docker daemon (hack/image);
# docs/install.md compares the two.
FROM golang:1.26 AS build
# go.mod's toolchain line names the Go release to build with; the go command
# fetches it from the module proxy.
ENV GOTOOLCHAIN=auto CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags=-s -o /out/manager ./cmd/manager && \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags=-s -o /out/hitl-mcp ./cmd/hitl-mcp && \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags=-s -o /out/hitl-inbox ./cmd/hitl-inbox

# distroless/static: /etc/passwd with nonroot (65532), /tmp, CA certificates,
# no shell and no C library.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.title="hitl" \
      org.opencontainers.image.description="hitl's manager, MCP server and web inbox: AI agents ask people structured questions through the Kubernetes API" \
      org.opencontainers.image.source="https://github.com/hitl-dev/hitl" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /out/manager /out/hitl-mcp /out/hitl-inbox /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/manager"]
