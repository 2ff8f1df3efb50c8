//! `tandem generate-docs --out DIR` (hidden; for packaging): the man pages and the shell
//! completions, generated from the same clap definition the command line parses with, so
//! they cannot drift from it.
//!
//! Layout: `DIR/man8/tandem.8` (every verb listed), `DIR/man8/tandem-VERB.8` (one per
//! visible verb), `DIR/completions/tandem.bash`, `DIR/completions/_tandem` (zsh),
//! `DIR/completions/tandem.fish`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::error::CliError;

/// The section of every page: tandem's node is a system administration command.
const MAN_SECTION: &str = "8";

/// Writes every man page and completion file under `out`.
pub fn generate(out: &Path) -> Result<(), CliError> {
    let command = Cli::command();
    let man_dir = out.join(format!("man{MAN_SECTION}"));
    let completion_dir = out.join("completions");
    for dir in [&man_dir, &completion_dir] {
        std::fs::create_dir_all(dir).map_err(|source| CliError::Docs {
            path: dir.clone(),
            source,
        })?;
    }
    write_file(&man_dir.join("tandem.8"), |writer| {
        clap_mangen::Man::new(command.clone())
            .section(MAN_SECTION)
            .render(writer)
    })?;
    for verb in command.get_subcommands().filter(|verb| !verb.is_hide_set()) {
        let name = format!("tandem-{}", verb.get_name());
        let page = verb
            .clone()
            .name(name.clone())
            .bin_name(format!("tandem {}", verb.get_name()));
        write_file(&man_dir.join(format!("{name}.8")), |writer| {
            clap_mangen::Man::new(page.clone())
                .section(MAN_SECTION)
                .render(writer)
        })?;
    }
    for (shell, file) in [
        (Shell::Bash, "tandem.bash"),
        (Shell::Zsh, "_tandem"),
        (Shell::Fish, "tandem.fish"),
    ] {
        write_file(&completion_dir.join(file), |writer| {
            clap_complete::generate(shell, &mut command.clone(), "tandem", writer);
            Ok(())
        })?;
    }
    Ok(())
}

fn write_file(
    path: &Path,
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), CliError> {
    let error = |source| CliError::Docs {
        path: path.to_path_buf(),
        source,
    };
    let mut writer = BufWriter::new(File::create(path).map_err(error)?);
    render(&mut writer).map_err(error)?;
    writer.flush().map_err(error)
}
