//! `tandem dump`: load a drbd.conf-style file and print it back in canonical form, like
//! `drbdadm dump`.
//!
//! ADAPTER(config): the `config` crate's `load(path)` and `dump(&config, resource)` are being
//! written in parallel. [`load_and_dump`] is the only function that calls into it; when that
//! API lands, replace its body (the intended body is in the comment there) and delete this
//! paragraph.

use std::path::Path;

use crate::error::CliError;

/// The canonical text of the configuration at `path`, or of one resource in it.
pub fn load_and_dump(path: &Path, resource: Option<&str>) -> Result<String, CliError> {
    // ADAPTER(config): intended body, once the config crate exports it:
    //     let config = config::load(path).map_err(|error| CliError::Dump(error.to_string()))?;
    //     Ok(config::dump(&config, resource))
    let _ = resource;
    Err(CliError::Dump(format!(
        "dump {}: configuration loading is not available yet",
        path.display()
    )))
}
