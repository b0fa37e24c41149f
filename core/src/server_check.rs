//! What a server's `INFO` says about running slidelimit on it
//! (docs/protocol.md, "What the server needs"): the settings under which
//! Redis forgets admissions, refuses them, or is not the master. Pure: a
//! binding sends `INFO` and hands the text over.

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The limit is not kept, or no acquire can be admitted.
    Problem,
    /// Acquires may soon be refused.
    Warning,
    /// What a restart or an untested version may cost.
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Problem => "problem",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One thing `INFO` shows: a stable `code` and what it means here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
}

/// The servers and versions docs/compatibility.md proves (major.minor).
const TESTED: &str = "Redis 6.2, 7.0, 7.2, Valkey 8.0";

/// The findings for one server's `INFO` text (any sections; a rule whose
/// fields are missing is skipped), most severe first.
pub fn check_server_info(info: &str) -> Vec<Finding> {
    let field = |name: &str| {
        info.lines().find_map(|line| {
            let (key, value) = line.trim_end_matches('\r').split_once(':')?;
            (key == name).then_some(value)
        })
    };
    let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok());
    let mut found = Vec::new();
    let mut add = |severity, code, message: String| {
        found.push(Finding {
            severity,
            code,
            message,
        })
    };

    if matches!(field("role"), Some("slave" | "replica")) {
        add(
            Severity::Problem,
            "replica",
            "this server is a replica: every acquire is refused (READONLY, unavailable); \
             point the limiters at its master"
                .into(),
        );
    }
    if let (Some(max), Some(policy)) = (number("maxmemory"), field("maxmemory_policy")) {
        if max > 0 && policy != "noeviction" {
            add(
                Severity::Problem,
                "evicts_keys",
                format!(
                    "maxmemory-policy is {policy} with maxmemory {max}: Redis may evict a \
                     limiter's key and forget its admissions, and a window then admits over \
                     the limit; set maxmemory-policy noeviction"
                ),
            );
        } else if let Some(used) = number("used_memory").filter(|_| max > 0) {
            if used.saturating_mul(10) >= max.saturating_mul(9) {
                add(
                    Severity::Warning,
                    "memory_nearly_full",
                    format!(
                        "used_memory {used} of maxmemory {max} ({}%): at maxmemory every \
                         acquire that would admit is refused (OOM, unavailable)",
                        used.saturating_mul(100) / max
                    ),
                );
            }
        }
    }
    if field("rdb_last_bgsave_status") == Some("err") {
        add(
            Severity::Warning,
            "last_save_failed",
            "the last RDB save failed: with stop-writes-on-bgsave-error yes (the default) \
             every acquire that would admit is refused (MISCONF, unavailable)"
                .into(),
        );
    }
    if field("aof_last_write_status") == Some("err") {
        add(
            Severity::Warning,
            "aof_write_failed",
            "the last AOF write failed: Redis refuses writes until it succeeds \
             (MISCONF, unavailable)"
                .into(),
        );
    }
    if let (Some(clients), Some(max)) = (number("connected_clients"), number("maxclients")) {
        if max > 0 && clients.saturating_mul(10) >= max.saturating_mul(9) {
            add(
                Severity::Warning,
                "clients_nearly_full",
                format!(
                    "{clients} of maxclients {max} connections: at maxclients a worker's new \
                     connection is refused (unavailable)"
                ),
            );
        }
    }
    if field("aof_enabled") == Some("0") {
        add(
            Severity::Note,
            "no_aof",
            "no AOF: a restart forgets the admissions since the last RDB save (all of \
             them without one), and a window may then admit over the limit once"
                .into(),
        );
    }
    if field("cluster_enabled") == Some("1") {
        add(
            Severity::Note,
            "cluster_node",
            "a Cluster node: limiters use the Cluster client, and this looked at this node \
             only; check every master"
                .into(),
        );
    }
    let (server, version) = match field("valkey_version") {
        Some(v) => ("Valkey", v),
        None => match field("redis_version") {
            Some(v) => ("Redis", v),
            None => ("", ""),
        },
    };
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    if let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) {
        let tested = match server {
            "Valkey" => (major, minor) == (8, 0),
            _ => matches!((major, minor), (6, 2) | (7, 0) | (7, 2)),
        };
        if server == "Redis" && (major, minor) < (6, 2) {
            add(
                Severity::Warning,
                "untested_version",
                format!("{server} {version} is older than any tested ({TESTED})"),
            );
        } else if !tested {
            add(
                Severity::Note,
                "untested_version",
                format!("{server} {version} is not among the tested versions ({TESTED})"),
            );
        }
    }
    found.sort_by_key(|f| f.severity);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `INFO` as Redis 7.0 sends it, cut to the fields the rules read.
    fn info(overrides: &[(&str, &str)]) -> String {
        let mut fields = vec![
            ("redis_version", "7.0.15"),
            ("role", "master"),
            ("maxmemory", "0"),
            ("maxmemory_policy", "noeviction"),
            ("used_memory", "1000000"),
            ("rdb_last_bgsave_status", "ok"),
            ("aof_enabled", "1"),
            ("aof_last_write_status", "ok"),
            ("connected_clients", "3"),
            ("maxclients", "10000"),
            ("cluster_enabled", "0"),
        ];
        for (key, value) in overrides {
            match fields.iter_mut().find(|(k, _)| k == key) {
                Some(field) => field.1 = value,
                None => fields.push((key, value)),
            }
        }
        let mut text = String::from("# Server\r\n");
        for (key, value) in fields {
            text += &format!("{key}:{value}\r\n");
        }
        text
    }

    fn codes(info: &str) -> Vec<(Severity, &'static str)> {
        check_server_info(info)
            .into_iter()
            .map(|f| (f.severity, f.code))
            .collect()
    }

    #[test]
    fn a_sound_master_has_no_finding() {
        assert_eq!(codes(&info(&[])), []);
        for version in ["6.2.16", "7.2.6"] {
            assert_eq!(codes(&info(&[("redis_version", version)])), []);
        }
        assert_eq!(
            codes(&info(&[
                ("valkey_version", "8.0.1"),
                ("redis_version", "7.2.4")
            ])),
            []
        );
        // A full memory is a problem only with maxmemory set.
        assert_eq!(codes(&info(&[("used_memory", "99999999999")])), []);
    }

    #[test]
    fn each_rule_names_its_finding() {
        for (overrides, want) in [
            (vec![("role", "slave")], (Severity::Problem, "replica")),
            (
                vec![
                    ("maxmemory", "4194304"),
                    ("maxmemory_policy", "volatile-lru"),
                ],
                (Severity::Problem, "evicts_keys"),
            ),
            (
                vec![("maxmemory", "1000000"), ("used_memory", "900000")],
                (Severity::Warning, "memory_nearly_full"),
            ),
            (
                vec![("rdb_last_bgsave_status", "err")],
                (Severity::Warning, "last_save_failed"),
            ),
            (
                vec![("aof_last_write_status", "err")],
                (Severity::Warning, "aof_write_failed"),
            ),
            (
                vec![("connected_clients", "9000")],
                (Severity::Warning, "clients_nearly_full"),
            ),
            (vec![("aof_enabled", "0")], (Severity::Note, "no_aof")),
            (
                vec![("cluster_enabled", "1")],
                (Severity::Note, "cluster_node"),
            ),
            (
                vec![("redis_version", "6.0.20")],
                (Severity::Warning, "untested_version"),
            ),
            (
                vec![("redis_version", "7.4.1")],
                (Severity::Note, "untested_version"),
            ),
            (
                vec![("valkey_version", "7.2.5")],
                (Severity::Note, "untested_version"),
            ),
        ] {
            assert_eq!(codes(&info(&overrides)), [want], "{overrides:?}");
        }
        // Just under the thresholds: nothing.
        assert_eq!(
            codes(&info(&[
                ("maxmemory", "1000000"),
                ("used_memory", "899999")
            ])),
            []
        );
        assert_eq!(codes(&info(&[("connected_clients", "8999")])), []);
    }

    #[test]
    fn the_most_severe_come_first_and_the_message_says_why() {
        let found = check_server_info(&info(&[
            ("aof_enabled", "0"),
            ("maxmemory", "100"),
            ("maxmemory_policy", "allkeys-lru"),
            ("role", "slave"),
        ]));
        let codes: Vec<_> = found.iter().map(|f| f.code).collect();
        assert_eq!(codes, ["replica", "evicts_keys", "no_aof"]);
        assert!(
            found[1].message.contains("allkeys-lru"),
            "{}",
            found[1].message
        );
        assert!(
            found[1].message.contains("noeviction"),
            "{}",
            found[1].message
        );
    }

    #[test]
    fn missing_or_odd_fields_skip_their_rule() {
        assert_eq!(codes(""), []);
        assert_eq!(
            codes("# Memory\r\nmaxmemory:lots\r\nmaxmemory_policy:allkeys-lru\r\n"),
            []
        );
        assert_eq!(codes("redis_version:unstable\r\n"), []);
        assert_eq!(codes("connected_clients:5\r\nmaxclients:0\r\n"), []);
    }
}
