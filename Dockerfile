# One Threat View command as a distroless-style image, for people who build with
# Docker or BuildKit. `make images` builds the same images without a daemon
# (tools/imagebuild) and is what CI uses; both give: a static binary
# (CGO_ENABLED=0, -trimpath, version stamped), CA certificates, time zone data,
# a nonroot user (65532), nothing else (no shell, no package manager).
#
#   docker build --build-arg NAME=tokens -t threatview/tokens:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg NAME=collector -t REGISTRY/threatview/collector:0.1.0 --push .
#
# NAME is a command directory's name: collector, processor, auditlogger,
# auditworker, tokens, identity, visualrenderer, admininterface, archiver,
# cleanup, migrate or smoketest (services/*/cmd/NAME, migrations/cmd/NAME, deploy/*/cmd/NAME).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG NAME
ARG VERSION=0.1.0
ARG TARGETOS=linux
ARG TARGETARCH
RUN test -n "$NAME" || { echo "--build-arg NAME=<command> is required" >&2; exit 1; }
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN dir="$(ls -d services/*/cmd/"$NAME" migrations/cmd/"$NAME" deploy/*/cmd/"$NAME" 2>/dev/null | head -n 1)" \
    && test -n "$dir" || { echo "no command directory named $NAME" >&2; exit 1; }; \
    CGO_ENABLED=0 GOOS="$TARGETOS" GOARCH="$TARGETARCH" GOFLAGS= \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= -X main.version=$VERSION -X threatview/platform/cli.Version=$VERSION" \
      -o "/out/usr/local/bin/$NAME" "./$dir"
# The root filesystem of the final image, owned by root, readable by all.
RUN mkdir -p /out/etc/ssl/certs /out/usr/share /out/tmp /out/home/nonroot \
    && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
    && cp -a /usr/share/zoneinfo /out/usr/share/ && rm -rf /out/usr/share/zoneinfo/right /out/usr/share/zoneinfo/posix \
    && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/etc/passwd \
    && printf 'root:x:0:\nnonroot:x:65532:\n' >/out/etc/group \
    && chmod 1777 /out/tmp && chown 65532:65532 /out/home/nonroot && chmod 700 /out/home/nonroot \
    && ln -s "/usr/local/bin/$NAME" /out/usr/local/bin/entrypoint

FROM scratch
ARG NAME
ARG VERSION=0.1.0
ARG REVISION=unknown
COPY --from=build /out/ /
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/home/nonroot
LABEL org.opencontainers.image.title="threatview-${NAME}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="NOASSERTION" \
      org.opencontainers.image.vendor="Threat View"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/entrypoint"]
