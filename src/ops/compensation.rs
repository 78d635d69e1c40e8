//! Resolving the compensation queue: for each pending entry, the ledger and the orders decide
//! whether the deduction was applied, must be returned, or never happened. The queue is walked
//! in pages (an incident can leave a million entries), each page in four steps: read the
//! ledger records (and whether each ledger is whole), read the orders, decide, then return the
//! stock of the deductions that must go back and close the entries with their audit rows.

use super::guard::{Write, phase_allows};
use crate::db::audit::AuditEntry;
use crate::db::compensation::{self, APPLIED, Compensation, NOT_APPLIED, RETURNED, Resolve};
use crate::db::{Db, orders};
use crate::domain::compensation::{OrderSeen, Verdict, decide};
use crate::domain::stock::LedgerEntry;
use crate::domain::{ActivityId, ProductId};
use crate::error::{Error, Result};
use crate::redis::stock::{Restored, restore_many};
use crate::redis::{KeySpace, Keyed, ProductKeys, RedisStore};
use redis::Value;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// What happened to one entry.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Resolution {
    pub request_id: String,
    pub product: String,
    pub quantity: i64,
    pub verdict: Verdict,
    /// The status the entry has now (`pending` when it stays in the queue).
    pub status: String,
    pub detail: String,
}

/// The report of `compensation resolve`.
#[derive(Clone, Debug, Serialize)]
pub struct ResolveReport {
    pub activity: String,
    pub resolutions: Vec<Resolution>,
    pub resolved: usize,
    pub still_pending: usize,
    /// True when a node did not answer: its entries stay pending, named (exit 3).
    #[serde(skip)]
    pub unreachable: bool,
}

/// Which entries to resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Which {
    /// One request id.
    One(String),
    /// Every pending entry.
    All,
    /// The pending entries up to this id: the ones a confirmation counted (entries that arrive
    /// after it are left for the next look).
    UpTo(i64),
}

/// Resolves pending entries. Resolving twice changes nothing: only pending entries are touched
/// and the restore script is idempotent per request id.
pub async fn resolve(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    which: &Which,
    actor: &str,
    grace: Duration,
) -> Result<ResolveReport> {
    super::guard::writable(redis, db, "resolve compensation entries")?;
    let a = crate::db::activity::require(db, activity).await?;
    phase_allows(&a, Write::Resolve)?;
    super::guard::redis_ready(redis, keys, activity, Write::Resolve).await?;
    let mut report = ResolveReport {
        activity: activity.to_string(),
        resolutions: Vec::new(),
        resolved: 0,
        still_pending: 0,
        unreachable: false,
    };
    let page = Page {
        redis,
        db,
        keys,
        activity,
        actor,
        grace,
    };
    match which {
        Which::One(r) => {
            let found = compensation::of_request(db, activity, r).await?;
            if found.is_empty() {
                return Err(Error::bad_input(format!(
                    "request '{r}' has no compensation entry in activity '{activity}': see `seckill-console compensation list {activity}`"
                )));
            }
            page.resolve(&found, &mut report).await?;
        }
        Which::All | Which::UpTo(_) => {
            let upto = match which {
                Which::UpTo(id) => *id,
                _ => i64::MAX,
            };
            let mut after = 0;
            loop {
                let entries = compensation::pending_page(db, activity, after, upto).await?;
                let Some(last) = entries.last() else {
                    break;
                };
                after = last.id;
                let full = entries.len() >= usize::try_from(compensation::PAGE).unwrap_or(0);
                page.resolve(&entries, &mut report).await?;
                if !full {
                    break;
                }
            }
        }
    }
    Ok(report)
}

/// Where one page of entries is resolved.
struct Page<'a> {
    redis: &'a RedisStore,
    db: &'a Db,
    keys: &'a KeySpace,
    activity: &'a ActivityId,
    actor: &'a str,
    grace: Duration,
}

/// What Redis holds for one entry's request.
enum Record {
    Entry(LedgerEntry),
    /// The ledger is whole and has no entry of the request: no unit is recorded for it.
    Absent,
    /// The ledger itself is gone (evicted, a restart): its absence proves nothing.
    LedgerLost,
    Corrupt,
}

