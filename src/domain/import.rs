//! The activity import file (TOML): parsed and validated in full before anything is written, so
//! a bad file is an error that names the file, the field and the bad value.
//!
//! ```toml
//! [activity]
//! id = "spring-sale"
//! name = "Spring sale"
//! starts_at = 2026-12-01T10:00:00Z      # a TOML datetime or an RFC 3339 string, with offset
//! ends_at = "2026-12-01T20:00:00+08:00"
//! status = "scheduled"                  # optional: draft | scheduled | cancelled
//!
//! [[products]]
//! id = "p1"
//! name = "Phone"                        # optional
//! stock = 100
//! per_user_limit = 2
//! ```

use super::activity::{ACTIVITY_STATUSES, Activity, ActivityDef, ActivityStatus, Product};
use super::ids::is_valid_id;
use super::{ActivityId, ProductId};
use crate::error::{Error, Result};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashSet;

/// The largest stock one product may hold: the Lua scripts keep integers exact below 2^53.
pub const MAX_STOCK: i64 = 1_000_000_000_000;
/// The largest per-user limit: what one request may take (`deduct.lua` refuses a quantity
/// above 10^9), well inside the scripts' exact integers and every backend's column.
pub const MAX_LIMIT: i64 = 1_000_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    activity: RawActivity,
    #[serde(default)]
    products: Vec<RawProduct>,
}

