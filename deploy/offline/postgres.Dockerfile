# Stand-in for postgres:16: bookworm's PostgreSQL (15), with the behaviour docker-compose.yml
# relies on: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB create the role and database on the
# first start, the data live in /var/lib/postgresql/data, `pg_isready` is on PATH, and the server
# listens on the container's network with password authentication.
ARG DEBIAN_IMAGE=local/bookworm:minbase
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["docker-entrypoint.sh"]
EXPOSE 5432
CMD ["postgres"]
