//! Finds the server binary that delayq runs itself (`delayq serve`'s embedded server, the
//! test fixture, the benchmark, the chaos harness) and its command-line client, by one rule:
//!
//! 1. a path the caller was given (a flag), else the environment variable
//!    [`SERVER_ENV`] (`DELAYQ_REDIS_SERVER`), which must name a file;
//! 2. else `redis-server` on `PATH`;
//! 3. else `valkey-server` on `PATH` (the name Valkey's packages install, with no
//!    `redis-server` beside it on Fedora, Arch and Debian 13).
//!
//! The client (`redis-cli`, used to build test clusters) is found the same way
//! ([`CLI_ENV`]), preferring the one beside the server binary, since a build of its own
//! comes with its own client.
//!
//! Which server and version it is, and whether delayq can use it, is checked when delayq
//! connects (the library's `server` module), not here.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// Names the server binary to run, in place of a lookup on `PATH`.
pub const SERVER_ENV: &str = "DELAYQ_REDIS_SERVER";
/// Names the command-line client to run.
pub const CLI_ENV: &str = "DELAYQ_REDIS_CLI";
/// The server binaries looked for on `PATH`, in order.
pub const SERVER_NAMES: [&str; 2] = ["redis-server", "valkey-server"];
/// The clients looked for on `PATH`, in order.
pub const CLI_NAMES: [&str; 2] = ["redis-cli", "valkey-cli"];

/// No binary was found, or the one named does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFound {
    what: String,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for NotFound {}

/// The server binary: `given` (a flag) or `$DELAYQ_REDIS_SERVER` if set, else `redis-server`,
/// else `valkey-server` on `PATH`.
pub fn find_server(given: Option<&Path>) -> Result<PathBuf, NotFound> {
    find_server_in(given, &Environment::read())
}

/// What the lookup reads of the process's environment.
struct Environment {
    server: Option<OsString>,
    cli: Option<OsString>,
    path: Option<OsString>,
}

impl Environment {
    fn read() -> Self {
        Environment {
            server: std::env::var_os(SERVER_ENV),
            cli: std::env::var_os(CLI_ENV),
            path: std::env::var_os("PATH"),
        }
    }
}

fn find_server_in(given: Option<&Path>, env: &Environment) -> Result<PathBuf, NotFound> {
    if let Some(named) = named(given, SERVER_ENV, env.server.as_ref())? {
        return Ok(named);
    }
    on_path(&SERVER_NAMES, env.path.as_ref()).ok_or_else(|| NotFound {
        what: format!(
            "no Redis server binary found: neither redis-server nor valkey-server is on PATH. \
             Install one (Debian/Ubuntu: apt-get install redis-server, or valkey-server on \
             Debian 13 and later; Fedora: dnf install valkey; Arch: pacman -S valkey; \
             macOS: brew install redis or brew install valkey), or set {SERVER_ENV} to the \
             binary to run"
        ),
    })
}

/// The command-line client: `given` or `$DELAYQ_REDIS_CLI` if set, else `redis-cli` or
/// `valkey-cli` beside the server binary [`find_server`] finds, else either on `PATH`.
pub fn find_cli(given: Option<&Path>) -> Result<PathBuf, NotFound> {
    find_cli_in(given, &Environment::read())
}

fn find_cli_in(given: Option<&Path>, env: &Environment) -> Result<PathBuf, NotFound> {
    if let Some(named) = named(given, CLI_ENV, env.cli.as_ref())? {
        return Ok(named);
    }
    let beside_server = find_server_in(None, env).ok().and_then(|server| {
        let dir = server.parent()?.to_path_buf();
        CLI_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
    });
    beside_server
        .or_else(|| on_path(&CLI_NAMES, env.path.as_ref()))
        .ok_or_else(|| NotFound {
            what: format!(
                "no Redis client binary found: neither redis-cli nor valkey-cli is beside the \
                 server binary or on PATH. Install one (Debian/Ubuntu: apt-get install \
                 redis-tools; Fedora: dnf install valkey), or set {CLI_ENV} to it"
            ),
        })
}

