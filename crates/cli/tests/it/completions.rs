//! Shell completions and the manual page are made from the command-line definitions:
//! they name the commands.

use crate::common::bin;
use std::process::Command;

fn stdout(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(out.status.success(), "tapeloom {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_of_each_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["completions", shell]);
        for cmd in ["backup", "restore", "library", "completions"] {
            assert!(script.contains(cmd), "{shell}: no {cmd}");
        }
    }
}

#[test]
fn the_manual_page_is_roff_and_documents_the_commands() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".TH"), "{}", &page[..page.len().min(200)]);
    for cmd in ["backup", "restore", r"\-\-home", r"\-\-json"] {
        assert!(page.contains(cmd), "no {cmd}");
    }
}

#[test]
fn each_command_has_a_manual_page_with_its_options() {
    let page = stdout(&["man", "backup"]);
    assert!(
        page.starts_with(".TH tapeloom-backup"),
        "{}",
        &page[..page.len().min(200)]
    );
    for opt in [r"\-\-concurrency", r"\-\-limit\-rate", r"\-\-drives"] {
        assert!(page.contains(opt), "backup page lacks {opt}");
    }
    let page = stdout(&["man", "library", "create"]);
    assert!(
        page.contains(r"\-\-model"),
        "library create page lacks --model"
    );
    let out = Command::new(bin())
        .args(["man", "nonesuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no command 'nonesuch'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
