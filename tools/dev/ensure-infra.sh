#!/usr/bin/env bash
# Makes sure the infrastructure that `pnpm test` and CI need is reachable on loopback:
#   - Postgres on 127.0.0.1:5432 with a superuser `postgres` that trust auth lets in from localhost,
#   - Redis on 127.0.0.1:6379 (and the redis-server binary on disk: meshes start their own),
#   - nats-server with JetStream on 127.0.0.1:4222 (and the nats-server binary on disk, because
#     tests start private nats-servers on other ports),
#   - softhsm2 (the PKCS#11 token that the KMS tests use),
#   - moto_server (the AWS KMS the KMS tests use), from pip when it is missing,
#   - curl and jq (the README walk-through test),
#   - promtool (Prometheus' rule checker: the monitoring rules are checked and unit-tested with it),
#   - pgbouncer (the binary only: packages/events' PgBouncer test starts its own on a free port).
# Whatever is missing is installed from Debian's packages (root only) and started. Anything that is
# already up is left exactly as it is. Idempotent; prints one line per dependency.
# Exits non-zero with a message when something cannot be made reachable within 30 s.
set -euo pipefail

readonly WAIT_SECONDS=30
readonly PG_PORT=5432 REDIS_PORT=6379 NATS_PORT=4222
readonly HBA_MARK='# custos ensure-infra: trust loopback (dev/CI only)'
APT_LOG="$(mktemp -t custos-ensure-infra-apt.XXXXXX)"
readonly APT_LOG
trap 'rm -f "$APT_LOG"' EXIT
apt_updated=0

say() { printf '%s\n' "$*"; }
die() {
  printf 'ensure-infra: %s\n' "$*" >&2
  exit 1
}

is_root() { [[ "$(id -u)" == 0 ]]; }

# apt_install WHAT PACKAGE... : installs Debian packages quietly, `apt-get update` at most once.
apt_install() {
  local what="$1"
  shift
  is_root || die "$what: needs the Debian package(s) $* but this is not root; install them and run again"
  command -v apt-get >/dev/null 2>&1 || die "$what: needs $* but apt-get is not available on this machine; install them and run again"
  say "$what: installing $* (apt-get)"
  if [[ "$apt_updated" == 0 ]]; then
    if ! DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$APT_LOG" 2>&1; then
      tail -n 20 "$APT_LOG" >&2
      die "$what: apt-get update failed"
    fi
    apt_updated=1
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$APT_LOG" 2>&1; then
    tail -n 20 "$APT_LOG" >&2
    die "$what: apt-get install $* failed"
  fi
}

# wait_for SECONDS COMMAND...: polls COMMAND every half second until it succeeds or time runs out.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------------------------------
# probes (bash's /dev/tcp, so they work before any client is installed)

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

redis_pong() {
  local reply
  reply="$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REDIS_PORT; printf 'PING\r\n' >&3; IFS= read -r -t 2 line <&3; printf '%s' \"\$line\"" 2>/dev/null)" || return 1
  [[ "$reply" == +PONG* ]]
}

# Prints the INFO line a NATS server sends on connect.
nats_info() {
  timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT; IFS= read -r -t 2 line <&3; printf '%s' \"\$line\"" 2>/dev/null
}
nats_jetstream_up() {
  local info
  info="$(nats_info)" || return 1
  [[ "$info" == INFO* && "$info" == *'"jetstream":true'* ]]
}

pg_select1() {
  command -v psql >/dev/null 2>&1 || return 1
  PGCONNECT_TIMEOUT=3 psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1
}

# ---------------------------------------------------------------------------------------------------
# Postgres

