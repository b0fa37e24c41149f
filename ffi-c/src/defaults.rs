//! Core's defaults, for bindings whose callers may leave the namespace, the
//! algorithm or the timeout out (Ruby's keyword arguments, Go's options): the
//! binding fills them in from here instead of keeping its own copy.

use std::ffi::{c_char, CStr};
use std::panic::catch_unwind;

/// Static NUL-terminated copies of core's defaults (a test checks them
/// against core, so they cannot drift).
const DEFAULT_NAMESPACE: &CStr = c"rl";
const DEFAULT_ALGORITHM: &CStr = c"sliding_log";

/// The namespace a binding uses when its caller names none (core's
/// `DEFAULT_NAMESPACE`), as a static NUL-terminated string: never free it.
#[no_mangle]
pub extern "C" fn slidelimit_default_namespace() -> *const c_char {
    catch_unwind(|| DEFAULT_NAMESPACE.as_ptr()).unwrap_or(c"".as_ptr())
}

/// The name of the algorithm a binding uses when its caller names none
/// (core's `DEFAULT_ALGORITHM`, for `slidelimit_algorithm_parse`), as a
/// static NUL-terminated string: never free it.
#[no_mangle]
pub extern "C" fn slidelimit_default_algorithm() -> *const c_char {
    catch_unwind(|| DEFAULT_ALGORITHM.as_ptr()).unwrap_or(c"".as_ptr())
}

/// The per-call timeout in milliseconds a binding uses when its caller sets
/// none (core's `DEFAULT_TIMEOUT_MS`).
#[no_mangle]
pub extern "C" fn slidelimit_default_timeout_ms() -> u64 {
    slidelimit_core::DEFAULT_TIMEOUT_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: *const c_char) -> &'static str {
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn defaults_are_cores() {
        assert_eq!(
            text(slidelimit_default_namespace()),
            slidelimit_core::DEFAULT_NAMESPACE
        );
        assert_eq!(
            text(slidelimit_default_algorithm()),
            slidelimit_core::DEFAULT_ALGORITHM.as_str()
        );
        assert_eq!(
            slidelimit_default_timeout_ms(),
            slidelimit_core::DEFAULT_TIMEOUT_MS
        );
    }
}
