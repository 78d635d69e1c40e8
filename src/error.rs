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

/// An error with its kind. The message never holds a password: callers build it from redacted
/// URLs only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
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
