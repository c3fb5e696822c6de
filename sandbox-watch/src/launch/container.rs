//! `container ID|NAME|CGROUP`: finds the container's cgroup v2 directory without depending on
//! one runtime, lists what already runs in it, and tells when it is empty or gone.
//!
//! Resolution, in order: a cgroup v2 path (absolute, or relative to the cgroup2 mount); a full
//! or unambiguous short container id found in the cgroup paths of running processes (the
//! layouts of docker `docker-<id>.scope` / `/docker/<id>`, podman `libpod-<id>`, containerd
//! `cri-containerd-<id>.scope`, CRI-O `crio-<id>.scope`, and plain runc `<parent>/<id>`); a
//! name through `docker`, `podman`, `nerdctl` or `crictl` when one is installed.
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use procfs::process::MountInfos;

use crate::error::Usage;

/// A container's cgroup, as the kernel names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// The id (or the argument when it was a path).
    pub id: String,
    /// Path inside the cgroup2 hierarchy, e.g. `/sw-test/abc`.
    pub cgroup: String,
    /// The directory, e.g. `/sys/fs/cgroup/unified/sw-test/abc`.
    pub dir: PathBuf,
    /// What `bpf_get_current_cgroup_id` returns for it: the directory's inode.
    pub cgroup_id: u64,
    /// Depth below the root (`/a/b` is 2): the ancestor level the kernel compares.
    pub level: u32,
}

/// Where cgroup2 is mounted (from /proc/self/mountinfo): /sys/fs/cgroup on a pure v2 host,
/// /sys/fs/cgroup/unified on a hybrid one.
pub fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = procfs::process::Process::myself().ok()?.mountinfo().ok()?;
    cgroup2_of(mounts)
}

fn cgroup2_of(mounts: MountInfos) -> Option<PathBuf> {
    mounts
        .into_iter()
        .find(|m| m.fs_type == "cgroup2")
        .map(|m| m.mount_point)
}

/// The id a cgroup path component names, in the layouts above (None for plain names).
pub fn id_in_component(component: &str) -> Option<&str> {
    let c = component.strip_suffix(".scope").unwrap_or(component);
    for prefix in [
        "docker-",
        "libpod-",
        "cri-containerd-",
        "crio-",
        "containerd-",
    ] {
        if let Some(id) = c.strip_prefix(prefix) {
            return (!id.starts_with("conmon-")).then_some(id);
        }
    }
    // runc and docker's cgroupfs driver: the id itself (hex, long enough not to be a word).
    (c.len() >= 12
        && c.bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
        || c.len() >= 3 && !c.contains('.'))
    .then_some(c)
}

