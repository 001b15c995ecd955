# nicpick image: build on Debian 12, ship the binary with its runtime
# libraries on debian:12-slim.  NCCL and the CUDA runtime are not needed
# in this image.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      gcc make pkg-config libc6-dev libnl-3-dev libnl-route-3-dev libnl-genl-3-dev \
      libcurl4-openssl-dev libjansson-dev ca-certificates git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make BUILD=/out all

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libnl-3-200 libnl-route-3-200 libnl-genl-3-200 libcurl4 libjansson4 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/nicpick /usr/local/bin/nicpick
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/nicpick"]
