//! Build script: the git commit `tandem --version` prints (`TANDEM_COMMIT`), from
//! `TANDEM_COMMIT` in the build's environment (a build from a source tarball) or from
//! `git rev-parse` in the checkout; `unknown` when neither says.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=TANDEM_COMMIT");
    // Rebuild when the checkout moves to another commit: HEAD, and the branch it names.
    for path in ["HEAD".to_string()]
        .into_iter()
        .chain(git(&["symbolic-ref", "-q", "HEAD"]))
    {
        if let Some(file) = git(&["rev-parse", "--git-path", &path]) {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    // No "-dirty" mark: the script reruns only when HEAD moves, so it could not keep one true.
    let commit = std::env::var("TANDEM_COMMIT")
        .ok()
        .filter(|commit| !commit.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    println!(
        "cargo:rustc-env=TANDEM_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
