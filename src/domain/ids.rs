//! Activity and product ids: `[A-Za-z0-9_-]{1,64}`. Anything else is bad input, because an id
//! becomes part of a Redis hash tag and a SCAN pattern, where `{`, `}`, `:` or `*` would change
//! which keys a command touches.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest id the contract allows.
pub const MAX_ID_LEN: usize = 64;

/// True when `s` is a valid activity or product id.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check(what: &str, s: &str) -> Result<()> {
    if is_valid_id(s) {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "{what} id '{}' is invalid: use 1 to {MAX_ID_LEN} characters from A-Z a-z 0-9 _ -",
            shorten(s)
        )))
    }
}

/// Keeps error messages one line even for a pasted megabyte.
fn shorten(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if clean.chars().count() > 80 {
        let head: String = clean.chars().take(77).collect();
        format!("{head}...")
    } else {
        clean
    }
}

macro_rules! id_type {
    ($name:ident, $what:literal) => {
        #[doc = concat!("A validated ", $what, " id.")]
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `s`; the error names the bad value.
            pub fn parse(s: &str) -> Result<Self> {
                check($what, s)?;
                Ok($name(s.to_string()))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        impl std::str::FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                $name::parse(s)
            }
        }
    };
}

id_type!(ActivityId, "activity");
id_type!(ProductId, "product");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_contract_alphabet() {
        assert!(is_valid_id("a"));
        assert!(is_valid_id("A-z_09"));
        assert!(is_valid_id(&"x".repeat(64)));
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "a:b",
            "a{b}",
            "a}",
            "a b",
            "a*",
            "é",
            "a\n",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_id(bad), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn error_names_the_value() {
        let err = ActivityId::parse("a{1}").expect_err("braces are invalid");
        assert!(err.message.contains("'a{1}'"), "{}", err.message);
        assert_eq!(err.kind.exit_code(), 2);
    }
}
