//! Fuzz target `config_parse`: the drbd.conf lexer, statement parser and resolution
//! (options, ranges, sections, hosts, connections, volumes), through
//! [`config::parse_str_isolated`], which never reads a file (`include` is an error).
//!
//! Input: the file's text (invalid UTF-8 is replaced, so every input reaches the lexer).
//!
//! Properties: parsing never panics; every error points into the file it was given; a parsed
//! configuration dumps to text that parses back to an equal configuration, dumps again to the
//! same text, and its dump with every default shown parses back equal too (`drbdadm dump`'s
//! normal form, which `tandem dump` promises).

use std::path::Path;

use config::{dump, dump_with, parse_str_isolated, DumpOptions};

/// The file name the text is parsed as.
const FILE_NAME: &str = "fuzz.res";

/// The target's body.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let file = Path::new(FILE_NAME);
    let config = match parse_str_isolated(&text, file) {
        Ok(config) => config,
        Err(error) => {
            let shown = error.to_string();
            assert!(shown.starts_with(FILE_NAME), "{shown}");
            assert!(error.location().is_some(), "{shown}");
            return;
        }
    };
    let dumped = dump(&config, None);
    let again = parse_str_isolated(&dumped, Path::new("dump.res"));
    let shown = again.as_ref().map_err(ToString::to_string);
    assert_eq!(shown, Ok(&config), "the dump parses back equal:\n{dumped}");
    if let Ok(again) = again {
        assert_eq!(dump(&again, None), dumped, "the dump is a fixed point");
    }
    let full = dump_with(
        &config,
        None,
        DumpOptions {
            show_defaults: true,
        },
    );
    let full_again = parse_str_isolated(&full, Path::new("full.res"));
    let shown = full_again.as_ref().map_err(ToString::to_string);
    assert_eq!(
        shown,
        Ok(&config),
        "the full dump parses back equal:\n{full}"
    );
    for resource in &config.resources {
        let _ = dump(&config, Some(&resource.name));
    }
}
