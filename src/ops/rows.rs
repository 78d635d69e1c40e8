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
pub struct KeptRows(Option<Rows>);

impl KeptRows {
    /// The rows for this refresh, with their keys in the same order: the kept ones while they
    /// are younger than [`ROWS_EVERY`], else every row read again.
    pub async fn current(
        &mut self,
        db: &Db,
        activity: &ActivityId,
        keys: &KeySpace,
    ) -> Result<(Vec<Product>, Vec<ProductKeys>)> {
        if let Some(r) = &mut self.0
            && r.at.elapsed() < ROWS_EVERY
        {
            r.kept = true;
            return Ok((r.products.clone(), r.keys.clone()));
        }
        let products = activities::products(db, activity).await?;
        let pkeys: Vec<ProductKeys> = products
            .iter()
            .map(|p| keys.product(activity, &p.product_id))
            .collect();
        self.0 = Some(Rows {
            products: products.clone(),
            keys: pkeys.clone(),
            at: Instant::now(),
            kept: false,
        });
        Ok((products, pkeys))
    }

    /// Reads again the rows of the products whose cut `moved` at this refresh, into `products`
    /// and the kept rows (kept rows only: rows read whole just now are current).
    pub async fn moved(
        &mut self,
        db: &Db,
        activity: &ActivityId,
        moved: &[String],
        products: &mut [Product],
    ) -> Result<()> {
        let Some(rows) = &mut self.0 else {
            return Ok(());
        };
        if moved.is_empty() || !std::mem::take(&mut rows.kept) {
            return Ok(());
        }
        let fresh = activities::products_by_ids(db, activity, moved).await?;
        rows.take(fresh, products);
        Ok(())
    }

    /// Reads every row again into `products` and the kept rows, when this refresh used kept
    /// ones: a reader that forgot its cuts cannot tell which products moved.
    pub async fn all_moved(
        &mut self,
        db: &Db,
        activity: &ActivityId,
        products: &mut [Product],
    ) -> Result<()> {
        let Some(rows) = &mut self.0 else {
            return Ok(());
        };
        if !std::mem::take(&mut rows.kept) {
            return Ok(());
        }
        let fresh = activities::products(db, activity).await?;
        rows.take(fresh, products);
        Ok(())
    }
}

impl Rows {
    /// Puts the `fresh` rows in place of their products' rows, here and in `products`.
    fn take(&mut self, fresh: Vec<Product>, products: &mut [Product]) {
        let fresh: HashMap<String, Product> = fresh
            .into_iter()
            .map(|p| (p.product_id.as_str().to_string(), p))
            .collect();
        for p in products.iter_mut().chain(self.products.iter_mut()) {
            if let Some(row) = fresh.get(p.product_id.as_str()) {
                *p = row.clone();
            }
        }
    }
}
