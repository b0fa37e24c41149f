//! What every `extern "C"` body goes through: the panic boundary, NULL
//! checks, `(pointer, length)` inputs turned into slices, out-pointers and the
//! optional message buffer and field. Nothing here is exported.

use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core::{tenant_from_bytes, Error};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Why a call failed: a result code, the field core blames (if any) and a
/// message for people.
pub(crate) struct Failure {
    pub(crate) code: slidelimit_result,
    pub(crate) field: Option<&'static str>,
    pub(crate) message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            code: e.code().into(),
            field: e.field(),
            message: e.message().to_owned(),
        }
    }
}

/// A NULL pointer is the C caller's misuse of a parameter, not a field of the
/// contract: it names the parameter in the message only.
pub(crate) fn null(name: &str) -> Failure {
    Failure {
        code: slidelimit_result::NullPointer,
        field: None,
        message: format!("{name}: must not be NULL"),
    }
}

pub(crate) fn invalid(field: &'static str, problem: impl std::fmt::Display) -> Failure {
    Error::invalid(field, problem).into()
}

/// `BUFFER_TOO_SMALL`, saying what the buffer `name` (whose capacity is
/// `<name>_cap`) needs, in `unit`s, and what it got.
pub(crate) fn too_small(name: &str, what: &str, needed: usize, unit: &str, cap: usize) -> Failure {
    Failure {
        code: slidelimit_result::BufferTooSmall,
        field: None,
        message: format!("{name}: {what} needs {needed} {unit}, {name}_cap is {cap}"),
    }
}

pub(crate) type Outcome = Result<(), Failure>;

/// The optional caller buffer that receives a failure's message, and the
/// optional out-pointer that receives its field.
#[derive(Clone, Copy)]
pub(crate) struct MessageOut {
    pub(crate) buf: *mut u8,
    pub(crate) cap: usize,
    pub(crate) len: *mut usize,
    pub(crate) field: *mut slidelimit_field,
}

impl MessageOut {
    pub(crate) const NONE: MessageOut = MessageOut {
        buf: std::ptr::null_mut(),
        cap: 0,
        len: std::ptr::null_mut(),
        field: std::ptr::null_mut(),
    };

    pub(crate) fn new(
        buf: *mut u8,
        cap: usize,
        len: *mut usize,
        field: *mut slidelimit_field,
    ) -> MessageOut {
        MessageOut {
            buf,
            cap,
            len,
            field,
        }
    }

    /// Writes an error's message and field.
    pub(crate) unsafe fn report(self, field: Option<&'static str>, text: &str) {
        self.write(text);
        slidelimit_field::of(field).write_to(self.field);
    }

    /// Writes as much of `text` as fits (cut at a character boundary) and a NUL.
    pub(crate) unsafe fn write(self, text: &str) {
        let mut n = 0;
        if !self.buf.is_null() && self.cap > 0 {
            n = text.len().min(self.cap - 1);
            while !text.is_char_boundary(n) {
                n -= 1;
            }
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.buf, n);
            *self.buf.add(n) = 0;
        }
        if !self.len.is_null() {
            *self.len = n;
        }
    }
}

/// Runs `body` inside the panic boundary and reports its failure.
pub(crate) fn boundary(msg: MessageOut, body: impl FnOnce() -> Outcome) -> slidelimit_result {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return slidelimit_result::Ok,
        Ok(Err(failure)) => failure,
        Err(_) => Failure {
            code: slidelimit_result::Internal,
            field: None,
            message: "internal: a panic was caught at the C boundary (a bug in slidelimit)"
                .to_owned(),
        },
    };
    // Writing the message and field cannot panic: plain copies into the
    // caller's memory.
    unsafe { msg.report(failure.field, &failure.message) };
    failure.code
}

/// Releases a `Box` handed to C, ignoring NULL; nothing unwinds into C.
pub(crate) unsafe fn free_box<T>(ptr: *mut T) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !ptr.is_null() {
            drop(Box::from_raw(ptr));
        }
    }));
}

/// A `(pointer, length)` input as a slice; NULL is fine only with length 0.
pub(crate) unsafe fn input<'a, T>(
    name: &str,
    ptr: *const T,
    len: usize,
) -> Result<&'a [T], Failure> {
    if len == 0 {
        Ok(&[])
    } else if ptr.is_null() {
        Err(null(name))
    } else {
        Ok(std::slice::from_raw_parts(ptr, len))
    }
}

