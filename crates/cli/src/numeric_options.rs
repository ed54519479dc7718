//! Tests that `tests/numeric-options.txt`, the table of every numeric option that
//! `tests/it/options.rs` drives through the binary, names every option of the
//! command line whose value is a number, and that the argument parser refuses
//! each value the table does not list as valid: a new numeric option fails here
//! until it is in the table, and so until it is driven through bad values too.

use crate::numeric_table::{rows, PROBES};
use crate::Cli;
use clap::{CommandFactory, Parser};
use std::any::TypeId;
use std::collections::BTreeSet;

/// The types of the values that are numbers: counts, sizes, indexes, rates,
/// durations, and the flags that take a number or a word.
fn numeric_types() -> [TypeId; 11] {
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<f64>(),
        TypeId::of::<std::time::Duration>(),
        TypeId::of::<tapeloom_engine::DriveSet>(),
        TypeId::of::<crate::commands::backup::Concurrency>(),
    ]
}

/// How the table names an argument: `--long`, or `<id>` for a positional one.
fn name(arg: &clap::Arg) -> String {
    match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => format!("<{}>", arg.get_id()),
    }
}

/// Every argument of `cmd` and its subcommands: (command path, name, whether its
/// value is a number).
fn arguments(cmd: &clap::Command, path: &[String], out: &mut Vec<(String, String, bool)>) {
    let numeric = numeric_types();
    for arg in cmd.get_arguments() {
        let id = arg.get_value_parser().type_id();
        let is_number = numeric.iter().any(|t| id == *t);
        out.push((path.join(" "), name(arg), is_number));
    }
    for sub in cmd.get_subcommands() {
        let mut p = path.to_vec();
        p.push(sub.get_name().to_string());
        arguments(sub, &p, out);
    }
}

fn all_arguments() -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    arguments(&Cli::command(), &[], &mut out);
    out
}

#[test]
fn the_table_names_every_numeric_option() {
    let table: BTreeSet<(String, String)> = (rows().into_iter())
        .map(|r| (r.command.join(" "), r.option))
        .collect();
    let args = all_arguments();
    let missing: Vec<_> = (args.iter())
        .filter(|(c, n, numeric)| *numeric && !table.contains(&(c.clone(), n.clone())))
        .collect();
    assert!(
        missing.is_empty(),
        "numeric options missing from tests/numeric-options.txt: {missing:?}"
    );
    let known: BTreeSet<(String, String)> = (args.into_iter()).map(|(c, n, _)| (c, n)).collect();
    let stale: Vec<_> = table.difference(&known).collect();
    assert!(
        stale.is_empty(),
        "the table names no such options: {stale:?}"
    );
}

#[test]
fn the_parser_refuses_what_the_table_does_not_list() {
    // A JOB that may also be a path (ls, restore) is parsed by the command itself,
    // before it does anything: tests/it/options.rs checks those.
    let paths: BTreeSet<(String, String)> = (all_arguments().into_iter())
        .filter(|(_, n, numeric)| !numeric && n == "<args>")
        .map(|(c, n, _)| (c, n))
        .collect();
    for row in rows() {
        if paths.contains(&(row.command.join(" "), row.option.clone())) {
            continue;
        }
        for probe in PROBES {
            let mut argv = vec!["tapeloom".to_string()];
            argv.extend(row.argv(probe, "src", "new"));
            let parsed = Cli::try_parse_from(&argv);
            let valid = row.takes(probe);
            match parsed {
                Ok(_) => assert!(valid, "{argv:?} was taken; the table says it is not valid"),
                Err(e) => assert!(
                    !valid && e.kind() == clap::error::ErrorKind::ValueValidation,
                    "{argv:?}: {e}"
                ),
            }
        }
    }
}
