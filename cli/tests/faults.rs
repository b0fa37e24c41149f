//! The CLI's side of the fault tests in rust/tests/faults.rs, each against a
//! redis-server of its own: TLS with a private CA, and bad input that must
//! be `invalid_argument` (exit 11) naming the field and write nothing.

#[path = "../../rust/tests/common/mod.rs"]
mod common;

use common::tls::Certificates;
use common::{unique_namespace, OwnRedis};
use std::process::Command;

fn dbsize(con: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

// -------------------------------------------------------------------- TLS

#[test]
fn tls_trusts_a_private_ca_through_ssl_cert_file_and_refuses_another() {
    let certs = Certificates::generate("cli-server");
    let stranger = Certificates::generate("cli-stranger");
    let port = common::free_port();
    let _own = OwnRedis::start_args(port, certs.server_args(port));
    let url = format!("rediss://localhost:{port}/");
    let ns = unique_namespace("tls");

    // The CLI trusts a private CA through SSL_CERT_FILE (read by rustls-native-certs).
    let cli = |ca: &str| {
        Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args([
                "acquire",
                "--redis",
                &url,
                "--resource",
                "geocode",
                "--tenant",
                "cli",
            ])
            .args([
                "--namespace",
                &ns,
                "--limit",
                "5",
                "--window-ms",
                "1000",
                "--json",
            ])
            .env("SSL_CERT_FILE", ca)
            .output()
            .unwrap()
    };
    let out = cli(&certs.path("ca.crt"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&stranger.path("ca.crt"));
    assert_eq!(
        out.status.code(),
        Some(12),
        "unavailable: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// -------------------------------------------------------------- bad input

#[test]
fn bad_input_is_invalid_argument_naming_the_field_and_writes_nothing() {
    let own = OwnRedis::start();
    let mut con = own.connection();
    let ns = "bad";
    // Exit 11 (invalid_argument), the field on stderr, no key.
    let url = own.url();
    let oversized = "x".repeat(513);
    let base = |tenant: &str, limit: &str, window: &str, cost: &str| -> Vec<String> {
        [
            "acquire",
            "--redis",
            &url,
            "--namespace",
            ns,
            "--resource",
            "geocode",
            "--tenant",
            tenant,
            "--limit",
            limit,
            "--window-ms",
            window,
            "--cost",
            cost,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    for (args, field) in [
        (base("", "3", "1000", "1"), "tenant"),
        (base(&oversized, "3", "1000", "1"), "tenant"),
        (base("t", "3", "1000", "4"), "cost"),
        (base("t", "0", "1000", "1"), "limit"),
        (base("t", "3", "0", "1"), "window_ms"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(11), "{field}: {stderr}");
        assert!(
            stderr.contains("invalid_argument") && stderr.contains(field),
            "{stderr}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_slidelimit"))
        .args([
            "reset",
            "--redis",
            &url,
            "--resource",
            "geocode",
            "--tenant",
            "",
            "--window-ms",
            "1000",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(11),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dbsize(&mut con), 0, "bad input through the CLI wrote a key");
}
