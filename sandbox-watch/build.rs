//! Builds the BPF object (sandbox-watch-ebpf) with aya-build so the binary can embed it.
use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "sandbox-watch-ebpf")
        .ok_or_else(|| anyhow!("sandbox-watch-ebpf package not found"))?;
    let root = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", ebpf.manifest_path))?;
    let package = aya_build::Package {
        name: ebpf.name.as_str(),
        root_dir: root.as_str(),
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
        .context("building the BPF object failed; `cargo xtask setup` installs what it needs")
}
