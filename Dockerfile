# Stoa in a container: build with cargo, run on a slim base as a non-root user.
#   docker build -t stoa .
#   docker run -p 8000:8000 -v "$PWD/apps:/apps:ro" stoa
# The apps directory is a volume: mount the plugins (built for the same
# glibc and app-api line as this image's host) at /apps.
# HTTPS on 8443: mount the certificate chain and key read-only, bind TLS
# there and keep the plain bind on the container's loopback, where the
# HEALTHCHECK asks (the key must be readable by uid 10001):
#   docker run -p 8443:8443 -v /etc/stoa/tls:/etc/stoa/tls:ro \
#     -e STOA_BIND=127.0.0.1:8000,tls://0.0.0.0:8443 \
#     -e STOA_TLS_CERT=/etc/stoa/tls/tls.crt -e STOA_TLS_KEY=/etc/stoa/tls/tls.key stoa
# Process mode (the default; STOA_WORKER_MODE=process below says it for the
# reader): stoa runs as PID 1 as a supervisor
# that loads no app code, reaps every child and turns `docker stop`'s SIGTERM
# into a drain of its worker processes (one per CPU, or STOA_WORKERS); an app
# that crashes or hangs costs one worker, which is replaced. Size the memory
# limit for that many processes, each with every app.

# The toolchain of rust-toolchain.toml (which rustup would otherwise fetch).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p stoa -p hello-project -p article -p environ -p demo \
    && mkdir -p /out/apps \
    && cp target/release/stoa /out/stoa \
    && cp target/release/libhello_project.so target/release/libarticle.so \
          target/release/libenviron.so target/release/libdemo.so /out/apps/

FROM debian:bookworm-slim
# curl for the HEALTHCHECK; the distribution's current version (bookworm's
# security updates) rather than a pin that would go stale.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 stoa \
    && useradd --system --uid 10001 --gid stoa --no-create-home stoa
COPY --from=build /out/stoa /usr/local/bin/stoa
# The sample apps, for a first run; mount your own over /apps.
COPY --from=build --chown=root:root --chmod=0755 /out/apps /apps
USER 10001:10001
EXPOSE 8000 8443
STOPSIGNAL SIGTERM
ENV STOA_BIND=0.0.0.0:8000 \
    STOA_APPS=/apps \
    STOA_WORKER_MODE=process \
    STOA_GRACEFUL_TIMEOUT=25s
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8000/.well-known/stoa/health"]
ENTRYPOINT ["/usr/local/bin/stoa"]
