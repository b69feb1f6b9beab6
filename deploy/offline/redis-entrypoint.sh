#!/bin/sh
set -eu
if [ "$1" = redis-server ]; then
    shift
    case "${1:-}" in
        *.conf) ;;
        *) set -- --protected-mode no "$@" ;;
    esac
    exec runuser -u redis -- redis-server "$@"
fi
exec "$@"
