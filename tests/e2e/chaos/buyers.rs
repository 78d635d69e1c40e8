//! What buyers and the shop's app servers do: deductions and retries, orders that land late
//! (or never), payments, expiries and their returns, compensation entries, time passing.

use super::steps::Rng;
use super::world::{ACTOR, Deduction, Evidence, Order, Request, World, cmd, pname};
use seckill_console::db::Arg;
use seckill_console::db::compensation::NewCompensation;
use seckill_console::ops::compensation::{Which, resolve};
use seckill_console::redis::stock::{Deducted, deduct, restore};
use std::time::{Duration, Instant};

impl World {
    pub async fn deduct_new(&mut self, p: usize, user: usize, units: i64) {
        self.next += 1;
        let rid = format!("{}-r{}", self.activity, self.next);
        let r = deduct(
            &self.store,
            &self.pkeys(p),
            &rid,
            &format!("u{user}"),
            &units.to_string(),
        )
        .await;
        self.say(format!(
            "   deduct {rid} {} u{user} x{units} -> {r:?}",
            pname(p)
        ));
        if let Ok(Deducted::Remaining(_)) = r {
            self.limit_check(p, user, units, None);
            self.deds.push(Deduction {
                rid,
                p,
                user,
                units,
                at: Instant::now(),
                abandoned: false,
                stale: false,
                order: None,
                ev: Evidence::ALL,
            });
        } else {
            self.failed.push(Request {
                rid,
                p,
                user,
                units,
            });
        }
    }

    fn pending_idx(&self) -> Vec<usize> {
        (0..self.deds.len())
            .filter(|&i| self.deds[i].pending())
            .collect()
    }

    pub async fn retry(&mut self, pick: u32) {
        let pending = self.pending_idx();
        let n = pending.len() + self.failed.len();
        if n == 0 {
            return;
        }
        let k = pick as usize % n;
        if k < pending.len() {
            let i = pending[k];
            let (rid, p, user, units) = {
                let d = &self.deds[i];
                (d.rid.clone(), d.p, d.user, d.units)
            };
            let keys = self.pkeys(p);
            let known = matches!(
                cmd(
                    &self.store,
                    &[b"HGET", keys.ledger.as_bytes(), rid.as_bytes()]
                )
                .await,
                Ok(redis::Value::BulkString(_))
            );
            let r = deduct(
                &self.store,
                &keys,
                &rid,
                &format!("u{user}"),
                &units.to_string(),
            )
            .await;
            self.say(format!(
                "   retry {rid} (pending, ledger entry {known}) -> {r:?}"
            ));
            if matches!(r, Ok(Deducted::Remaining(_))) && !known {
                // Its first deduction was lost: this one is new, and Redis knows it fully.
                self.limit_check(p, user, units, Some(&rid));
                let d = &mut self.deds[i];
                d.at = Instant::now();
                d.ev = Evidence::ALL;
                d.stale = false;
            }
        } else {
            let req = self.failed.remove(k - pending.len());
            let r = deduct(
                &self.store,
                &self.pkeys(req.p),
                &req.rid,
                &format!("u{}", req.user),
                &req.units.to_string(),
            )
            .await;
            self.say(format!("   retry {} (refused before) -> {r:?}", req.rid));
            if let Ok(Deducted::Remaining(_)) = r {
                self.limit_check(req.p, req.user, req.units, None);
                self.deds.push(Deduction {
                    rid: req.rid,
                    p: req.p,
                    user: req.user,
                    units: req.units,
                    at: Instant::now(),
                    abandoned: false,
                    stale: false,
                    order: None,
                    ev: Evidence::ALL,
                });
            } else {
                self.failed.push(req);
            }
        }
    }

