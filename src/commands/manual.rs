//! `completions` and `man`: the shell completion scripts and the man page, generated from the
//! very clap definitions the console parses with, so they can never list a flag it lacks.

use crate::cli::{Cli, Command, CompletionShell};
use clap::CommandFactory;
use seckill_console::error::{Error, Result};
use std::path::Path;

/// The name the scripts complete and the page documents.
const NAME: &str = "seckill-console";

/// What `command` prints, when it is one of these two (they need no configuration, no server
/// and no database).
pub fn generate(command: Option<&Command>) -> Option<Result<Vec<u8>>> {
    match command? {
        Command::Completions { shell } => Some(Ok(completions(*shell))),
        Command::Man { dir: None } => Some(Ok(man())),
        Command::Man { dir: Some(dir) } => Some(man_pages(dir)),
        _ => None,
    }
}

/// Writes the main page and one per subcommand into `dir`; says what it wrote.
fn man_pages(dir: &Path) -> Result<Vec<u8>> {
    if !dir.is_dir() {
        return Err(Error::bad_input(format!(
            "--dir '{}' is not a directory: create it first",
            dir.display()
        )));
    }
    clap_mangen::generate_to(Cli::command(), dir).map_err(|e| {
        Error::unavailable(format!(
            "cannot write the man pages to '{}': {e}",
            dir.display()
        ))
    })?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::unavailable(format!("cannot list '{}': {e}", dir.display())))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(NAME) && n.ends_with(".1"))
        .collect();
    pages.sort();
    Ok(format!("{}\n", pages.join("\n")).into_bytes())
}

fn completions(shell: CompletionShell) -> Vec<u8> {
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), NAME, &mut out);
    out
}

fn man() -> Vec<u8> {
    let mut out = Vec::new();
    // Rendering into memory cannot fail but by running out of it.
    let _ = clap_mangen::Man::new(Cli::command()).render(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).expect("UTF-8")
    }

    #[test]
    fn every_shell_completes_the_subcommands_and_their_flags() {
        for shell in [
            CompletionShell::Bash,
            CompletionShell::Zsh,
            CompletionShell::Fish,
        ] {
            let s = text(completions(shell));
            for word in ["watch", "exec-severity", "preheat", "redis-cluster"] {
                assert!(s.contains(word), "{shell:?} lacks {word}");
            }
        }
    }

    #[test]
    fn man_dir_writes_a_page_per_subcommand_and_names_a_bad_dir() {
        let dir = tempfile::tempdir().expect("tmp");
        let listed = text(man_pages(dir.path()).expect("written"));
        for page in [
            "seckill-console.1",
            "seckill-console-watch.1",
            "seckill-console-exporter.1",
        ] {
            assert!(dir.path().join(page).is_file(), "{page} missing");
            assert!(listed.lines().any(|l| l == page), "{listed}");
        }
        let e = man_pages(&dir.path().join("nope")).expect_err("no such dir");
        assert!(e.message.contains("nope"), "{}", e.message);
        assert_eq!(e.kind, seckill_console::ErrorKind::BadInput);
    }

    #[test]
    fn the_man_page_names_the_console_and_its_commands() {
        let page = text(man());
        assert!(
            page.starts_with(".ie") || page.contains(".TH seckill-console"),
            "{page}"
        );
        for word in ["watch", "preheat", "reconcile", "Sentinels"] {
            assert!(page.contains(word), "the page lacks {word}");
        }
    }
}
