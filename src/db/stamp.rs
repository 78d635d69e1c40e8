//! Times to and from the database, as each backend's columns take and give them.
//!
//! Written: MySQL / MariaDB get a DATETIME parameter. sqlx sends a `DateTime<Utc>` typed as
//! TIMESTAMP, which the server holds to TIMESTAMP's range, so an activity ending after
//! 2038-01-19 was stored as NULL (the columns are `DATETIME(6)`, and the session's zone is UTC,
//! so the value is the same). The others take the time with its zone.
//!
//! Read: PostgreSQL holds times chrono cannot: `infinity` and `-infinity` (a shop's "never
//! ends") and years past 262,143. sqlx's decoder adds their microseconds to its epoch with an
//! operator that panics when the sum leaves chrono's range, so a row written that way would
//! crash every command that read it. [`DbTime`] reads them as the first or last instant chrono
//! holds instead, which every comparison treats as "long ago" or "never" (an activity that never
//! ends is live, and its keys never expire). SQLite and MySQL decode as `DateTime<Utc>` does
//! (their decoders answer an error, not a panic, for a time out of range).

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgValueFormat, PgValueRef};
use sqlx::{Decode, Encode, MySql, Postgres, Sqlite};

/// A time column's value, bound or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbTime(pub DateTime<Utc>);

impl sqlx::Type<MySql> for DbTime {
    /// Bound as DATETIME (see the module's note).
    fn type_info() -> sqlx::mysql::MySqlTypeInfo {
        <chrono::NaiveDateTime as sqlx::Type<MySql>>::type_info()
    }
    /// Read from DATETIME and TIMESTAMP columns alike, as `DateTime<Utc>` is.
    fn compatible(ty: &sqlx::mysql::MySqlTypeInfo) -> bool {
        <DateTime<Utc> as sqlx::Type<MySql>>::compatible(ty)
    }
}

impl Encode<'_, MySql> for DbTime {
    fn encode_by_ref(
        &self,
        buf: &mut <MySql as sqlx::Database>::ArgumentBuffer,
    ) -> Result<sqlx::encode::IsNull, BoxDynError> {
        Encode::<MySql>::encode_by_ref(&self.0.naive_utc(), buf)
    }
}

/// SQLite and PostgreSQL: typed and bound exactly as `DateTime<Utc>`.
macro_rules! as_datetime {
    ($db:ty) => {
        impl sqlx::Type<$db> for DbTime {
            fn type_info() -> <$db as sqlx::Database>::TypeInfo {
                <DateTime<Utc> as sqlx::Type<$db>>::type_info()
            }
            fn compatible(ty: &<$db as sqlx::Database>::TypeInfo) -> bool {
                <DateTime<Utc> as sqlx::Type<$db>>::compatible(ty)
            }
        }
        impl Encode<'_, $db> for DbTime {
            fn encode_by_ref(
                &self,
                buf: &mut <$db as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, BoxDynError> {
                Encode::<$db>::encode_by_ref(&self.0, buf)
            }
        }
    };
}
as_datetime!(Sqlite);
as_datetime!(Postgres);

impl<'r> Decode<'r, Sqlite> for DbTime {
    fn decode(value: <Sqlite as sqlx::Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<Sqlite>>::decode(value).map(DbTime)
    }
}

impl<'r> Decode<'r, MySql> for DbTime {
    fn decode(value: <MySql as sqlx::Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<MySql>>::decode(value).map(DbTime)
    }
}

impl<'r> Decode<'r, Postgres> for DbTime {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        match value.format() {
            // TIMESTAMP and TIMESTAMPTZ: microseconds since 2000-01-01 UTC, `infinity` the
            // largest i64 and `-infinity` the smallest.
            PgValueFormat::Binary => {
                let micros = <i64 as Decode<Postgres>>::decode(value)?;
                Ok(DbTime(from_postgres_micros(micros)))
            }
            // The text form: parsing answers an error, never a panic.
            PgValueFormat::Text => <DateTime<Utc> as Decode<Postgres>>::decode(value).map(DbTime),
        }
    }
}

/// A time column another service may have written in a form no decoder reads (a SQLite TEXT
/// column holds any text): None then, where one bad row must not make the whole list fail.
/// Only for rows an operator lists (the compensation queue); an activity's window is read
/// strictly, since a guess there would open or close a sale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LooseTime(pub Option<DateTime<Utc>>);

macro_rules! loose {
    ($db:ty) => {
        impl sqlx::Type<$db> for LooseTime {
            fn type_info() -> <$db as sqlx::Database>::TypeInfo {
                <DbTime as sqlx::Type<$db>>::type_info()
            }
            fn compatible(ty: &<$db as sqlx::Database>::TypeInfo) -> bool {
                <DbTime as sqlx::Type<$db>>::compatible(ty)
                    || <String as sqlx::Type<$db>>::compatible(ty)
            }
        }
        impl<'r> Decode<'r, $db> for LooseTime {
            fn decode(value: <$db as sqlx::Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(LooseTime(
                    <DbTime as Decode<'r, $db>>::decode(value).ok().map(|t| t.0),
                ))
            }
        }
    };
}
loose!(Sqlite);
loose!(MySql);
loose!(Postgres);

/// 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in seconds since 1970.
const POSTGRES_EPOCH_SECS: i64 = 946_684_800;

/// A PostgreSQL time from its microseconds since its epoch, held to chrono's range.
fn from_postgres_micros(micros: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(POSTGRES_EPOCH_SECS, 0)
        .and_then(|epoch| epoch.checked_add_signed(TimeDelta::microseconds(micros)))
        .unwrap_or(if micros > 0 {
            DateTime::<Utc>::MAX_UTC
        } else {
            DateTime::<Utc>::MIN_UTC
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_times_past_chronos_range_are_held_to_its_edges() {
        assert_eq!(
            from_postgres_micros(0),
            DateTime::<Utc>::from_timestamp(POSTGRES_EPOCH_SECS, 0).expect("epoch")
        );
        assert_eq!(
            from_postgres_micros(1_500_000),
            DateTime::<Utc>::from_timestamp(POSTGRES_EPOCH_SECS + 1, 500_000_000).expect("time")
        );
        // `infinity` and `-infinity`.
        assert_eq!(from_postgres_micros(i64::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(from_postgres_micros(i64::MIN), DateTime::<Utc>::MIN_UTC);
    }
}