pg_bin_version() {
  # Highest installed server version, e.g. 15 (empty when none).
  local d best=""
  for d in /usr/lib/postgresql/*/bin/postgres; do
    [[ -x "$d" ]] || continue
    d="${d#/usr/lib/postgresql/}"
    d="${d%%/*}"
    if [[ -z "$best" ]] || ((${d%%.*} > ${best%%.*})); then best="$d"; fi
  done
  printf '%s' "$best"
}

# Prints "VERSION CLUSTER STATUS" of the local Debian cluster configured for port 5432, if any.
pg_local_cluster() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 0
  { pg_lsclusters -h 2>/dev/null || true; } | awk -v p="$PG_PORT" '$3 == p { print $1, $2, $4; exit }'
}

# Puts trust lines for 127.0.0.1 and ::1 at the top of the cluster's pg_hba.conf (first match wins).
pg_trust_loopback() {
  local hba="/etc/postgresql/$1/$2/pg_hba.conf"
  [[ -f "$hba" ]] || die "postgres: $hba not found"
  grep -qxF "$HBA_MARK" "$hba" && return 0
  local tmp
  tmp="$(mktemp)"
  {
    printf '%s\n' "$HBA_MARK"
    printf 'host all all 127.0.0.1/32 trust\n'
    printf 'host all all ::1/128 trust\n'
    printf 'local all postgres trust\n\n'
    cat "$hba"
  } >"$tmp"
  cat "$tmp" >"$hba" # keeps the file's owner and mode
  rm -f "$tmp"
}

pg_ctl_cluster() {
  # pg_ctlcluster creates its socket folder itself on current postgresql-common; older ones do not.
  install -d -o postgres -g postgres -m 2775 /var/run/postgresql 2>/dev/null || true
  pg_ctlcluster --skip-systemctl-redirect "$1" "$2" "$3" >>"$APT_LOG" 2>&1
}

# The server on 5432 answers but refuses `psql -U postgres` without a password: if it is the local
# Debian cluster, put the trust lines in and restart it; otherwise there is nothing we may change.
pg_fix_auth() {
  local how="$1" cluster ver name
  cluster="$(pg_local_cluster)"
  if [[ -z "$cluster" ]] || ! is_root; then
    die "postgres: something answers on 127.0.0.1:$PG_PORT but \`psql -h 127.0.0.1 -U postgres -c 'select 1'\` fails; it needs a superuser 'postgres' with trust auth from localhost"
  fi
  read -r ver name _ <<<"$cluster"
  say "postgres: allowing trust auth on loopback in cluster $ver/$name and restarting it"
  pg_trust_loopback "$ver" "$name"
  pg_ctl_cluster "$ver" "$name" restart || {
    tail -n 20 "$APT_LOG" >&2
    die "postgres: restart of cluster $ver/$name failed"
  }
  wait_for "$WAIT_SECONDS" pg_select1 || die "postgres: not reachable with trust auth within ${WAIT_SECONDS}s after restart (see /var/log/postgresql/postgresql-$ver-$name.log)"
  say "postgres: up ($how cluster $ver/$name)"
}

ensure_postgres() {
  if pg_select1; then
    say "postgres: up (already running)"
    return
  fi

  if port_open 127.0.0.1 "$PG_PORT"; then
    # Something serves 5432. Maybe only the client is missing.
    if ! command -v psql >/dev/null 2>&1; then
      apt_install postgres postgresql-client
      if wait_for 10 pg_select1; then
        say "postgres: up (already running; installed psql)"
        return
      fi
    fi
    pg_fix_auth restarted
    return
  fi

  # Nothing on 5432: install if needed, then start the local cluster.
  local how=started
  if [[ -z "$(pg_bin_version)" ]] || ! command -v pg_ctlcluster >/dev/null 2>&1; then
    apt_install postgres postgresql
    how="installed and started"
  fi
  command -v psql >/dev/null 2>&1 || apt_install postgres postgresql-client
  is_root || die "postgres: not running on 127.0.0.1:$PG_PORT and only root can start the local cluster here"
  local cluster ver name status
  cluster="$(pg_local_cluster)"
  if [[ -z "$cluster" ]]; then
    ver="$(pg_bin_version)"
    [[ -n "$ver" ]] || die "postgres: no server binaries found under /usr/lib/postgresql"
    say "postgres: creating cluster $ver/main on port $PG_PORT"
    pg_createcluster -p "$PG_PORT" "$ver" main >>"$APT_LOG" 2>&1 || {
      tail -n 20 "$APT_LOG" >&2
      die "postgres: pg_createcluster failed"
    }
    cluster="$(pg_local_cluster)"
  fi
  read -r ver name status <<<"$cluster"
  if [[ "$status" == online* ]]; then
    # Running already (e.g. just started by the package's install script): wait for its port, then
    # make sure trust works, restarting only if it does not.
    wait_for "$WAIT_SECONDS" port_open 127.0.0.1 "$PG_PORT" ||
      die "postgres: cluster $ver/$name is running but does not listen on 127.0.0.1:$PG_PORT"
    if wait_for 3 pg_select1; then
      say "postgres: up ($how cluster $ver/$name)"
    else
      pg_fix_auth "$how"
    fi
    return
  fi
  pg_trust_loopback "$ver" "$name"
  pg_ctl_cluster "$ver" "$name" start || {
    tail -n 20 "$APT_LOG" >&2
    die "postgres: start of cluster $ver/$name failed"
  }
  wait_for "$WAIT_SECONDS" pg_select1 ||
    die "postgres: cluster $ver/$name not reachable on 127.0.0.1:$PG_PORT with trust auth within ${WAIT_SECONDS}s (see /var/log/postgresql/postgresql-$ver-$name.log)"
  say "postgres: up ($how cluster $ver/$name)"
}

# ---------------------------------------------------------------------------------------------------
# Redis

ensure_redis() {
  if redis_pong; then
    # Meshes and tests start their own redis-server (with a password) on other ports: the binary
    # must be on disk even when something else serves 6379.
    if ! command -v redis-server >/dev/null 2>&1; then
      apt_install redis redis-server
      say "redis: up (already running; installed redis-server)"
      return
    fi
    say "redis: up (already running)"
    return
  fi
  if port_open 127.0.0.1 "$REDIS_PORT"; then
    die "redis: something answers on 127.0.0.1:$REDIS_PORT but does not reply PONG to PING (password set?)"
  fi
  local how=started
  if ! command -v redis-server >/dev/null 2>&1; then
    apt_install redis redis-server
    how="installed and started"
    # The package may have started its own server meanwhile.
    if wait_for 3 redis_pong; then
      say "redis: up (installed; started by the package)"
      return
    fi
  fi
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null ||
    die "redis: redis-server failed to start (see /var/log/redis/ci.log)"
  wait_for "$WAIT_SECONDS" redis_pong || die "redis: not answering PING on 127.0.0.1:$REDIS_PORT within ${WAIT_SECONDS}s (see /var/log/redis/ci.log)"
  say "redis: up ($how)"
}

# ---------------------------------------------------------------------------------------------------
# NATS

nats_bin() {
  if command -v nats-server >/dev/null 2>&1; then
    command -v nats-server
  elif [[ -x /usr/sbin/nats-server ]]; then
    printf '/usr/sbin/nats-server'
  else
    return 1
  fi
}

ensure_nats() {
  local note=""
  if ! nats_bin >/dev/null; then
    apt_install nats nats-server
    note="; installed nats-server"
  fi
  local bin
  bin="$(nats_bin)" || die "nats: nats-server binary still missing after install"

  if nats_jetstream_up; then
    say "nats: up (already running$note)"
    return
  fi
  if port_open 127.0.0.1 "$NATS_PORT"; then
    die "nats: something answers on 127.0.0.1:$NATS_PORT but it is not a nats-server with JetStream enabled"
  fi
  mkdir -p /var/lib/nats-server
  if command -v start-stop-daemon >/dev/null 2>&1; then
    # --pidfile: without it start-stop-daemon takes any running nats-server (tests start their own on
    # other ports) for this one and starts nothing.
    start-stop-daemon --start --oknodo --background --make-pidfile --pidfile /run/custos-nats-server.pid \
      --exec "$bin" -- \
      -a 127.0.0.1 -p "$NATS_PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log >/dev/null ||
      die "nats: start-stop-daemon could not start $bin"
  else
    nohup setsid "$bin" -a 127.0.0.1 -p "$NATS_PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log \
      >/dev/null 2>&1 </dev/null &
  fi
  wait_for "$WAIT_SECONDS" nats_jetstream_up ||
    die "nats: no JetStream-enabled nats-server on 127.0.0.1:$NATS_PORT within ${WAIT_SECONDS}s (see /var/log/nats-server.log)"
  say "nats: up (started$note)"
}

# ---------------------------------------------------------------------------------------------------
# SoftHSM (PKCS#11 tests)

ensure_softhsm() {
  if command -v softhsm2-util >/dev/null 2>&1; then
    say "softhsm2: present"
    return
  fi
  apt_install softhsm2 softhsm2
  command -v softhsm2-util >/dev/null 2>&1 || die "softhsm2: softhsm2-util still missing after install"
  say "softhsm2: installed"
}

moto_bin() {
  if command -v moto_server >/dev/null 2>&1; then
    command -v moto_server
  elif [[ -x /root/.pyenv/shims/moto_server ]]; then
    printf '%s\n' /root/.pyenv/shims/moto_server
  else
    return 1
  fi
}

ensure_moto() {
  if moto_bin >/dev/null; then
    say "moto_server: present"
    return
  fi
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    apt_install moto_server python3 python3-pip python3-venv
  fi
  # Debian's python refuses system-wide pip installs (PEP 668); a venv of our own is the clean way.
  is_root || die "moto_server: missing; install it with \`pip install 'moto[server]'\` and run again"
  local venv=/opt/custos-moto
  if [[ ! -x "$venv/bin/moto_server" ]]; then
    say "moto_server: installing moto[server] (pip) into $venv"
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q 'moto[server]'; } >>"$APT_LOG" 2>&1; then
      tail -n 20 "$APT_LOG" >&2
      die "moto_server: pip install 'moto[server]' failed"
    fi
  fi
  ln -sf "$venv/bin/moto_server" /usr/local/bin/moto_server 2>/dev/null ||
    die "moto_server: installed in $venv but cannot link it into /usr/local/bin; set MOTO_SERVER=$venv/bin/moto_server"
  say "moto_server: installed"
}

# ---------------------------------------------------------------------------------------------------
# curl and jq: the README's first-use walk-through (run by tools/e2e/test/readme.spec.ts) uses them

ensure_cli_tools() {
  local missing=()
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v jq >/dev/null 2>&1 || missing+=(jq)
  if ((${#missing[@]} == 0)); then
    say "curl, jq: present"
    return
  fi
  apt_install "curl, jq" "${missing[@]}"
  say "curl, jq: installed ${missing[*]}"
}

# ---------------------------------------------------------------------------------------------------
# promtool: tools/e2e/test/metrics.spec.ts runs `promtool check rules` and `promtool test rules` on the
# chart's alert rules. Debian ships it in the prometheus package; the server it also installs is not
# started here (nothing in the suite needs it).

ensure_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    say "promtool: present"
    return
  fi
  # Without recommends (node-exporter), and the server the package enables is stopped again.
  apt_install promtool --no-install-recommends prometheus
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
  command -v promtool >/dev/null 2>&1 || die "promtool: the prometheus package installed no promtool"
  say "promtool: installed"
}

# pgbouncer: packages/events/test/pgbouncer.spec.ts runs the relay through a PgBouncer it starts itself,
# in session and transaction mode (docs/dependencies.md, PgBouncer).

ensure_pgbouncer() {
  if [[ -x /usr/sbin/pgbouncer || -x /usr/bin/pgbouncer ]]; then
    say "pgbouncer: present"
    return
  fi
  apt_install pgbouncer pgbouncer
  say "pgbouncer: installed"
}

ensure_postgres
ensure_redis
ensure_nats
ensure_softhsm
ensure_moto
ensure_cli_tools
ensure_promtool
ensure_pgbouncer
