//! The live view's refresh (a tracker that stays open, [`Tracker::refresh`]): which products a
//! refresh reads, and the status of those it leaves out.
//!
//! A product at rest (its books stand at its cut, balanced and explained, with nothing that
//! waits on the grace window, a lookup or a save) shows the same status as long as its cut, its
//! row and its orders stand. The [`super::quiet::Watchlist`] says which cuts moved (Redis's
//! pushes, or the streams asked); the rows kept say which rows changed; the feed of changed
//! orders names the products whose orders changed, which are woken in the same refresh. The
//! minute's check of the sums compares a product at rest with one grouped sum of the live
//! orders, and reads it only if that differs; a product is also read when the sweep comes to it
//! and when its checkpoint's feed position falls due. At 100,000 quiet products, reading
//! and showing every product at every refresh was 80% of a core.

use super::*;

/// What of a product's books at rest a refresh can change without its cut moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rested {
    position: EventId,
    live_units: i64,
    unexplained: i64,
    discrepancy: i64,
    stream_gap: bool,
}

impl Rested {
    pub(super) fn of(b: &Books) -> Self {
        Rested {
            position: b.position,
            live_units: b.live_units,
            unexplained: b.unexplained,
            discrepancy: b.discrepancy,
            stream_gap: b.stream_gap,
        }
    }
}

/// A product's status as the last refresh showed it (the live view).
#[derive(Clone, Debug)]
pub(super) struct Shown {
    pub(super) status: ProductStatus,
    pub(super) cut_ms: i64,
    /// Nothing in its books waits on time or on another read ([`Tracker::at_rest`]): while
    /// its cut and row stand and the feed names none of its orders, its status stands too.
    pub(super) rest: bool,
}

impl Tracker {
    /// Reads again the rows of the products whose cut moved at this refresh ([`KeptRows`]),
    /// and of those held between a top-up's two writes.
    async fn rows_moved(&mut self, db: &Db, topups: Vec<String>) -> Result<()> {
        let Some(watch) = &self.watch else {
            return Ok(());
        };
        if watch.anew() {
            return self.rows.all_moved(db, &self.activity).await;
        }
        // A product held between a top-up's two writes has its row read at every refresh: the
        // database write comes after the step that moved the product, and a console that dies
        // after it moves the product no more.
        let mut moved: Vec<String> = watch.moved().to_vec();
        for id in topups {
            if !moved.contains(&id) {
                moved.push(id);
            }
        }
        self.rows.moved(db, &self.activity, &moved).await
    }

