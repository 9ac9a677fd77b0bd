# syntax=docker/dockerfile:1
# regokite: the admission server (`regokite admission`) and the controllers
# (`regokite controller`) in one image. Runs as a non-root user on a read-only
# root filesystem: the only writes go to /tmp (mount an emptyDir there) and to
# mounted volumes. Policies are mounted from a ConfigMap (see deploy/) or baked
# in at /policies (`docker build --build-arg POLICIES=policies .`).

# The base: any Debian-like image with python3 (3.11+) and its venv module;
# scripts/image builds on one made with mmdebstrap.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY regokite ./regokite
# One virtualenv holding regokite and its dependencies (wheels only: regorus and
# cryptography ship manylinux wheels, so no compiler is needed).
RUN python3 -m venv /opt/regokite \
    && /opt/regokite/bin/pip install --only-binary=:all: --no-compile . \
    && /opt/regokite/bin/python -m compileall -q /opt/regokite/lib

FROM ${PYTHON_IMAGE}
ARG POLICIES=policies
LABEL org.opencontainers.image.title="regokite" \
      org.opencontainers.image.description="Policy-as-data for Kubernetes: Rego decides, a Python supervisor acts." \
      org.opencontainers.image.licenses="Apache-2.0"
# Bytecode was compiled at build time; nothing is written beside the code at run time.
# HOME and TMPDIR point at /tmp, the one writable place: --self-signed keeps its
# files under ~/.cache, and several admission workers share Prometheus metrics
# through a directory made under $TMPDIR (PROMETHEUS_MULTIPROC_DIR).
ENV PATH=/opt/regokite/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
COPY --from=build /opt/regokite /opt/regokite
COPY ${POLICIES} /policies
RUN groupadd --system --gid 10001 regokite \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin regokite \
    && regokite --version
USER 10001:10001
WORKDIR /tmp
# 8443: admission HTTPS; 9090: controller metrics, /healthz, /readyz (--metrics-port)
EXPOSE 8443 9090
ENTRYPOINT ["regokite"]
CMD ["admission", "--policies", "/policies", "--self-signed"]