/// A `(pointer, length)` input that must be UTF-8; the message names `name`.
pub(crate) unsafe fn input_str<'a>(
    name: &'static str,
    ptr: *const u8,
    len: usize,
) -> Result<&'a str, Failure> {
    let bytes = input(name, ptr, len)?;
    std::str::from_utf8(bytes).map_err(|e| {
        invalid(
            name,
            format!("is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })
}

/// A tenant, checked by core's rules (non-empty UTF-8, at most 512 bytes).
pub(crate) unsafe fn tenant_input<'a>(ptr: *const u8, len: usize) -> Result<&'a str, Failure> {
    Ok(tenant_from_bytes(input("tenant", ptr, len)?)?)
}

/// A handle the caller passes in.
pub(crate) unsafe fn reference<'a, T>(name: &str, ptr: *const T) -> Result<&'a T, Failure> {
    ptr.as_ref().ok_or_else(|| null(name))
}

/// Checks an out-pointer up front, so that nothing is computed for nothing.
pub(crate) fn out<T>(name: &str, ptr: *mut T) -> Result<*mut T, Failure> {
    if ptr.is_null() {
        Err(null(name))
    } else {
        Ok(ptr)
    }
}

/// Hands out a pointer into memory that outlives the call (static or owned by
/// an object the caller holds).
pub(crate) unsafe fn bytes_out(
    bytes: &[u8],
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> Outcome {
    let out_ptr = out("out_ptr", out_ptr)?;
    let out_len = out("out_len", out_len)?;
    *out_ptr = bytes.as_ptr();
    *out_len = bytes.len();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_internal_with_a_message() {
        let mut buf = [0xAAu8; 128];
        let mut len = 0usize;
        // A stale field from an earlier failure must not survive.
        let mut field = slidelimit_field::of(Some("limit"));
        let msg = MessageOut::new(buf.as_mut_ptr(), buf.len(), &mut len, &mut field);
        let r = boundary(msg, || panic!("boom"));
        assert_eq!(r, slidelimit_result::Internal);
        assert!(std::str::from_utf8(&buf[..len])
            .unwrap()
            .starts_with("internal:"));
        assert_eq!(buf[len], 0);
        assert_eq!(field, slidelimit_field::NONE);
    }

    #[test]
    fn a_failure_reports_cores_field_even_without_a_message_buffer() {
        let mut field = slidelimit_field::NONE;
        let msg = MessageOut::new(std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut field);
        let r = boundary(msg, || {
            Err(Error::invalid("window_ms", "must be at least 1").into())
        });
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert_eq!(field.name(), Some("window_ms"));
        // Core's errors without a field, and the boundary's own, report none.
        for failure in [
            || Err(Error::new(slidelimit_core::ErrorCode::MalformedReply, "x: y").into()),
            || Err(null("tenant")),
            || Err(too_small("buf", "the key", 9, "bytes", 1)),
        ] as [fn() -> Outcome; 3]
        {
            let mut field = slidelimit_field::of(Some("cost"));
            let msg = MessageOut::new(std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut field);
            assert_ne!(boundary(msg, failure), slidelimit_result::Ok);
            assert_eq!(field, slidelimit_field::NONE);
        }
    }

    #[test]
    fn success_leaves_the_field_untouched() {
        let mut field = slidelimit_field::of(Some("cost"));
        let msg = MessageOut::new(std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut field);
        assert_eq!(boundary(msg, || Ok(())), slidelimit_result::Ok);
        assert_eq!(field.name(), Some("cost"));
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let mut buf = [0xAAu8; 4];
        let mut len = 99usize;
        let msg = MessageOut::new(buf.as_mut_ptr(), buf.len(), &mut len, std::ptr::null_mut());
        // "aé" is 3 bytes; "aéé" needs 5: only "aé" and the NUL fit.
        unsafe { msg.write("aéé") };
        assert_eq!(len, 3);
        assert_eq!(&buf[..4], "aé\0".as_bytes());
    }

    #[test]
    fn null_inputs_are_fine_only_when_empty() {
        let empty: &[u8] = unsafe { input("x", std::ptr::null(), 0) }.ok().unwrap();
        assert!(empty.is_empty());
        let err = unsafe { input::<u8>("x", std::ptr::null(), 1) }
            .err()
            .unwrap();
        assert_eq!(err.code, slidelimit_result::NullPointer);
        assert_eq!(err.message, "x: must not be NULL");
    }
}