impl Page<'_> {
    async fn resolve(&self, entries: &[Compensation], report: &mut ResolveReport) -> Result<()> {
        let (open, closed): (Vec<&Compensation>, Vec<&Compensation>) =
            entries.iter().partition(|e| e.is_pending());
        for e in closed {
            report.resolutions.push(Resolution {
                request_id: e.request_id.clone(),
                product: e.product_id.clone(),
                quantity: e.quantity,
                verdict: match e.status.as_str() {
                    APPLIED => Verdict::Applied,
                    RETURNED => Verdict::AlreadyReturned,
                    _ => Verdict::NotApplied,
                },
                status: e.status.clone(),
                detail: "already resolved; nothing changed".into(),
            });
        }
        if open.is_empty() {
            return Ok(());
        }
        let product_keys: Vec<ProductKeys> = open
            .iter()
            .map(|e| {
                ProductId::parse(&e.product_id)
                    .map(|p| self.keys.product(self.activity, &p))
                    .map_err(|err| {
                        Error::internal(format!("compensation entry {}: {}", e.id, err.message))
                    })
            })
            .collect::<Result<_>>()?;
        let records = self.records(&open, &product_keys).await?;
        let rids: Vec<&str> = open.iter().map(|e| e.request_id.as_str()).collect();
        let orders = orders::statuses(self.db, self.activity, &rids).await?;
        // Redis's clock, as the ledger's times are: an age never mixes two clocks.
        let now_ms = match product_keys.first() {
            Some(k) => crate::redis::cut::clock_of(self.redis, k).await,
            None => chrono::Utc::now().timestamp_millis(),
        };
        let grace_ms = i64::try_from(self.grace.as_millis()).unwrap_or(i64::MAX);
        let mut verdicts: Vec<(&Compensation, &ProductKeys, Verdict)> = Vec::new();
        let mut asked: Vec<String> = open.iter().map(|e| e.product_id.clone()).collect();
        asked.sort();
        asked.dedup();
        let known: std::collections::HashSet<String> =
            crate::db::activity::products_by_ids(self.db, self.activity, &asked)
                .await?
                .into_iter()
                .map(|p| p.product_id.to_string())
                .collect();
        for ((e, k), record) in open.iter().zip(&product_keys).zip(records) {
            if !known.contains(&e.product_id) {
                // Its keys were never the console's to read: no fix rebuilds them.
                report.still_pending += 1;
                report.resolutions.push(pending(
                    e,
                    Verdict::InFlight,
                    &format!(
                        "product '{}' is not in activity {}: the app server wrote an entry for a product the activity does not have (see docs/app-servers.md, rule compensation); left pending for a person to look at",
                        e.product_id, self.activity
                    ),
                ));
                continue;
            }
            let seen = seen(&orders, e);
            let verdict = match record {
                Record::Entry(entry) => decide(Some(&entry), seen, now_ms, grace_ms),
                Record::Absent => decide(None, seen, now_ms, grace_ms),
                Record::LedgerLost if seen == OrderSeen::Live => Verdict::Applied,
                Record::LedgerLost => {
                    report.still_pending += 1;
                    report.resolutions.push(pending(
                        e,
                        Verdict::InFlight,
                        "the product's ledger is lost, so an absent entry proves nothing: `seckill-console fix` rebuilds it; resolve again afterwards",
                    ));
                    continue;
                }
                Record::Corrupt => {
                    report.still_pending += 1;
                    report.resolutions.push(pending(
                        e,
                        Verdict::InFlight,
                        "the ledger record is corrupt; left pending",
                    ));
                    continue;
                }
            };
            verdicts.push((*e, k, verdict));
        }
        let (restored, unreachable) = self.restore(&verdicts).await?;
        report.unreachable |= unreachable;
        self.close(verdicts, &restored, report).await
    }

    /// Each entry's ledger record, and whether its ledger is whole: one pipeline.
    async fn records(
        &self,
        open: &[&Compensation],
        product_keys: &[ProductKeys],
    ) -> Result<Vec<Record>> {
        let mut items: Vec<Keyed> = Vec::with_capacity(open.len() * 2);
        for (e, k) in open.iter().zip(product_keys) {
            items.push(Keyed::new(
                &k.ledger,
                redis::cmd("HGET").arg(&k.ledger).arg(&e.request_id).clone(),
            ));
            items.push(Keyed::new(
                &k.ledger,
                redis::cmd("EXISTS").arg(&k.ledger).clone(),
            ));
        }
        let replies = self.redis.pipeline(items).await;
        let mut out = Vec::with_capacity(open.len());
        for (e, pair) in open.iter().zip(replies.chunks(2)) {
            let [record, exists] = pair else {
                return Err(Error::internal("short pipeline reply"));
            };
            // A ledger of another type answers an error: its entries read as corrupt (pending),
            // the others go on.
            for r in [record, exists] {
                if let Err(err) = r
                    && let Some(stop) = super::repair::fatal(self.redis, err)
                {
                    return Err(stop);
                }
            }
            let exists = match exists {
                Ok(Value::Int(n)) => *n > 0,
                _ => true,
            };
            out.push(match record {
                Ok(Value::BulkString(b)) => match LedgerEntry::parse(&e.request_id, b) {
                    Some(entry) => Record::Entry(entry),
                    None => Record::Corrupt,
                },
                Ok(_) if exists => Record::Absent,
                Ok(_) => Record::LedgerLost,
                Err(_) => Record::Corrupt,
            });
        }
        Ok(out)
    }

    /// Returns the stock of the entries to return, in one pipeline. A script's error (a
    /// corrupt value in one product) belongs to its entry, which stays pending with it; so
    /// does a node that did not answer (the entries of the other nodes are resolved, and the
    /// flag says one did not: exit 3); a refusal stops the whole resolution.
    async fn restore(
        &self,
        verdicts: &[(&Compensation, &ProductKeys, Verdict)],
    ) -> Result<(HashMap<String, std::result::Result<Restored, String>>, bool)> {
        let to_return: Vec<(&ProductKeys, &str)> = verdicts
            .iter()
            .filter(|(_, _, v)| *v == Verdict::Return)
            .map(|(e, k, _)| (*k, e.request_id.as_str()))
            .collect();
        let mut restored = HashMap::new();
        let mut unreachable = false;
        for ((k, rid), r) in to_return
            .iter()
            .zip(restore_many(self.redis, &to_return).await)
        {
            let r = match r {
                Ok(r) => Ok(r),
                Err(err) => match super::repair::fatal(self.redis, &err) {
                    Some(stop) if stop.kind == crate::error::ErrorKind::Unavailable => {
                        unreachable = true;
                        let node = self
                            .redis
                            .node_for_key(&k.stock)
                            .map(|n| n.addr.clone())
                            .unwrap_or_default();
                        Err(format!(
                            "not applied on {node}: {}; left pending",
                            crate::redis::describe(&err)
                        ))
                    }
                    Some(stop) => return Err(stop),
                    None => Err(crate::redis::describe(&err)),
                },
            };
            restored.insert(rid.to_string(), r);
        }
        Ok((restored, unreachable))
    }

    /// Closes the entries decided, each with its audit row; leaves the others pending.
    async fn close(
        &self,
        verdicts: Vec<(&Compensation, &ProductKeys, Verdict)>,
        restored: &HashMap<String, std::result::Result<Restored, String>>,
        report: &mut ResolveReport,
    ) -> Result<()> {
        let mut shown = Vec::new();
        let mut writes = Vec::new();
        for (e, _, verdict) in verdicts {
            let r = match restored.get(e.request_id.as_str()) {
                Some(Err(why)) => {
                    report.still_pending += 1;
                    report.resolutions.push(pending(
                        e,
                        verdict,
                        &format!(
                            "the restore script failed ({why}): left pending; `seckill-console fix` repairs the product, then resolve again"
                        ),
                    ));
                    continue;
                }
                Some(Ok(r)) => Some(r),
                None => None,
            };
            let Some((status, detail)) = closing(verdict, r) else {
                report.still_pending += 1;
                report
                    .resolutions
                    .push(pending(e, verdict, &pending_detail(verdict, r)));
                continue;
            };
            let mut audit = AuditEntry::new(self.actor, "compensation.resolve", self.activity);
            audit.product_id = Some(e.product_id.clone());
            audit.before_value = Some(compensation::PENDING.into());
            audit.after_value = Some(status.into());
            audit.reason = detail.clone();
            audit.detail =
                serde_json::json!({ "request_id": e.request_id, "quantity": e.quantity })
                    .to_string();
            shown.push((e, verdict, status, detail));
            writes.push(audit);
        }
        let resolves: Vec<Resolve<'_>> = shown
            .iter()
            .zip(writes)
            .map(|((e, _, status, detail), audit)| Resolve {
                id: e.id,
                status,
                resolution: detail,
                audit,
            })
            .collect();
        let changed = compensation::resolve_many(self.db, &resolves).await?;
        for ((e, verdict, status, detail), changed) in shown.into_iter().zip(changed) {
            report.resolutions.push(Resolution {
                request_id: e.request_id.clone(),
                product: e.product_id.clone(),
                quantity: e.quantity,
                verdict,
                status: status.into(),
                detail: if changed {
                    detail
                } else {
                    "resolved concurrently; nothing changed".into()
                },
            });
            if changed {
                report.resolved += 1;
            }
        }
        Ok(())
    }
}

