//! The faults: eviction of one key, a trimmed or holed event stream, corrupt values, writes
//! outside the scripts, a restart from an older snapshot or without persistence. Each also
//! tells the model which evidence of the product's deductions Redis lost.

use super::steps::{Field, Key, Step};
use super::world::{Evidence, Saved, World, cmd, pname};

impl World {
    fn evidence_lost(&mut self, p: usize, f: impl Fn(&mut Evidence)) {
        for d in self.deds.iter_mut().filter(|d| d.p == p) {
            f(&mut d.ev);
        }
    }

    pub async fn fault(&mut self, step: &Step) {
        match step {
            Step::Del { p, key } => {
                let k = self.pkeys(*p);
                let name = match key {
                    Key::Stock => &k.stock,
                    Key::Meta => &k.meta,
                    Key::Buyers => &k.buyers,
                    Key::Ledger => &k.ledger,
                    Key::Events => &k.events,
                };
                let r = cmd(&self.store, &[b"DEL", name.as_bytes()]).await;
                self.say(format!("   DEL {name} -> {r:?}"));
                match key {
                    Key::Stock => self.evidence_lost(*p, |e| e.s = false),
                    Key::Meta => self.evidence_lost(*p, |e| e.c = false),
                    Key::Buyers => {
                        self.evidence_lost(*p, |e| e.b = false);
                        self.products[*p].limit_exempt = true;
                    }
                    Key::Ledger => {
                        self.evidence_lost(*p, |e| e.l = false);
                        self.products[*p].limit_exempt = true;
                    }
                    Key::Events => {}
                }
            }
            Step::Xdel { p, pick } => {
                let k = self.pkeys(*p);
                let ids =
                    match cmd(&self.store, &[b"XRANGE", k.events.as_bytes(), b"-", b"+"]).await {
                        Ok(redis::Value::Array(entries)) => entries
                            .into_iter()
                            .filter_map(|e| match e {
                                redis::Value::Array(mut parts) if !parts.is_empty() => {
                                    match parts.swap_remove(0) {
                                        redis::Value::BulkString(id) => Some(id),
                                        _ => None,
                                    }
                                }
                                _ => None,
                            })
                            .collect::<Vec<_>>(),
                        _ => Vec::new(),
                    };
                if let Some(id) = ids.get(*pick as usize % ids.len().max(1)) {
                    let r = cmd(&self.store, &[b"XDEL", k.events.as_bytes(), id]).await;
                    self.say(format!(
                        "   XDEL {} {} -> {r:?}",
                        k.events,
                        String::from_utf8_lossy(id)
                    ));
                }
            }
            Step::Xtrim { p, keep } => {
                let k = self.pkeys(*p);
                let keep = keep.to_string();
                let r = cmd(
                    &self.store,
                    &[b"XTRIM", k.events.as_bytes(), b"MAXLEN", keep.as_bytes()],
                )
                .await;
                self.say(format!("   XTRIM {} MAXLEN {keep} -> {r:?}", k.events));
            }
            Step::Corrupt { p, field } => {
                let k = self.pkeys(*p);
                let key = if *field == Field::Stock {
                    &k.stock
                } else {
                    &k.meta
                };
                if !matches!(
                    cmd(&self.store, &[b"EXISTS", key.as_bytes()]).await,
                    Ok(redis::Value::Int(1))
                ) {
                    self.say(format!("   (no {key} to corrupt)"));
                    return;
                }
                let r = match field {
                    Field::Stock => cmd(&self.store, &[b"SET", key.as_bytes(), b"abc"]).await,
                    Field::Deducted => {
                        cmd(&self.store, &[b"HSET", key.as_bytes(), b"deducted", b"abc"]).await
                    }
                    Field::Limit => {
                        cmd(&self.store, &[b"HSET", key.as_bytes(), b"limit", b"abc"]).await
                    }
                    Field::Returned => {
                        cmd(&self.store, &[b"HSET", key.as_bytes(), b"returned", b"abc"]).await
                    }
                    Field::Paused => {
                        cmd(&self.store, &[b"HSET", key.as_bytes(), b"paused", b"7"]).await
                    }
                };
                self.say(format!("   corrupt {field:?} of {} -> {r:?}", pname(*p)));
                if *field == Field::Stock {
                    self.evidence_lost(*p, |e| e.s = false);
                } else {
                    // A corrupt meta hash is rebuilt: its counters are not read.
                    self.evidence_lost(*p, |e| e.c = false);
                }
            }
            Step::Incr { p, by } => {
                let k = self.pkeys(*p);
                if let Ok(redis::Value::BulkString(b)) =
                    cmd(&self.store, &[b"GET", k.stock.as_bytes()]).await
                    && seckill_console::domain::stock::parse_int(&b).is_some()
                {
                    let by = by.to_string();
                    let r = cmd(&self.store, &[b"INCRBY", k.stock.as_bytes(), by.as_bytes()]).await;
                    self.say(format!("   INCRBY {} {by} -> {r:?}", k.stock));
                    // The stock no longer witnesses the deductions.
                    self.evidence_lost(*p, |e| e.s = false);
                }
            }
            Step::Rollback => {
                if let Some(saved) = self.saved.take() {
                    self.restore(saved).await;
                    self.say("   rollback to the checkpoint");
                }
            }
            Step::Failover { lost } => self.failover(*lost).await,
            Step::Flush { p } => {
                let k = self.pkeys(*p);
                for key in k.script_keys().into_iter().chain([k.books.as_str()]) {
                    let _ = cmd(&self.store, &[b"DEL", key.as_bytes()]).await;
                }
                self.evidence_lost(*p, |e| *e = Evidence::NONE);
                self.products[*p].limit_exempt = true;
                self.say(format!("   every key of {} lost", pname(*p)));
            }
            _ => {}
        }
    }

