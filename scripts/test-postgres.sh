#!/usr/bin/env bash
# Throwaway PostgreSQL server for the store tests: initdb + pg_ctl in a temp
# directory, run as a non-root user (the `postgres` system user when started
# as root), listening on 127.0.0.1 only, trust auth on loopback.
#
#   env=$(scripts/test-postgres.sh start) && eval "$env"   # sets RAGFORGE_TEST_POSTGRES and RAGFORGE_TEST_PGDATA
#   scripts/test-postgres.sh stop              # stops the server of $RAGFORGE_TEST_PGDATA and removes it
#   scripts/test-postgres.sh run CMD...        # start, run CMD with the variable set, stop (always)
#   scripts/test-postgres.sh check             # exit 0 when the server binaries are installed
set -euo pipefail

pgbin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return; }; done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return; }
  echo "no PostgreSQL server binaries (initdb): install Debian's postgresql" >&2
  exit 1
}

# as_user runs a command as the server's owner (root may not run PostgreSQL).
as_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bin port dir
  bin=$(pgbin)
  port=${PGPORT_TEST:-$(( 20000 + RANDOM % 20000 ))}
  dir=$(mktemp -d /tmp/ragforge-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  as_user "$bin/initdb" -D "$dir/data" -U ragforge --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
  as_user "$bin/createdb" -h 127.0.0.1 -p "$port" -U ragforge ragforge_test
  echo "export RAGFORGE_TEST_PGDATA=$dir"
  echo "export RAGFORGE_TEST_POSTGRES=postgres://ragforge@127.0.0.1:$port/ragforge_test?sslmode=disable"
}

stop() {
  local dir=${RAGFORGE_TEST_PGDATA:?RAGFORGE_TEST_PGDATA is unset}
  case "$dir" in /tmp/ragforge-pg.*) ;; *) echo "refusing to remove $dir" >&2; exit 1 ;; esac
  as_user "$(pgbin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  check) pgbin >/dev/null 2>&1 ;;
  run)
    shift
    env=$(start)
    eval "$env"
    export RAGFORGE_TEST_PGDATA RAGFORGE_TEST_POSTGRES
    trap stop EXIT
    "$@"
    ;;
  *) echo "usage: $0 start|stop|run CMD..." >&2; exit 2 ;;
esac
