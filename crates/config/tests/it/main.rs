//! Integration tests: load the reference configurations through the public API.
//!
//! This test deliberately reads the reference files in `shared/reference/configs/` beside
//! the workspace (see shared/README.md): tandem must load a DRBD user's files unchanged.

use std::path::PathBuf;

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/configs").join(name)
}

#[test]
fn smoke() {
    for name in ["r2.res", "r3.res"] {
        let config = config::load(&reference(name)).unwrap();
        println!("{}", config::dump(&config, None));
        let again = config::parse_str(&config::dump(&config, None), &reference(name)).unwrap();
        assert_eq!(config, again);
    }
}
