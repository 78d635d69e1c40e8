#!/usr/bin/env python3
"""A reference order service for seckill-console's app-server contract (issue 51).

It sells with lua/deduct.lua, writes each sale's order and outbox row in one transaction,
records unknown outcomes as compensation rows, pays, expires and cancels orders (restoring
their units with lua/restore.lua), exactly as docs/app-servers.md says. Comments marked
`guide:` name the rule a step follows. `--break RULE` turns it into a deliberately wrong client
that breaks that one rule of `seckill-console conform` for a few requests.

Needs redis-py (`pip install redis`); SQLite through the standard library; PostgreSQL only when
psycopg (3) or psycopg2 is installed. Prints one JSON summary line on stdout.
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import redis

LUA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "lua")
TOPIC = "seckill.order.created"
RETRIES = 3  # guide: retry an unknown outcome with the same request id, bounded, with backoff
BREAK_COUNT = 2  # requests each --break mode spoils
RULES = ["request-unique", "order-after-success", "order-copies-deduction",
         "no-order-after-return", "dead-before-return", "sold-in-window", "updated-at-moves",
         "timestamps", "outbox", "compensation"]


class Lost(Exception):
    """The outcome of a Redis call is unknown (reply lost, connection dropped after sending)."""


class Rejected(Exception):
    """The transaction was rolled back before its commit: nothing of it was written."""


class Unknown(Exception):
    """The commit failed: the rows may or may not be there."""


def utcnow():
    return datetime.now(timezone.utc)


def after(t):
    """Now, strictly later than t (guide: every status change moves updated_at later)."""
    while True:
        now = utcnow()
        if now > t:
            return now
        time.sleep(0.001)


class Db:
    """SQLite (sqlite:PATH) or PostgreSQL (postgres://...), one connection per thread."""

    def __init__(self, url):
        self.local = threading.local()
        if url.startswith("sqlite:"):
            import sqlite3
            path = url[len("sqlite:"):].split("?")[0]
            if path.startswith("//"):
                path = path[2:]
            self.kind, self.driver, self.target = "sqlite", sqlite3, path
        elif url.startswith(("postgres://", "postgresql://")):
            try:
                import psycopg as driver
            except ImportError:
                try:
                    import psycopg2 as driver
                except ImportError:
                    sys.exit("order_service: PostgreSQL needs psycopg or psycopg2 (pip install psycopg[binary])")
            self.kind, self.driver, self.target = "postgres", driver, url
        else:
            sys.exit(f"order_service: unsupported --db {url!r} (sqlite:PATH or postgres://...)")

    def conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            if self.kind == "sqlite":
                # The default mode: a transaction begins at the first INSERT/UPDATE and ends
                # with commit(); a busy database is waited for, not failed.
                c = self.driver.connect(self.target, timeout=30, check_same_thread=False)
            else:
                c = self.driver.connect(self.target)
            self.local.conn = c
        return c

    def stamp(self, t):
        # guide: SQLite stamps are RFC 3339 text with a `T` and `+00:00` (never `Z`, never a
        # space): SQLite compares them as text. PostgreSQL takes the datetime (TIMESTAMPTZ).
        if self.kind == "sqlite":
            return t.isoformat(timespec="microseconds")
        return t

    def unstamp(self, v):
        return v if isinstance(v, datetime) else datetime.fromisoformat(v)

    def run(self, c, sql, args):
        cur = c.cursor()
        cur.execute(sql if self.kind == "sqlite" else sql.replace("?", "%s"), args)
        return cur.rowcount

    def write(self, statements):
        """Runs (sql, args) pairs in one transaction; returns their row counts."""
        c = self.conn()
        try:
            counts = [self.run(c, sql, args) for sql, args in statements]
        except Exception as e:
            c.rollback()
            raise Rejected(e) from e
        try:
            c.commit()
        except Exception as e:
            raise Unknown(e) from e
        return counts

    def query(self, sql, args):
        c = self.conn()
        cur = c.cursor()
        cur.execute(sql if self.kind == "sqlite" else sql.replace("?", "%s"), args)
        rows = cur.fetchall()
        c.commit()
        return rows

    def unique_violation(self, e):
        e = e.__cause__ or e
        if self.kind == "sqlite":
            return isinstance(e, self.driver.IntegrityError) and "UNIQUE" in str(e)
        return getattr(e, "sqlstate", getattr(e, "pgcode", None)) == "23505"


class Service:
    def __init__(self, a):
        self.a = a
        self.r = redis.Redis.from_url(a.redis, decode_responses=True, socket_timeout=5)
        self.db = Db(a.db)
        self.scripts = {}
        for name in ("deduct", "restore"):
            with open(os.path.join(LUA_DIR, name + ".lua")) as f:
                body = f.read()
            self.scripts[name] = (body, self.r.script_load(body))
        self.nonce = uuid.uuid4().hex[:12]  # guide: request ids never reused, across runs too
        self.lock = threading.Lock()
        self.stats = {"requests": 0, "replies": {}, "unknown": 0, "errors": 0,
                      "orders_written": 0, "order_rejected": 0, "order_commit_unknown": 0,
                      "paid": 0, "expired": 0, "cancelled": 0, "restored_units": 0,
                      "restore_replies": {}, "compensation_rows": 0, "retries": 0,
                      "gave_up": 0, "crashes": 0}
        self.orders = []    # dicts of the orders this run wrote: rid, product, user, qty, at, status
        self.refused = []   # (reply, rid, product, user, qty) of requests answered below zero
        self.broken = []    # {"request_id", "product", "detail"} of what --break spoiled
        self.taken = {}

    # -- bookkeeping -------------------------------------------------------------------------
    def count(self, key, n=1, sub=None):
        with self.lock:
            if sub is None:
                self.stats[key] += n
            else:
                self.stats[key][sub] = self.stats[key].get(sub, 0) + n

    def take(self, rule):
        """The index of this spoiled request (0, 1, ...) when --break RULE still has one."""
        if self.a.break_rule != rule:
            return None
        with self.lock:
            n = self.taken.get(rule, 0)
            if n >= BREAK_COUNT:
                return None
            self.taken[rule] = n + 1
            return n

    def spoil(self, rid, product, detail):
        with self.lock:
            self.broken.append({"request_id": rid, "product": product, "detail": detail})

    # -- Redis ---------------------------------------------------------------------------------
    def keys(self, product):
        # guide: the five keys of one product share the hash tag {A:P}
        base = f"{self.a.prefix}:{{{self.a.activity}:{product}}}"
        return [f"{base}:{k}" for k in ("stock", "meta", "buyers", "ledger", "events")]

    def script(self, name, product, args, lose=False):
        """EVALSHA (NOSCRIPT -> EVAL once). A reply lost in transit raises Lost."""
        body, sha = self.scripts[name]
        keys = self.keys(product)
        try:
            try:
                reply = self.r.evalsha(sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                reply = self.r.eval(body, len(keys), *keys, *args)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            raise Lost(str(e)) from e
        if lose:
            # Injected fault: Redis ran the script, its reply never reached us.
            raise Lost("injected timeout")
        return int(reply)

    def restore(self, rid, product):
        # guide: restore only after the order is surely dead or surely absent
        try:
            got = self.script("restore", product, [rid])
        except (Lost, redis.exceptions.ResponseError):
            got = "unknown"  # the console returns it later (orphan) or it was returned already
        self.count("restore_replies", sub=str(got))
        if isinstance(got, int) and got > 0:
            self.count("restored_units", got)
        return got

    # -- the database rows -----------------------------------------------------------------------
    def order_rows(self, rid, product, user, qty, at, topic=TOPIC, outbox=True, queued=None):
        order_id = "o-" + rid
        s = self.db.stamp(at)
        rows = [("INSERT INTO seckill_order (order_id, request_id, activity_id, product_id, "
                 "user_id, quantity, status, created_at, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, 'pending_payment', ?, ?)",
                 (order_id, rid, self.a.activity, product, user, qty, s, s))]
        if outbox:
            # guide: the outbox row in the order's transaction; payload keys in this order
            payload = json.dumps({"activity_id": self.a.activity, "order_id": order_id,
                                  "product_id": product, "quantity": qty, "request_id": rid,
                                  "user_id": user}, separators=(",", ":"))
            rows.append(("INSERT INTO seckill_outbox (order_id, activity_id, topic, payload, "
                         "status, attempts, created_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)",
                         (order_id, self.a.activity, topic, payload,
                          self.db.stamp(queued or at))))
        return rows

    def write_order(self, rid, product, user, qty, flagged=False):
        """guide: after a reply >= 0, the order (pending_payment, copying the deduction's
        product, user and quantity, created_at = updated_at = now) and its outbox row, in one
        transaction."""
        o = {"rid": rid, "product": product, "user": user, "qty": qty, "at": utcnow(),
             "status": "pending_payment", "flagged": flagged}
        rows = self.order_rows(rid, product, user, qty, o["at"])
        if self.a.break_rule:
            rows = self.spoil_order(o) or rows
        try:
            self.db.write(rows)
        except Rejected as e:
            if self.db.unique_violation(e):
                return True  # guide: a UNIQUE violation on request_id: a retry already wrote it
            # guide: the insert failed for sure (rolled back): give the units back
            self.count("order_rejected")
            self.restore(rid, product)
            return False
        except Unknown:
            # guide: commit outcome unknown: do nothing; the console's fix returns an orphan
            self.count("order_commit_unknown")
            return False
        self.count("orders_written")
        with self.lock:
            self.orders.append(o)
        return True

    def spoil_order(self, o):
        """--break modes that spoil the order as it is written: the rows to write instead
        (None: not this one). The order is then kept out of payment and expiry."""
        rid, product, now = o["rid"], o["product"], o["at"]
        topic, outbox, stamp, before = TOPIC, True, None, len(self.broken)
        n = self.take("order-copies-deduction")
        if n is not None:
            # BROKEN on purpose: the order does not copy its deduction
            if n == 0:
                o["qty"] += 1
            else:
                o["user"] += "-other"
            self.spoil(rid, product, "order quantity+1" if n == 0 else "order of another user")
        n = self.take("sold-in-window")
        if n is not None:
            # BROKEN on purpose: stamped 3 hours before the sale window opened
            starts = self.db.query("SELECT starts_at FROM seckill_activity WHERE activity_id = ?",
                                   (self.a.activity,))[0][0]
            o["at"] = self.db.unstamp(starts).astimezone(timezone.utc) - timedelta(hours=3)
            self.spoil(rid, product, "order created 3 h before the window")
        n = self.take("timestamps")
        if n is not None:
            # BROKEN on purpose: not the documented spelling (order and outbox row)
            stamp = (now.isoformat(timespec="microseconds").replace("+00:00", "Z") if n == 0
                     else now.strftime("%Y-%m-%d %H:%M:%S"))
            self.spoil(rid, product, "stamp " + stamp)
        n = self.take("outbox")
        if n is not None:
            # BROKEN on purpose: no outbox row, or the wrong topic
            outbox, topic = n != 0, "orders"
            self.spoil(rid, product, "no outbox row" if n == 0 else "outbox topic 'orders'")
        if len(self.broken) == before:
            return None
        o["flagged"] = True
        rows = self.order_rows(rid, product, o["user"], o["qty"], o["at"], topic, outbox,
                               queued=now)
        if stamp is not None:
            rows = [(sql, tuple(stamp if v == self.db.stamp(now) else v for v in args))
                    for sql, args in rows]
        return rows

    def compensate(self, rid, product, user, qty, reason):
        # guide: an unknown outcome is recorded first, insert-or-ignore on request_id (a second
        # timeout of the same request id writes no second row)
        try:
            n = self.db.write([("INSERT INTO seckill_compensation (request_id, activity_id, "
                                "product_id, user_id, quantity, status, reason, created_at) "
                                "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) "
                                "ON CONFLICT (request_id) DO NOTHING",
                                (rid, self.a.activity, product, user, qty, reason,
                                 self.db.stamp(utcnow())))])[0]
        except (Rejected, Unknown):
            n = 0
            self.count("errors")  # the retries go on; the console still sees the deduction
        self.count("compensation_rows", max(n, 0))

    def set_status(self, o, status, olds=("pending_payment",), moves=True):
        """guide: UPDATE ... WHERE request_id=? AND status=<old>: True when it changed the row."""
        now = after(o["at"])
        marks = ",".join("?" * len(olds))
        if moves:
            sql, args = (f"UPDATE seckill_order SET status = ?, updated_at = ? "
                         f"WHERE request_id = ? AND status IN ({marks})",
                         (status, self.db.stamp(now), o["rid"], *olds))
        else:  # BROKEN on purpose (updated-at-moves)
            sql, args = (f"UPDATE seckill_order SET status = ? "
                         f"WHERE request_id = ? AND status IN ({marks})", (status, o["rid"], *olds))
        try:
            changed = self.db.write([(sql, args)])[0] == 1
        except (Rejected, Unknown):
            return False  # not surely changed: never restore
        if changed:
            o["at"], o["status"] = now, status
        return changed

    # -- a purchase -----------------------------------------------------------------------------
    def buy(self, k, n, product, qty):
        a = self.a
        rng = random.Random(f"{a.seed}:{k}:{n}")  # the same draws whatever the threads do
        rid, user = f"r-{self.nonce}-{k}-{n}", f"u{k}"
        self.count("requests")
        reply, tries = None, 0
        while True:
            lose = rng.random() < a.fault_timeout
            try:
                reply = self.script("deduct", product, [rid, user, qty], lose=lose)
                break
            except Lost as e:
                # guide: unknown outcome: the compensation row FIRST, then retry the same id
                self.compensate(rid, product, user, qty,
                                "timeout" if "injected" in str(e) else "connection")
                if (tries == 0 and rng.random() < 0.5) or tries >= RETRIES:
                    self.count("gave_up")  # guide: still unknown: compensation resolve decides
                    self.count("unknown")
                    return
                tries += 1
                self.count("retries")
                time.sleep(0.01 * 2 ** tries)
            except redis.exceptions.ResponseError:
                # An error reply: a corrupt value, nothing written. Tell the buyer "not now".
                self.count("errors")
                return
        self.count("replies", sub="sold" if reply >= 0 else str(reply))
        if reply < 0:
            # guide: -1/-2/-3/-5/-8 tell the buyer, -7 the purchase failed, -4 a bug: no order
            with self.lock:
                self.refused.append((reply, rid, product, user, qty))
            return
        if rng.random() < a.fault_crash:
            # Injected crash between the deduction and the order: nothing recorded. The
            # console reports the deduction orphaned after its grace window; fix returns it.
            self.count("crashes")
            if a.crash_exit:
                os._exit(137)
            return
        if self.take("no-order-after-return") is not None:
            # BROKEN on purpose: the order "failed", its units went back, the retry answers -7,
            # and the order is written anyway.
            self.restore(rid, product)
            again = self.script("deduct", product, [rid, user, qty])
            self.write_order(rid, product, user, qty, flagged=True)
            self.spoil(rid, product, f"order written after the return (retry answered {again})")
            return
        self.write_order(rid, product, user, qty)

    # -- after the sale ---------------------------------------------------------------------
    def settle(self, o, i):
        """Pay, expire or cancel one order (guide: mark dead FIRST, restore AFTER the commit)."""
        a, rng = self.a, random.Random(f"{self.a.seed}:settle:{i}")
        r = rng.random()
        if r < a.pay:
            if self.set_status(o, "paid"):
                self.count("paid")
                if rng.random() < a.cancel and self.set_status(o, "cancelled",
                                                             ("pending_payment", "paid")):
                    self.count("cancelled")  # a refund: cancel takes a paid order too
                    self.restore(o["rid"], o["product"])
        elif r < a.pay + a.expire:
            if self.set_status(o, "expired"):
                self.count("expired")
                self.restore(o["rid"], o["product"])
        elif r < a.pay + a.expire + a.cancel:
            if self.set_status(o, "cancelled"):
                self.count("cancelled")
                self.restore(o["rid"], o["product"])

    def break_after_sale(self):
        """The --break modes that spoil finished sales (the orders they touch are kept apart)."""
        a, products = self.a, self.a.products
        pending = [o for o in self.orders if not o["flagged"]]
        rule = a.break_rule
        if rule == "request-unique":
            # BROKEN on purpose: the request id of a sale deducted again on another product
            for o in pending:
                if self.take(rule) is None:
                    break
                other = products[(products.index(o["product"]) + 1) % len(products)]
                got = self.script("deduct", other, [o["rid"], o["user"], o["qty"]])
                o["flagged"] = True
                if got >= 0:
                    self.spoil(o["rid"], other, f"request id of {o['product']} deducted on {other}")
                else:
                    self.taken[rule] -= 1  # refused there: try the next one
        elif rule == "order-after-success":
            # BROKEN on purpose: orders for requests refused (or never sent to Redis)
            sold_out = [r[1:] for r in self.refused if r[0] == -2]
            never = [(f"r-{self.nonce}-never-{i}", products[0], "u0", 1) for i in range(BREAK_COUNT)]
            for rid, product, user, qty in (sold_out + never)[:BREAK_COUNT]:
                self.take(rule)
                self.db.write(self.order_rows(rid, product, user, qty, utcnow()))
                self.count("orders_written")
                self.spoil(rid, product, "order without a successful deduction")
        elif rule == "dead-before-return":
            # BROKEN on purpose: restore first, mark the order dead 3 s later (beyond conform's
            # clock slack: --clock-slack-ms, 2000 by default)
            spoiled = []
            for o in pending:
                if self.take(rule) is None:
                    break
                o["flagged"] = True
                self.restore(o["rid"], o["product"])
                spoiled.append(o)
            time.sleep(3)
            for o in spoiled:
                if self.set_status(o, "expired"):
                    self.count("expired")
                self.spoil(o["rid"], o["product"], "restored 3 s before the order expired")
        elif rule == "updated-at-moves":
            for o in pending[:BREAK_COUNT]:
                self.take(rule)
                o["flagged"] = True
                if self.set_status(o, "paid", moves=False):
                    self.count("paid")
                self.spoil(o["rid"], o["product"], "paid without moving updated_at")
        elif rule == "compensation":
            # BROKEN on purpose: a compensation row that does not copy its deduction
            for n, o in enumerate(pending[:BREAK_COUNT]):
                self.take(rule)
                o["flagged"] = True
                qty, product = o["qty"], o["product"]
                if n == 0:
                    qty = 0
                elif len(products) > 1:
                    product = products[(products.index(product) + 1) % len(products)]
                else:
                    qty += 1
                self.compensate(o["rid"], product, o["user"], qty, "timeout")
                self.spoil(o["rid"], o["product"], f"compensation row {product} x{qty}")

    def run(self):
        a = self.a
        plan = random.Random(a.seed)
        purchases = []
        for k in range(a.buyers):
            # Each buyer wants one product; most click once, some twice more (each purchase a
            # new request id: the per-user limit then answers -3).
            product = plan.choice(a.products)
            for n in range(3 if plan.random() < 0.2 else 1):
                purchases.append((k, n, product, 2 if plan.random() < 0.15 else 1))
        with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
            list(pool.map(lambda p: self.buy(*p), purchases))
        self.break_after_sale()
        with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
            live = [o for o in self.orders if not o["flagged"]]
            list(pool.map(lambda io: self.settle(io[1], io[0]), enumerate(live)))
        out = dict(self.stats, activity=a.activity, run=self.nonce, db=self.db.kind)
        if a.break_rule:
            out["break"] = {"rule": a.break_rule, "spoiled": self.broken}
        print(json.dumps(out, sort_keys=True))
        if a.break_rule and not self.broken:
            print(f"order_service: --break {a.break_rule} found nothing to spoil", file=sys.stderr)
            return 3
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redis", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--activity", required=True)
    p.add_argument("--products", required=True, type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--buyers", type=int, required=True)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="seckill")
    p.add_argument("--fault-timeout", type=float, default=0.0)
    p.add_argument("--fault-crash", type=float, default=0.0)
    p.add_argument("--crash-exit", action="store_true", help="exit 137 at the first crash")
    p.add_argument("--pay", type=float, default=0.6)
    p.add_argument("--expire", type=float, default=0.2)
    p.add_argument("--cancel", type=float, default=0.05)
    p.add_argument("--break", dest="break_rule", choices=RULES)
    a = p.parse_args()
    if a.break_rule in ("request-unique",) and len(a.products) < 2:
        p.error("--break request-unique needs two products")
    if a.break_rule == "timestamps" and not a.db.startswith("sqlite:"):
        p.error("--break timestamps is a SQLite rule")
    return Service(a).run()


if __name__ == "__main__":
    sys.exit(main())
