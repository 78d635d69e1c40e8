//! The product series (`seckill_stock_remaining{activity,product}` and the eight others),
//! kept between rounds as each product's figures and written out by hand at each round.
//!
//! Why not prometheus_client's families, as the activity's series are: a round cleared them
//! and created every series again, two label strings cloned and hashed per series, then
//! encoded each through the registry. At 100,000 products that is 900,000 series a round: the
//! exporter's figures ran 16 polls behind Redis (`scripts/bench live`, 2026-12-07). Here a
//! round overwrites each product's figures in place (no allocation unless the product is new)
//! and the text is written straight from them.

use crate::domain::stock::ProductStatus;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One product's figures as the exporter shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Figures {
    stock: Option<i64>,
    initial: i64,
    sold: i64,
    in_flight: i64,
    orphaned: i64,
    unledgered: i64,
    drift: Option<i64>,
    paused: bool,
    state: &'static str,
}

impl Figures {
    fn of(p: &ProductStatus) -> Self {
        Figures {
            stock: p.redis_remaining,
            initial: p.initial,
            sold: p.db_sold,
            in_flight: p.in_flight,
            orphaned: p.orphaned,
            unledgered: p.unledgered,
            drift: p.drift,
            paused: p.paused,
            state: p.state.as_str(),
        }
    }

    /// The value of family `i` of [`FAMILIES`] (None: no series, as for a stock that cannot be
    /// read).
    fn value(&self, i: usize) -> Option<i64> {
        match i {
            0 => self.stock,
            1 => Some(self.initial),
            2 => Some(self.sold),
            3 => Some(self.in_flight),
            4 => Some(self.orphaned),
            5 => Some(self.unledgered),
            6 => self.drift,
            7 => Some(i64::from(self.paused)),
            _ => Some(1),
        }
    }
}

/// The families, in [`Figures::value`]'s order; the last one carries the state as a label.
const FAMILIES: [(&str, &str); 9] = [
    (
        "seckill_stock_remaining",
        "Units Redis holds for sale (absent when the stock key is missing or corrupt)",
    ),
    (
        "seckill_initial_stock",
        "Units the product was imported with, top-ups included",
    ),
    ("seckill_sold_units", "Units of live orders in the database"),
    (
        "seckill_in_flight_units",
        "Units deducted in Redis whose orders are within the grace window",
    ),
    (
        "seckill_orphaned_units",
        "Units deducted in Redis without an order past the grace window (lost sales)",
    ),
    (
        "seckill_unledgered_units",
        "Units of live orders Redis holds no deduction for (oversell risk)",
    ),
    (
        "seckill_drift_units",
        "Redis's stock minus the stock the database's truth expects",
    ),
    (
        "seckill_paused",
        "1 when Redis refuses sales of the product",
    ),
    (
        "seckill_product_state",
        "1 for the product's current state (ok, drift, negative, missing, corrupt, ...)",
    ),
];

/// One activity's products, with the round each was last reported in.
#[derive(Debug, Default)]
struct Products {
    round: u64,
    figures: BTreeMap<String, (Figures, u64)>,
}

/// Every exported activity's product figures.
#[derive(Debug, Default)]
pub struct ProductSeries {
    round: u64,
    activities: BTreeMap<String, Products>,
}

/// A label value as the text format wants it.
fn escaped(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl ProductSeries {
    /// A new round: only the activities reported in it are written out.
    pub fn begin_round(&mut self) {
        self.round += 1;
    }

    /// The products of `activity` read this round (ids unique, as in a status report).
    pub fn report(&mut self, activity: &str, products: &[ProductStatus]) {
        let round = self.round;
        let a = match self.activities.get_mut(activity) {
            Some(a) => a,
            None => self.activities.entry(activity.to_string()).or_default(),
        };
        a.round = round;
        for p in products {
            let f = Figures::of(p);
            match a.figures.get_mut(p.product.as_str()) {
                Some(e) => *e = (f, round),
                None => {
                    a.figures.insert(p.product.clone(), (f, round));
                }
            }
        }
        // Each product of the report holds one entry: more entries are products taken out.
        if a.figures.len() != products.len() {
            a.figures.retain(|_, (_, r)| *r == round);
        }
    }

    /// The activity's poll failed: it has no product series (rather than figures no longer
    /// true) until it is read again.
    pub fn failed(&mut self, activity: &str) {
        self.activities.remove(activity);
    }

    /// Keeps only `activities`.
    pub fn retain(&mut self, activities: &[String]) {
        self.activities.retain(|a, _| activities.contains(a));
    }

    /// Writes the families of the activities reported this round, in the text format.
    pub fn encode(&self, out: &mut String) {
        let now: Vec<(&String, &Products)> = self
            .activities
            .iter()
            .filter(|(_, p)| p.round == self.round)
            .collect();
        for (i, (name, help)) in FAMILIES.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} gauge");
            for (activity, products) in &now {
                for (product, (f, _)) in &products.figures {
                    let Some(v) = f.value(i) else { continue };
                    out.push_str(name);
                    out.push_str("{activity=\"");
                    escaped(out, activity);
                    out.push_str("\",product=\"");
                    escaped(out, product);
                    if i == FAMILIES.len() - 1 {
                        out.push_str("\",state=\"");
                        out.push_str(f.state);
                    }
                    let _ = writeln!(out, "\"}} {v}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: &str, stock: i64) -> ProductStatus {
        let mut p = crate::ops::status::one_product_report("a", stock)
            .products
            .remove(0);
        p.product = id.to_string();
        p
    }

    #[test]
    fn only_the_products_of_this_round_are_written_and_labels_are_escaped() {
        let mut s = ProductSeries::default();
        s.begin_round();
        s.report("a", &[status("p1", 10), status("p\"2\\", 7)]);
        let mut text = String::new();
        s.encode(&mut text);
        assert!(
            text.contains("seckill_stock_remaining{activity=\"a\",product=\"p\\\"2\\\\\"} 7\n"),
            "{text}"
        );
        assert!(
            text.contains("seckill_product_state{activity=\"a\",product=\"p1\",state=\"ok\"} 1\n")
        );
        // p1 taken out, p3 added: p1's series go.
        s.begin_round();
        s.report("a", &[status("p3", 10), status("p\"2\\", 7)]);
        let mut text = String::new();
        s.encode(&mut text);
        assert!(!text.contains("product=\"p1\""), "{text}");
        assert!(text.contains("seckill_stock_remaining{activity=\"a\",product=\"p3\"} 10\n"));
        // A round that does not read the activity writes none of its series.
        s.begin_round();
        let mut text = String::new();
        s.encode(&mut text);
        assert!(!text.contains("activity=\"a\""), "{text}");
    }
}
