//! The product's event stream as the console reads it: ids (Redis stream ids, `<ms>-<seq>`,
//! which order every change of a product's books) and the events themselves. No I/O.

use std::fmt;

/// A stream id: milliseconds of Redis time and a sequence number within that millisecond.
/// Ordered as Redis orders them, so "at or before the cut" is a comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub ms: i64,
    pub seq: i64,
}

impl EventId {
    /// Before every real id: the position of an empty or absent stream.
    pub const ZERO: EventId = EventId { ms: 0, seq: 0 };

    /// Parses `<ms>-<seq>`, or a bare `<ms>` (ledger entries written before the stream
    /// existed carry only the time).
    pub fn parse(text: &str) -> Option<EventId> {
        let (ms, seq) = match text.split_once('-') {
            Some((ms, seq)) => (ms, seq),
            None => (text, "0"),
        };
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(ms) || !digits(seq) {
            return None;
        }
        Some(EventId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    /// The form XRANGE takes for "strictly after this id".
    pub fn exclusive(&self) -> String {
        format!("({self}")
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// What an event did to the product's books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `deduct.lua` took units for a request.
    Deducted,
    /// `restore.lua` gave a request's units back.
    Returned,
    /// The console recorded a deduction the database proves (`record.lua`).
    Booked,
    /// The console corrected the stock (`set_stock.lua`); `quantity` is the change.
    Adjusted,
    /// A rebuild ended here (`set_stock.lua` closing a rebuild): the events before it do not
    /// describe the books (some were lost, or their ledger entries were); the ledger does.
    Rebuilt,
    /// Anything else (a kind a newer script writes): ignored.
    Other,
}

/// One entry of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub id: EventId,
    pub kind: EventKind,
    pub request_id: String,
    pub quantity: i64,
}

impl Event {
    /// Builds an event from its id and its one field: the kind (`d`, `r`, `b`, `a`) and
    /// `<units>|<request id>`. None when the id or the value does not parse.
    pub fn from_fields(id: &str, fields: &[(Vec<u8>, Vec<u8>)]) -> Option<Event> {
        let id = EventId::parse(id)?;
        let (kind, value) = fields.first()?;
        let kind = match kind.as_slice() {
            b"d" => EventKind::Deducted,
            b"r" => EventKind::Returned,
            b"b" => EventKind::Booked,
            b"a" => EventKind::Adjusted,
            b"g" => EventKind::Rebuilt,
            _ => EventKind::Other,
        };
        let value = std::str::from_utf8(value).ok()?;
        let (quantity, request_id) = value.split_once('|')?;
        let quantity: i64 = quantity.parse().ok()?;
        if matches!(
            kind,
            EventKind::Deducted | EventKind::Returned | EventKind::Booked
        ) && (request_id.is_empty() || quantity < 1)
        {
            return None;
        }
        Some(Event {
            id,
            kind,
            request_id: request_id.to_string(),
            quantity,
        })
    }

    /// True for an event that makes a request's deduction active (a deduction or a booking).
    pub fn activates(&self) -> bool {
        matches!(self.kind, EventKind::Deducted | EventKind::Booked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        p.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn ids_order_as_redis_does() {
        let a = EventId::parse("1700000000000-5").expect("id");
        let b = EventId::parse("1700000000000-12").expect("id");
        let c = EventId::parse("1700000000001").expect("bare ms");
        assert!(a < b && b < c && EventId::ZERO < a);
        assert_eq!(
            c,
            EventId {
                ms: 1_700_000_000_001,
                seq: 0
            }
        );
        assert_eq!(b.to_string(), "1700000000000-12");
        assert_eq!(a.exclusive(), "(1700000000000-5");
        for bad in [
            "",
            "-",
            "1-",
            "-1",
            "a-1",
            "1-2-3",
            "99999999999999999999-0",
        ] {
            assert_eq!(EventId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn events_from_fields() {
        let e = Event::from_fields("5-1", &pairs(&[("d", "2|req|with|pipes")])).expect("event");
        assert_eq!(
            (e.kind, e.request_id.as_str(), e.quantity),
            (EventKind::Deducted, "req|with|pipes", 2)
        );
        assert!(e.activates());
        let a = Event::from_fields("5-2", &pairs(&[("a", "-7|")])).expect("adjust");
        assert_eq!((a.kind, a.quantity), (EventKind::Adjusted, -7));
        assert!(Event::from_fields("5-3", &pairs(&[("d", "1|")])).is_none());
        assert!(Event::from_fields("5-3", &pairs(&[("d", "x|r")])).is_none());
        assert!(Event::from_fields("x", &pairs(&[("d", "1|a")])).is_none());
        assert!(Event::from_fields("5-3", &[]).is_none());
    }

    proptest::proptest! {
        #[test]
        fn ids_round_trip(ms in 0i64..i64::MAX, seq in 0i64..i64::MAX) {
            let id = EventId { ms, seq };
            proptest::prop_assert_eq!(EventId::parse(&id.to_string()), Some(id));
        }

        /// Whatever the text, an id that parses is the text's numbers (a bare time is sequence
        /// 0), orders as the pair (ms, seq) does, and reads back from its own form.
        #[test]
        fn parsed_ids_are_the_numbers_of_the_text(
            text in "[0-9]{0,20}(-[0-9]{0,20})?|\\PC{0,24}",
            other in (0i64..i64::MAX, 0i64..i64::MAX),
        ) {
            if let Some(id) = EventId::parse(&text) {
                let (ms, seq) = text.split_once('-').unwrap_or((text.as_str(), "0"));
                proptest::prop_assert_eq!(
                    (ms.parse::<i64>().ok(), seq.parse::<i64>().ok()),
                    (Some(id.ms), Some(id.seq))
                );
                proptest::prop_assert_eq!(EventId::parse(&id.to_string()), Some(id));
                proptest::prop_assert_eq!(id.exclusive(), format!("({id}"));
                let other = EventId { ms: other.0, seq: other.1 };
                proptest::prop_assert_eq!(
                    id.cmp(&other),
                    (id.ms, id.seq).cmp(&(other.ms, other.seq))
                );
            }
        }

        /// An event that takes or gives back units names its request and moves at least one.
        #[test]
        fn accepted_events_name_a_request_and_units(
            kind in "[dbra]|[a-z]{0,2}",
            value in "-?[0-9]{0,3}\\|[a-z|]{0,5}|\\PC{0,10}",
        ) {
            let fields = vec![(kind.clone().into_bytes(), value.clone().into_bytes())];
            if let Some(e) = Event::from_fields("1-1", &fields) {
                let (units, request) = value.split_once('|').expect("a '|' in an accepted value");
                proptest::prop_assert_eq!(units.parse::<i64>(), Ok(e.quantity));
                proptest::prop_assert_eq!(request, e.request_id.as_str());
                proptest::prop_assert_eq!(e.activates(), kind == "d" || kind == "b");
                if matches!(kind.as_str(), "d" | "r" | "b") {
                    proptest::prop_assert!(e.quantity >= 1 && !e.request_id.is_empty(), "{:?}", e);
                } else if kind == "g" {
                    proptest::prop_assert_eq!(e.kind, EventKind::Rebuilt);
                } else if kind != "a" {
                    proptest::prop_assert_eq!(e.kind, EventKind::Other);
                }
            }
        }
    }
}