/// One part of a file cut at its `[[products]]` headers (see [`parse_in_parts`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPart {
    activity: Option<RawActivity>,
    #[serde(default)]
    products: Vec<RawProduct>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawActivity {
    id: String,
    name: String,
    starts_at: toml::Value,
    ends_at: toml::Value,
    status: Option<String>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProduct {
    id: String,
    name: Option<String>,
    stock: i64,
    per_user_limit: i64,
}

/// Parses and validates an import file. `file` is only used in messages.
pub fn parse_activity_file(file: &str, text: &str) -> Result<ActivityDef> {
    let bad = |msg: String| Error::bad_input(format!("file '{file}': {msg}"));
    let parsed = parse_in_parts(text, PRODUCTS_PER_PART).map_or_else(|| toml::from_str(text), Ok);
    let raw: RawFile = parsed.map_err(|e| {
        bad(format!(
            "not a valid activity file{}: {}",
            toml_location(text, &e),
            e.message()
        ))
    })?;

    let a = raw.activity;
    if !is_valid_id(&a.id) {
        return Err(bad(format!(
            "activity.id: '{}' is invalid: use 1 to 64 characters from A-Z a-z 0-9 _ -",
            a.id
        )));
    }
    let activity_id = ActivityId::parse(&a.id).map_err(|e| bad(e.message))?;
    if a.name.trim().is_empty() || a.name.len() > 200 {
        return Err(bad(format!(
            "activity.name: '{}' must be 1 to 200 characters",
            a.name
        )));
    }
    let starts_at = timestamp("activity.starts_at", &a.starts_at).map_err(bad)?;
    let ends_at = timestamp("activity.ends_at", &a.ends_at).map_err(bad)?;
    if ends_at <= starts_at {
        return Err(bad(format!(
            "activity.ends_at: '{}' is not after starts_at '{}'",
            ends_at.to_rfc3339(),
            starts_at.to_rfc3339()
        )));
    }
    let status_given = a.status.is_some();
    let status = match a.status.as_deref() {
        None => ActivityStatus::Scheduled,
        Some(s) => ActivityStatus::parse(s).ok_or_else(|| {
            bad(format!(
                "activity.status: '{s}' is not one of {}",
                ACTIVITY_STATUSES.join(", ")
            ))
        })?,
    };

    if raw.products.is_empty() {
        return Err(bad(
            "products: the file has no [[products]] entry; an activity needs at least one".into(),
        ));
    }
    let mut seen = HashSet::new();
    let mut products = Vec::with_capacity(raw.products.len());
    for (i, p) in raw.products.into_iter().enumerate() {
        let field = |f: &str| format!("products[{i}].{f}");
        if !is_valid_id(&p.id) {
            return Err(bad(format!(
                "{}: '{}' is invalid: use 1 to 64 characters from A-Z a-z 0-9 _ -",
                field("id"),
                p.id
            )));
        }
        if !seen.insert(p.id.clone()) {
            return Err(bad(format!(
                "{}: '{}' is a duplicate product id",
                field("id"),
                p.id
            )));
        }
        if p.stock < 0 {
            return Err(bad(format!(
                "{}: {} is negative; stock must be >= 0",
                field("stock"),
                p.stock
            )));
        }
        if p.stock > MAX_STOCK {
            return Err(bad(format!(
                "{}: {} is above the maximum {MAX_STOCK}",
                field("stock"),
                p.stock
            )));
        }
        if p.per_user_limit < 1 {
            return Err(bad(format!(
                "{}: {} must be >= 1",
                field("per_user_limit"),
                p.per_user_limit
            )));
        }
        if p.per_user_limit > MAX_LIMIT {
            return Err(bad(format!(
                "{}: {} is above the maximum {MAX_LIMIT} (one request takes at most that many units)",
                field("per_user_limit"),
                p.per_user_limit
            )));
        }
        products.push(Product::new(
            ProductId::parse(&p.id).map_err(|e| bad(e.message))?,
            p.name.as_deref().unwrap_or_default(),
            p.stock,
            p.per_user_limit,
        ));
    }
    Ok(ActivityDef {
        activity: Activity {
            activity_id,
            name: a.name,
            starts_at,
            ends_at,
            status,
        },
        products,
        status_given,
    })
}

/// Products parsed at once by [`parse_in_parts`]: a part of about 80 KB.
const PRODUCTS_PER_PART: usize = 1_000;

/// A large file parsed a part at a time, cut before its `[[products]]` headers: the TOML
/// parser holds every token of what it parses (an 8.3 MB file of 100,000 products took 266 MB
/// whole), while each part's tokens are dropped before the next part's are made.
///
/// None, and the caller parses the file whole, for a file of one part and wherever the
/// parts could read differently from the whole file: a file with a multi-line string (a
/// header-like line could sit inside one), a part that does not parse (a cut inside a multi-line array leaves one unclosed;
/// the whole file's parse then reports the error where it is), or an `[activity]` table in
/// more or fewer than one part. The root's keys (a `products = [...]` among them) can only
/// be in the first part, before its headers, which then clash there as in the whole file. A
/// header this does not recognize (`[[ products ]]`) only leaves two products in one part.
fn parse_in_parts(text: &str, per_part: usize) -> Option<RawFile> {
    if text.contains("\"\"\"") || text.contains("'''") {
        return None;
    }
    let mut cuts = vec![0];
    let mut headers = 0usize;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if is_products_header(line) {
            if headers > 0 && headers.is_multiple_of(per_part) {
                cuts.push(at);
            }
            headers += 1;
        }
        at += line.len();
    }
    if cuts.len() == 1 {
        // One part: the whole file, parsed as such.
        return None;
    }
    cuts.push(text.len());
    let mut activity = None;
    let mut products = Vec::with_capacity(headers);
    for w in cuts.windows(2) {
        let part: RawPart = toml::from_str(&text[w[0]..w[1]]).ok()?;
        if let Some(a) = part.activity
            && activity.replace(a).is_some()
        {
            return None;
        }
        products.extend(part.products);
    }
    Some(RawFile {
        activity: activity?,
        products,
    })
}

/// A line that is exactly a `[[products]]` header, maybe indented, maybe with a comment.
fn is_products_header(line: &str) -> bool {
    line.trim_start_matches([' ', '\t'])
        .strip_prefix("[[products]]")
        .is_some_and(|rest| {
            let rest = rest.trim_matches([' ', '\t', '\r', '\n']);
            rest.is_empty() || rest.starts_with('#')
        })
}

/// Where a TOML error is: ` (line N, key 'k')`, the key only when the line starts with one.
/// Never the value, which may be a secret.
pub fn toml_location(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return String::new();
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = line.split('=').next().unwrap_or("").trim();
    let is_key = !key.is_empty()
        && line.contains('=')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if is_key {
        format!(" (line {line_no}, key '{key}')")
    } else {
        format!(" (line {line_no})")
    }
}

