//! One error taxonomy for every binding: a stable code, the field at fault (if
//! any) and a message for people.

use std::fmt;

/// Stable error codes. The string form is what every binding exposes; the
/// number is what the C ABI returns. Numbers are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[repr(u32)]
pub enum ErrorCode {
    /// A policy, tenant, cost or time that breaks the contract's rules.
    InvalidArgument = 1,
    /// Redis could not be reached or did not answer within the timeout.
    Unavailable = 2,
    /// Redis ran the script and it failed (or the server rejected the call).
    ScriptError = 3,
    /// The key exists with a type the algorithm does not use.
    WrongType = 4,
    /// The reply was not the five integers the contract promises.
    MalformedReply = 5,
    /// The server refused the command for this user (ACL `NOPERM`) or refused
    /// the credentials (`WRONGPASS`, `NOAUTH`).
    PermissionDenied = 6,
    /// A bug in slidelimit itself (for example a caught panic at the FFI boundary).
    Internal = 7,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 7] = [
        ErrorCode::InvalidArgument,
        ErrorCode::Unavailable,
        ErrorCode::ScriptError,
        ErrorCode::WrongType,
        ErrorCode::MalformedReply,
        ErrorCode::PermissionDenied,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::ScriptError => "script_error",
            ErrorCode::WrongType => "wrong_type",
            ErrorCode::MalformedReply => "malformed_reply",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn as_u32(self) -> u32 {
        self as u32
    }

    pub fn from_u32(n: u32) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_u32() == n)
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with a stable [`ErrorCode`], the offending field when one is to
/// blame, and a message that names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    code: ErrorCode,
    field: Option<&'static str>,
    message: String,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            field: None,
            message: message.into(),
        }
    }

    /// An `invalid_argument` error about one field; the message starts with its name.
    pub fn invalid(field: &'static str, problem: impl fmt::Display) -> Self {
        Error {
            code: ErrorCode::InvalidArgument,
            field: Some(field),
            message: format!("{field}: {problem}"),
        }
    }

    /// This error about a field of one limit, named as core names it for
    /// the limit at `index` of a policy of `limits` limits: unchanged for
    /// one limit, `limit` becomes `limits[1].limit` for several. Bindings
    /// that check a limit's values before core does use it too.
    pub fn for_limit(self, index: usize, limits: usize) -> Error {
        if limits < 2 {
            return self;
        }
        let Some(field) = self.field else {
            return self;
        };
        let Some(renamed) = crate::policy::limit_field(index, field) else {
            return self;
        };
        let problem = self
            .message
            .strip_prefix(field)
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(&self.message)
            .to_owned();
        Error::invalid(renamed, problem)
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn field(&self) -> Option<&'static str> {
        self.field
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a binding must do with an error reply from Redis, without the error
/// itself. Superseded by [`crate::map_server_error`], which also builds the
/// error (and names the key in a WRONGTYPE); kept while the C ABI moves over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerErrorKind {
    /// The script is not in this node's cache: load it and retry once.
    NoScript,
    /// The node does not own the slot (Cluster): `unavailable` when it surfaces.
    Redirect,
    /// Redis is loading, busy or a replica cannot serve: treat as unavailable.
    Transient,
    /// Anything else is final for this call.
    Final(ErrorCode),
}

/// Classifies the text of a Redis error reply by the same table as
/// [`crate::map_server_error`].
pub fn classify_server_error(reply: &str) -> ServerErrorKind {
    use crate::server_error::{row, Row};
    match row(reply) {
        Row::NoScript => ServerErrorKind::NoScript,
        Row::Redirect => ServerErrorKind::Redirect,
        Row::Transient => ServerErrorKind::Transient,
        Row::InvalidArgument => ServerErrorKind::Final(ErrorCode::InvalidArgument),
        Row::WrongType => ServerErrorKind::Final(ErrorCode::WrongType),
        Row::PermissionDenied => ServerErrorKind::Final(ErrorCode::PermissionDenied),
        Row::Other => ServerErrorKind::Final(ErrorCode::ScriptError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut numbers: Vec<u32> = ErrorCode::ALL.iter().map(|c| c.as_u32()).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_u32(code.as_u32()), Some(code));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::from_u32(0), None);
    }

    #[test]
    fn server_errors_are_classified() {
        use ServerErrorKind::*;
        assert_eq!(
            classify_server_error("NOSCRIPT No matching script."),
            NoScript
        );
        assert_eq!(
            classify_server_error(
                "WRONGTYPE Operation against a key holding the wrong kind of value script: x"
            ),
            Final(ErrorCode::WrongType)
        );
        assert_eq!(
            classify_server_error(
                "ERR Error running script (call to f_x): @user_script:1: WRONGTYPE Operation"
            ),
            Final(ErrorCode::WrongType)
        );
        assert_eq!(
            classify_server_error("NOPERM User rl has no permissions to access the 'x' key"),
            Final(ErrorCode::PermissionDenied)
        );
        assert_eq!(classify_server_error("MOVED 3999 127.0.0.1:7001"), Redirect);
        assert_eq!(classify_server_error("LOADING Redis is loading"), Transient);
        assert_eq!(
            classify_server_error("ERR slidelimit: bad"),
            Final(ErrorCode::ScriptError)
        );
        assert_eq!(
            classify_server_error("ERR slidelimit invalid_argument cost: must be at least 1"),
            Final(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            classify_server_error(
                "WRONGTYPE slidelimit: the key holds data slidelimit did not write (...)"
            ),
            Final(ErrorCode::WrongType)
        );
    }

    #[test]
    fn invalid_names_the_field() {
        let e = Error::invalid("tenant", "must not be empty");
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(e.field(), Some("tenant"));
        assert_eq!(e.to_string(), "invalid_argument: tenant: must not be empty");
    }
}
