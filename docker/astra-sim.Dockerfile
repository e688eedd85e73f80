# ASTRA-sim (analytical and ns-3 backends) built from an ASTRA-sim source tree that you supply.
# Nothing here downloads ASTRA-sim, ns-3, Chakra or yaml-cpp: they all come from the build context.
# The usual way in is docker/build.sh, which assembles the context, fills in the commit labels and
# then builds astra-hetero on top (docker/README.md). By hand:
#
#   docker build -f docker/astra-sim.Dockerfile --build-arg BASE_IMAGE=debian-local:bookworm \
#       --build-arg YAML_CPP_DIR=extern/helper/yaml-cpp -t astra-sim:518bd51 /path/to/astra-sim
#
# Build context: an ASTRA-sim checkout *with its submodules* at the commits of third_party/README.md,
# plus a copy of yaml-cpp (revision a83cd31, the one ASTRA-sim's CMake would download) at YAML_CPP_DIR
# inside it. Remove earlier build outputs from it first (or use build.sh, which leaves them out).
#
# Base image: a local tag of Debian 12 (bookworm), e.g. one made with debootstrap (docker/README.md);
# no registry is assumed. Its apt sources must reach a Debian archive (pass HTTP_PROXY / HTTPS_PROXY /
# NO_PROXY, Docker's predefined build arguments, when that needs a proxy; apt reads them).

ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BASE_IMAGE

# Build tools and libraries (third_party/README.md, "What we learned building it"); python3 runs ns-3's
# `ns3` build driver, python3-venv lets docker/Dockerfile make its own environment on top.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      g++ make cmake ninja-build \
      libopenmpi-dev openmpi-bin \
      protobuf-compiler libprotobuf-dev \
      libboost-dev \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Where the source lives: the path of ASTRA-sim's own image, which docker/Dockerfile expects.
ARG ASTRA_SIM_ROOT=/app/astra-sim
# The ASTRA-sim tree, relative to the build context (build.sh sends it as src/, beside this file, so
# that editing this file leaves the copied tree, and the compiled layers after it, cached).
ARG SOURCE_DIR=.
# yaml-cpp's source, relative to that tree; handed to CMake's FetchContent so it never downloads.
ARG YAML_CPP_DIR=extern/helper/yaml-cpp
# Parallel compile jobs; empty means one per CPU the build sees.
ARG JOBS=

COPY ${SOURCE_DIR} ${ASTRA_SIM_ROOT}
WORKDIR ${ASTRA_SIM_ROOT}

RUN for f in CMakeLists.txt build/astra_analytical/CMakeLists.txt \
             extern/graph_frontend/chakra/schema/protobuf/et_def.proto \
             extern/network_backend/analytical/CMakeLists.txt \
             extern/network_backend/ns-3/ns3 extern/helper/fmt/CMakeLists.txt \
             extern/helper/spdlog/CMakeLists.txt "${YAML_CPP_DIR}/CMakeLists.txt"; do \
      [ -f "$f" ] || { echo "astra-sim.Dockerfile: $f is missing from the build context" \
                            "(an ASTRA-sim checkout with its submodules, and yaml-cpp at YAML_CPP_DIR)"; exit 1; }; \
    done \
 && protoc et_def.proto --proto_path=extern/graph_frontend/chakra/schema/protobuf \
      --cpp_out=extern/graph_frontend/chakra/schema/protobuf

# Analytical backends (congestion-aware and -unaware), as build/astra_analytical/build.sh does, plus the
# offline yaml-cpp.
RUN mkdir -p build/astra_analytical/build && cd build/astra_analytical/build \
 && cmake .. -G Ninja -DBUILDTARGET=all -DCMAKE_BUILD_TYPE=Release \
      -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
      "-DFETCHCONTENT_SOURCE_DIR_YAML-CPP=${ASTRA_SIM_ROOT}/${YAML_CPP_DIR}" \
 && cmake --build . -j "${JOBS:-$(nproc)}" \
 && ls -l bin/AstraSim_Analytical_Congestion_Aware bin/AstraSim_Analytical_Congestion_Unaware

