#!/usr/bin/env bash
# What one PostgreSQL server sustains at saturation, for README "Scaling past one PostgreSQL": WAL
# MB/s writing WAL alone, row writes/s (and their WAL) in the shape of the project's hot rows,
# commits/s, and with a standby, how fast its one startup process replays that WAL. Run it against
# a server of its own (WAL is counted for the whole server; it needs a superuser for CHECKPOINT):
#
#   CAPACITY_URL=postgresql://postgres@127.0.0.1:55433/postgres \
#   [CAPACITY_STANDBY_URL=postgresql://postgres@127.0.0.1:55434/postgres] [CAPACITY_SECONDS=30] \
#   tools/bench/capacity/capacity.sh [name:clients ...]     (default: wal:4 rows:4 rows:8 commits:16)
#
# With a standby, its replay is paused during the workloads, then resumed and timed with the primary idle.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${CAPACITY_URL:?CAPACITY_URL: a server of its own, as a superuser}
standby=${CAPACITY_STANDBY_URL:-}
seconds=${CAPACITY_SECONDS:-30}
scratch=${url%/*}/capacity_scratch
q() { psql "$1" -Atqc "$2"; }

q "$url" 'DROP DATABASE IF EXISTS capacity_scratch'
q "$url" 'CREATE DATABASE capacity_scratch'
psql "$scratch" -qf "$here/schema.sql"
[ -n "$standby" ] && q "$standby" 'SELECT pg_wal_replay_pause()' >/dev/null
first=$(q "$url" 'SELECT pg_current_wal_lsn()')
written() { q "$scratch" 'SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables'; }

for workload in "${@:-wal:4 rows:4 rows:8 commits:16}"; do
  for one in $workload; do
    name=${one%%:*} clients=${one##*:}
    q "$scratch" CHECKPOINT
    rows0=$(written) lsn0=$(q "$url" 'SELECT pg_current_wal_lsn()')
    out=$(pgbench -n -f "$here/$name.sql" -c "$clients" -j 2 -T "$seconds" "$scratch" 2>&1)
    lsn1=$(q "$url" 'SELECT pg_current_wal_lsn()')
    sleep 11 # the backends' row counters reach pg_stat within 10 s of their going idle
    rows=$(( $(written) - rows0 ))
    wal=$(q "$url" "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    awk -v n="$name" -v c="$clients" -v t="$tps" -v r="$rows" -v w="$wal" -v s="$seconds" 'BEGIN {
      printf "%s, %d clients: %.0f transactions/s, %.0f row writes/s, %.1f MB/s of WAL, %.0f bytes of WAL a row\n", n, c, t, r / s, w / s / 1e6, w / (r ? r : 1) }'
  done
done

if [ -n "$standby" ]; then
  last=$(q "$url" 'SELECT pg_current_wal_lsn()')
  started=$(date +%s.%N)
  q "$standby" 'SELECT pg_wal_replay_resume()' >/dev/null
  until [ "$(q "$standby" "SELECT pg_last_wal_replay_lsn() >= '$last'")" = t ]; do sleep 0.2; done
  awk -v w="$(q "$url" "SELECT pg_wal_lsn_diff('$last', '$first')")" -v s="$(echo "$(date +%s.%N) - $started" | bc)" 'BEGIN {
    printf "standby replay: %.0f MB in %.1f s, %.1f MB/s (one startup process, the primary idle)\n", w / 1e6, s, w / s / 1e6 }'
fi
q "$url" 'DROP DATABASE capacity_scratch'
