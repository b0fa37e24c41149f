//! The one result enum every fallible function returns, its stable names,
//! and the version: the static strings of the ABI.

use slidelimit_core::ErrorCode;
use std::ffi::{c_char, CString};
use std::panic::catch_unwind;
use std::sync::OnceLock;

/// The result of every fallible function. Values are stable and never reused:
/// 1..=7 are core's error codes with the same numbers in every binding; 100 and
/// up are errors of the C boundary itself (a misuse by the caller).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_result {
    Ok = 0,
    /// A policy, tenant, cost, time or enum value that breaks the contract.
    InvalidArgument = 1,
    /// Redis could not be reached or did not answer in time.
    Unavailable = 2,
    /// Redis ran the script and it failed.
    ScriptError = 3,
    /// The key holds a type the algorithm does not use.
    WrongType = 4,
    /// The reply is not the five integers the contract promises.
    MalformedReply = 5,
    /// The server refused the command for this user (ACL).
    PermissionDenied = 6,
    /// A bug in slidelimit (for example a panic caught at the boundary).
    Internal = 7,
    /// A required pointer was NULL.
    NullPointer = 100,
    /// The caller's buffer cannot hold the output; nothing was written.
    BufferTooSmall = 101,
}

impl slidelimit_result {
    /// Every value, for the uniqueness test and for name lookups.
    pub(crate) const ALL: [slidelimit_result; 10] = [
        slidelimit_result::Ok,
        slidelimit_result::InvalidArgument,
        slidelimit_result::Unavailable,
        slidelimit_result::ScriptError,
        slidelimit_result::WrongType,
        slidelimit_result::MalformedReply,
        slidelimit_result::PermissionDenied,
        slidelimit_result::Internal,
        slidelimit_result::NullPointer,
        slidelimit_result::BufferTooSmall,
    ];

    fn name(self) -> &'static str {
        match self {
            slidelimit_result::Ok => "ok",
            slidelimit_result::NullPointer => "null_pointer",
            slidelimit_result::BufferTooSmall => "buffer_too_small",
            // Core owns the names of its codes.
            other => other
                .core_code()
                .map(ErrorCode::as_str)
                .unwrap_or("unknown"),
        }
    }

    fn core_code(self) -> Option<ErrorCode> {
        ErrorCode::from_u32(self as u32)
    }
}

impl From<ErrorCode> for slidelimit_result {
    fn from(code: ErrorCode) -> Self {
        // Exhaustive on purpose: a new core code must get its C value here.
        match code {
            ErrorCode::InvalidArgument => slidelimit_result::InvalidArgument,
            ErrorCode::Unavailable => slidelimit_result::Unavailable,
            ErrorCode::ScriptError => slidelimit_result::ScriptError,
            ErrorCode::WrongType => slidelimit_result::WrongType,
            ErrorCode::MalformedReply => slidelimit_result::MalformedReply,
            ErrorCode::PermissionDenied => slidelimit_result::PermissionDenied,
            ErrorCode::Internal => slidelimit_result::Internal,
        }
    }
}

/// The field an error is about, as core names it (`"limit"`, `"tenant"`, ...):
/// `name` points to `len` bytes of static UTF-8 (no NUL terminator; never free
/// it), or is NULL with `len` 0 when the error names no field. Core decides
/// the field when it makes the error, so no binding reads it back from the
/// message.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct slidelimit_field {
    pub name: *const u8,
    pub len: usize,
}

impl slidelimit_field {
    pub(crate) const NONE: slidelimit_field = slidelimit_field {
        name: std::ptr::null(),
        len: 0,
    };

    pub(crate) fn of(field: Option<&'static str>) -> slidelimit_field {
        field.map_or(slidelimit_field::NONE, |name| slidelimit_field {
            name: name.as_ptr(),
            len: name.len(),
        })
    }

    /// The name, for tests (None when no field).
    #[cfg(test)]
    pub(crate) fn name(self) -> Option<&'static str> {
        (!self.name.is_null()).then(|| {
            let bytes = unsafe { std::slice::from_raw_parts(self.name, self.len) };
            std::str::from_utf8(bytes).unwrap()
        })
    }

    /// Writes the field through an optional out-pointer.
    pub(crate) unsafe fn write_to(self, out: *mut slidelimit_field) {
        if !out.is_null() {
            *out = self;
        }
    }
}

/// The version of slidelimit (core's), as a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn slidelimit_version() -> *const c_char {
    static VERSION: OnceLock<CString> = OnceLock::new();
    catch_unwind(|| {
        VERSION
            .get_or_init(|| CString::new(slidelimit_core::VERSION).unwrap_or_default())
            .as_ptr()
    })
    .unwrap_or(c"".as_ptr())
}

/// The stable name of a result code (`"ok"`, `"invalid_argument"`,
/// `"unavailable"`, ..., `"null_pointer"`, `"buffer_too_small"`), the same tag
/// every binding reports; `"unknown"` for a value that is not a code. Static,
/// NUL-terminated: never free it.
#[no_mangle]
pub extern "C" fn slidelimit_result_name(code: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    catch_unwind(|| {
        let names = NAMES.get_or_init(|| {
            slidelimit_result::ALL
                .iter()
                .map(|r| (*r as u32, CString::new(r.name()).unwrap_or_default()))
                .collect()
        });
        names
            .iter()
            .find(|(n, _)| *n == code)
            .map_or(c"unknown".as_ptr(), |(_, name)| name.as_ptr())
    })
    .unwrap_or(c"unknown".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn result_codes_are_unique_and_match_core() {
        let mut values: Vec<u32> = slidelimit_result::ALL.iter().map(|r| *r as u32).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), slidelimit_result::ALL.len());
        for code in ErrorCode::ALL {
            let ours = slidelimit_result::from(code);
            assert_eq!(ours as u32, code.as_u32(), "{code}");
            assert_eq!(ours.name(), code.as_str());
        }
        // The boundary's own codes are outside core's range.
        assert!(ErrorCode::from_u32(slidelimit_result::NullPointer as u32).is_none());
        assert!(ErrorCode::from_u32(slidelimit_result::BufferTooSmall as u32).is_none());
        let mut names: Vec<&str> = slidelimit_result::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), slidelimit_result::ALL.len());
    }

    #[test]
    fn result_names_are_static_c_strings() {
        let name = |c: u32| {
            unsafe { CStr::from_ptr(slidelimit_result_name(c)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(0), "ok");
        assert_eq!(name(1), "invalid_argument");
        assert_eq!(name(7), "internal");
        assert_eq!(name(101), "buffer_too_small");
        assert_eq!(name(8), "unknown");
        let version = unsafe { CStr::from_ptr(slidelimit_version()) };
        assert_eq!(version.to_str().unwrap(), slidelimit_core::VERSION);
    }
}
