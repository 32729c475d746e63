//! `delayq serve --config FILE`: every flag of `serve` can be set in a TOML file, under its
//! long name (`max-wait = "30s"`, `tokens-file = "/etc/delayq/tokens"`, `push-allow =
//! ["10.0.0.0/8"]`, `fsync-always = true`). A flag given on the command line or in the
//! environment wins over the file; the file wins over the defaults. A key that is not a
//! flag of `serve` is an error, so that a misspelt setting is not silently ignored.
//!
//! It works by turning the file's settings into flags and parsing again: one parser, so
//! the file takes exactly what the command line takes, checked the same way.

use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{ArgMatches, Command, CommandFactory, FromArgMatches};

use super::Cli;

/// The command line, with `serve --config FILE`'s settings added where no flag gave them.
/// Exits with clap's message (or the file's problem) when they are bad.
pub fn parse() -> Cli {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let command = Cli::command();
    let matches = command.clone().get_matches_from(&argv);
    let from_file = match matches.subcommand() {
        Some(("serve", serve)) => match serve.get_one::<std::path::PathBuf>("config") {
            Some(path) => flags_of_file(&command, serve, path).unwrap_or_else(|e| {
                eprintln!("delayq: --config {}: {e}", path.display());
                std::process::exit(2);
            }),
            None => Vec::new(),
        },
        _ => Vec::new(),
    };
    if from_file.is_empty() {
        return Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    }
    // `serve` is the last subcommand, so flags appended at the end are its own.
    let argv = argv.into_iter().chain(from_file);
    Cli::command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
        .unwrap_or_else(|e| e.exit())
}

/// The flags that the settings of the file at `path` stand for, leaving out those that
/// the command line or the environment gave (`given`).
fn flags_of_file(cli: &Command, given: &ArgMatches, path: &Path) -> Result<Vec<OsString>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let table: toml::Table = text.parse().map_err(|e| format!("not valid TOML: {e}"))?;
    let serve = cli.find_subcommand("serve").ok_or("no serve command")?;
    let mut flags = Vec::new();
    for (key, value) in &table {
        let name = key.replace('_', "-");
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(name.as_str()) && name != "config")
            .ok_or_else(|| {
                format!("`{key}` is not a flag of `delayq serve` (see delayq serve --help)")
            })?;
        let source = given.value_source(arg.get_id().as_str());
        if matches!(
            source,
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let flag = format!("--{name}");
        let takes_value = arg.get_action().takes_values();
        let values = match value {
            toml::Value::Array(items) => items.iter().map(text_of).collect::<Result<Vec<_>, _>>(),
            one => text_of(one).map(|v| vec![v]),
        }
        .map_err(|e| format!("`{key}`: {e}"))?;
        for v in values {
            match (takes_value, v.as_str()) {
                (true, _) => flags.extend([flag.clone().into(), v.into()]),
                (false, "true") => flags.push(flag.clone().into()),
                (false, "false") => {}
                (false, other) => return Err(format!("`{key}` is true or false, not {other}")),
            }
        }
    }
    Ok(flags)
}

/// A setting's value as a flag's text.
fn text_of(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!("a {} is not a flag's value", other.type_str())),
    }
}