    /// The live view's refresh: every product's cut from the [`Watchlist`] (read whole only
    /// where something moved), then the books of the products that moved or are not at rest,
    /// and the status of each; a product at rest that nothing moved keeps the status it had,
    /// and costs nothing here. Nothing is left out that could have changed: a product is
    /// read when Redis or its row moved, when an order of its changed (the feed names it),
    /// when its sum of live orders differs at the minute's check, when the sweep
    /// comes to it, and when its checkpoint falls due.
    pub(super) async fn refresh_live(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        keys: &KeySpace,
    ) -> Result<Reading> {
        self.cost = RefreshCost::default();
        let activity = activities::require(db, &self.activity).await?;
        let changed_rows = self.rows.current(db, &self.activity, keys).await?;
        let ids: Vec<String> = self
            .rows
            .products()
            .iter()
            .map(|p| p.product_id.to_string())
            .collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let n = ids.len();
        // Kept rows are the same list (only a whole read of the rows can change it).
        let listed = changed_rows.is_none() && self.listed.len() == n;
        if (!listed && self.relist(&refs)) || self.shown.len() != n {
            self.index = refs
                .iter()
                .enumerate()
                .map(|(i, id)| (id.to_string(), i))
                .collect();
            // Room for every product's books at once: grown by doubling while the first
            // refresh settles 100,000 products, the old and the new table stood side by side.
            self.kept.reserve(n.saturating_sub(self.kept.len()));
            self.shown = vec![None; n];
            self.asleep = vec![false; n];
            self.slots = self
                .rows
                .keys()
                .iter()
                .map(|k| crate::redis::slots::key_slot(k.stock.as_bytes()))
                .collect();
        }
        let Some(watch) = self.watch.as_mut() else {
            return Err(crate::error::Error::internal(
                "a live refresh without its watchlist",
            ));
        };
        let (kept, shown) = (&self.kept, &self.shown);
        // A product at rest has books standing at its last cut (asked first: a look-up of
        // every product's books each refresh was a sixth of the live view's CPU).
        let carried = |i: usize| {
            shown
                .get(i)
                .is_some_and(|s| s.as_ref().is_some_and(|s| s.rest))
                || kept.contains_key(refs[i])
        };
        let read = watch
            .read(
                redis,
                (&refs, self.rows.keys(), self.rows.generation()),
                (keys.prefix(), self.activity.as_str()),
                carried,
            )
            .await;
        self.cost.quiet = watch.cost;
        let read = match read {
            Ok(r) => r,
            Err(e) => {
                // As in `refresh_keyed`: start over from the checkpoints.
                self.start_over();
                return Err(redis.error(&e));
            }
        };
        self.opts.interleave.at(Stage::Cut).await;

        // The sweep's next page is read in this refresh, at rest or not, and so is a product
        // whose unreadable entry another reader's sweep found (checked here before it shows).
        let page = self.sweep_list(&refs);
        let mut active = self.wanted(redis, &refs, &read, changed_rows.as_deref());
        for &i in page.iter().chain(&self.told_bad()) {
            active[i] = true;
        }
        let verify = self
            .last_verify
            .is_none_or(|t| t.elapsed() >= self.opts.verify_every);
        let mut checked_resting = false;
        if verify {
            match self.verify_resting(redis, db, &refs, &mut active).await {
                Ok(Some(checked)) => checked_resting = checked,
                // Not known what moved since the read: every product is read.
                Ok(None) => active.fill(true),
                Err(e) => {
                    self.start_over();
                    return Err(e);
                }
            }
        }
        // Products left out before and read now take the position the feed was read to for
        // them while they rested.
        for (i, was) in self.asleep.iter_mut().enumerate() {
            if std::mem::take(was)
                && active[i]
                && let Some(k) = self.kept.get_mut(refs[i])
            {
                k.feed = self.rest_feed.or(k.feed);
            }
        }
        // A product held between a top-up's two writes is never at rest: its last cut says.
        let topups: Vec<String> = (0..n)
            .filter(|&i| active[i])
            .filter(|&i| {
                self.watch
                    .as_ref()
                    .and_then(|w| w.last_cut(i))
                    .is_some_and(|c| c.meta.topup.is_some())
            })
            .map(|i| ids[i].clone())
            .collect();
        self.rows_moved(db, topups).await?;

        let (mut items, swept) = self.items(redis, (read, &active, &page));
        let latest = self.rest_clock.1;
        let settled = match self.advance(redis, db, &mut items, Some(swept)).await {
            Ok(s) => s,
            Err(e) => {
                self.start_over();
                return Err(e);
            }
        };
        self.tell_bad(redis, &page, &refs).await;
        if checked_resting {
            // Also when every product was at rest (the refresh's own check had none to read).
            self.last_verify = Some(Instant::now());
        }
        self.show(items, &settled);
        Ok(self.reading(activity, latest))
    }

    /// The minute's check of the sums for the products at rest, without reading them (at
    /// 100,000 products, making every product an item of the refresh once a minute was a
    /// peak of 54 MB and most of the reader's growth in memory): nothing moved them in Redis
    /// since their cut (Redis would have named them), so their live units at the cut are the
    /// database's live units now; one grouped sum of the activity's live orders compares them
    /// all, and a product whose sum differs is read in this refresh, settled and checked as
    /// any other. Returns whether it compared any product; None when Redis's pushes do not
    /// say what moved since the read (then every product is read, as before).
    async fn verify_resting(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        ids: &[&str],
        active: &mut [bool],
    ) -> Result<Option<bool>> {
        let resting: Vec<usize> = (0..ids.len()).filter(|&i| !active[i]).collect();
        if resting.is_empty() {
            return Ok(Some(false));
        }
        let Some(watch) = self.watch.as_mut() else {
            return Ok(None);
        };
        if watch.pushed_since_read(redis).await.is_none() {
            return Ok(None);
        }
        let mut tx = db_cut::begin(db, &self.activity).await?;
        let live = db_cut::live_units(&mut tx, &self.activity, None).await?;
        drop(tx);
        self.cost.verified = true;
        for i in resting {
            let units = live.get(ids[i]).copied().unwrap_or(0);
            if self
                .kept
                .get(ids[i])
                .is_none_or(|k| k.books.live_units != units)
            {
                tracing::debug!(product = %ids[i], "live orders differ from the books at rest; reading it");
                active[i] = true;
            }
        }
        Ok(Some(true))
    }