fn timestamp(field: &str, v: &toml::Value) -> std::result::Result<DateTime<Utc>, String> {
    let text = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        other => return Err(format!("{field}: {other} is not a date-time")),
    };
    let t = DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            format!("{field}: '{text}' is not an RFC 3339 date-time with offset, e.g. 2026-12-01T10:00:00Z")
        })?;
    // One calendar on every backend: MySQL's DATETIME holds the years 1000 to 9999, and a
    // sale before the epoch is a typo.
    if !(1970..=9999).contains(&chrono::Datelike::year(&t)) {
        return Err(format!(
            "{field}: '{text}' is out of range: give a time from 1970 to 9999 (UTC)"
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[activity]
id = "a1"
name = "Sale"
starts_at = 2026-12-01T10:00:00Z
ends_at = "2026-12-01T20:00:00+08:00"

[[products]]
id = "p1"
stock = 10
per_user_limit = 2
"#;

    #[test]
    fn a_time_out_of_every_backends_calendar_is_named() {
        for (when, ok) in [
            ("2099-12-31T23:59:59Z", true),
            ("9999-12-31T23:59:59Z", true),
            // Year 10000 in UTC.
            ("9999-12-31T23:00:00-05:00", false),
            ("1969-12-31T23:59:59Z", false),
        ] {
            let v = toml::Value::String(when.into());
            let r = timestamp("activity.ends_at", &v);
            assert_eq!(r.is_ok(), ok, "{when}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains("activity.ends_at") && e.contains(when), "{e}");
            }
        }
    }

    #[test]
    fn parses_a_good_file() {
        let def = parse_activity_file("x.toml", GOOD).expect("valid file");
        assert_eq!(def.activity.activity_id.as_str(), "a1");
        assert_eq!(def.activity.status, ActivityStatus::Scheduled);
        assert!(
            !def.status_given,
            "no status in the file: a re-import keeps the database's"
        );
        assert_eq!(def.products[0].initial_stock, 10);
        assert_eq!(
            def.activity.ends_at.to_rfc3339(),
            "2026-12-01T12:00:00+00:00"
        );
    }

    fn err(text: &str) -> String {
        let e = parse_activity_file("bad.toml", text).expect_err("must fail");
        assert_eq!(e.kind.exit_code(), 2);
        e.message
    }

    #[test]
    fn errors_name_file_field_and_value() {
        let m = err(&GOOD.replace("id = \"p1\"", "id = \"p{1}\""));
        assert!(
            m.contains("bad.toml") && m.contains("products[0].id") && m.contains("'p{1}'"),
            "{m}"
        );
        let m = err(&GOOD.replace("id = \"a1\"", "id = \"a:1\""));
        assert!(m.contains("activity.id") && m.contains("'a:1'"), "{m}");
        let m = err(&GOOD.replace("stock = 10", "stock = -5"));
        assert!(m.contains("products[0].stock") && m.contains("-5"), "{m}");
        let m = err(&GOOD.replace("per_user_limit = 2", ""));
        assert!(m.contains("per_user_limit"), "{m}");
        for big in ["9223372036854775807", "10000000000000000", "1000000001"] {
            let m = err(&GOOD.replace("per_user_limit = 2", &format!("per_user_limit = {big}")));
            assert!(
                m.contains("products[0].per_user_limit")
                    && m.contains(big)
                    && m.contains("maximum"),
                "{m}"
            );
        }
        let m = err(&format!(
            "{GOOD}\n[[products]]\nid = \"p1\"\nstock = 1\nper_user_limit = 1\n"
        ));
        assert!(
            m.contains("products[1].id") && m.contains("duplicate"),
            "{m}"
        );
        let m = err("this is { not toml");
        assert!(
            m.contains("bad.toml") && m.contains("not a valid activity file"),
            "{m}"
        );
        let m = err(&GOOD.replace(
            "starts_at = 2026-12-01T10:00:00Z",
            "starts_at = \"tomorrow\"",
        ));
        assert!(
            m.contains("activity.starts_at") && m.contains("'tomorrow'"),
            "{m}"
        );
    }

    /// What any parse must hold: an accepted file keeps every documented bound; a refused
    /// one is bad input that names the file.
    fn parse_holds_its_rules(
        text: &str,
    ) -> std::result::Result<(), proptest::test_runner::TestCaseError> {
        use proptest::{prop_assert, prop_assert_eq};
        match parse_activity_file("fuzz.toml", text) {
            Ok(def) => {
                let a = &def.activity;
                prop_assert!(is_valid_id(a.activity_id.as_str()), "{}", a.activity_id);
                prop_assert!(
                    !a.name.trim().is_empty() && a.name.len() <= 200,
                    "{:?}",
                    a.name
                );
                prop_assert!(a.ends_at > a.starts_at, "{} {}", a.starts_at, a.ends_at);
                prop_assert!(
                    ACTIVITY_STATUSES.contains(&a.status.as_str()),
                    "{}",
                    a.status
                );
                prop_assert!(!def.products.is_empty());
                let mut ids = HashSet::new();
                for p in &def.products {
                    prop_assert!(
                        ids.insert(p.product_id.as_str()),
                        "duplicate {}",
                        p.product_id
                    );
                    prop_assert!((0..=MAX_STOCK).contains(&p.initial_stock), "{:?}", p);
                    prop_assert!((1..=MAX_LIMIT).contains(&p.per_user_limit), "{:?}", p);
                }
            }
            Err(e) => {
                prop_assert_eq!(e.kind.exit_code(), 2);
                prop_assert!(e.message.starts_with("file 'fuzz.toml': "), "{}", e.message);
            }
        }
        Ok(())
    }

    /// A file of `n` products, each with a name and a comment or blank line between them.
    fn many(n: usize) -> String {
        let mut text = GOOD.replace(
            "[[products]]\nid = \"p1\"\nstock = 10\nper_user_limit = 2\n",
            "",
        );
        for i in 0..n {
            text.push_str(&format!(
                "\n[[products]] # no. {i}\nid = \"p{i}\"\nname = \"手机 {i}\"\nstock = {i}\nper_user_limit = 1\n"
            ));
        }
        text
    }

    #[test]
    fn a_large_file_is_parsed_in_parts_as_it_reads_whole() {
        let text = many(10);
        let whole: RawFile = toml::from_str(&text).expect("valid");
        let parts = parse_in_parts(&text, 3).expect("cut into four parts");
        assert_eq!(parts.products, whole.products);
        assert_eq!(parts.activity, whole.activity);
        assert_eq!(parts.products.len(), 10);
        assert_eq!(parts.products[9].name.as_deref(), Some("手机 9"));
        // The [activity] table after the products reads the same.
        let (head, rest) = text.split_at(text.find("\n[[products]]").expect("a header"));
        let moved = format!("{rest}\n{head}");
        let parts = parse_in_parts(&moved, 3).expect("the activity in the last part");
        assert_eq!(parts.activity, whole.activity);
        // Windows line ends: the same parts, the same products.
        let crlf = text.replace('\n', "\r\n");
        let parts = parse_in_parts(&crlf, 3).expect("cut at CRLF headers");
        assert_eq!(parts.products, whole.products);
        // One part: the whole file's parse.
        assert!(parse_in_parts(&text, 10).is_none());
        let def = parse_activity_file("big.toml", &text).expect("valid");
        assert_eq!(def.products.len(), 10);
    }

    #[test]
    fn a_file_the_parts_could_misread_is_parsed_whole() {
        let text = many(6);
        // A multi-line string could hold a header-like line.
        let quoted = text.replacen(
            "name = \"手机 1\"",
            "name = \"\"\"a\n[[products]]\nb\"\"\"",
            1,
        );
        assert!(parse_in_parts(&quoted, 2).is_none());
        let def = parse_activity_file("x.toml", &quoted).expect("valid");
        assert_eq!(def.products.len(), 6);
        assert_eq!(def.products[1].name, "a\n[[products]]\nb");
        // Two [activity] tables: the whole file's error, with its line.
        let twice = format!("{text}\n[activity]\nid = \"a2\"\n");
        assert!(parse_in_parts(&twice, 2).is_none());
        let m = err(&twice);
        assert!(m.contains("not a valid activity file (line"), "{m}");
        // A cut inside a multi-line array: the whole file's error.
        let array = text.replacen("stock = 4\n", "stock = [\n4,\n]\n", 1);
        assert!(parse_in_parts(&array, 2).is_none());
        assert!(err(&array).contains("not a valid activity file"));
    }

    proptest::proptest! {
        /// Whatever the parts read is what the whole file reads: a file the parts accept is
        /// one the whole parse accepts, the same activity and the same products in order.
        #[test]
        fn the_parts_read_what_the_whole_file_reads(
            n in 2usize..12,
            per_part in 1usize..5,
            cut in 0usize..2_000,
            junk in "[\\[\\]{}=\"'#.,a-z0-9 \\t\\r\\n-]{0,24}",
        ) {
            let mut text = many(n);
            let at = cut.min(text.len());
            if text.is_char_boundary(at) {
                text.insert_str(at, &junk);
            }
            if let Some(parts) = parse_in_parts(&text, per_part) {
                let whole: std::result::Result<RawFile, _> = toml::from_str(&text);
                proptest::prop_assert!(whole.is_ok(), "parts accepted what the whole refuses: {:?}", whole.err());
                let whole = whole.expect("checked");
                proptest::prop_assert_eq!(parts.activity, whole.activity);
                proptest::prop_assert_eq!(parts.products, whole.products);
            }
        }

        #[test]
        fn any_text_is_a_valid_activity_or_an_error_naming_the_file(s in "\\PC{0,400}") {
            parse_holds_its_rules(&s)?;
        }

        #[test]
        fn mutated_files_are_valid_activities_or_errors_naming_the_file(
            cut in 0usize..200,
            junk in "[\\[\\]{}=\"a-z0-9 \\n-]{0,20}",
        ) {
            let mut text = GOOD.to_string();
            let at = cut.min(text.len());
            if text.is_char_boundary(at) {
                text.insert_str(at, &junk);
            }
            parse_holds_its_rules(&text)?;
        }

        /// Stock and limits written into a file come back as written when within bounds, and
        /// are refused naming the product's field and the value when not.
        #[test]
        fn stock_and_limit_round_trip_or_are_named(
            stock in proptest::prop_oneof![
                0i64..=MAX_STOCK,
                MAX_STOCK - 2..=MAX_STOCK + 2,
                -1_000i64..0,
                MAX_STOCK + 1..i64::MAX,
            ],
            limit in proptest::prop_oneof![
                1i64..=MAX_LIMIT,
                MAX_LIMIT - 2..=MAX_LIMIT + 2,
                -1_000i64..1,
                MAX_LIMIT + 1..i64::MAX,
            ],
            id in "[A-Za-z0-9_-]{1,64}",
        ) {
            let text = GOOD
                .replace("id = \"p1\"", &format!("id = \"{id}\""))
                .replace("stock = 10", &format!("stock = {stock}"))
                .replace("per_user_limit = 2", &format!("per_user_limit = {limit}"));
            let stock_ok = (0..=MAX_STOCK).contains(&stock);
            let limit_ok = (1..=MAX_LIMIT).contains(&limit);
            match parse_activity_file("x.toml", &text) {
                Ok(def) => {
                    proptest::prop_assert!(stock_ok && limit_ok, "accepted {} {}", stock, limit);
                    let p = &def.products[0];
                    proptest::prop_assert_eq!(
                        (p.product_id.as_str(), p.initial_stock, p.per_user_limit),
                        (id.as_str(), stock, limit)
                    );
                }
                Err(e) => {
                    // Stock is checked first.
                    let (field, value) = if stock_ok {
                        ("products[0].per_user_limit", limit)
                    } else {
                        ("products[0].stock", stock)
                    };
                    proptest::prop_assert!(!(stock_ok && limit_ok), "{}", e.message);
                    proptest::prop_assert!(
                        e.message.contains("x.toml")
                            && e.message.contains(field)
                            && e.message.contains(&value.to_string()),
                        "{}",
                        e.message
                    );
                }
            }
        }
    }
}
