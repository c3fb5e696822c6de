//! The guest's kernel and initramfs: Debian's kernel package (downloaded once with apt), its
//! vmlinuz and the modules the guest loads, and busybox with /init packed into an initramfs.
use super::*;

pub(super) struct Kernel {
    pub(super) package: String,
    pub(super) release: String,
    pub(super) vmlinuz: PathBuf,
    /// Module files in load order.
    pub(super) modules: Vec<PathBuf>,
}

/// The current Debian kernel package (linux-image-amd64's dependency), downloaded once, with
/// its vmlinuz and the modules the guest loads taken out.
pub(super) fn kernel(dir: &Path) -> anyhow::Result<Kernel> {
    let package = kernel_package()?;
    let kdir = dir.join("kernel").join(&package);
    let ready = kdir.join("ready");
    // Taken out again when the list of modules changed since.
    let wanted = kdir.join("modules-wanted");
    if !ready.exists() || fs::read_to_string(&wanted).ok() != Some(MODULES.join("\n")) {
        let deb = match find_deb(dir, &package)? {
            Some(deb) => deb,
            None => {
                let download = || {
                    let mut cmd = Command::new("apt-get");
                    cmd.current_dir(dir).arg("download").arg(&package);
                    if is_root() {
                        // Else apt warns that _apt cannot write into target/vm.
                        cmd.args(["-o", "APT::Sandbox::User=root"]);
                    }
                    eprintln!("+ {cmd:?}");
                    cmd.status().is_ok_and(|s| s.success())
                };
                if !download() {
                    if is_root() {
                        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
                    }
                    ensure!(download(), "`apt-get download {package}` failed");
                }
                find_deb(dir, &package)?
                    .with_context(|| format!("apt-get download left no {package}_*.deb"))?
            }
        };
        extract_kernel(&deb, &kdir)?;
        fs::write(&wanted, MODULES.join("\n"))?;
    }
    let text = fs::read_to_string(&ready)?;
    let mut lines = text.lines();
    let release = lines.next().context("empty kernel ready file")?.to_string();
    let modules = lines
        .filter(|l| !l.is_empty())
        .map(|m| kdir.join("modules").join(format!("{m}.ko")))
        .collect();
    Ok(Kernel {
        package,
        release,
        vmlinuz: kdir.join("vmlinuz"),
        modules,
    })
}

pub(super) fn kernel_package() -> anyhow::Result<String> {
    let depends = || -> Option<String> {
        let out = Command::new("apt-cache")
            .args(["depends", "linux-image-amd64"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            let p = l.trim().trim_start_matches('|').strip_prefix("Depends: ")?;
            (p.starts_with("linux-image-") && p[12..].starts_with(|c: char| c.is_ascii_digit()))
                .then(|| p.trim().to_string())
        })
    };
    let package = match depends() {
        Some(p) => p,
        None => {
            ensure!(
                is_root(),
                "apt-cache knows no linux-image-amd64: run `sudo apt-get update`"
            );
            crate::run(Command::new("apt-get").args(["update", "-qq"]))?;
            depends().context("apt-cache depends linux-image-amd64 names no kernel package")?
        }
    };
    if !package.starts_with("linux-image-6.1.") {
        eprintln!("vm-test: note: the Debian kernel is {package}, not a 6.1 one");
    }
    Ok(package)
}

pub(super) fn find_deb(dir: &Path, package: &str) -> anyhow::Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    Ok(fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        }))
}

