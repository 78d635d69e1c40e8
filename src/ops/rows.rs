//! The product rows of an activity as a view that stays open keeps them: read whole at most
//! every [`ROWS_EVERY`]; in between only the rows of products whose Redis state moved are read
//! again. Every operator's write (a pause, a top-up) changes the database first and then
//! Redis, where it moves the product, so its row is read again in the refresh that sees it; an
//! import of more products shows within [`ROWS_EVERY`]. (Reading 10,000 rows every second was
//! a fifth of the live view's CPU.)

use crate::db::{Db, activity as activities};
use crate::domain::{ActivityId, Product};
use crate::error::Result;
use crate::redis::{KeySpace, ProductKeys};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a view that stays open reads every product row again.
pub const ROWS_EVERY: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Rows {
    products: Vec<Product>,
    /// Their keys, in the same order (built once per whole read, not every refresh).
    keys: Vec<ProductKeys>,
    /// When they were read whole.
    at: Instant,
    /// This refresh uses the kept rows (not rows read whole just now).
    kept: bool,
}

/// An activity's product rows and their keys, kept between refreshes.
#[derive(Debug, Default)]
pub struct KeptRows(Option<Rows>, u64);

impl KeptRows {
    /// Makes the rows current for this refresh: the kept ones while they are younger than
    /// [`ROWS_EVERY`], else every row read again. Returns None when the kept rows stand, else
    /// the indices of the rows that differ from the kept ones (every row on the first read
    /// or when the list of products changed).
    pub async fn current(
        &mut self,
        db: &Db,
        activity: &ActivityId,
        keys: &KeySpace,
    ) -> Result<Option<Vec<usize>>> {
        if let Some(r) = &mut self.0
            && r.at.elapsed() < ROWS_EVERY
        {
            r.kept = true;
            return Ok(None);
        }
        let products = activities::products(db, activity).await?;
        let changed: Vec<usize> = match &self.0 {
            Some(r)
                if r.products.len() == products.len()
                    && r.products
                        .iter()
                        .zip(&products)
                        .all(|(a, b)| a.product_id == b.product_id) =>
            {
                (0..products.len())
                    .filter(|&i| r.products[i] != products[i])
                    .collect()
            }
            _ => {
                // Another list (or the first): what was kept in its order is not.
                self.1 += 1;
                (0..products.len()).collect()
            }
        };
        let pkeys: Vec<ProductKeys> = match self.0.take() {
            // The same products: their keys are the same too.
            Some(r) if changed.len() < products.len() || products.is_empty() => r.keys,
            _ => products
                .iter()
                .map(|p| keys.product(activity, &p.product_id))
                .collect(),
        };
        self.0 = Some(Rows {
            products,
            keys: pkeys,
            at: Instant::now(),
            kept: false,
        });
        Ok(Some(changed))
    }

    /// Which list of products the rows are (it changes when products are added, taken out
    /// or ordered otherwise; a row read again in place keeps it).
    pub fn generation(&self) -> u64 {
        self.1
    }

    /// The rows made current by [`KeptRows::current`] (none before it).
    pub fn products(&self) -> &[Product] {
        self.0.as_ref().map_or(&[], |r| r.products.as_slice())
    }

    /// Their keys, in the same order.
    pub fn keys(&self) -> &[ProductKeys] {
        self.0.as_ref().map_or(&[], |r| r.keys.as_slice())
    }

    /// Reads again the rows of the products whose cut `moved` at this refresh (kept rows
    /// only: rows read whole just now are current).
    pub async fn moved(&mut self, db: &Db, activity: &ActivityId, moved: &[String]) -> Result<()> {
        let Some(rows) = &mut self.0 else {
            return Ok(());
        };
        if moved.is_empty() || !std::mem::take(&mut rows.kept) {
            return Ok(());
        }
        let fresh = activities::products_by_ids(db, activity, moved).await?;
        rows.take(fresh);
        Ok(())
    }

    /// Reads every row again, when this refresh used kept ones: a reader that forgot its cuts
    /// cannot tell which products moved.
    pub async fn all_moved(&mut self, db: &Db, activity: &ActivityId) -> Result<()> {
        let Some(rows) = &mut self.0 else {
            return Ok(());
        };
        if !std::mem::take(&mut rows.kept) {
            return Ok(());
        }
        let fresh = activities::products(db, activity).await?;
        rows.take(fresh);
        Ok(())
    }
}

impl Rows {
    /// Puts the `fresh` rows in place of their products' rows.
    fn take(&mut self, fresh: Vec<Product>) {
        let mut fresh: HashMap<String, Product> = fresh
            .into_iter()
            .map(|p| (p.product_id.as_str().to_string(), p))
            .collect();
        for p in &mut self.products {
            if let Some(row) = fresh.remove(p.product_id.as_str()) {
                *p = row;
            }
        }
    }
}