/// The status an entry closes with and why, or None when it stays pending.
fn closing(verdict: Verdict, restored: Option<&Restored>) -> Option<(&'static str, String)> {
    Some(match verdict {
        Verdict::Applied => (
            APPLIED,
            "the deduction happened and its order exists".to_string(),
        ),
        Verdict::AlreadyReturned => (
            RETURNED,
            "the ledger shows the stock was returned already".to_string(),
        ),
        Verdict::NotApplied => (
            NOT_APPLIED,
            "the ledger has no record of this request: no unit is recorded for it".to_string(),
        ),
        Verdict::InFlight => return None,
        Verdict::Return => match restored? {
            Restored::Returned(n) => (
                RETURNED,
                format!("{n} unit(s) returned through the restore script"),
            ),
            Restored::AlreadyReturned => (RETURNED, "returned already (concurrently)".to_string()),
            // The stock key or another piece is missing, the request id was refused, or its
            // entry vanished under the return: its units may still be held, so it stays.
            Restored::Missing | Restored::BadArgs | Restored::Unknown => return None,
        },
    })
}

fn pending_detail(verdict: Verdict, restored: Option<&Restored>) -> String {
    match (verdict, restored) {
        (Verdict::InFlight, _) => {
            "deducted recently; its order may still land (inside the grace window)".into()
        }
        (_, Some(Restored::Missing)) | (_, None) => {
            "a piece of the product is missing in Redis: fix or preheat first, then resolve again"
                .into()
        }
        (_, Some(Restored::BadArgs)) => {
            "the restore script refused the request id as a bad argument; left pending".into()
        }
        _ => "its ledger entry vanished while it was returned: `seckill-console fix` rebuilds the product; resolve again afterwards".into(),
    }
}

