# The apps image deployment.yaml's init container copies from
# (registry.example.com/stoa-apps): the plugins in /apps, and a shell with
# mkdir, cp and chmod for the copy. Built from the repository's root, with the
# toolchain of the host image (the root Dockerfile), so the plugins match its
# glibc and app-api line:
#   docker build -f deploy/k8s/apps.Dockerfile -t registry.example.com/stoa-apps:1.0.0 .
#   docker push registry.example.com/stoa-apps:1.0.0
# Put your own plugins' crates in the cargo command (or COPY built .so files
# into /apps) and give the image a new tag for each release of the apps.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p hello-project -p article -p environ -p demo \
    && mkdir -p /out/apps \
    && cp target/release/libhello_project.so target/release/libarticle.so \
          target/release/libenviron.so target/release/libdemo.so /out/apps/

# Nothing of it runs but the init container's `sh -c`: busybox's sh, mkdir,
# cp and chmod are enough, and the image stays small.
FROM busybox:1.37
COPY --from=build --chown=root:root --chmod=0755 /out/apps /apps
USER 10001:10001