    /// Takes in the unreadable entries other readers' sweeps found: each goes into the
    /// product's books as one to read again (the refresh's recheck keeps it only if this
    /// reader reads it unreadable too); returns the products, by index, to read now.
    fn told_bad(&mut self) -> Vec<usize> {
        let Some(watch) = self.watch.as_mut() else {
            return Vec::new();
        };
        let mut woken = Vec::new();
        for bad in watch.told_bad() {
            let hash = if bad.hash == 'b' {
                HashOf::Buyers
            } else {
                HashOf::Ledger
            };
            let (Some(&i), Some(k)) = (
                self.index.get(bad.product.as_str()),
                self.kept.get_mut(bad.product.as_str()),
            ) else {
                continue;
            };
            if k.books.bad_entries.len() < MAX_BAD_ENTRIES {
                k.books.bad_entries.entry((hash, bad.field)).or_default();
                woken.push(i);
            }
        }
        woken
    }

    /// Tells the other readers the unreadable entries this refresh's sweep page holds.
    async fn tell_bad(&mut self, redis: &RedisStore, page: &[usize], ids: &[&str]) {
        let mut bad = Vec::new();
        for &i in page {
            let Some(k) = ids.get(i).and_then(|id| self.kept.get(*id)) else {
                continue;
            };
            for (hash, field) in k.books.bad_entries.keys() {
                bad.push(crate::redis::peers::Bad {
                    product: ids[i].to_string(),
                    hash: if *hash == HashOf::Buyers { 'b' } else { 'l' },
                    field: field.clone(),
                });
            }
        }
        if let Some(w) = self.watch.as_mut() {
            w.tell_bad(redis, &bad).await;
        }
    }

    /// The products this refresh reads, with their cuts (read whole now, or standing), and
    /// the sweep's `page` among them; every other product is left asleep.
    fn items(
        &mut self,
        redis: &RedisStore,
        (read, active, page): (Vec<usize>, &[bool], &[usize]),
    ) -> (Vec<ProductAtCut>, Vec<usize>) {
        // The products this refresh reads, with their cuts: read whole now, or standing.
        let mut whole = read.into_iter().peekable();
        let mut items: Vec<ProductAtCut> =
            Vec::with_capacity(active.iter().filter(|a| **a).count());
        let mut swept = Vec::with_capacity(page.len());
        for (i, wanted) in active.iter().enumerate() {
            let now = whole.next_if_eq(&i).is_some();
            if !wanted {
                self.asleep[i] = true;
                continue;
            }
            let Some(item) = self.at_cut(redis, i, now) else {
                continue;
            };
            // Books not at rest may have moved since their save; those at rest are checked
            // after the refresh ([`Tracker::show`]).
            if let Some(k) = self.kept.get_mut(item.id())
                && k.rested.is_none()
            {
                k.dirty = true;
            }
            if page.contains(&i) {
                swept.push(items.len());
            }
            items.push(item);
        }
        self.rest_clock = self.refresh_clock(&items);
        (items, swept)
    }

    /// Which products this refresh reads: every one when the list, the cuts or the rows were
    /// all read anew or the sums are due; else those not at rest, those whose cut or row
    /// moved, the sweep's next page and those whose checkpoint falls due.
    fn wanted(
        &mut self,
        redis: &RedisStore,
        ids: &[&str],
        read: &[usize],
        changed_rows: Option<&[usize]>,
    ) -> Vec<bool> {
        let n = ids.len();
        // The minute's sums are compared after (`verify_resting`): a product at rest is
        // read then only if its sum moved.
        let anew = self.watch.as_ref().is_none_or(Watchlist::anew);
        if anew || self.opts.fresh || self.last_verify.is_none() {
            return vec![true; n];
        }
        let mut active: Vec<bool> = self
            .shown
            .iter()
            .map(|s| !s.as_ref().is_some_and(|s| s.rest))
            .collect();
        if let Some(w) = &self.watch {
            for id in w.moved() {
                if let Some(&i) = self.index.get(id.as_str()) {
                    active[i] = true;
                }
            }
        }
        // A product read whole for the first time since its books were made (never shown).
        for i in read {
            if self.shown[*i].is_none() {
                active[*i] = true;
            }
        }
        for &i in changed_rows.unwrap_or_default() {
            if let Some(a) = active.get_mut(i) {
                *a = true;
            }
        }
        // A checkpoint whose feed position fell behind is written in its turn (see `save`).
        let saving = self.opts.save_every.is_some_and(|every| {
            !redis.read_only() && self.last_save.is_none_or(|t| t.elapsed() >= every)
        });
        if saving && let Some(rest) = self.rest_feed {
            let now_ms = Utc::now().timestamp_millis();
            for (i, id) in ids.iter().enumerate() {
                if active[i] {
                    continue;
                }
                // A product never sold has no checkpoint to keep up (`save` writes none).
                if let Some(k) = self.kept.get(*id)
                    && k.books.position != EventId::ZERO
                    && k.feed != Some(rest)
                    && k.saved
                        .is_none_or(|s| now_ms - s.at_ms >= FEED_SAVE_EVERY_MS + feed_turn(id))
                {
                    active[i] = true;
                }
            }
        }
        active
    }