/// `dpkg-deb -x` into a scratch directory, keep vmlinuz and the modules (decompressed, in
/// load order from their own `depends=`), drop the rest (400 MB).
pub(super) fn extract_kernel(deb: &Path, kdir: &Path) -> anyhow::Result<()> {
    let scratch = kdir.join("extract");
    let _ = fs::remove_dir_all(kdir);
    fs::create_dir_all(&scratch)?;
    crate::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&scratch))?;
    let vmlinuz = fs::read_dir(scratch.join("boot"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .context("no boot/vmlinuz-* in the kernel package")?;
    let release = vmlinuz.file_name().unwrap().to_str().unwrap()["vmlinuz-".len()..].to_string();
    let mod_root = scratch.join("lib/modules").join(&release);

    // Module name (as in `depends=`: dashes become underscores) → file.
    let mut index = HashMap::new();
    let mut stack = vec![mod_root.join("kernel")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(name) = module_name(&p) {
                index.insert(name, p);
            }
        }
    }
    let builtin: HashSet<String> = fs::read_to_string(mod_root.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| module_name(Path::new(l)))
        .collect();

    let out = kdir.join("modules");
    fs::create_dir_all(&out)?;
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for want in MODULES {
        add_module(want, &index, &builtin, &out, &mut seen, &mut order)?;
    }
    fs::copy(&vmlinuz, kdir.join("vmlinuz"))?;
    fs::remove_dir_all(&scratch)?;
    fs::write(
        kdir.join("ready"),
        format!("{release}\n{}\n", order.join("\n")),
    )?;
    eprintln!(
        "vm-test: kernel {release}, modules in load order: {}",
        order.join(" ")
    );
    Ok(())
}

pub(super) fn module_name(p: &Path) -> Option<String> {
    let n = p.file_name()?.to_str()?;
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|s| n.strip_suffix(s))?;
    Some(stem.replace('-', "_"))
}

/// Depth first: a module's dependencies are loaded before it.
pub(super) fn add_module(
    name: &str,
    index: &HashMap<String, PathBuf>,
    builtin: &HashSet<String>,
    out: &Path,
    seen: &mut HashSet<String>,
    order: &mut Vec<String>,
) -> anyhow::Result<()> {
    let name = name.replace('-', "_");
    if !seen.insert(name.clone()) {
        return Ok(());
    }
    let Some(path) = index.get(&name) else {
        if !builtin.contains(&name) {
            eprintln!("vm-test: note: no module {name} in this kernel (nor built in); skipped");
        }
        return Ok(());
    };
    let data = read_module(path)?;
    for dep in modinfo(&data, "depends")
        .with_context(|| format!("reading {}", path.display()))?
        .split(',')
        .filter(|d| !d.is_empty())
    {
        add_module(dep, index, builtin, out, seen, order)?;
    }
    fs::write(out.join(format!("{name}.ko")), &data)?;
    order.push(name);
    Ok(())
}

/// The module's bytes, decompressed (busybox insmod takes plain .ko files).
pub(super) fn read_module(path: &Path) -> anyhow::Result<Vec<u8>> {
    let n = path.to_string_lossy();
    let tool = if n.ends_with(".xz") {
        "xz"
    } else if n.ends_with(".zst") {
        "zstd"
    } else if n.ends_with(".gz") {
        "gzip"
    } else {
        return Ok(fs::read(path)?);
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("cannot run {tool} to decompress {n}"))?;
    ensure!(out.status.success(), "{tool} -dc {n} failed");
    Ok(out.stdout)
}

/// A `key=value` of an ELF64 module's `.modinfo` section ("" when absent).
pub(super) fn modinfo(ko: &[u8], key: &str) -> anyhow::Result<String> {
    let num = |off: usize, len: usize| -> Option<usize> {
        let b = ko.get(off..off + len)?;
        Some(b.iter().rev().fold(0usize, |n, &x| (n << 8) | x as usize))
    };
    ensure!(
        ko.starts_with(b"\x7fELF") && ko.get(4) == Some(&2) && ko.get(5) == Some(&1),
        "not a little-endian ELF64 file"
    );
    let bad = || anyhow::anyhow!("truncated ELF file");
    let shoff = num(0x28, 8).ok_or_else(bad)?;
    let shentsize = num(0x3a, 2).ok_or_else(bad)?;
    let shnum = num(0x3c, 2).ok_or_else(bad)?;
    let shstrndx = num(0x3e, 2).ok_or_else(bad)?;
    let section = |i: usize| -> Option<(usize, usize, usize)> {
        let h = shoff + i * shentsize;
        Some((num(h, 4)?, num(h + 24, 8)?, num(h + 32, 8)?))
    };
    let (_, stroff, _) = section(shstrndx).ok_or_else(bad)?;
    for i in 0..shnum {
        let (name, off, size) = section(i).ok_or_else(bad)?;
        let name_bytes = ko.get(stroff + name..).ok_or_else(bad)?;
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(0);
        if &name_bytes[..end] != b".modinfo" {
            continue;
        }
        let data = ko.get(off..off + size).ok_or_else(bad)?;
        let prefix = format!("{key}=");
        return Ok(data
            .split(|&b| b == 0)
            .find_map(|s| s.strip_prefix(prefix.as_bytes()))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default());
    }
    bail!("no .modinfo section")
}

