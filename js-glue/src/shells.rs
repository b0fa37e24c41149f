//! The exports whose bodies are the same in both shells, written once here;
//! and the test that keeps every other body out of both shells.

/// Expands, in a shell crate, every export whose body needs nothing of the
/// framework: the `Policy` getters, `scriptText` and `limitsJson`, the `MemoryEngine`
/// constructor and `keyCount`, the `DenyCache` getters, `forget` and
/// `clear`, and the free functions `errorCodes`, `constantsJson`, `version`,
/// `escapeTenant`, `slot`, `forgetTenant`, `resendPauseMs` and `limitField`.
///
/// `$attr` is the framework's attribute macro, in scope at the call site
/// (`napi` or `wasm_bindgen`). Both read `getter`, `constructor` and
/// `js_name = "..."` the same way, so one spelling serves both. The shell
/// defines `Policy { inner: glue::Policy }` and
/// `MemoryEngine { inner: glue::MemoryEngine }` (deriving `Default`); these
/// add impl blocks to them, next to the shell's own.
///
/// ```text
/// use napi_derive::napi;
/// slidelimit_js_glue::shared_exports!(napi);
/// ```
#[macro_export]
macro_rules! shared_exports {
    ($attr:ident) => {
        #[$attr]
        impl Policy {
            #[$attr(getter)]
            pub fn namespace(&self) -> String {
                self.inner.namespace()
            }

            #[$attr(getter)]
            pub fn resource(&self) -> String {
                self.inner.resource()
            }

            #[$attr(getter)]
            pub fn algorithm(&self) -> String {
                self.inner.algorithm()
            }

            #[$attr(getter)]
            pub fn limit(&self) -> f64 {
                self.inner.limit()
            }

            #[$attr(getter, js_name = "windowMs")]
            pub fn window_ms(&self) -> f64 {
                self.inner.window_ms()
            }

            /// Absent (napi: null, wasm: undefined) unless bucketed.
            #[$attr(getter)]
            pub fn buckets(&self) -> Option<f64> {
                self.inner.buckets()
            }

            /// The Lua source for EVAL after a NOSCRIPT.
            #[$attr(js_name = "scriptText")]
            pub fn script_text(&self, peek: bool) -> String {
                self.inner.script_text(peek)
            }

            /// Every limit as JSON (`glue::Policy::limits_json`).
            #[$attr(js_name = "limitsJson")]
            pub fn limits_json(&self) -> String {
                self.inner.limits_json()
            }
        }

        #[$attr]
        impl DenyCache {
            #[$attr(getter)]
            pub fn capacity(&self) -> f64 {
                self.inner.capacity()
            }

            /// Tenants held now.
            #[$attr(getter)]
            pub fn size(&self) -> u32 {
                self.inner.size()
            }

            /// Drops `tenant` in this and every other cache of the process (a
            /// reset through this limiter); returns the tenants held.
            #[$attr]
            pub fn forget(&mut self, tenant: String) -> u32 {
                self.inner.forget(&tenant)
            }

            #[$attr]
            pub fn clear(&mut self) {
                self.inner.clear()
            }
        }

        /// Core's name of a field of the limit at `index` of a policy of
        /// several (`limits[1].window_ms`); absent past core's most limits.
        #[$attr(js_name = "limitField")]
        pub fn limit_field(index: u32, field: String) -> Option<String> {
            $crate::limit_field(index, &field)
        }

        #[$attr]
        impl MemoryEngine {
            #[$attr(constructor)]
            pub fn new() -> Self {
                Self::default()
            }

            #[$attr(getter, js_name = "keyCount")]
            pub fn key_count(&self) -> u32 {
                self.inner.key_count()
            }
        }

        /// Every error code core defines, in numeric order.
        #[$attr(js_name = "errorCodes")]
        pub fn error_codes() -> Vec<String> {
            $crate::error_codes()
        }

        /// Core's defaults and metric names as JSON (`glue::constants_json`).
        #[$attr(js_name = "constantsJson")]
        pub fn constants_json() -> String {
            $crate::constants_json()
        }

        /// slidelimit-core's version.
        #[$attr]
        pub fn version() -> String {
            $crate::version()
        }

        /// `tenant` as it appears in a key.
        #[$attr(js_name = "escapeTenant")]
        pub fn escape_tenant(tenant: String) -> String {
            $crate::escape_tenant(&tenant)
        }

        /// Cluster slot of a key.
        #[$attr]
        pub fn slot(key: String) -> u32 {
            $crate::slot(&key)
        }

        /// Every deny cache of this copy of the module drops `tenant`'s
        /// entry: a reset through a limiter whose own cache is off.
        #[$attr(js_name = "forgetTenant")]
        pub fn forget_tenant(tenant: String) {
            $crate::forget_tenant(&tenant)
        }

        /// Core's wait in ms before resending a script call Redis refused
        /// without running it (TRYAGAIN while a slot migrates), at the
        /// `attempt`-th resend; absent (napi: null, wasm: undefined) when
        /// the reply is not to be resent.
        #[$attr(js_name = "resendPauseMs")]
        pub fn resend_pause_ms(reply: String, attempt: u32) -> Option<f64> {
            $crate::resend_pause_ms(&reply, attempt)
        }
    };
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    /// The two shells, relative to this crate.
    const SHELLS: [&str; 2] = ["../node/native/src/lib.rs", "../wasm/src/lib.rs"];

    /// `text` with comments and the insides of string and char literals
    /// blanked, so that braces in them do not count.
    fn code_only(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '/' if chars.peek() == Some(&'/') => {
                    while chars.next_if(|&c| c != '\n').is_some() {}
                }
                '"' => {
                    out.push('"');
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => {
                                chars.next();
                            }
                            '"' => break,
                            _ => {}
                        }
                    }
                    out.push('"');
                }
                // A char literal ('{', '\n'), not a lifetime ('a): blanked.
                '\'' if matches!(chars.clone().nth(1), Some('\'')) => {
                    chars.nth(1);
                    out.push_str("' '");
                }
                '\'' if chars.peek() == Some(&'\\') => {
                    chars.nth(1); // the backslash and the escaped char
                    while chars.next().is_some_and(|c| c != '\'') {}
                    out.push_str("' '");
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// Every `fn`'s name and body (between its braces, exclusive) in `code`.
    fn bodies(code: &str) -> Vec<(String, String)> {
        let bytes = code.as_bytes();
        let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let mut found = Vec::new();
        let mut at = 0;
        while let Some(off) = code[at..].find("fn ") {
            let start = at + off;
            at = start + 3;
            if start > 0 && is_ident(bytes[start - 1]) {
                continue; // the tail of a longer word
            }
            let name: String = code[at..]
                .trim_start()
                .chars()
                .take_while(|&c| c.is_alphanumeric() || c == '_')
                .collect();
            // The body opens at the first `{`, unless a `;` ends a bodiless fn first.
            let Some(open) = code[at..].find(['{', ';']).map(|i| at + i) else {
                break;
            };
            if bytes[open] == b';' {
                continue;
            }
            let mut depth = 0;
            let close = (open..bytes.len())
                .find(|&i| {
                    match bytes[i] {
                        b'{' => depth += 1,
                        b'}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .expect("unbalanced braces");
            found.push((name, code[open + 1..close].to_owned()));
            at = open + 1; // nested fns are bodies of their own
        }
        found
    }

    /// The body as compared: no whitespace and no `&`, so that `f(&x)` and
    /// `f(x)` (String against &str parameters) count as the same body.
    fn normalized(body: &str) -> String {
        body.chars()
            .filter(|c| !c.is_whitespace() && *c != '&')
            .collect()
    }

    /// Bodies found in both `a` and `b`, as "name (a) / name (b): body".
    fn shared(a: &str, b: &str) -> Vec<String> {
        let of = |text: &str| -> HashMap<String, String> {
            bodies(&code_only(text))
                .into_iter()
                .map(|(name, body)| (normalized(&body), name))
                .filter(|(body, _)| !body.is_empty())
                .collect()
        };
        let (a, b) = (of(a), of(b));
        let mut both: Vec<String> = a
            .iter()
            .filter_map(|(body, name)| {
                b.get(body)
                    .map(|other| format!("{name} (napi) / {other} (wasm): {body}"))
            })
            .collect();
        both.sort();
        both
    }

    #[test]
    fn no_function_body_is_written_in_both_shells() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let [napi, wasm] = SHELLS.map(|p| {
            let path = dir.join(p);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        });
        // Guards the extraction itself: a parser that found nothing would pass.
        assert!(
            bodies(&code_only(&napi)).len() >= 10,
            "napi shell: too few fns found"
        );
        assert!(
            bodies(&code_only(&wasm)).len() >= 10,
            "wasm shell: too few fns found"
        );
        let both = shared(&napi, &wasm);
        assert!(
            both.is_empty(),
            "function bodies written in both shells; move them into \
             glue::shared_exports! or the glue itself:\n{}",
            both.join("\n")
        );
    }

    #[test]
    fn finds_a_body_shared_across_spellings() {
        let napi = "#[napi]\npub fn slot(key: String) -> u32 {\n    glue::slot(&key)\n}\n\
                    fn other() { let s = \"}\"; s.len() }";
        let wasm = "#[wasm_bindgen]\npub fn slot(key: &str) -> u32 { glue::slot(key) } // {\n\
                    fn nested<'a>(x: &'a str) -> char { '{' }";
        assert_eq!(
            shared(napi, wasm),
            ["slot (napi) / slot (wasm): glue::slot(key)"]
        );
    }

    #[test]
    fn reads_nested_bodies_and_skips_bodiless_fns() {
        let code = "trait T { fn a(); }\nfn outer() { fn inner() { 1 } inner() }";
        let names: Vec<_> = bodies(&code_only(code))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["outer", "inner"]);
    }
}
