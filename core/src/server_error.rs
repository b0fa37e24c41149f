//! The one table that maps an error reply from Redis to what a binding does
//! with it: retry once with EVAL, or report an [`Error`] with the code every
//! binding reports for it. `docs/protocol.md` ("Errors") shows the table.

use crate::error::{Error, ErrorCode};
use crate::policy::Algorithm;

/// What a binding does with one error reply from Redis to a script call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerErrorAction {
    /// NOSCRIPT: send the same call once as EVAL on the same connection/node.
    RetryWithEval,
    /// Anything else: this error, final for the call.
    Fail(Error),
}

/// How the scripts start the error reply for an argument that breaks a rule
/// of the contract; the field's name, `: ` and the problem follow.
const INVALID_ARGUMENT_REPLY: &str = "ERR slidelimit invalid_argument ";

/// The field names core uses, so that a field named by a script maps to the
/// same `&'static str` a check in core would report.
const FIELDS: [&str; 9] = [
    "buckets",
    "limit",
    "window_ms",
    "cost",
    "now_ms",
    "tenant",
    "namespace",
    "resource",
    "algorithm",
];

/// The rows of the table, without the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Row {
    NoScript,
    Redirect,
    Transient,
    InvalidArgument,
    WrongType,
    PermissionDenied,
    Other,
}

/// How servers say that the ACL refused a key or a command: `NOPERM` first,
/// or, for a command a script called, in their own words (Redis 6.2 and 7.0:
/// "The user executing the script can't run this command or subcommand";
/// 7.2 and Valkey 8: "ACL failure in script: User u has no permissions to
/// run the 'set' command").
const ACL_REFUSALS: [&str; 4] = [
    "NOPERM",
    "No permissions",
    "ACL failure in script",
    "can't run this command or subcommand",
];

/// What a server at its `maxclients` answers a new connection's first command.
const MAX_CLIENTS_REACHED: &str = "ERR max number of clients reached";

/// Server states that pass: a load, a busy script, a slot on the move, a
/// failover, and the states in which a master refuses writes: a full memory
/// (`OOM`, with `maxmemory-policy noeviction`), too few replicas for
/// `min-replicas-to-write` (`NOREPLICAS`), a failed save with
/// `stop-writes-on-bgsave-error` (`MISCONF`). Redis refuses a script's write
/// only before its first one, so nothing was recorded; a denial, which
/// writes nothing, is still answered.
fn is_transient(code: &str) -> bool {
    matches!(
        code,
        "LOADING"
            | "BUSY"
            | "TRYAGAIN"
            | "CLUSTERDOWN"
            | "MASTERDOWN"
            | "READONLY"
            | "OOM"
            | "NOREPLICAS"
            | "MISCONF"
    )
}

/// Redis 6.2 and older wrap the error of a command a script ran in their own
/// text, the command's code after the last `: -` (`ERR Error running script
/// (call to f_...): @user_script:9: @user_script: 9: -READONLY You can't
/// ...`); 7.0 and later answer with the command's code first.
fn wrapped_code(reply: &str) -> Option<&str> {
    if !reply.starts_with("ERR Error running script") {
        return None;
    }
    let after = &reply[reply.rfind(": -")? + 3..];
    after.split_whitespace().next()
}

pub(crate) fn row(reply: &str) -> Row {
    let code = reply.split_whitespace().next().unwrap_or("");
    match code {
        "NOSCRIPT" => return Row::NoScript,
        "MOVED" | "ASK" => return Row::Redirect,
        _ if is_transient(code) => return Row::Transient,
        // An auth refusal is the same kind of failure as an ACL one: the
        // server will not run commands for these credentials, and retrying
        // cannot help. WRONGPASS answers AUTH/HELLO with a wrong password;
        // NOAUTH any command on a connection that has not authenticated.
        "NOPERM" | "WRONGPASS" | "NOAUTH" => return Row::PermissionDenied,
        _ => {}
    }
    // The scripts check their arguments as core does and name the field.
    if reply.starts_with(INVALID_ARGUMENT_REPLY) {
        return Row::InvalidArgument;
    }
    // A server at `maxclients` answers a new connection so, then closes it.
    if wrapped_code(reply).is_some_and(is_transient) || reply == MAX_CLIENTS_REACHED {
        return Row::Transient;
    }
    // Inside a script the server wraps the command's error in its own text
    // ("ERR Error running script ...: WRONGTYPE ..."); the scripts also answer
    // `WRONGTYPE slidelimit: ...` for a key of the right type holding data
    // slidelimit did not write.
    if reply.contains("WRONGTYPE") {
        Row::WrongType
    } else if ACL_REFUSALS.iter().any(|text| reply.contains(text)) {
        Row::PermissionDenied
    } else {
        Row::Other
    }
}

