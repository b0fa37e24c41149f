//! Flat forms for bindings where every crossing of the C ABI and every read
//! of a struct field costs more than the work behind it (ruby-ffi: about a
//! tenth of a microsecond each). Same core decisions as the functions they
//! mirror; only the shape of the output differs.

use crate::boundary::{boundary, input, out, MessageOut};
use crate::result::slidelimit_result;
use slidelimit_core::Decision;

/// How many `uint64_t` words `slidelimit_decision_words_from_reply` writes.
pub const SLIDELIMIT_DECISION_WORDS: usize = 6;

/// `slidelimit_decision_from_reply` with the decision written as
/// `SLIDELIMIT_DECISION_WORDS` words to `out_words`, in this order: allowed
/// (1 or 0), remaining, retry_after_ms, reset_after_ms, now_ms, and
/// `denied_by + 1` (0 when the decision names no denying limit), so a binding
/// reads it back in one go. No message buffer: on a failure (the same code
/// for the same reply, out_words untouched), call
/// `slidelimit_decision_from_reply` for core's message and field.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_decision_words_from_reply(
    reply: *const i64,
    reply_len: usize,
    limits: usize,
    out_words: *mut u64,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_words = out("out_words", out_words)?;
        let reply = input("reply", reply, reply_len)?;
        let d = Decision::from_reply(reply, limits)?;
        let words: [u64; SLIDELIMIT_DECISION_WORDS] = [
            u64::from(d.allowed),
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms,
            d.now_ms,
            d.denied_by.map_or(0, |p| u64::from(p) + 1),
        ];
        std::ptr::copy_nonoverlapping(words.as_ptr(), out_words, words.len());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{slidelimit_decision, slidelimit_decision_from_reply};
    use std::ptr::{null, null_mut};

    // The words hold what the struct holds, and a reply the struct form
    // refuses gets the same code here with the words left alone.
    #[test]
    fn words_match_the_struct_form() {
        let replies: [(&[i64], usize); 10] = [
            (&[1, 2, 0, 1000, 5000], 1),
            (&[0, 0, 250, 900, 5000, 2], 2),
            (&[0, 0, 250, 900, 5000, 2], 1),
            (&[0, 0, 250, 900, 5000, 3], 2),
            (&[0, 0, 250, 900, 5000, 0], 2),
            (&[0, 0, 250, 900, 5000], 1),
            (&[2, 0, 0, 0, 0], 1),
            (&[1, -1, 0, 0, 0], 1),
            (&[1, 2, 0, 1000], 1),
            (&[1, 2, 0, 1000, 5000], 0),
        ];
        for (reply, limits) in replies {
            let mut d = slidelimit_decision {
                allowed: false,
                remaining: 7,
                retry_after_ms: 7,
                reset_after_ms: 7,
                now_ms: 7,
                denied_by: 7,
            };
            let mut words = [7u64; SLIDELIMIT_DECISION_WORDS];
            let (by_struct, by_words) = unsafe {
                (
                    slidelimit_decision_from_reply(
                        reply.as_ptr(),
                        reply.len(),
                        limits,
                        &mut d,
                        null_mut(),
                        0,
                        null_mut(),
                        null_mut(),
                    ),
                    slidelimit_decision_words_from_reply(
                        reply.as_ptr(),
                        reply.len(),
                        limits,
                        words.as_mut_ptr(),
                    ),
                )
            };
            assert_eq!(by_struct, by_words, "{reply:?} of {limits}");
            let want = if by_struct == slidelimit_result::Ok {
                [
                    u64::from(d.allowed),
                    d.remaining,
                    d.retry_after_ms,
                    d.reset_after_ms,
                    d.now_ms,
                    u64::try_from(d.denied_by + 1).unwrap(),
                ]
            } else {
                [7; SLIDELIMIT_DECISION_WORDS]
            };
            assert_eq!(words, want, "{reply:?}");
        }
    }

    #[test]
    fn null_pointers_are_refused() {
        let mut words = [0u64; SLIDELIMIT_DECISION_WORDS];
        let reply = [1i64, 2, 0, 1000, 5000];
        unsafe {
            assert_eq!(
                slidelimit_decision_words_from_reply(null(), 5, 1, words.as_mut_ptr()),
                slidelimit_result::NullPointer
            );
            assert_eq!(
                slidelimit_decision_words_from_reply(reply.as_ptr(), 5, 1, null_mut()),
                slidelimit_result::NullPointer
            );
        }
    }
}
