//! The one error type of the console: a kind that maps to the exit code, and a message that an
//! operator can act on (it names the bad value and says what to do).

use serde::Serialize;
use std::fmt;

/// What went wrong, as far as the caller (and the exit code) is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Usage, ids, config, import file: exit 2.
    BadInput,
    /// Redis or the database unreachable or timed out: exit 3.
    Unavailable,
    /// A verification or invariant failed: exit 4.
    CheckFailed,
    /// Refused on purpose (read-only, live activity, compare-and-set conflict, no permission): exit 5.
    Refused,
    /// Something the console did not expect: exit 1.
    Internal,
}

impl ErrorKind {
    /// The process exit code of the contract.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::BadInput => 2,
            ErrorKind::Unavailable => 3,
            ErrorKind::CheckFailed => 4,
            ErrorKind::Refused => 5,
            ErrorKind::Internal => 1,
        }
    }

    /// The name used in the JSON error object.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadInput => "bad_input",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::CheckFailed => "check_failed",
            ErrorKind::Refused => "refused",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of the two servers the console watches an error came from, when it says so: `watch`
/// raises `redis_unreachable` or `db_unreachable` by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    Redis,
    Database,
}

/// An error with its kind. The message never holds a password: callers build it from redacted
/// URLs only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// The server that failed (set where an unreachable server is turned into an error).
    pub service: Option<Service>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            service: None,
        }
    }
    /// `service` could not be reached or did not answer in time (exit 3).
    pub fn unreachable(service: Service, message: impl Into<String>) -> Self {
        Error {
            service: Some(service),
            ..Self::unavailable(message)
        }
    }
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadInput, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    pub fn check_failed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::CheckFailed, message)
    }
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// Names `service` as the one that failed, where the error does not name one already.
    pub fn from_service(mut self, service: Service) -> Self {
        if self.kind == ErrorKind::Unavailable {
            self.service.get_or_insert(service);
        }
        self
    }

    /// Prefixes the message with what the console was doing.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A number given by the operator, echoed back in an error: as typed where it is short, in
/// scientific notation where Rust's plain form runs to hundreds of digits (`1e308`): at most
/// about a dozen characters for any value.
pub fn echoed(x: f64) -> String {
    let plain = x.to_string();
    if plain.len() <= 16 {
        plain
    } else {
        // Six significant digits are enough to recognise what was typed.
        let e = format!("{x:.5e}");
        match e.split_once('e') {
            Some((mantissa, exp)) => {
                let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
                format!("{mantissa}e{exp}")
            }
            None => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::echoed;

    #[test]
    fn short_numbers_as_typed_long_ones_in_scientific_notation() {
        assert_eq!(echoed(1.0), "1");
        assert_eq!(echoed(0.05), "0.05");
        assert_eq!(echoed(4000.5), "4000.5");
        assert_eq!(echoed(1e308), "1e308");
        assert_eq!(echoed(-1.5e300), "-1.5e300");
        assert_eq!(echoed(1e-300), "1e-300");
        assert_eq!(echoed(123_456_789_012_345_680.0), "1.23457e17");
        assert_eq!(echoed(f64::NAN), "NaN");
        assert_eq!(echoed(f64::INFINITY), "inf");
        assert!(echoed(f64::MAX).len() <= 16, "{}", echoed(f64::MAX));
        assert!(echoed(f64::MIN_POSITIVE).len() <= 16);
    }
}
