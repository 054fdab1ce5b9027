# chamberd: the scheduler, queue manager, API and dashboard (docs/install.md, "Building the
# images"). Build from the repository root:
#   docker build -f deploy/docker/chamberd.Dockerfile -t chamberd:0.1.0 .

FROM debian:bookworm AS build
# Node.js and npm bundle the dashboard that chamberd embeds; the rest comes from
# scripts/install-deps.sh --for build.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates nodejs npm \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN scripts/install-deps.sh --for build \
 && rm -rf /var/lib/apt/lists/*
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAMBER_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target chamberd \
 && strip /build/src/chamberd/chamberd

FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates libcpp-httplib0.11 libcurl4 libfmt9 libspdlog1.10 libsqlite3-0 \
      libssl3 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/src/chamberd/chamberd /usr/local/bin/chamberd
# The chart runs it as 65532 with a read-only root; /var/lib/chamber holds the history.
RUN mkdir -p /var/lib/chamber && chown 65532:65532 /var/lib/chamber
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/chamberd"]
