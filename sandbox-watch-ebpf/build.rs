//! Compiles the C shim (c/kernel.c) with clang to LLVM bitcode carrying CO-RE relocations and
//! hands it to bpf-linker, which links it with the Rust programs into one BPF object.
//!
//! The types it relocates against come from this machine's kernel BTF (bpftool); the loader
//! relocates every field access again for the kernel the object is loaded on.
use std::{env, path::PathBuf, process::Command};

fn run(cmd: &mut Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}. Run `cargo xtask setup`."));
    assert!(status.success(), "{what} failed: {cmd:?}");
}

fn main() {
    let bpf_linker =
        which::which("bpf-linker").expect("bpf-linker not found: run `cargo xtask setup`");
    println!("cargo:rerun-if-changed={}", bpf_linker.display());
    println!("cargo:rerun-if-changed=c/kernel.c");

    // Only the BPF build needs the shim; a host build of this crate has nothing to link.
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("bpf") {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let vmlinux = out.join("vmlinux.h");
    let btf = "/sys/kernel/btf/vmlinux";
    let header = Command::new("bpftool")
        .args(["btf", "dump", "file", btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run bpftool ({e}): run `cargo xtask setup`"));
    assert!(
        header.status.success(),
        "bpftool could not read {btf}: {}",
        String::from_utf8_lossy(&header.stderr)
    );
    std::fs::write(&vmlinux, header.stdout).unwrap();

    let bitcode = out.join("kernel.bc");
    run(
        Command::new("clang")
            .args([
                "-target",
                "bpf",
                "-O2",
                "-g",
                "-emit-llvm",
                "-c",
                "-D__TARGET_ARCH_x86",
                // BPF v3 (kernel 5.1+; atomics with a result, 5.12+): sw_fetch_add needs it.
                "-mcpu=v3",
            ])
            .arg("-I")
            .arg(&out)
            .arg("c/kernel.c")
            .arg("-o")
            .arg(&bitcode),
        "clang (C shim)",
    );
    println!("cargo:rustc-link-arg={}", bitcode.display());
    // The sequence number's fetch-and-add returns a value: the linker must keep the v3 atomics
    // (`--cpu v3` is refused beside aya-build's own `--cpu`; the feature alone is accepted).
    println!("cargo:rustc-link-arg=--cpu-features=+alu32");
}
