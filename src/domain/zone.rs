//! The operator's time zone: text tables and the TUI show times in it (operators think in
//! their own zone); JSON stays RFC 3339 in UTC.

use crate::error::{Error, Result};
use chrono::{DateTime, FixedOffset, Local, Utc};

/// Where times are shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Zone {
    /// The machine's zone (TZ, /etc/localtime).
    #[default]
    Local,
    Named(chrono_tz::Tz),
}

impl Zone {
    /// `local`, or an IANA name (`Asia/Shanghai`, `UTC`); anything else names itself.
    pub fn parse(text: &str) -> Result<Zone> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        t.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
            Error::bad_input(format!(
                "time zone '{}' is unknown: use an IANA name such as Asia/Shanghai or UTC, or local",
                t.escape_debug()
            ))
        })
    }

    /// `t` in this zone.
    pub fn at(&self, t: DateTime<Utc>) -> DateTime<FixedOffset> {
        match self {
            Zone::Local => t.with_timezone(&Local).fixed_offset(),
            Zone::Named(tz) => t.with_timezone(tz).fixed_offset(),
        }
    }

    /// `t` as tables show it: date, time and offset (`2026-12-01 08:00:00 +08:00`).
    pub fn show(&self, t: DateTime<Utc>) -> String {
        self.at(t).format("%Y-%m-%d %H:%M:%S %:z").to_string()
    }

    /// The zone's name, for headers: the IANA name, or `local` with its offset now.
    pub fn name(&self) -> String {
        match self {
            Zone::Local => format!("local {}", Utc::now().with_timezone(&Local).format("%:z")),
            Zone::Named(tz) => tz.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn names_parse_and_show_their_offset() {
        let t = Utc
            .with_ymd_and_hms(2026, 12, 1, 0, 0, 0)
            .single()
            .expect("time");
        let sh = Zone::parse("Asia/Shanghai").expect("known");
        assert_eq!(sh.show(t), "2026-12-01 08:00:00 +08:00");
        assert_eq!(sh.name(), "Asia/Shanghai");
        assert_eq!(
            Zone::parse("UTC").expect("known").show(t),
            "2026-12-01 00:00:00 +00:00"
        );
        assert_eq!(Zone::parse(" local ").expect("local"), Zone::Local);
        for bad in ["Mars/Olympus", "", "+08:00", "Asia/Nowhere"] {
            let e = Zone::parse(bad).expect_err(bad);
            assert!(e.message.contains("is unknown"), "{}", e.message);
        }
    }
}