    /// A product's keys come back as `saved` holds them (a restart from an older snapshot, a
    /// failover to a lagging replica); the model's evidence goes back with them.
    pub async fn restore(&mut self, saved: Saved) {
        for (key, dump) in &saved.dumps {
            let _ = cmd(&self.store, &[b"DEL", key.as_bytes()]).await;
            if let Some(d) = dump {
                let _ = cmd(&self.store, &[b"RESTORE", key.as_bytes(), b"0", d]).await;
            }
        }
        let p = saved.p;
        for d in self.deds.iter_mut().filter(|d| d.p == p) {
            d.ev = if saved.rids.contains(&d.rid) {
                saved.ev.get(&d.rid).copied().unwrap_or(Evidence::NONE)
            } else {
                Evidence::NONE
            };
        }
        let m = &mut self.products[p];
        m.limit_exempt = true;
        m.pause_enforced = false;
        self.say(format!("   {} back to an older state", pname(p)));
    }

    /// Every key of the product, the console's checkpoint too (a node rolls back whole), and
    /// the evidence the model has now.
    pub async fn saved_of(&self, p: usize) -> Saved {
        let k = self.pkeys(p);
        let mut dumps = Vec::new();
        for key in k.script_keys().into_iter().chain([k.books.as_str()]) {
            let v = match cmd(&self.store, &[b"DUMP", key.as_bytes()]).await {
                Ok(redis::Value::BulkString(b)) => Some(b),
                _ => None,
            };
            dumps.push((key.to_string(), v));
        }
        let mine = self.deds.iter().filter(|d| d.p == p);
        Saved {
            p,
            dumps,
            ev: mine.clone().map(|d| (d.rid.clone(), d.ev)).collect(),
            rids: mine.map(|d| d.rid.clone()).collect(),
        }
    }

    pub async fn checkpoint(&mut self, p: usize) {
        self.saved = Some(self.saved_of(p).await);
        self.say(format!("   checkpoint of {}", pname(p)));
    }
}