/// Maps one error reply from Redis to a script call. `reply` is the server's
/// error text (`"NOSCRIPT No matching script..."`, with the error prefix);
/// `key` and `algorithm` are the call's, so a WRONGTYPE names them.
pub fn map_server_error(reply: &str, key: &str, algorithm: Algorithm) -> ServerErrorAction {
    match row(reply) {
        Row::NoScript => ServerErrorAction::RetryWithEval,
        row => ServerErrorAction::Fail(final_error(row, reply, Some((key, algorithm)))),
    }
}

/// The first wait before a resend (see [`resend_pause_ms`]); each attempt
/// doubles it, up to [`MAX_RESEND_PAUSE_MS`].
pub const FIRST_RESEND_PAUSE_MS: u64 = 5;
/// The longest wait between two resends.
pub const MAX_RESEND_PAUSE_MS: u64 = 100;

/// How long a binding waits before sending a script call again that Redis
/// answered with the error `reply` without running it, at the `attempt`-th
/// resend (from 0). The call ran nowhere, so a resend cannot count twice:
/// - `TRYAGAIN`, which a Cluster node answers while the slot of a call's
///   keys migrates and it holds only some of them (a policy of several
///   limits): every attempt, 5, 10, 20, 40, 80, then 100 ms, since the keys
///   are together again once the move ends;
/// - `MOVED` or `ASK` that reached the binding (the Cluster client spent its
///   own redirects while a slot moved): the first attempt only, after 5 ms,
///   so that a client that never follows redirects (a standalone client on a
///   Cluster node) still fails at once after it.
///
/// `None` for anything else. A binding resends (EVALSHA, with its NOSCRIPT
/// fallback as ever) while its call timeout leaves room for the wait, and
/// otherwise reports the reply as [`map_server_error`] maps it
/// (`unavailable`).
pub fn resend_pause_ms(reply: &str, attempt: u32) -> Option<u64> {
    match row(reply) {
        Row::Transient if reply.split_whitespace().next() == Some("TRYAGAIN") => {
            let doubled = FIRST_RESEND_PAUSE_MS
                .checked_shl(attempt.min(16))
                .unwrap_or(u64::MAX);
            Some(doubled.min(MAX_RESEND_PAUSE_MS))
        }
        Row::Redirect if attempt == 0 => Some(FIRST_RESEND_PAUSE_MS),
        _ => None,
    }
}

/// Maps an error reply to the EVAL sent after a NOSCRIPT (or any error once the
/// retry is spent): a NOSCRIPT again means the server will not run the script,
/// a `script_error`; everything else maps as in [`map_server_error`].
pub fn map_server_error_after_retry(reply: &str, key: &str, algorithm: Algorithm) -> Error {
    final_error(row(reply), reply, Some((key, algorithm)))
}

/// Maps an error reply to a command that is not a script call (connecting,
/// `DEL` for a reset) by the same table, with no retry. Such a command is
/// about no rule's key, so a WRONGTYPE message is the reply alone.
pub fn map_command_error(reply: &str) -> Error {
    final_error(row(reply), reply, None)
}

