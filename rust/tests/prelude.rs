//! The scripts are `lua/prelude.lua` + the algorithm's file, spliced by core.
//! Against a real redis-server: the text core sends is what Redis hashes to
//! the SHA core names; the by-hand recipe of docs/protocol.md (`cat` the two
//! files, `redis-cli --eval` the result) decides exactly as the binding does;
//! and an algorithm's file sent alone is refused, writing nothing.

mod common;

use common::{raw_connection, redis_url, unique_namespace};
use slidelimit::{Algorithm, MemoryEngine, Mode, Policy, Script};
use std::path::{Path, PathBuf};
use std::process::Command;

fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lua")
}

fn file_name(algorithm: Algorithm) -> String {
    format!("{}.lua", algorithm.as_str())
}

/// `cat lua/prelude.lua lua/<algorithm>.lua`, read from the files as they are now.
fn spliced_by_hand(algorithm: Algorithm) -> String {
    let read = |name: &str| std::fs::read_to_string(lua_dir().join(name)).unwrap();
    read("prelude.lua") + &read(&file_name(algorithm))
}

#[test]
fn redis_hashes_the_spliced_text_to_cores_sha1() {
    let mut con = raw_connection();
    for script in Script::ALL {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.text())
            .query(&mut con)
            .unwrap();
        assert_eq!(sha, script.sha1(), "{script:?}");
    }
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        assert_eq!(
            spliced_by_hand(algorithm),
            Script::new(algorithm, Mode::Acquire).text()
        );
    }
}

/// `redis-cli -u URL --eval FILE KEY , ARGS...`, its output lines (raw
/// mode, as stdout is no terminal: one integer per line, or the error text).
fn redis_cli_eval(file: &Path, key: &str, args: &[String]) -> Vec<String> {
    let out = Command::new("redis-cli")
        .arg("-u")
        .arg(redis_url())
        .arg("--eval")
        .arg(file)
        .arg(key)
        .arg(",")
        .args(args)
        .output()
        .expect("run redis-cli (scripts/deps.sh installs it)");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_by_hand_recipe_decides_like_core() {
    let dir = std::env::temp_dir().join(unique_namespace("slidelimit-prelude-"));
    std::fs::create_dir_all(&dir).unwrap();
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let file = dir.join(file_name(algorithm));
        std::fs::write(&file, spliced_by_hand(algorithm)).unwrap();
        let policy = Policy::new(&unique_namespace("pre"), "api", algorithm, 3, 1000).unwrap();
        let engine = MemoryEngine::new();
        // Four checks 10 ms apart: three admitted, the fourth denied.
        for step in 0..4u64 {
            let now = 1_800_000_000_000 + 10 * step;
            let call = policy.build_call("t", 1, Some(now), Mode::Acquire).unwrap();
            let got = redis_cli_eval(&file, &call.keys[0], &call.args);
            let d = engine.acquire(&policy, "t", 1, now).unwrap();
            let expect: Vec<String> = [
                u64::from(d.allowed),
                d.remaining,
                d.retry_after_ms,
                d.reset_after_ms,
                d.now_ms,
            ]
            .iter()
            .map(u64::to_string)
            .collect();
            assert_eq!(got, expect, "{algorithm:?} step {step}");
            assert_eq!(d.allowed, step < 3);
        }
        // The arguments are checked as well: the field core would name.
        let got = redis_cli_eval(
            &file,
            &policy.key("t").unwrap(),
            &["3".into(), "1000".into(), "4".into(), String::new()],
        );
        assert!(
            got.concat()
                .starts_with("ERR slidelimit invalid_argument cost:"),
            "{algorithm:?}: {got:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_algorithm_file_alone_is_refused_and_writes_nothing() {
    let mut con = raw_connection();
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let alone = std::fs::read_to_string(lua_dir().join(file_name(algorithm))).unwrap();
        let policy = Policy::new(&unique_namespace("alone"), "api", algorithm, 3, 1000).unwrap();
        let call = policy.build_call("t", 1, None, Mode::Acquire).unwrap();
        let reply: redis::RedisResult<Vec<i64>> = redis::cmd("EVAL")
            .arg(&alone)
            .arg(1)
            .arg(&call.keys[0])
            .arg(&call.args)
            .query(&mut con);
        assert!(
            reply.is_err(),
            "{algorithm:?} ran without the prelude: {reply:?}"
        );
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&call.keys[0])
            .query(&mut con)
            .unwrap();
        assert_eq!(exists, 0, "{algorithm:?}");
    }
}
