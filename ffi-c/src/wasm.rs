//! Exports for a host that runs the wasm32 build (Go's cgo-free path, under
//! wazero): the host has no allocator of its own inside the module's memory,
//! so it asks for buffers here to pass inputs and receive outputs. Only on
//! wasm32: the native ABI and header do not change.

use std::alloc::{alloc, dealloc, Layout};

/// Every block is 8-aligned, enough for the `uint64_t` and `double` out-params.
const ALIGN: usize = 8;

/// Allocates `len` bytes (at least 1) in the module's memory; NULL when out
/// of memory. Release it with `slidelimit_wasm_free` and the same `len`.
#[no_mangle]
pub extern "C" fn slidelimit_wasm_alloc(len: usize) -> *mut u8 {
    match Layout::from_size_align(len.max(1), ALIGN) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) => unsafe { alloc(layout) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// Releases a block from `slidelimit_wasm_alloc` (`len` as given to it). NULL
/// is ignored.
///
/// # Safety
/// `ptr` comes from `slidelimit_wasm_alloc(len)` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_wasm_free(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(len.max(1), ALIGN) {
        // SAFETY: the caller hands back a block of this layout.
        unsafe { dealloc(ptr, layout) }
    }
}
