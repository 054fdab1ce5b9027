# chamber-agent: GPU discovery, metrics and health through NVML on each GPU node
# (docs/install.md, "Building the images"). NVML is not in the image: it comes from the host's
# driver (hostPath, --nvml-library). Build from the repository root:
#   docker build -f deploy/docker/agent.Dockerfile -t chamber-agent:0.1.0 .

FROM debian:bookworm AS build
# The project configures as a whole, so the build needs what chamberd's does (Node.js and npm
# for the dashboard included), though only chamber-agent is built.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      ca-certificates nodejs npm \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN scripts/install-deps.sh --for build \
 && rm -rf /var/lib/apt/lists/*
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHAMBER_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target chamber-agent \
 && strip /build/src/agent/chamber-agent

FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libcpp-httplib0.11 libfmt9 libspdlog1.10 libssl3 libgrpc++1.51 libprotobuf32 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/src/agent/chamber-agent /usr/local/bin/chamber-agent
USER 65532:65532
EXPOSE 9401
ENTRYPOINT ["/usr/local/bin/chamber-agent"]