# ns-3 backend, as build/astra_ns3/build.sh does. Its example configs write to scratch/output and read
# scratch/output/flow.txt, which the source does not ship: prepare both, writable by any user (containers
# run as the caller's uid). Object files are dropped; the binary needs only ns-3's shared libraries.
RUN cd extern/network_backend/ns-3 \
 && ./ns3 configure --enable-mpi -- -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
      "-DFETCHCONTENT_SOURCE_DIR_YAML-CPP=${ASTRA_SIM_ROOT}/${YAML_CPP_DIR}" \
 && ./ns3 build AstraSimNetwork -j "${JOBS:-$(nproc)}" \
 && ls -l build/scratch/ns3.42-AstraSimNetwork-default \
 && find cmake-cache -name '*.o' -delete \
 && mkdir -p scratch/output && echo 0 > scratch/output/flow.txt && chmod -R a+rwX scratch/output

# One directory of links to the three binaries (the ns-3 one stays in its build tree for its libraries).
# Containers run as the caller's uid, so what ASTRA-sim writes must be writable by any user: the example
# traces (Chakra's trace reader opens a trace with std::ios::in | std::ios::app, src/feeder_v3/
# et_feeder.h, which fails on a file the user cannot write), and the directories its run scripts run in
# (every binary creates log/ in its working directory: the tree's root, the image's WORKDIR, and ns-3's
# build/scratch).
RUN chmod -R a+rwX examples \
 && chmod a+rwx . extern/network_backend/ns-3/build/scratch \
 && mkdir -p /opt/astra-sim/bin \
 && ln -s "${ASTRA_SIM_ROOT}/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware" \
          "${ASTRA_SIM_ROOT}/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware" \
          "${ASTRA_SIM_ROOT}/extern/network_backend/ns-3/build/scratch/ns3.42-AstraSimNetwork-default" \
          /opt/astra-sim/bin/
ENV ASTRA_SIM_BIN_DIR=/opt/astra-sim/bin

# What went in: every component's commit (docker/build.sh fills these in from the checkout's git
# metadata or its SOURCE_COMMITS file; "unknown" when it could not tell).
ARG ASTRA_SIM_COMMIT=unknown
ARG CHAKRA_COMMIT=unknown
ARG NETWORK_ANALYTICAL_COMMIT=unknown
ARG NETWORK_NS3_COMMIT=unknown
ARG MEMORY_ANALYTICAL_COMMIT=unknown
ARG FMT_COMMIT=unknown
ARG SPDLOG_COMMIT=unknown
ARG YAML_CPP_COMMIT=unknown
LABEL org.opencontainers.image.title="astra-sim" \
      org.opencontainers.image.revision="${ASTRA_SIM_COMMIT}" \
      org.astra-hetero.component.astra-sim="${ASTRA_SIM_COMMIT}" \
      org.astra-hetero.component.chakra="${CHAKRA_COMMIT}" \
      org.astra-hetero.component.astra-network-analytical="${NETWORK_ANALYTICAL_COMMIT}" \
      org.astra-hetero.component.astra-network-ns3="${NETWORK_NS3_COMMIT}" \
      org.astra-hetero.component.astra-memory-analytical="${MEMORY_ANALYTICAL_COMMIT}" \
      org.astra-hetero.component.fmt="${FMT_COMMIT}" \
      org.astra-hetero.component.spdlog="${SPDLOG_COMMIT}" \
      org.astra-hetero.component.yaml-cpp="${YAML_CPP_COMMIT}" \
      org.astra-hetero.base-image="${BASE_IMAGE}"
# The same commits for programs inside the image (astra-hetero records them as provenance).
ENV ASTRA_SIM_COMPONENTS="astra-sim=${ASTRA_SIM_COMMIT} chakra=${CHAKRA_COMMIT} astra-network-analytical=${NETWORK_ANALYTICAL_COMMIT} astra-network-ns3=${NETWORK_NS3_COMMIT} astra-memory-analytical=${MEMORY_ANALYTICAL_COMMIT} fmt=${FMT_COMMIT} spdlog=${SPDLOG_COMMIT} yaml-cpp=${YAML_CPP_COMMIT}"

CMD ["ls", "-l", "/opt/astra-sim/bin"]
