# shellcheck shell=bash
# A throwaway PostgreSQL server for tests/adapters/test_langgraph_stores.py (LangGraph's
# PostgresStore), sourced by .ci/run: Debian's postgresql package (installed when its binaries are
# absent), a cluster in a temporary folder listening on a unix socket only (no port to collide
# with), one database, its DSN exported as RECALLPACK_TEST_POSTGRES_DSN for pytest, and the server
# stopped and its folder removed when the sourcing shell exits. A DSN already set is used as it
# is. If no server can be started, it says why and goes on: the test then skips, saying so.

recallpack_postgres_bin() {
  # Debian keeps the server's binaries out of PATH, under /usr/lib/postgresql/VERSION/bin.
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV) "$(dirname "$(command -v pg_ctl || echo .)")"; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/createdb" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

recallpack_postgres_start() {
  local bin as_user=() owner
  if [ -n "${RECALLPACK_TEST_POSTGRES_DSN:-}" ]; then
    echo "postgres: using RECALLPACK_TEST_POSTGRES_DSN as set"
    return 0
  fi
  bin=$(recallpack_postgres_bin || true)
  if [ -z "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "postgres: installing Debian's postgresql package"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } \
      >/tmp/recallpack-postgres-install.log 2>&1 \
      || echo "postgres: the install failed (see /tmp/recallpack-postgres-install.log)"
    bin=$(recallpack_postgres_bin || true)
  fi
  if [ -z "$bin" ]; then
    echo "postgres: no server binaries; the PostgresStore test will skip"
    return 0
  fi
  RECALLPACK_POSTGRES_DIR=$(mktemp -d)
  owner=$(id -un)
  # initdb refuses to run as root: as root, the cluster belongs to the package's postgres user.
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    as_user=(runuser -u postgres --)
    chown postgres "$RECALLPACK_POSTGRES_DIR"
  fi
  local dir=$RECALLPACK_POSTGRES_DIR
  if "${as_user[@]}" "$bin/initdb" -D "$dir/data" -U "$owner" -A trust --no-sync >"$dir/initdb.log" 2>&1 \
    && "${as_user[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses='' -k $dir -c fsync=off" start >/dev/null; then
    RECALLPACK_POSTGRES_STOP=("${as_user[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop)
    if "${as_user[@]}" "$bin/createdb" -h "$dir" -U "$owner" recallpack_test; then
      export RECALLPACK_TEST_POSTGRES_DSN="host=$dir user=$owner dbname=recallpack_test"
      echo "postgres: a server on the unix socket in $dir (RECALLPACK_TEST_POSTGRES_DSN)"
      return 0
    fi
  fi
  echo "postgres: the server did not start; the PostgresStore test will skip. Its logs:"
  tail -n 20 "$dir/initdb.log" "$dir/server.log" 2>/dev/null || true
}

recallpack_postgres_stop() {
  if [ -n "${RECALLPACK_POSTGRES_STOP+x}" ]; then
    "${RECALLPACK_POSTGRES_STOP[@]}" >/dev/null 2>&1 || true
  fi
  if [ -n "${RECALLPACK_POSTGRES_DIR:-}" ]; then
    rm -rf "$RECALLPACK_POSTGRES_DIR"
  fi
}

recallpack_postgres_start
# Chained after whatever exit trap the sourcing script already set, so neither is lost.
recallpack_postgres_previous_trap=$(trap -p EXIT)
recallpack_postgres_previous_trap=${recallpack_postgres_previous_trap#trap -- }
recallpack_postgres_previous_trap=${recallpack_postgres_previous_trap% EXIT}
eval "recallpack_postgres_previous_trap=${recallpack_postgres_previous_trap:-''}"
trap "recallpack_postgres_stop; ${recallpack_postgres_previous_trap:-:}" EXIT
