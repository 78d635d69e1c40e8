#!/bin/sh
# End-to-end run of the Go reference client against the real console binary:
# a private redis-server, a fresh PostgreSQL database, an activity imported and preheated,
# two client runs (same --seed: the run nonce keeps their request ids apart), each followed by
# `conform` (when the binary has it), `compensation resolve --all` and `fix --yes`; then the
# checks: every product `ok`, no alert, nothing oversold, every buyer within the per-user limit,
# Redis holdings equal to the live orders, `conform` again.
#
# Environment (all optional):
#   CONSOLE   the console binary            (default: <repo>/target/debug/seckill-console)
#   PG        PostgreSQL server URL, no db  (default: postgres://postgres@127.0.0.1:5432)
#   PORT      redis-server port             (default: the first free one from 7461; never 6379)
#   BUYERS, CONCURRENCY, SEED               (default: 300, 16, 7)
#   CONFORM   yes (default: run `conform` when the binary has it) or no
# Needs: redis-server, psql, python3 (to read the console's JSON), the client built as
# ./order_service (see README.md). Exit 0 when every check holds.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CONSOLE=${CONSOLE:-$REPO/target/debug/seckill-console}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
BUYERS=${BUYERS:-300}
CONCURRENCY=${CONCURRENCY:-16}
SEED=${SEED:-7}
CLIENT=$HERE/order_service
[ -x "$CLIENT" ] || { echo "build the client first (README.md)" >&2; exit 2; }

# The first port from 7461 nothing answers on (never 6379: shared data).
if [ -z "${PORT:-}" ]; then
    PORT=7461
    while redis-cli -p "$PORT" ping >/dev/null 2>&1; do PORT=$((PORT + 1)); done
fi
[ "$PORT" != 6379 ] || { echo "refusing port 6379 (shared data)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/goclient-e2e.XXXXXX)
DB=goclient_$(basename "$WORK" | tr -dc 'a-zA-Z0-9' | tr 'A-Z' 'a-z')
cleanup() {
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

redis-server --port "$PORT" --save '' --appendonly no --daemonize yes --dir "$WORK" >/dev/null
psql -q "$PG/postgres" -c "CREATE DATABASE $DB"
C="$CONSOLE --redis redis://127.0.0.1:$PORT --db $PG/$DB"

# The window includes now (deduct.lua answers -8 outside it).
START=$(date -u -d '-10 min' +%Y-%m-%dT%H:%M:%SZ)
END=$(date -u -d '+3 hour' +%Y-%m-%dT%H:%M:%SZ)
cat >"$WORK/activity.toml" <<EOF
[activity]
id = "go-sale"
name = "Go reference client"
starts_at = "$START"
ends_at = "$END"

[[products]]
id = "p1"
stock = 40
per_user_limit = 2

[[products]]
id = "p2"
stock = 25
per_user_limit = 1

[[products]]
id = "p3"
stock = 500
per_user_limit = 3
EOF
$C migrate >/dev/null
$C activity import "$WORK/activity.toml"
$C preheat go-sale >/dev/null

# conform (issue 51), when the binary has it (CONFORM=no skips it).
CONFORM=${CONFORM:-yes}
if [ "$CONFORM" = yes ] && ! $C conform --help >/dev/null 2>&1; then CONFORM=no; fi

# Two sales, each followed by the console's repair: the second sells again what the first
# run's repair returned (new request ids; same --seed, the run nonce keeps them apart).
for run in 1 2; do
    "$CLIENT" --redis "127.0.0.1:$PORT" --db "$PG/$DB?sslmode=disable" --activity go-sale \
        --products p1,p2,p3 --buyers "$BUYERS" --concurrency "$CONCURRENCY" --seed "$SEED" \
        --fault-timeout 0.1 --fault-crash 0.05
    sleep 2 # past the 1 s grace window: crashes are orphans now, not in flight
    # The client's own writes break no rule, before the console repairs anything (orphans
    # and pending compensation entries are no broken rule).
    [ $CONFORM = no ] || $C --grace-secs 1 conform go-sale >"$WORK/conform.txt" ||
        { cat "$WORK/conform.txt"; exit 1; }
    $C --grace-secs 1 status go-sale --json >"$WORK/before.json"
    $C --grace-secs 1 compensation resolve go-sale --all >/dev/null
    $C --grace-secs 1 fix go-sale --yes >/dev/null
done
$C --grace-secs 1 status go-sale --json >"$WORK/after.json"
# ... and still none after resolve and fix.
[ $CONFORM = no ] || $C --grace-secs 1 conform go-sale >"$WORK/conform.txt" ||
    { cat "$WORK/conform.txt"; exit 1; }
[ $CONFORM = no ] || tail -1 "$WORK/conform.txt"

# The live orders' units per product and buyer (pending_payment and paid hold stock).
psql -qAt -F ' ' "$PG/$DB" -c "SELECT o.product_id, o.user_id, SUM(o.quantity), p.per_user_limit
    FROM seckill_order o JOIN seckill_product p USING (activity_id, product_id)
    WHERE o.activity_id = 'go-sale' AND o.status IN ('pending_payment', 'paid')
    GROUP BY o.product_id, o.user_id, p.per_user_limit" >"$WORK/held.txt"
for p in p1 p2 p3; do
    redis-cli -p "$PORT" hgetall "seckill:{go-sale:$p}:buyers" | paste - - |
        sed "s/^/$p /" >>"$WORK/redis_held.txt"
done

python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
before = json.load(open(f"{work}/before.json"))
after = json.load(open(f"{work}/after.json"))
bad = []
for p in before["products"]:
    print(f"before: {p['product']} state={p['state']} drift={p['drift']} orphaned={p['orphaned']}")
for p in after["products"]:
    print(f"after:  {p['product']} state={p['state']} initial={p['initial']} redis={p['redis_remaining']} sold={p['db_sold']}")
    if p["state"] != "ok":
        bad.append(f"{p['product']} is {p['state']}")
    if p["db_sold"] > p["initial"] or p["redis_remaining"] < 0:
        bad.append(f"{p['product']} oversold")
    if p["redis_remaining"] != p["initial"] - p["db_sold"]:
        bad.append(f"{p['product']}: Redis {p['redis_remaining']} != {p['initial']} - {p['db_sold']}")
if after["alerts"]:
    bad.append(f"alerts left: {[a['kind'] for a in after['alerts']]}")
if after["compensation"]["pending"]:
    bad.append("compensation entries still pending")
held = {}
for line in open(f"{work}/held.txt"):
    prod, user, units, limit = line.split()
    held[(prod, user)] = int(units)
    if int(units) > int(limit):
        bad.append(f"{user} holds {units} of {prod}, limit {limit}")
redis_held = {}
for line in open(f"{work}/redis_held.txt"):
    parts = line.split()
    if len(parts) == 3:  # the placeholder field "" has no user
        redis_held[(parts[0], parts[1])] = int(parts[2])
if redis_held != held:
    bad.append(f"Redis holdings differ from the live orders: {set(redis_held.items()) ^ set(held.items())}")
print(f"buyers holding stock: {len(held)}, max per buyer: {max(held.values(), default=0)}")
if bad:
    print("FAILED:", *bad, sep="\n  ")
    sys.exit(1)
print("balanced: every product ok, nothing oversold, every buyer within the limit")
EOF