fn final_error(row: Row, reply: &str, call: Option<(&str, Algorithm)>) -> Error {
    match row {
        Row::NoScript | Row::Other => Error::new(ErrorCode::ScriptError, reply),
        Row::Redirect => Error::new(
            ErrorCode::Unavailable,
            format!("redis unavailable: the cluster's slot map is changing; retry ({reply})"),
        ),
        Row::Transient => Error::new(
            ErrorCode::Unavailable,
            format!("redis unavailable: {reply}"),
        ),
        Row::WrongType => {
            // The multi-limit script names the limit at fault; the call's own
            // key would be its first limit's, perhaps a sound one.
            let (limit, call) = match limit_named_in(reply) {
                Some((i, key, algorithm)) => (format!("limits[{i}]: "), Some((key, algorithm))),
                None => (String::new(), call),
            };
            match call {
                Some((key, algorithm)) => Error::new(
                    ErrorCode::WrongType,
                    format!(
                        "{limit}key {key} holds a value the {} algorithm does not use \
                         (another program's key, or the other algorithm's): {reply}",
                        algorithm.as_str()
                    ),
                ),
                None => Error::new(ErrorCode::WrongType, reply),
            }
        }
        Row::PermissionDenied => Error::new(ErrorCode::PermissionDenied, reply),
        Row::InvalidArgument => invalid_argument(&reply[INVALID_ARGUMENT_REPLY.len()..]),
    }
}

/// How lua/multi_limit.lua names the limit whose key failed:
/// `WRONGTYPE slidelimit limits[<i>] key <key> (<algorithm>): <the error>`.
const LIMIT_NAMED: &str = "WRONGTYPE slidelimit limits[";

/// The 0-based position, key and algorithm a multi-limit WRONGTYPE names.
/// Keys hold no spaces (core escapes them in tenants and refuses them in
/// names), so the key ends at the first one.
fn limit_named_in(reply: &str) -> Option<(usize, &str, Algorithm)> {
    let rest = &reply[reply.find(LIMIT_NAMED)? + LIMIT_NAMED.len()..];
    let (position, rest) = rest.split_once("] key ")?;
    let (key, rest) = rest.split_once(" (")?;
    let (algorithm, _) = rest.split_once("): ")?;
    Some((
        position.parse().ok()?,
        key,
        Algorithm::parse(algorithm).ok()?,
    ))
}

