# Stand-in for python:3.11-slim, built from a local Debian bookworm image (bookworm's python3 is
# 3.11). What the app's Dockerfile relies on: `python` and `pip` on PATH, installs allowed
# (a venv, since Debian's own Python refuses `pip install` outside one), `useradd`.
# extra-ca/ holds the certificates build-images.sh was given (EXTRA_CA_CERTS), for a
# TLS-intercepting proxy between the build and the package index; pip and uv are pointed at the
# system's bundle, which then includes them.
ARG DEBIAN_IMAGE=local/bookworm:minbase
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/python
COPY extra-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
ENV PATH=/opt/python/bin:$PATH LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["python"]
