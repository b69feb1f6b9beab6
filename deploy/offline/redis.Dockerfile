# Stand-in for redis:7: bookworm's Redis (7.0), run as `redis` in /data. Like the official
# image's entrypoint, a server started without a config file gets `--protected-mode no`, so the
# other containers may connect (it listens on the compose network only; no port is published).
ARG DEBIAN_IMAGE=local/bookworm:minbase
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
ENTRYPOINT ["docker-entrypoint.sh"]
EXPOSE 6379
CMD ["redis-server"]