/// `<field>: <problem>` from a script: core's error for that field. A field
/// core does not know keeps the code, without a field.
fn invalid_argument(rest: &str) -> Error {
    let named = rest.split_once(": ").and_then(|(name, problem)| {
        FIELDS
            .iter()
            .find(|f| **f == name)
            .map(|field| Error::invalid(field, problem))
    });
    named.unwrap_or_else(|| Error::new(ErrorCode::InvalidArgument, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "rl:{geocode:t-1}:log:60000";
    const LOG: Algorithm = Algorithm::SlidingLog;

    fn fail(reply: &str) -> Error {
        match map_server_error(reply, KEY, LOG) {
            ServerErrorAction::Fail(e) => e,
            ServerErrorAction::RetryWithEval => panic!("{reply}: retry, expected an error"),
        }
    }

    #[test]
    fn tryagain_is_resent_with_growing_pauses_a_redirect_once() {
        let reply = "TRYAGAIN Multiple keys request during rehashing of slot";
        let pauses: Vec<_> = (0..8).map(|a| resend_pause_ms(reply, a)).collect();
        assert_eq!(
            pauses,
            [5, 10, 20, 40, 80, 100, 100, 100].map(Some).to_vec()
        );
        assert_eq!(resend_pause_ms(reply, u32::MAX), Some(MAX_RESEND_PAUSE_MS));
        for other in [
            "NOSCRIPT No matching script.",
            "LOADING Redis is loading the dataset in memory",
            "ERR TRYAGAIN",
            "",
        ] {
            assert_eq!(resend_pause_ms(other, 0), None, "{other}");
        }
        // When the resends run out, the reply is unavailable, as ever.
        assert_eq!(fail(reply).code(), ErrorCode::Unavailable);
        // A redirect the client did not follow: once, then unavailable.
        for redirect in ["MOVED 3999 127.0.0.1:7001", "ASK 3999 127.0.0.1:7001"] {
            assert_eq!(resend_pause_ms(redirect, 0), Some(FIRST_RESEND_PAUSE_MS));
            assert_eq!(resend_pause_ms(redirect, 1), None);
        }
    }

    #[test]
    fn noscript_retries_once_then_is_a_script_error() {
        let reply = "NOSCRIPT No matching script. Please use EVAL.";
        assert_eq!(
            map_server_error(reply, KEY, LOG),
            ServerErrorAction::RetryWithEval
        );
        let after = map_server_error_after_retry(reply, KEY, LOG);
        assert_eq!(after.code(), ErrorCode::ScriptError);
        assert_eq!(after.message(), reply);
    }

    #[test]
    fn a_redirect_that_surfaces_is_unavailable() {
        for reply in ["MOVED 3999 127.0.0.1:7001", "ASK 3999 127.0.0.1:7001"] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::Unavailable, "{reply}");
            assert!(e.message().contains("slot map is changing; retry"), "{e}");
            assert!(e.message().contains(reply), "{e}");
            assert_eq!(map_server_error_after_retry(reply, KEY, LOG), e);
        }
    }

    #[test]
    fn transient_server_states_are_unavailable() {
        for reply in [
            "LOADING Redis is loading the dataset in memory",
            "BUSY Redis is busy running a script.",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            "READONLY You can't write against a read only replica.",
            // Redis 7.0 and later, a script's first write at maxmemory.
            "OOM command not allowed when used memory > 'maxmemory'. script: 6f1e, on @user_script:75.",
            // Redis 6.2's wrapping of a command's error inside a script.
            "ERR Error running script (call to f_6f1e): @user_script:75: @user_script: 75: -OOM command not allowed when used memory > 'maxmemory'.",
            "ERR Error running script (call to f_6f1e): @user_script:75: @user_script: 75: -READONLY You can't write against a read only replica.",
            "NOREPLICAS Not enough good replicas to write. script: 6f1e, on @user_script:183.",
            "ERR Error running script (call to f_6f1e): @user_script:183: @user_script: 183: -NOREPLICAS Not enough good replicas to write.",
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. script: 6f1e, on @user_script:183.",
            "ERR Error running script (call to f_6f1e): @user_script:183: @user_script: 183: -MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
            "ERR max number of clients reached",
        ] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::Unavailable, "{reply}");
            assert_eq!(e.message(), format!("redis unavailable: {reply}"));
            assert_eq!(map_server_error_after_retry(reply, KEY, LOG), e);
            assert_eq!(map_command_error(reply), e);
            if !reply.contains("TRYAGAIN") {
                // Only a slot's move ends within a call's timeout.
                assert_eq!(resend_pause_ms(reply, 0), None, "{reply}");
            }
        }
        // Only the wrapped command's code counts: a script error that merely
        // mentions one, or a code in a script's own text, stays a script error.
        for reply in [
            "ERR Error running script (call to f_x): @user_script:3: user_script:3: attempt to index OOM",
            "ERR slidelimit: -READONLY in our own words",
            "ERR Error running script (call to f_x): @user_script:3: -OOMPH not a code",
        ] {
            assert_eq!(fail(reply).code(), ErrorCode::ScriptError, "{reply}");
        }
    }

    #[test]
    fn wrongtype_names_the_key_and_the_algorithm() {
        for reply in [
            "WRONGTYPE Operation against a key holding the wrong kind of value script: x",
            "ERR Error running script (call to f_x): @user_script:1: WRONGTYPE Operation against a key",
            "WRONGTYPE slidelimit: the key holds data slidelimit did not write (...)",
        ] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::WrongType, "{reply}");
            assert_eq!(e.field(), None);
            assert!(
                e.message().starts_with(&format!(
                    "key {KEY} holds a value the sliding_log algorithm does not use"
                )),
                "{e}"
            );
            assert!(e.message().ends_with(reply), "{e}");
        }
        let counter = "rl:{geocode:t-1}:counter:60000";
        let ServerErrorAction::Fail(e) =
            map_server_error("WRONGTYPE Operation", counter, Algorithm::SlidingCounter)
        else {
            panic!("WRONGTYPE must fail");
        };
        assert!(e.message().contains(counter), "{e}");
        assert!(e.message().contains("the sliding_counter algorithm"), "{e}");
    }

    #[test]
    fn a_multi_limit_wrongtype_names_the_limit_at_fault() {
        let second = "rl:{geocode:t-1}:bucketed_window:60000:60";
        for inner in [
            "WRONGTYPE slidelimit: the key holds data slidelimit did not write (...)",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ] {
            let reply =
                format!("WRONGTYPE slidelimit limits[1] key {second} (bucketed_window): {inner}");
            // The call's first key is what a binding passes; the reply wins.
            let e = fail(&reply);
            assert_eq!((e.code(), e.field()), (ErrorCode::WrongType, None));
            assert!(
                e.message().starts_with(&format!(
                    "limits[1]: key {second} holds a value the bucketed_window algorithm does not use"
                )),
                "{e}"
            );
            assert!(e.message().ends_with(&reply), "{e}");
        }
        // Not the script's form: the call's key, as for one limit.
        for reply in [
            "WRONGTYPE slidelimit limits[x] key k (sliding_log): WRONGTYPE",
            "WRONGTYPE slidelimit limits[1] key k (fixed_window): WRONGTYPE",
            "WRONGTYPE slidelimit limits[1] key",
        ] {
            let e = fail(reply);
            assert!(e.message().starts_with(&format!("key {KEY} holds")), "{e}");
        }
    }

    #[test]
    fn noperm_is_permission_denied() {
        for reply in [
            "NOPERM User rl has no permissions to access the 'x' key",
            "ERR Error running script (call to f_x): @user_script:1: NOPERM this user has no permissions",
            "ERR Error running script: No permissions to access a key",
            // A command the user may not run, called by a script: Redis 6.2,
            // 7.0, then 7.2 and Valkey 8.
            "ERR Error running script (call to f_x): @user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand",
            "ERR The user executing the script can't run this command or subcommand script: 9f1e, on @user_script:169.",
            "ERR ACL failure in script: User limiter has no permissions to run the 'setrange' command script: 9f1e, on @user_script:169.",
        ] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::PermissionDenied, "{reply}");
            assert_eq!(e.message(), reply);
        }
    }

    #[test]
    fn an_auth_refusal_is_permission_denied() {
        for reply in [
            "WRONGPASS invalid username-password pair or user is disabled.",
            "NOAUTH Authentication required.",
        ] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::PermissionDenied, "{reply}");
            assert_eq!(e.field(), None);
            assert_eq!(e.message(), reply);
            assert_eq!(map_server_error_after_retry(reply, KEY, LOG), e);
            assert_eq!(map_command_error(reply), e);
        }
        // Only as the error's first word: a script's own text that merely
        // mentions it stays a script error.
        let e = fail("ERR Error running script: @user_script:1: WRONGPASS in a string");
        assert_eq!(e.code(), ErrorCode::ScriptError);
    }

    #[test]
    fn a_scripts_invalid_argument_names_cores_field() {
        for (field, problem) in [
            ("limit", "must be at least 1"),
            ("window_ms", "must be at least 1"),
            ("cost", "exceeds the limit; such a request could never pass"),
            ("now_ms", "must be at most 2^52"),
        ] {
            let reply = format!("ERR slidelimit invalid_argument {field}: {problem}");
            let e = fail(&reply);
            assert_eq!(e, Error::invalid(field, problem), "{reply}");
            assert_eq!(e.field(), Some(field));
            assert_eq!(e.message(), format!("{field}: {problem}"));
        }
        // A field core does not name keeps the code, without a field.
        let e = fail("ERR slidelimit invalid_argument speed: too fast");
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(e.field(), None);
        assert_eq!(e.message(), "speed: too fast");
    }

    #[test]
    fn a_command_that_is_no_call_maps_by_the_same_table() {
        for reply in [
            "NOSCRIPT No matching script.",
            "MOVED 3999 127.0.0.1:7001",
            "LOADING Redis is loading",
            "NOPERM no permissions",
            "ERR slidelimit invalid_argument cost: must be at least 1",
            "ERR unknown command",
        ] {
            assert_eq!(
                map_command_error(reply),
                map_server_error_after_retry(reply, KEY, LOG),
                "{reply}"
            );
        }
        let e = map_command_error("WRONGTYPE Operation");
        assert_eq!(e.code(), ErrorCode::WrongType);
        assert_eq!(e.message(), "WRONGTYPE Operation");
    }

    #[test]
    fn anything_else_is_a_script_error() {
        for reply in [
            "ERR slidelimit: bad",
            "ERR Error running script (call to f_x): @user_script:9: attempt to compare nil",
            "ERR unknown command 'EVALSHA'",
            "",
        ] {
            let e = fail(reply);
            assert_eq!(e.code(), ErrorCode::ScriptError, "{reply:?}");
            assert_eq!(e.message(), reply);
            assert_eq!(map_server_error_after_retry(reply, KEY, LOG), e);
        }
    }
}