    /// Product `i` of the list as this refresh reads it: its row, its keys, and its cut (read
    /// whole now, at its read's instant; or its last one, standing, now).
    fn at_cut(&self, redis: &RedisStore, i: usize, whole: bool) -> Option<ProductAtCut> {
        let product = self.rows.products().get(i)?.clone();
        let keys = self.rows.keys().get(i)?.clone();
        let watch = self.watch.as_ref()?;
        let cut = if whole {
            watch.last_cut(i)?.clone()
        } else {
            watch.cut_now(redis, i, &keys)?
        };
        Some(ProductAtCut { product, keys, cut })
    }

    /// Redis's clock at this refresh, earliest and latest (the cuts read and the nodes'
    /// clocks).
    fn refresh_clock(&self, items: &[ProductAtCut]) -> (i64, i64) {
        let clock = self.watch.as_ref().and_then(Watchlist::clock_ms);
        let cuts = items.iter().map(|i| i.cut.now_ms);
        let earliest = cuts.clone().chain(clock).min();
        let latest = cuts.chain(clock).max();
        let local = Utc::now().timestamp_millis();
        (earliest.unwrap_or(local), latest.unwrap_or(local))
    }

    /// Products at rest whose order the feed shows changed are read from here on, in this
    /// refresh: added to `items` and `moving`, from the feed's position for the products at
    /// rest. (Nothing else in them can have moved: their cut stands, and their books stand at
    /// it.)
    pub(super) fn wake(
        &mut self,
        redis: &RedisStore,
        items: &mut Vec<ProductAtCut>,
        moving: &mut Vec<usize>,
        changes: &[Change],
    ) {
        if !self.asleep.iter().any(|a| *a) {
            return;
        }
        for c in changes {
            let Some(&i) = self.index.get(c.product.as_str()) else {
                continue;
            };
            if !self.asleep.get(i).copied().unwrap_or(false) {
                continue;
            }
            self.asleep[i] = false;
            let Some(item) = self.at_cut(redis, i, false) else {
                continue;
            };
            let rest = self.rest_feed;
            let Some(k) = self.kept.get_mut(item.id()) else {
                continue;
            };
            k.feed = rest.or(k.feed);
            k.dirty = true;
            moving.push(items.len());
            items.push(item);
        }
    }

    /// Whether the status of `item` stands as long as its cut, its row and its orders do:
    /// books that carry, standing at the cut, balanced and explained, with nothing waiting on
    /// the grace window, a lookup or a save.
    fn at_rest(&self, item: &ProductAtCut, explained: bool) -> bool {
        let Some(k) = self.kept.get(item.id()) else {
            return false;
        };
        let b = &k.books;
        let c = &item.cut;
        let saves = self.opts.save_every.is_some();
        explained
            && !self.unkept.contains_key(item.id())
            && k.feed.is_some()
            && !k.without_ledger
            && !(saves && k.dirty)
            && b.unbacked.is_empty()
            && b.unledgered.is_empty()
            && b.returned.is_empty()
            && b.bad_entries.is_empty()
            && b.breaches.is_empty()
            && b.unexplained == 0
            && b.discrepancy == 0
            && c.position == Some(b.position)
            && c.meta.topup.is_none()
            && c.meta.frozen.is_none()
            && c.active().is_some_and(|a| b.balanced(a))
    }