/// Finds the container among the cgroup paths in use (`paths`: `0::` lines of /proc/*/cgroup).
pub fn match_id<'a>(
    arg: &str,
    paths: impl IntoIterator<Item = &'a str>,
) -> Result<(String, String), Usage> {
    // id → its cgroup path (up to and including the component naming it)
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for path in paths {
        let mut prefix = String::new();
        for component in path.split('/').filter(|c| !c.is_empty()) {
            prefix.push('/');
            prefix.push_str(component);
            if let Some(id) = id_in_component(component)
                && (id == arg || arg.len() >= 3 && id.starts_with(arg))
            {
                found
                    .entry(id.to_string())
                    .or_insert_with(|| prefix.clone());
            }
        }
    }
    if let Some(path) = found.get(arg) {
        return Ok((arg.to_string(), path.clone()));
    }
    match found.len() {
        1 => Ok(found.into_iter().next().expect("one")),
        0 => Err(Usage(format!("no running container matches '{arg}'"))),
        _ => Err(Usage(format!(
            "'{arg}' matches more than one container; give more of the id: {}",
            found
                .iter()
                .map(|(id, path)| format!("{id} ({path})"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The cgroup v2 paths of running processes.
fn paths_in_use() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Ok(all) = procfs::process::all_processes() else {
        return out;
    };
    for p in all.flatten() {
        // Hierarchy 0 is cgroup v2 (the `0::PATH` line).
        if let Ok(groups) = p.cgroups()
            && let Some(v2) = groups.0.into_iter().find(|g| g.hierarchy == 0)
            && !out.contains(&v2.pathname)
        {
            out.push(v2.pathname);
        }
    }
    out
}

/// A container name through the runtimes' own command line tools, when installed.
fn id_from_name(name: &str) -> Option<String> {
    let tools: [(&str, &[&str]); 4] = [
        ("docker", &["inspect", "--format", "{{.Id}}"]),
        ("podman", &["inspect", "--format", "{{.Id}}"]),
        ("nerdctl", &["inspect", "--format", "{{.ID}}"]),
        (
            "crictl",
            &[
                "inspect",
                "--output",
                "go-template",
                "--template",
                "{{.status.id}}",
            ],
        ),
    ];
    tools.iter().find_map(|(tool, args)| {
        let out = Command::new(tool)
            .args(*args)
            .arg(name)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !id.is_empty() && !id.contains('\n')).then_some(id)
    })
}

pub fn resolve(arg: &str) -> Result<Container, Usage> {
    let mount = cgroup2_mount().ok_or_else(|| {
        Usage("no cgroup2 filesystem is mounted; container mode needs cgroup v2".into())
    })?;
    let under_mount = |rel: &str| -> Option<PathBuf> {
        let dir = mount.join(rel.trim_start_matches('/'));
        (!rel.trim_matches('/').is_empty() && dir.join("cgroup.procs").is_file()).then_some(dir)
    };
    let (id, dir) = if let Some(rel) = Path::new(arg)
        .strip_prefix(&mount)
        .ok()
        .and_then(|r| r.to_str())
    {
        (
            arg.to_string(),
            under_mount(rel).ok_or_else(|| Usage(format!("{arg}: not a cgroup directory")))?,
        )
    } else if let Some(dir) = arg.contains('/').then(|| under_mount(arg)).flatten() {
        (arg.to_string(), dir)
    } else {
        let paths = paths_in_use();
        let (id, path) = match match_id(arg, paths.iter().map(String::as_str)) {
            Ok(found) => found,
            Err(not_found) => match id_from_name(arg) {
                Some(full) => match_id(&full, paths.iter().map(String::as_str))?,
                None => {
                    return Err(Usage(format!(
                        "{}; give a container id, a name docker/podman/nerdctl/crictl knows, or a cgroup path under {}",
                        not_found.0,
                        mount.display()
                    )));
                }
            },
        };
        (
            id,
            under_mount(&path)
                .ok_or_else(|| Usage(format!("container {arg}: its cgroup {path} is gone")))?,
        )
    };
    let cgroup =
        format!("/{}", dir.strip_prefix(&mount).unwrap_or(&dir).display()).replace("//", "/");
    let cgroup_id = std::fs::metadata(&dir)
        .map_err(|e| Usage(format!("{}: {e}", dir.display())))?
        .ino();
    let level = cgroup.split('/').filter(|c| !c.is_empty()).count() as u32;
    Ok(Container {
        id,
        cgroup,
        dir,
        cgroup_id,
        level,
    })
}

impl Container {
    /// Processes in the cgroup and the cgroups below it.
    pub fn pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(d) = dirs.pop() {
            if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
            if let Ok(entries) = std::fs::read_dir(&d) {
                dirs.extend(
                    entries
                        .flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| e.path()),
                );
            }
        }
        out
    }

    /// Removed, or no process left in it.
    pub fn finished(&self) -> bool {
        !self.dir.is_dir() || self.pids().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::FromBufRead as _;

    #[test]
    fn finds_the_cgroup2_mount_in_both_layouts() {
        let hybrid = "30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs ro\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let mount_from_mountinfo =
            |text: &str| cgroup2_of(MountInfos::from_buf_read(text.as_bytes()).unwrap());
        assert_eq!(
            mount_from_mountinfo(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let pure =
            "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            mount_from_mountinfo(pure),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(
            mount_from_mountinfo("1 2 0:1 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }

    const ID: &str = "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e";

    #[test]
    fn ids_in_every_runtime_layout() {
        let layouts = [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
            format!("/machine.slice/libpod-{ID}.scope/container"),
            format!("/libpod_parent/libpod-{ID}"),
            format!("/kubepods.slice/kubepods-pod1.slice/cri-containerd-{ID}.scope"),
            format!("/kubepods/burstable/pod1/crio-{ID}.scope"),
            format!("/sw-test/{ID}"),
        ];
        for path in &layouts {
            let (id, cgroup) =
                match_id(ID, [path.as_str(), "/", "/user.slice/session-1.scope"]).unwrap();
            assert_eq!(id, ID, "{path}");
            assert!(
                path.starts_with(&cgroup) && cgroup.contains(ID),
                "{path} → {cgroup}"
            );
            let (short, _) = match_id(&ID[..12], [path.as_str()]).unwrap();
            assert_eq!(short, ID);
        }
        assert!(id_in_component(&format!("libpod-conmon-{ID}.scope")).is_none());
    }

    #[test]
    fn unknown_and_ambiguous_ids_are_usage_errors() {
        let other = "3f4e5d6c0000000000000000000000000000000000000000000000000000000f";
        let paths = [format!("/docker/{ID}"), format!("/docker/{other}")];
        let err = match_id("3f4e5d6c", paths.iter().map(String::as_str)).unwrap_err();
        assert!(
            err.0.contains("more than one") && err.0.contains(ID) && err.0.contains(other),
            "{}",
            err.0
        );
        assert!(
            match_id("ffff", paths.iter().map(String::as_str))
                .unwrap_err()
                .0
                .contains("no running container")
        );
        assert_eq!(
            match_id(ID, paths.iter().map(String::as_str)).unwrap().0,
            ID
        );
    }
}