    /// The database clock now, `late_ms` back (an order committed late carries the stamp of
    /// its transaction's start).
    fn db_now(&self, late_ms: u32) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() - chrono::Duration::milliseconds(self.behind_ms + i64::from(late_ms))
    }

    pub async fn land_idx(&mut self, i: usize, late_ms: u32) {
        let at = self.db_now(late_ms);
        let d = self.deds[i].clone();
        let mut tx = self.db.begin().await.expect("begin");
        tx.execute(
            "INSERT INTO seckill_order (order_id, request_id, activity_id, product_id, user_id, quantity, status, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, 'pending_payment', ?, ?)",
            &[
                format!("o-{}", d.rid).into(),
                d.rid.as_str().into(),
                self.activity.as_str().into(),
                pname(d.p).into(),
                format!("u{}", d.user).into(),
                Arg::Int(d.units),
                Arg::Time(at),
                Arg::Time(at),
            ],
        )
        .await
        .expect("order");
        tx.execute(
            "INSERT INTO seckill_outbox (order_id, activity_id, topic, payload, status, attempts, created_at) \
             VALUES (?, ?, 'seckill.order.created', '{}', 'pending', 0, ?)",
            &[
                format!("o-{}", d.rid).into(),
                self.activity.as_str().into(),
                Arg::Time(at),
            ],
        )
        .await
        .expect("outbox");
        tx.commit().await.expect("commit the order");
        let traced = d.traced();
        if !traced {
            self.fx.untraced_landed[d.p] += d.units;
        }
        self.deds[i].order = Some(Order::Unpaid);
        self.say(format!(
            "   order {} lands ({} ms late{})",
            d.rid,
            late_ms,
            if traced { "" } else { ", untraced" }
        ));
    }

    pub async fn land(&mut self, pick: u32, late_ms: u32) {
        let pending = self.pending_idx();
        if pending.is_empty() {
            return;
        }
        let i = pending[pick as usize % pending.len()];
        self.land_idx(i, late_ms).await;
    }

    pub fn abandon(&mut self, pick: u32) {
        let pending = self.pending_idx();
        if pending.is_empty() {
            return;
        }
        let i = pending[pick as usize % pending.len()];
        self.deds[i].abandoned = true;
        let rid = self.deds[i].rid.clone();
        self.say(format!("   {rid} abandoned: its order never comes"));
    }

    pub async fn pay(&mut self, pick: u32) {
        let unpaid: Vec<usize> = (0..self.deds.len())
            .filter(|&i| self.deds[i].order == Some(Order::Unpaid))
            .collect();
        if unpaid.is_empty() {
            return;
        }
        let i = unpaid[pick as usize % unpaid.len()];
        let rid = self.deds[i].rid.clone();
        self.db
            .execute(
                "UPDATE seckill_order SET status = 'paid', updated_at = ? WHERE request_id = ? AND status = 'pending_payment'",
                &[Arg::Time(self.db_now(0)), rid.as_str().into()],
            )
            .await
            .expect("pay");
        self.deds[i].order = Some(Order::Paid);
        self.say(format!("   pay {rid}"));
    }

    pub async fn expire(&mut self, pick: u32) {
        let live: Vec<usize> = (0..self.deds.len())
            .filter(|&i| self.deds[i].live())
            .collect();
        if live.is_empty() {
            return;
        }
        let i = live[pick as usize % live.len()];
        let rid = self.deds[i].rid.clone();
        let status = if self.deds[i].order == Some(Order::Unpaid) {
            "expired"
        } else {
            "cancelled"
        };
        self.db
            .execute(
                &format!(
                    "UPDATE seckill_order SET status = '{status}', updated_at = ? WHERE request_id = ?"
                ),
                &[Arg::Time(self.db_now(0)), rid.as_str().into()],
            )
            .await
            .expect("expire");
        self.deds[i].order = Some(Order::Ended { given_back: false });
        self.say(format!("   {status} {rid}"));
    }

    pub async fn give_back(&mut self, pick: u32) {
        let ended: Vec<usize> = (0..self.deds.len())
            .filter(|&i| self.deds[i].order == Some(Order::Ended { given_back: false }))
            .collect();
        if ended.is_empty() {
            return;
        }
        let i = ended[pick as usize % ended.len()];
        let (rid, p) = (self.deds[i].rid.clone(), self.deds[i].p);
        let r = restore(&self.store, &self.pkeys(p), &rid).await;
        self.deds[i].order = Some(Order::Ended { given_back: true });
        self.say(format!("   restore {rid} -> {r:?}"));
    }

    /// A caller that lost the reply of a request records it; then `compensation resolve`.
    pub async fn compensate(&mut self, pick: u32) {
        let mut open: Vec<Request> = self
            .deds
            .iter()
            .filter(|d| d.order.is_none())
            .map(|d| Request {
                rid: d.rid.clone(),
                p: d.p,
                user: d.user,
                units: d.units,
            })
            .collect();
        open.extend(self.failed.iter().cloned());
        if let Some(req) = open.get(pick as usize % open.len().max(1)) {
            seckill_console::db::compensation::insert(
                &self.db,
                &NewCompensation {
                    request_id: req.rid.clone(),
                    activity_id: self.activity.clone(),
                    product_id: pname(req.p).into(),
                    user_id: format!("u{}", req.user),
                    quantity: req.units,
                    reason: ACTOR.into(),
                },
            )
            .await
            .expect("compensation entry");
            self.say(format!("   compensation entry for {}", req.rid));
        }
        self.resolve().await;
    }

    pub async fn resolve(&mut self) {
        let r = resolve(
            &self.store,
            &self.db,
            &self.keys,
            &self.id,
            &Which::All,
            ACTOR,
            self.grace,
        )
        .await;
        match r {
            Ok(r) => {
                let shown: Vec<String> = r.resolutions.iter().map(|x| format!("{x:?}")).collect();
                self.say(format!("   resolve: {}", shown.join("; ")));
            }
            Err(e) => self.violation(
                "E-console-error",
                format!("compensation resolve failed: {e}"),
            ),
        }
    }

    /// The app servers keep their promise: an order lands within the grace window. Pending
    /// deductions half that old land now.
    pub async fn auto_land(&mut self) {
        let half = self.grace / 2;
        let due: Vec<usize> = (0..self.deds.len())
            .filter(|&i| self.deds[i].pending() && self.deds[i].at.elapsed() >= half)
            .collect();
        for i in due {
            self.say("   (auto: the grace window is half gone)");
            self.land_idx(i, 0).await;
        }
    }

    /// A pending deduction that aged close to the grace window during a slow step may have been
    /// taken for an orphan: the model stops counting on Redis holding it.
    pub fn mark_stale(&mut self) {
        let limit = self.grace.saturating_sub(Duration::from_millis(250));
        let mut shown = Vec::new();
        for d in self.deds.iter_mut() {
            if d.pending() && !d.stale && d.at.elapsed() >= limit {
                d.stale = true;
                shown.push(d.rid.clone());
            }
        }
        for rid in shown {
            self.say(format!(
                "   (slow step: {rid} aged past the grace window's margin)"
            ));
        }
    }

    /// Every pending order lands (or, 30%, is abandoned), then the grace window passes.
    pub async fn wait(&mut self, pick: u32) {
        let mut r = Rng::new(u64::from(pick));
        while let Some(&i) = self.pending_idx().first() {
            if r.chance(70) {
                let late = u32::try_from(r.below(self.grace_ms().min(1000) as u64)).unwrap_or(0);
                self.land_idx(i, late).await;
            } else {
                self.deds[i].abandoned = true;
                let rid = self.deds[i].rid.clone();
                self.say(format!("   {rid} abandoned"));
            }
        }
        self.say(format!("   waiting {} ms", self.grace_ms() + 300));
        tokio::time::sleep(self.grace + Duration::from_millis(300)).await;
    }
}
