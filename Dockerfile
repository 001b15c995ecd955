# nicpick images.  Each stage is a thin wrapper around the make targets CI
# runs; nothing here is built any other way.
#
#   release (default): FROM scratch, the static nicpick (and the smoke
#                      companion, when the tree has one), non-root, no
#                      capabilities.  Dockerfile.release is this stage alone,
#                      for building from an existing `make static`.
#   cuda:              nicpick on the CUDA runtime with NCCL, for running the
#                      smoke all-reduce in nicpick's own init container.
#
#   docker build -t nicpick .                 # release
#   docker build --target cuda -t nicpick:cuda .
ARG VERSION=0.0.0
ARG REVISION=unknown

FROM debian:12 AS build
ARG REVISION
WORKDIR /src
COPY . .
# make itself is not in the base image; install-deps.sh brings it.
RUN scripts/install-deps.sh static && make static GITREV=$REVISION

# Keep in step with Dockerfile.release (tests/integration/test_image.py checks).
FROM scratch AS release
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="nicpick" \
      org.opencontainers.image.description="Picks and verifies the network interface NCCL uses, per pod, agreed across a training job" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /src/build/static/nicpick /src/build/static/nicpick-smok[e] /usr/local/bin/
COPY --from=build /src/build/static/links/ /usr/local/bin/
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/nicpick"]
CMD ["--help"]

# The CUDA runtime images carry libnccl2; the check fails the build if one
# ever does not.  glibc 2.39 here runs the companion built on Debian 12.
FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04 AS cuda
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="nicpick-cuda" \
      org.opencontainers.image.description="nicpick with the CUDA runtime and NCCL, for the smoke all-reduce" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
RUN ldconfig -p | grep -q 'libnccl\.so\.2 '
COPY --from=build /src/build/static/nicpick /src/build/static/nicpick-smok[e] /usr/local/bin/
COPY --from=build /src/build/static/links/ /usr/local/bin/
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/nicpick"]
CMD ["--help"]
