//! Builds `preload/ticks.rs` into the shared library MySQL servers preload
//! (`server::preload`), embedded in the binary with `include_bytes!`. It is compiled by
//! rustc alone — `no_std`, no crates — for the target being built, where it knows the
//! target's `times` system call: Linux on x86_64 and aarch64. Elsewhere nothing is built
//! and the `ticks_shim` cfg stays unset (servers start as they would without it).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ticks_shim)");
    println!("cargo::rerun-if-changed=preload/ticks.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || !matches!(arch.as_str(), "x86_64" | "aarch64") {
        return;
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let lib = out.join("libdbb-ticks.so");
    let status = Command::new(&rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "cdylib",
            "--crate-name",
            "dbb_ticks",
        ])
        .args([
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
        ])
        .args(["--target", &target])
        .arg("preload/ticks.rs")
        .arg("-o")
        .arg(&lib)
        .status()
        .unwrap_or_else(|e| panic!("running {rustc} to build preload/ticks.rs: {e}"));
    assert!(
        status.success(),
        "{rustc} could not build preload/ticks.rs ({status})"
    );
    println!("cargo::rustc-cfg=ticks_shim");
}
