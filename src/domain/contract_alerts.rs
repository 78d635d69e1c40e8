//! The alerts of what the shop's app servers did against their contract (docs/app-servers.md):
//! each names the rule, the requests behind it and what to do; and the sale window Redis
//! enforces when it is not the activity's. No I/O.

use super::alerts::{Alert, AlertKind, Severity};
use super::stock::ProductStatus;

/// The alerts of the products whose Redis window is not the activity's, one per window Redis
/// holds, however many products hold it (a console upgraded during a sale finds every product
/// without one; a re-import whose push failed, every product with the old one).
pub(super) fn window_alerts(products: &[ProductStatus]) -> Vec<Alert> {
    let mut windows: std::collections::BTreeMap<(Option<i64>, Option<i64>), Vec<&str>> =
        std::collections::BTreeMap::new();
    for p in products {
        if let Some(w) = p.redis_window
            && p.window_differs()
        {
            windows
                .entry((w.opens, w.closes))
                .or_default()
                .push(&p.product);
        }
    }
    windows
        .into_iter()
        .map(|((opens, closes), held)| window_alert(opens, closes, &held))
        .collect()
}

/// The alert of the products whose Redis holds the window `opens`, `closes` (ms; none when
/// absent) instead of the activity's: one product's own, or one for all of them.
fn window_alert(opens: Option<i64>, closes: Option<i64>, held: &[&str]) -> Alert {
    let end = |v: Option<i64>| match v.and_then(chrono::DateTime::from_timestamp_millis) {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        None => "none".to_string(),
    };
    let what = if opens.is_none() && closes.is_none() {
        "carries no sale window in Redis (preheated by an older console): its deductions are not held to the activity's window".to_string()
    } else {
        format!(
            "is held in Redis to another sale window than the activity's (opens {}, closes {})",
            end(opens),
            end(closes)
        )
    };
    let (product, who) = match held {
        [one] => (Some(one.to_string()), one.to_string()),
        [first, rest @ ..] => (
            None,
            format!(
                "{} product(s) ({first} and {} more)",
                held.len(),
                rest.len()
            ),
        ),
        [] => (None, String::new()),
    };
    Alert {
        kind: AlertKind::WindowMismatch,
        severity: Severity::Warning,
        product,
        node: None,
        message: format!("{who} {what}: `fix` or `preheat` writes the activity's"),
        age_secs: None,
    }
}

/// The alerts of what the shop's app servers did against the contract (docs/app-servers.md):
/// each names the rule, the requests behind it and what to do.
pub(super) fn fault_alerts(p: &ProductStatus) -> Vec<(AlertKind, Severity, String)> {
    let Some(f) = p.faults.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(x) = &f.request_reused {
        out.push((
            AlertKind::RequestReused,
            Severity::Warning,
            format!(
                "{}: {} deduction(s) ({} unit(s)) of request ids whose order belongs to another product (request ids are unique across an activity): {}; fix returns them here once past the grace window",
                p.product,
                x.count,
                x.units,
                examples_shown(x)
            ),
        ));
    }
    if let Some(x) = &f.order_mismatch {
        // Orders holding more than their deductions took are units sold that Redis did not
        // take: oversell risk.
        let severity = if x.units > 0 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        out.push((
            AlertKind::OrderMismatch,
            severity,
            format!(
                "{}: {} order(s) do not copy their deduction (an order's product, user and quantity are the deduction's): {}; an order of another quantity: correct or cancel it in the shop (fix does not guess which side is right); an order for another product: fix returns the deduction here, past the grace window, and books the order on its product",
                p.product,
                x.count,
                examples_shown(x)
            ),
        ));
    }
    if let Some(x) = &f.outside_window {
        out.push((
            AlertKind::OutsideWindow,
            Severity::Warning,
            format!(
                "{}: {} deduction(s) ({} unit(s)) served outside the sale window: {}; an app server runs a deduction script that does not check the window, or the product was preheated without one (fix writes it)",
                p.product,
                x.count,
                x.units,
                x.requests_shown()
            ),
        ));
    }
    if let Some(x) = &f.order_after_return {
        out.push((
            AlertKind::OrderAfterReturn,
            Severity::Critical,
            format!(
                "{}: {} live order(s) ({} unit(s)) of requests whose units were returned: {}; an order was written after its deduction went back (a retry answered -7, or it landed past the grace window), or a deduction was returned before its order was marked dead; fix books the units again",
                p.product,
                x.count,
                x.units,
                x.requests_shown()
            ),
        ));
    }
    out
}

/// A fault's examples with what is wrong with each.
fn examples_shown(f: &super::faults::Fault) -> String {
    let mut parts: Vec<String> = f
        .examples
        .iter()
        .map(|e| format!("{} ({})", e.request_id, e.detail))
        .collect();
    let more = f.count.saturating_sub(f.examples.len());
    if more > 0 {
        parts.push(format!("and {more} more"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::alerts::product_alerts;
    use crate::domain::meta::Meta;
    use crate::domain::stock::{StockValue, Truth};

    fn status(stock: StockValue, truth: Truth) -> ProductStatus {
        let meta = Meta {
            present: true,
            limit: Some(1),
            ..Meta::default()
        };
        ProductStatus::build("p1", 1, (&stock, &meta, &[]), truth)
    }

    #[test]
    fn a_product_without_a_window_is_counted_once_and_another_window_named() {
        let none = crate::domain::stock::RedisWindow {
            opens: None,
            closes: None,
        };
        let mut a = status(StockValue::Value(8), Truth::new(10, 2, 0, 0));
        a.product = "a".into();
        a.redis_window = Some(none);
        let mut b = a.clone();
        b.product = "b".into();
        let mut c = a.clone();
        c.product = "c".into();
        c.redis_window = Some(crate::domain::stock::RedisWindow {
            opens: Some(0),
            closes: None,
        });
        let alerts = product_alerts(&[a, b, c]);
        let window: Vec<&Alert> = alerts
            .iter()
            .filter(|x| x.kind == AlertKind::WindowMismatch)
            .collect();
        assert_eq!(window.len(), 2, "{alerts:?}");
        // Grouped by the window Redis holds: none (a and b together), then c's own.
        assert_eq!(window[0].product, None);
        assert!(
            window[0].message.starts_with("2 product(s) (a and 1 more)"),
            "{}",
            window[0].message
        );
        assert_eq!(window[1].product.as_deref(), Some("c"));
        assert!(
            window[1].message.contains("1970-01-01T00:00:00Z"),
            "{}",
            window[1].message
        );
    }
}