/// The binary the caller or `env_var` names, if either does; an error if it is not a file.
fn named(
    given: Option<&Path>,
    env_var: &str,
    env_value: Option<&OsString>,
) -> Result<Option<PathBuf>, NotFound> {
    let (path, source) = match (given, env_value) {
        (Some(path), _) => (path.to_path_buf(), "the path given".to_owned()),
        (None, Some(path)) if !path.is_empty() => (PathBuf::from(path), env_var.to_owned()),
        (None, _) => return Ok(None),
    };
    if path.is_file() {
        Ok(Some(path))
    } else {
        Err(NotFound {
            what: format!("{source} names {}, which is not a file", path.display()),
        })
    }
}

/// The first of `names` found in a directory of `PATH`, trying each name through all of
/// `PATH` before the next.
fn on_path(names: &[&str], path: Option<&OsString>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = std::env::split_paths(path?).collect();
    names
        .iter()
        .find_map(|name| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding empty files of `names` (the lookup only checks that they exist).
    fn dir_with(names: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "redis-binaries-{}-{}",
            std::process::id(),
            names.join("+")
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for name in names {
            std::fs::write(dir.join(name), b"").expect("file");
        }
        dir
    }

    fn env(path: &[&Path]) -> Environment {
        Environment {
            server: None,
            cli: None,
            path: Some(std::env::join_paths(path).expect("PATH")),
        }
    }

    #[test]
    fn valkey_server_alone_on_path_is_found() {
        let valkey = dir_with(&["valkey-server", "valkey-cli"]);
        let env = env(&[&valkey]);
        assert_eq!(find_server_in(None, &env), Ok(valkey.join("valkey-server")));
        assert_eq!(find_cli_in(None, &env), Ok(valkey.join("valkey-cli")));
    }

    #[test]
    fn redis_server_comes_before_valkey_server_wherever_each_is_on_path() {
        let valkey = dir_with(&["valkey-server"]);
        let redis = dir_with(&["redis-server"]);
        let env = env(&[&valkey, &redis]);
        assert_eq!(find_server_in(None, &env), Ok(redis.join("redis-server")));
    }

    #[test]
    fn the_variable_comes_before_path_and_must_name_a_file() {
        let redis = dir_with(&["redis-server", "custom-server"]);
        let mut env = env(&[&redis]);
        env.server = Some(redis.join("custom-server").into_os_string());
        assert_eq!(find_server_in(None, &env), Ok(redis.join("custom-server")));
        env.server = Some("/nonexistent/server".into());
        let err = find_server_in(None, &env)
            .expect_err("a missing file")
            .to_string();
        assert!(
            err.contains(SERVER_ENV) && err.contains("/nonexistent/server"),
            "{err}"
        );
        // A path given by the caller (a flag) wins over the variable.
        let given = redis.join("redis-server");
        assert_eq!(find_server_in(Some(&given), &env), Ok(given));
    }

    #[test]
    fn none_found_names_both_servers_and_how_to_install_them() {
        let empty = dir_with(&[]);
        let err = find_server_in(None, &env(&[&empty]))
            .expect_err("nothing on PATH")
            .to_string();
        for needed in [
            "redis-server",
            "valkey-server",
            "apt-get install",
            SERVER_ENV,
        ] {
            assert!(err.contains(needed), "{needed} missing from: {err}");
        }
    }

    #[test]
    fn the_client_beside_the_server_comes_first() {
        let build = dir_with(&["valkey-server", "valkey-cli"]);
        let system = dir_with(&["redis-cli"]);
        let mut env = env(&[&system]);
        env.server = Some(build.join("valkey-server").into_os_string());
        assert_eq!(find_cli_in(None, &env), Ok(build.join("valkey-cli")));
    }
}