    /// Keeps the status of every product this refresh read, and which of them are at rest
    /// (the feed's position for those goes on from theirs).
    fn show(&mut self, items: Vec<ProductAtCut>, settled: &HashMap<String, bool>) {
        self.cost.books = items.len() as u64;
        let grace = self.opts.grace;
        let none = Books::default();
        let still_asleep = self.asleep.iter().any(|a| *a);
        let mut rest_feed = if still_asleep { self.rest_feed } else { None };
        for item in items {
            let Some(&i) = self.index.get(item.id()) else {
                continue;
            };
            let explained = settled.get(item.id()).copied().unwrap_or(true);
            if let Some(k) = self.kept.get_mut(item.id())
                && k.rested.is_some_and(|r| r != Rested::of(&k.books))
            {
                k.dirty = true;
            }
            let rest = self.at_rest(&item, explained);
            if let Some(k) = self.kept.get_mut(item.id()) {
                k.rested = rest.then(|| Rested::of(&k.books));
            }
            if rest && let Some(f) = self.kept.get(item.id()).and_then(|k| k.feed) {
                let margin = chrono::Duration::from_std(self.opts.margin).unwrap_or_default();
                rest_feed = Some(match rest_feed {
                    Some(r) if r.from(margin) <= f.from(margin) => r,
                    _ => f,
                });
            }
            let cut_ms = item.cut.now_ms;
            let id = item.id().to_string();
            let books = self
                .kept
                .get(&id)
                .map(|k| &k.books)
                .or_else(|| self.unkept.get(&id).map(|u| &u.books))
                .unwrap_or(&none);
            let ProductAtCut { product, keys, cut } = item;
            let kept = &self.kept;
            let unledgered_in = |other: &str, rid: &str| {
                kept.get(other)
                    .map(|k| k.books.unledgered.contains_key(rid))
            };
            let view = snapshot::view(
                product,
                keys,
                cut,
                (books, false),
                explained,
                grace,
                &unledgered_in,
            );
            if let Some(slot) = self.shown.get_mut(i) {
                *slot = Some(Shown {
                    status: view.status,
                    cut_ms,
                    rest,
                });
            }
        }
        self.rest_feed = rest_feed;
    }

    /// What this refresh shows: every product's status, those at rest as they stood.
    fn reading(&self, activity: crate::domain::Activity, latest_ms: i64) -> Reading {
        let complete = self.shown.iter().all(Option::is_some);
        let mut statuses = Vec::with_capacity(self.shown.len());
        let mut cut_ms = Vec::with_capacity(self.shown.len());
        let mut slots: Vec<u16> = Vec::new();
        for (i, s) in self.shown.iter().enumerate() {
            // Always shown, but a product whose cut could not be made is left out whole
            // rather than shown beside another's slot.
            let Some(s) = s else { continue };
            statuses.push(s.status.clone());
            cut_ms.push(if self.asleep.get(i).copied().unwrap_or(false) {
                latest_ms.max(s.cut_ms)
            } else {
                s.cut_ms
            });
            if !complete {
                slots.push(self.slots.get(i).copied().unwrap_or(0));
            }
        }
        Reading {
            activity,
            statuses,
            cut_ms,
            slots: if complete {
                self.slots.clone()
            } else {
                slots.into()
            },
            taken_at: Utc
                .timestamp_millis_opt(latest_ms)
                .single()
                .unwrap_or_else(Utc::now),
            skew_ms: self.clock.skew_ms(),
            keys_age: self.watch.as_ref().and_then(Watchlist::keys_age),
        }
    }

    /// The next page of the sweep among the products of the list with books: the sweep goes
    /// round the list, from where it stopped, until it found a page (a look-up of every
    /// product's books to list those with some was a quarter of a quiet refresh's CPU).
    fn sweep_list(&mut self, ids: &[&str]) -> Vec<usize> {
        let n = ids.len();
        // Shared with k other readers, each sweeps a k-th of the pages (in credits: two
        // products a refresh shared by three readers is two every third refresh each).
        let sharing = self.watch.as_ref().map_or(1, Watchlist::sharing) as u64;
        self.sweep_credit += self.opts.sweep.products as u64;
        let take = usize::try_from(self.sweep_credit / sharing)
            .unwrap_or(usize::MAX)
            .min(n);
        self.sweep_credit %= sharing;
        let mut page = Vec::with_capacity(take);
        let mut looked = 0;
        // Another reader that publishes sweeps the products whose turn is its own, and tells
        // what it finds ([`crate::redis::peers`]).
        let watch = self.watch.as_ref();
        while page.len() < take && looked < n {
            let i = self.sweep_next.wrapping_add(looked) % n;
            looked += 1;
            if self.kept.contains_key(ids[i]) && watch.is_none_or(|w| w.sweeps(ids[i])) {
                page.push(i);
            }
        }
        if n > 0 {
            self.sweep_next = self.sweep_next.wrapping_add(looked) % n;
        }
        page
    }
}