/// busybox + /init + the modules, packed with busybox cpio; reused while its inputs are the
/// same.
pub(super) fn initramfs(dir: &Path, kernel: &Kernel) -> anyhow::Result<PathBuf> {
    let out = dir.join("initramfs.cpio.gz");
    let key_file = dir.join("initramfs.key");
    let busybox = Path::new("/bin/busybox");
    let meta = fs::metadata(busybox).context("no /bin/busybox (busybox-static)")?;
    let mut key = format!(
        "{} {}\nbusybox {} {:?}\n",
        kernel.package,
        kernel.release,
        meta.len(),
        meta.modified()?
    );
    for m in &kernel.modules {
        writeln!(key, "{} {}", m.display(), fs::metadata(m)?.len())?;
    }
    key.push_str(INIT);
    if out.exists() && fs::read_to_string(&key_file).ok().as_deref() == Some(key.as_str()) {
        return Ok(out);
    }

    let stage = dir.join("initramfs");
    let _ = fs::remove_dir_all(&stage);
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "mnt/host",
        "lib/modules",
        "tmp",
    ] {
        fs::create_dir_all(stage.join(d))?;
    }
    fs::copy(busybox, stage.join("bin/busybox"))?;
    fs::write(stage.join("init"), INIT)?;
    use std::os::unix::fs::PermissionsExt as _;
    for f in ["bin/busybox", "init"] {
        fs::set_permissions(stage.join(f), fs::Permissions::from_mode(0o755))?;
    }
    let mut names = Vec::new();
    for m in &kernel.modules {
        let name = m.file_name().unwrap();
        fs::copy(m, stage.join("lib/modules").join(name))?;
        names.push(name.to_string_lossy().trim_end_matches(".ko").to_string());
    }
    fs::write(
        stage.join("lib/modules/load-order"),
        format!("{}\n", names.join("\n")),
    )?;

    // The file list, parents first, for `busybox cpio -o`.
    let mut list = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<PathBuf> = fs::read_dir(stage.join(&rel))?
            .filter_map(|e| e.ok())
            .map(|e| rel.join(e.file_name()))
            .collect();
        entries.sort();
        for e in entries {
            if stage.join(&e).is_dir() {
                stack.push(e.clone());
            }
            list.push(e);
        }
    }
    let tmp = dir.join("initramfs.cpio.gz.tmp");
    let mut cpio = Command::new(busybox)
        .args(["cpio", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(&stage)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start busybox cpio")?;
    let mut gzip = Command::new("gzip")
        .arg("-9")
        .stdin(cpio.stdout.take().unwrap())
        .stdout(fs::File::create(&tmp)?)
        .spawn()
        .context("cannot start gzip")?;
    {
        let mut stdin = cpio.stdin.take().unwrap();
        for e in &list {
            writeln!(stdin, "{}", e.display())?;
        }
    }
    ensure!(cpio.wait()?.success(), "busybox cpio failed");
    ensure!(gzip.wait()?.success(), "gzip failed");
    fs::rename(&tmp, &out)?;
    fs::write(&key_file, key)?;
    eprintln!(
        "vm-test: initramfs {} ({} KiB)",
        out.display(),
        fs::metadata(&out)?.len() / 1024
    );
    Ok(out)
}
