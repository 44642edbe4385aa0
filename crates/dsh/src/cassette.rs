//! `dsh cassette show` and `dsh cassette diff`: looking at recordings made
//! with `--record` (docs/cassettes.md).

use dsh_llm::cassette::Cassette;

use crate::cli::CassetteCommand;
use crate::failure::Failure;
use crate::wording;

/// Runs one `dsh cassette` command.
pub(crate) fn run(command: &CassetteCommand) -> Result<(), Failure> {
    // A recording whose run was interrupted is looked at too (replay
    // refuses it).
    let load = |path| Cassette::inspect(path).map_err(|error| Failure::usage(error.to_string()));
    match command {
        CassetteCommand::Show { file } => {
            let cassette = load(file)?;
            println!(
                "{}",
                wording::cassette_show(
                    file,
                    cassette.level().as_str(),
                    cassette.interrupted(),
                    &cassette.summary()
                )
            );
            Ok(())
        }
        CassetteCommand::Diff { first, second } => {
            let (a, b) = (load(first)?, load(second)?);
            match a.diff(&b) {
                None => {
                    println!("{}", wording::CASSETTES_AGREE);
                    Ok(())
                }
                Some(divergence) => Err(Failure::failed(divergence.to_string())),
            }
        }
    }
}
