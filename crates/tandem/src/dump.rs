//! `tandem dump`: load a drbd.conf-style file and print it back in canonical form, like
//! `drbdadm dump`.
//!
//! Invariant: a named resource that the file does not define is an error (as in drbdadm),
//! never an empty dump.

use std::path::Path;

use crate::error::CliError;

/// The canonical text of the configuration at `path`, or of one resource in it.
pub fn load_and_dump(path: &Path, resource: Option<&str>) -> Result<String, CliError> {
    let config = config::load(path).map_err(|error| CliError::Dump(error.to_string()))?;
    if let Some(name) = resource {
        if !config
            .resources
            .iter()
            .any(|candidate| candidate.name == name)
        {
            return Err(CliError::Dump(format!(
                "'{name}' not defined in {}",
                path.display()
            )));
        }
    }
    Ok(config::dump(&config, resource))
}
