//! `dsh tree [AGENT-ID]`: the delegation tree of an agent (default: the most
//! recent top-level agent in the data directory), read from its
//! transcripts, as text, as versioned JSON (`--json`), or as one
//! self-contained page with a timeline (`--html FILE`). Each is a renderer
//! of [`dsh_tree::Tree`].

pub(crate) mod html;
pub(crate) mod text;

use std::io::Write;

use crate::cli::TreeArgs;
use crate::failure::Failure;
use crate::wording;

pub(crate) fn print(args: &TreeArgs) -> Result<(), Failure> {
    if args.json && args.html.is_some() {
        return Err(Failure::usage(wording::tree::JSON_AND_HTML));
    }
    let tree = dsh_tree::load(&args.data_dir, args.agent_id.as_deref()).map_err(|error| match error {
        dsh_tree::LoadError::Unlistable { .. } => Failure::failed(wording::tree::not_loaded(&error)),
        _ => Failure::usage(wording::tree::not_loaded(&error)),
    })?;
    if let Some(path) = &args.html {
        let page = html::page(&tree).map_err(|error| Failure::internal(error.to_string()))?;
        std::fs::write(path, page).map_err(|error| Failure::failed(wording::tree::html_not_written(path, &error)))?;
        eprintln!("{}", wording::tree::html_written(path, tree.walk().len()));
        return Ok(());
    }
    let out = if args.json {
        let mut json = serde_json::to_string_pretty(&tree).map_err(|error| Failure::internal(error.to_string()))?;
        json.push('\n');
        json
    } else {
        text::render(&tree, dsh_agent::transcript::now_ms())
    };
    // A closed pipe (`dsh tree | head`) is not a failure.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    Ok(())
}
