#!/usr/bin/env bash
# The whole test suite on a fresh machine: system packages, services, Python deps, lint,
# types, pytest on MariaDB, the core again on PostgreSQL, then the HA lane (the core and the
# node-failure tests on a three-node MariaDB Galera cluster behind HAProxy).
# Usage: ./scripts/test.sh [--fast | --ha] [pytest args...]
#   --fast: unit and real-database tests only (no broker, worker, browser or Spark processes)
#   --ha:   the HA lane only
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
ha_only=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi
if [ "${1:-}" = "--ha" ]; then ha_only=1; shift; fi

say() { printf '\n== %s\n' "$*"; }
die() { printf '\nERROR: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

apt_ready=0
apt_install() {
  if [ "$apt_ready" = 0 ]; then as_root apt-get update -qq || die "apt-get update failed"; apt_ready=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null \
    || die "could not install $* with apt-get"
}

say "system packages"
missing=()
pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null || missing+=(libmariadb-dev pkg-config)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -f /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
command -v java >/dev/null || missing+=(default-jre-headless)
command -v promtool >/dev/null || missing+=(prometheus)  # promtool: the alert rules' checks
command -v javac >/dev/null || missing+=(default-jdk-headless)  # examples/java is compiled and run
command -v npm >/dev/null || missing+=(nodejs npm)  # the generated TypeScript client
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then echo "installing: ${missing[*]}"; apt_install "${missing[@]}"; fi

say "services"
if ! mysqladmin -h127.0.0.1 -uroot ping >/dev/null 2>&1; then
  echo "starting MariaDB"
  as_root mkdir -p /run/mysqld && as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
  as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql || true
  for _ in $(seq 1 60); do mysqladmin -h127.0.0.1 -uroot ping >/dev/null 2>&1 && break; sleep 1; done
  mysqladmin -h127.0.0.1 -uroot ping >/dev/null 2>&1 || die "MariaDB is not reachable on 127.0.0.1:3306 and could not be started"
fi
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  for _ in $(seq 1 20); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done
  redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || die "Redis is not reachable on 127.0.0.1:6379 and could not be started"
fi
if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
  echo "starting PostgreSQL"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 && break; sleep 1; done
  pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 || die "PostgreSQL is not reachable on 127.0.0.1:5432 and could not be started"
fi
# The suite connects as root over TCP (trust authentication on this machine's clusters).
psql -h 127.0.0.1 -U root -d postgres -c "SELECT 1" >/dev/null 2>&1 \
  || as_root su postgres -c "psql -c \"CREATE ROLE root SUPERUSER LOGIN\"" >/dev/null 2>&1 || true
# Tests create databases with a binary collation: topic names and dedup keys are case-sensitive.
mysql -h127.0.0.1 -uroot -e "SET GLOBAL max_connections = GREATEST(@@max_connections, 500)" || true

say "python environment"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/pip install -q -e '.[mysql,postgres,test,spark,browser]' 2>&1 | grep -v -i 'warning' || true
.venv/bin/python -c "import django, MySQLdb, pytest" || die "python dependencies did not install"

say "lint"
.venv/bin/ruff check .

say "types"
.venv/bin/mypy

# The HA lane: a fresh three-node Galera cluster (scripts/galera.sh, data in /var/tmp),
# HAProxy on 4300 sending every connection to one writer; every in-process test of the
# messages, topics, registry, mqcenter and security suites on it, then the tests that kill
# nodes under load and race claims on two nodes. Stopped and deleted after.
ha_lane() {
  say "HA lane: MariaDB Galera (3 nodes) behind HAProxy"
  local started=$SECONDS
  export MQ_GALERA_DIR="${MQ_GALERA_DIR:-/var/tmp/mq-galera-lane}"
  ./scripts/galera.sh destroy >/dev/null 2>&1 || true
  trap './scripts/galera.sh destroy >/dev/null 2>&1 || true' EXIT
  ./scripts/galera.sh start
  local url; url=$(./scripts/galera.sh url)
  DATABASE_URL="$url/mqcenter" MQ_TEST_DB_NAME="${MQ_TEST_DB_NAME:-test_mqcenter}_galera" \
    .venv/bin/python -m pytest -n 2 -m "not e2e and not browser and not spark" \
    tests/messages tests/topics tests/registry tests/mqcenter tests/security "$@"
  # One at a time: these kill nodes, which the other tests would see.
  DATABASE_URL="$url/mqcenter" MQ_TEST_DB_NAME="${MQ_TEST_DB_NAME:-test_mqcenter}_galera" MQ_GALERA_LANE=1 \
    .venv/bin/python -m pytest -rP tests/ha "$@"
  ./scripts/galera.sh destroy
  trap - EXIT
  echo "HA lane: $((SECONDS - started))s"
}

say "tests"
export PYTHONUNBUFFERED=1
if [ "$ha_only" = 1 ]; then ha_lane "$@"; exit 0; fi
if [ "$fast" = 1 ]; then
  exec .venv/bin/python -m pytest -n 2 -m "not e2e and not browser and not spark" "$@"
fi
.venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
[ $# -eq 0 ] || exit 0  # a chosen subset runs on MariaDB only

say "the core on PostgreSQL"
DATABASE_URL=postgres://root@127.0.0.1:5432/mqcenter .venv/bin/python -m pytest -n 2 \
  -m "not e2e and not browser and not spark" tests/messages/delivery/test_produce.py \
  tests/messages/delivery/test_consume.py tests/messages/test_admin_api.py \
  tests/messages/delivery/test_claim_plan.py tests/messages/delivery/test_concurrency.py \
  tests/messages/delivery/test_insert_without_returning.py tests/messages/delivery/test_pull_answer.py \
  tests/messages/delivery/test_row_pull.py tests/messages/delivery/test_unpause_wakes.py \
  tests/messages/test_subscriptions.py tests/messages/test_cancel.py \
  tests/messages/transactions/test_transactions.py tests/messages/schedules/test_schedules.py \
  tests/messages/delivery/test_priority.py tests/messages/delivery/test_expiry.py \
  tests/messages/delivery/test_fair_keys.py \
  tests/messages/delivery/test_backpressure.py tests/messages/delivery/test_snooze.py \
  tests/messages/stats/test_flush.py tests/messages/archive/test_cleanup.py \
  tests/messages/routing tests/messages/test_overflow.py tests/messages/batches \
  tests/messages/delivery/test_dedup_window.py tests/messages/test_request_reply.py

ha_lane
