//! TLS for the tests: a private CA and a server certificate, made with the
//! openssl command line (scripts/deps.sh installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (scripts/deps.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate for `localhost` only (not 127.0.0.1, so a
/// connection by IP proves the host name is checked), made fresh per run.
pub struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    pub fn generate(name: &str) -> Certificates {
        let dir =
            std::env::temp_dir().join(format!("slidelimit-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let ca = [&ec[..], &["-x509", "-keyout", "ca.key", "-out", "ca.crt"]].concat();
        let ca = [&ca[..], &["-days", "2", "-subj", "/CN=slidelimit test CA"]].concat();
        openssl(&dir, &[&["req"], &ca[..]].concat());
        let csr = [&ec[..], &["-keyout", "server.key", "-out", "server.csr"]].concat();
        openssl(
            &dir,
            &[&["req"], &csr[..], &["-subj", "/CN=localhost"]].concat(),
        );
        std::fs::write(
            dir.join("server.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n",
        )
        .unwrap();
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-set_serial",
                "2",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.crt",
            ],
        );
        Certificates { dir }
    }

    /// redis-server arguments for a TLS-only server on `port` that presents
    /// this server certificate and does not ask clients for one.
    pub fn server_args(&self, port: u16) -> Vec<String> {
        let mut args = vec!["--port".to_owned(), "0".to_owned()];
        for (flag, value) in [
            ("--tls-port", port.to_string()),
            ("--tls-cert-file", self.path("server.crt")),
            ("--tls-key-file", self.path("server.key")),
            ("--tls-ca-cert-file", self.path("ca.crt")),
            ("--tls-auth-clients", "no".to_owned()),
        ] {
            args.extend([flag.to_owned(), value]);
        }
        args
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }

    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.crt")).unwrap()
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