/// Whether the entry's request has an order of the entry's product, and whether it still holds
/// stock. An order of the same request id for another product is none of this deduction's (a
/// request id used on two products): the entry's units are not sold by it.
fn seen(orders: &HashMap<String, orders::OrderOf>, e: &Compensation) -> OrderSeen {
    match orders.get(e.request_id.as_str()) {
        Some(o) if o.product == e.product_id && orders::is_live(&o.status) => OrderSeen::Live,
        Some(o) if o.product == e.product_id => OrderSeen::Dead,
        _ => OrderSeen::None,
    }
}

fn pending(e: &Compensation, verdict: Verdict, detail: &str) -> Resolution {
    Resolution {
        request_id: e.request_id.clone(),
        product: e.product_id.clone(),
        quantity: e.quantity,
        verdict,
        status: compensation::PENDING.into(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry closes only when its units are known to be back (or never taken): a return
    /// the script refused, could not check or lost track of leaves the entry pending, because
    /// its stock may still be held and closing it would lose those units for good.
    #[test]
    fn a_return_that_did_not_happen_leaves_the_entry_pending() {
        for refused in [Restored::Missing, Restored::BadArgs, Restored::Unknown] {
            assert_eq!(
                closing(Verdict::Return, Some(&refused)),
                None,
                "{refused:?} must stay pending"
            );
        }
        assert_eq!(closing(Verdict::Return, None), None);
        let (status, _) = closing(Verdict::Return, Some(&Restored::Returned(3))).expect("closes");
        assert_eq!(status, RETURNED);
        let (status, _) =
            closing(Verdict::Return, Some(&Restored::AlreadyReturned)).expect("closes");
        assert_eq!(status, RETURNED);
    }

    #[test]
    fn settled_verdicts_close_whatever_the_restore_said() {
        assert_eq!(closing(Verdict::Applied, None).map(|c| c.0), Some(APPLIED));
        assert_eq!(
            closing(Verdict::NotApplied, None).map(|c| c.0),
            Some(NOT_APPLIED)
        );
        assert_eq!(
            closing(Verdict::AlreadyReturned, None).map(|c| c.0),
            Some(RETURNED)
        );
        assert_eq!(closing(Verdict::InFlight, None), None);
    }

    #[test]
    fn the_pending_detail_names_why() {
        assert!(pending_detail(Verdict::Return, Some(&Restored::BadArgs)).contains("bad argument"));
        assert!(
            pending_detail(Verdict::Return, Some(&Restored::Missing)).contains("fix or preheat")
        );
        assert!(pending_detail(Verdict::InFlight, None).contains("grace window"));
    }
}
