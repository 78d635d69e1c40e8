//! An order's status, as `seckill_order.status` spells it. No I/O.

use serde::Serialize;

/// Where an order is: `pending_payment` and `paid` hold stock (the order counts as sold);
/// `cancelled` and `expired` gave it back (or are about to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    PendingPayment,
    Paid,
    Cancelled,
    Expired,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::PendingPayment => "pending_payment",
            OrderStatus::Paid => "paid",
            OrderStatus::Cancelled => "cancelled",
            OrderStatus::Expired => "expired",
        }
    }

    /// The status a row spells; None for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending_payment" => OrderStatus::PendingPayment,
            "paid" => OrderStatus::Paid,
            "cancelled" => OrderStatus::Cancelled,
            "expired" => OrderStatus::Expired,
            _ => return None,
        })
    }

    /// True for an order that holds stock: it counts as sold.
    pub fn is_live(self) -> bool {
        matches!(self, OrderStatus::PendingPayment | OrderStatus::Paid)
    }

    /// True when the status a row spells holds stock (a status the contract does not know
    /// does not).
    pub fn spelled_live(s: &str) -> bool {
        Self::parse(s).is_some_and(Self::is_live)
    }
}

impl std::fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_only_two_hold_stock() {
        for s in [
            OrderStatus::PendingPayment,
            OrderStatus::Paid,
            OrderStatus::Cancelled,
            OrderStatus::Expired,
        ] {
            assert_eq!(OrderStatus::parse(s.as_str()), Some(s));
        }
        assert!(OrderStatus::spelled_live("paid") && OrderStatus::spelled_live("pending_payment"));
        assert!(!OrderStatus::spelled_live("expired") && !OrderStatus::spelled_live("PAID"));
    }
}
