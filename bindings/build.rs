//! Build facts for `cratrace._native.build_info()` (what `cratrace
//! --version` prints): the Cargo profile the core was built with, its
//! optimisation level, the target and the compiler.

use std::path::Path;
use std::process::Command;

fn main() {
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out; Cargo's
    // PROFILE says only "release" or "debug", also for a profile that
    // inherits from one (`wheel`), so the name is read from the path.
    let profile = Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .unwrap_or_else(|| std::env::var("PROFILE").unwrap_or_default());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    println!("cargo:rustc-env=CRATRACE_BUILD_PROFILE={profile}");
    println!(
        "cargo:rustc-env=CRATRACE_BUILD_OPT_LEVEL={}",
        std::env::var("OPT_LEVEL").unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=CRATRACE_BUILD_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    println!("cargo:rustc-env=CRATRACE_BUILD_RUSTC={rustc_version}");
    println!("cargo:rerun-if-changed=build.rs");
}
