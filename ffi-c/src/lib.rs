//! The C ABI of slidelimit: a thin shell over `slidelimit-core`.
//!
//! Conventions (see `docs/ffi.md`):
//! - every fallible function returns a [`result::slidelimit_result`];
//!   out-params are written only when it is `SLIDELIMIT_RESULT_OK`;
//! - inputs are `const`; every byte pointer is followed by its length, so no
//!   string needs a NUL terminator (a NULL pointer is fine when the length is 0);
//! - functions that can fail for a reason worth explaining take an optional
//!   caller buffer (`msg`, `msg_cap`, `msg_len`) that receives the detailed
//!   message on failure, truncated at a UTF-8 boundary and NUL-terminated,
//!   and an optional `field` that receives the field core blames (a
//!   [`result::slidelimit_field`]), so no binding parses the message for it;
//! - every body runs inside a panic boundary and checks its pointers for NULL;
//! - each owned type has exactly one `*_free` function, which accepts NULL.
//!
//! Nothing here decides anything: keys, validation, scripts, reply parsing,
//! error mapping and the memory engine all come from core. One module per
//! concern, as in rustls-ffi:
//!
//! - [`boundary`]: the panic boundary, NULL checks, byte-slice helpers;
//! - [`result`]: the result enum, its names and the version string;
//! - [`policy`]: algorithms, policies, keys and slots, the timeout rule;
//! - [`call`]: scripts, building a call (as a handle or into caller
//!   buffers), parsing replies, mapping server errors;
//! - [`words`]: flat forms of results for bindings where each crossing
//!   costs (the decision as plain words);
//! - [`memory`]: the in-memory engine;
//! - [`metrics`]: core's metric names, help texts, labels and buckets;
//! - [`defaults`]: core's policy defaults (namespace, algorithm).

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)] // The safety contract of every function is in the header docs.

// Plumbing shared by every function; nothing in it is exported.
mod boundary;

// The exported API, one module per concern, in the order of the header
// (cbindgen writes the modules in the order they are declared).
pub mod result;

pub mod policy;

pub mod call;

pub mod words;

pub mod memory;

pub mod deny_cache;

pub mod metrics;

pub mod defaults;

// Buffers for a wasm host (go/ without cgo); absent from native builds and
// from the header.
#[cfg(target_arch = "wasm32")]
pub mod wasm;
