//! Packages installed or removed, derived from the files the kernel saw traced processes
//! create, rename and delete (not from the package managers' own logs):
//!
//! - pip, uv, …: a file created in a `<name>-<version>.dist-info` directory of a
//!   `site-packages`/`dist-packages` directory; the prefix before `lib/pythonX.Y/` tells a venv
//!   from the system (`/usr`, `/usr/local`) and the user's (`~/.local`). A dist-info renamed
//!   away or deleted is a removal.
//! - npm, pnpm, yarn: `node_modules/<name>/package.json` (or `@scope/name`) created; its
//!   version is what the file held at the end (a `package_meta` record). Global under
//!   `/usr/lib` or `/usr/local/lib`, else the project directory.
//! - dpkg (apt runs it): `/var/lib/dpkg/info/<name>.list` put in place (dpkg writes
//!   `.list-new` and renames it) or deleted; the version from the `.deb` file named on the
//!   dpkg command line (`name_version_arch.deb`, as apt names them). `manager` is `apt` when
//!   apt ran that dpkg.
//! - cargo install: a file put into `<root>/bin/` (cargo renames each binary there from a
//!   staging directory) by a capture that also wrote `<root>/.crates2.json`; name and version
//!   from the install entry of `.crates2.json` that lists the binary, read at the end (a
//!   `package_meta` record for the binary). `user` for `~/.cargo`, `system` for `/usr` and
//!   `/usr/local`, else `root` (a `--root` directory).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::output::report::ProcessEntry;
use crate::record::{Op, PackageMeta, Verdict};
use crate::state::files::FileEntry;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Package {
    /// `pip` (any installer of Python wheels), `npm`, `dpkg`, `apt` or `cargo`.
    pub manager: String,
    pub name: String,
    pub version: Option<String>,
    /// `system`, `user`, `venv`, `global`, `project` or `root` (cargo's `--root`).
    pub scope: String,
    /// The venv, user site or project directory (or dpkg's `--root`) the scope names.
    pub prefix: Option<String>,
    /// `install` or `remove`.
    pub action: String,
    pub pid: u32,
    /// The file the kernel saw that says so.
    pub evidence: String,
    /// The verdict of the process that did it.
    #[serde(default)]
    pub verdict: Verdict,
}

/// Where a file entry left a file, when it made one: its path, or where a rename put it.
fn landed(f: &FileEntry) -> Option<&str> {
    match f.op {
        Op::Create | Op::Write => Some(&f.path),
        Op::Rename => f.new_path.as_deref(),
        _ => None,
    }
}

/// `…/site-packages/six-1.17.0.dist-info/RECORD` → (prefix, name, version, site dir).
fn dist_info(path: &str) -> Option<(String, String, String)> {
    let mut parts = path.split('/').collect::<Vec<_>>();
    let at = parts.iter().position(|p| p.ends_with(".dist-info"))?;
    let site = *parts.get(at.checked_sub(1)?)?;
    if site != "site-packages" && site != "dist-packages" {
        return None;
    }
    let stem = parts[at].strip_suffix(".dist-info")?;
    let (name, version) = stem.split_once('-')?;
    parts.truncate(at - 1);
    // The prefix: what comes before lib/pythonX.Y (or lib/python3 for Debian's dist-packages).
    let lib = parts
        .iter()
        .rposition(|p| p.starts_with("python"))
        .filter(|&i| i > 0 && (parts[i - 1] == "lib" || parts[i - 1] == "lib64"));
    let prefix = match lib {
        Some(i) => parts[..i - 1].join("/"),
        None => parts.join("/"),
    };
    Some((prefix, name.to_string(), version.to_string()))
}

fn pip_scope(prefix: &str) -> &'static str {
    if prefix == "/usr" || prefix == "/usr/local" || prefix.is_empty() {
        "system"
    } else if prefix.ends_with("/.local") {
        "user"
    } else {
        "venv"
    }
}

/// `…/node_modules/@s/name/package.json` → (the directory holding node_modules, name).
fn node_module(path: &str) -> Option<(String, String)> {
    let dir = path.strip_suffix("/package.json")?;
    let (above, name) = dir.rsplit_once("/node_modules/")?;
    let ok = match name.split_once('/') {
        None => !name.starts_with('.'),
        Some((scope, rest)) => scope.starts_with('@') && !rest.contains('/'),
    };
    ok.then(|| (above.to_string(), name.to_string()))
}

/// `<root>/bin/<name>` → (root, name): where cargo install puts a binary.
fn cargo_bin(path: &str) -> Option<(&str, &str)> {
    let (root, bin) = path.rsplit_once("/bin/")?;
    (!bin.is_empty() && !bin.contains('/') && !bin.starts_with('.')).then_some((root, bin))
}

/// The cargo roots whose install record (`.crates2.json`, `.crates.toml`) the capture saw
/// written.
fn cargo_roots(files: &[FileEntry]) -> Vec<&str> {
    files
        .iter()
        .filter(|f| f.result.is_none())
        .filter_map(landed)
        .filter_map(|p| {
            p.strip_suffix("/.crates2.json")
                .or_else(|| p.strip_suffix("/.crates.toml"))
        })
        .collect()
}

fn cargo_scope(root: &str) -> &'static str {
    if root.ends_with("/.cargo") {
        "user"
    } else if root == "/usr" || root == "/usr/local" {
        "system"
    } else {
        "root"
    }
}

/// A cargo binary's package: the `.crates2.json` install key listing it
/// (`"NAME VERSION (SOURCE)"`) → (name, version).
fn crate_of(crates2: &serde_json::Value, bin: &str) -> Option<(String, String)> {
    crates2
        .get("installs")?
        .as_object()?
        .iter()
        .find(|(_, v)| {
            v.get("bins")
                .and_then(|b| b.as_array())
                .is_some_and(|b| b.iter().any(|b| b.as_str() == Some(bin)))
        })
        .and_then(|(key, _)| {
            let mut words = key.split(' ');
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
}

/// `<root>/var/lib/dpkg/info/<name>[:arch].list` → (root, name).
fn dpkg_list(path: &str) -> Option<(String, String)> {
    let (root, file) = path.rsplit_once("/var/lib/dpkg/info/")?;
    if file.contains('/') {
        return None;
    }
    let name = file.strip_suffix(".list")?;
    let name = name.split(':').next()?;
    (!name.is_empty()).then(|| (root.to_string(), name.to_string()))
}

/// The version of `name` in a `.deb` file named on a dpkg command line
/// (`/var/cache/apt/archives/tree_2.1.1-1_amd64.deb`; `%3a` is an epoch's colon).
fn deb_version(argv: &[String], name: &str) -> Option<String> {
    argv.iter().find_map(|a| {
        let file = a.rsplit('/').next()?.strip_suffix(".deb")?;
        let mut fields = file.split('_');
        (fields.next()? == name).then(|| fields.next().map(|v| v.replace("%3a", ":")))?
    })
}

fn latest(processes: &[ProcessEntry], pid: u32) -> Option<&ProcessEntry> {
    processes
        .iter()
        .rev()
        .find(|p| p.pid == pid && !p.fork_only)
}

/// Whether an apt frontend ran this process (up to a few generations up).
fn under_apt(processes: &[ProcessEntry], p: &ProcessEntry) -> bool {
    let mut at = p.ppid;
    for _ in 0..4 {
        let Some(q) = latest(processes, at) else {
            return false;
        };
        let exe = q
            .exe
            .as_deref()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("");
        if matches!(exe, "apt" | "apt-get" | "aptitude") {
            return true;
        }
        at = q.ppid;
    }
    false
}

/// Manifests whose content the capture reads at the end (npm's package.json files created;
/// binaries cargo installed, whose `.crates2.json` names them).
pub fn manifests(files: &[FileEntry]) -> Vec<String> {
    let roots = cargo_roots(files);
    let mut out: Vec<String> = files
        .iter()
        .filter(|f| f.result.is_none())
        .filter_map(landed)
        .filter(|p| {
            node_module(p).is_some() || cargo_bin(p).is_some_and(|(root, _)| roots.contains(&root))
        })
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

pub fn derive(
    processes: &[ProcessEntry],
    files: &[FileEntry],
    metas: &BTreeMap<String, PackageMeta>,
) -> Vec<Package> {
    let mut out: Vec<Package> = Vec::new();
    let verdict = |pid| latest(processes, pid).map_or(Verdict::Inside, |p| p.verdict);
    let roots = cargo_roots(files);
    let mut add = |p: Package| {
        let same = |q: &Package| {
            q.manager == p.manager
                && q.name == p.name
                && q.version == p.version
                && q.prefix == p.prefix
                && q.action == p.action
        };
        if !out.iter().any(same) {
            out.push(p);
        }
    };
    for f in files.iter().filter(|f| f.result.is_none()) {
        let to = landed(f);
        // pip: a file put into a dist-info is an install; one taken out of it (deleted, or
        // renamed elsewhere, as pip uninstall does) a removal.
        let pip = match (to.and_then(dist_info), dist_info(&f.path)) {
            (Some(d), _) => Some((d, "install")),
            (None, Some(d)) if matches!(f.op, Op::Delete | Op::Rename) => Some((d, "remove")),
            _ => None,
        };
        if let Some(((prefix, name, version), action)) = pip {
            add(Package {
                manager: "pip".into(),
                scope: pip_scope(&prefix).into(),
                prefix: Some(prefix).filter(|p| !p.is_empty()),
                name,
                version: Some(version),
                action: action.into(),
                pid: f.pid,
                evidence: to.unwrap_or(&f.path).to_string(),
                verdict: verdict(f.pid),
            });
            continue;
        }
        if let Some((project, name)) = to.and_then(node_module) {
            let global = project == "/usr/lib" || project == "/usr/local/lib";
            let meta = to.and_then(|t| metas.get(t));
            add(Package {
                manager: "npm".into(),
                name,
                version: meta.and_then(|m| m.version.clone()),
                scope: if global { "global" } else { "project" }.into(),
                prefix: Some(project),
                action: "install".into(),
                pid: f.pid,
                evidence: to.unwrap_or(&f.path).to_string(),
                verdict: verdict(f.pid),
            });
            continue;
        }
        let cargo = to
            .and_then(cargo_bin)
            .filter(|(root, _)| roots.contains(root));
        if let Some((root, bin)) = cargo {
            let meta = to.and_then(|t| metas.get(t));
            add(Package {
                manager: "cargo".into(),
                name: meta
                    .and_then(|m| m.name.clone())
                    .unwrap_or_else(|| bin.to_string()),
                version: meta.and_then(|m| m.version.clone()),
                scope: cargo_scope(root).into(),
                prefix: Some(root.to_string()),
                action: "install".into(),
                pid: f.pid,
                evidence: to.unwrap_or(&f.path).to_string(),
                verdict: verdict(f.pid),
            });
            continue;
        }
        let dpkg = match (to.and_then(dpkg_list), f.op) {
            (Some(d), _) => Some((d, "install", to.unwrap_or(&f.path))),
            (None, Op::Delete) => dpkg_list(&f.path).map(|d| (d, "remove", f.path.as_str())),
            _ => None,
        };
        if let Some(((root, name), action, evidence)) = dpkg {
            // dpkg -r rewrites a package's .list (.list-new renamed over it) before deleting
            // it: a .list put in place and then deleted by the same process is a removal.
            let deleted =
                |g: &FileEntry| g.pid == f.pid && g.op == Op::Delete && g.path == evidence;
            if action == "install" && files.iter().any(|g| g.result.is_none() && deleted(g)) {
                continue;
            }
            let p = latest(processes, f.pid);
            let apt = p.is_some_and(|p| under_apt(processes, p));
            add(Package {
                manager: if apt { "apt" } else { "dpkg" }.into(),
                version: p.and_then(|p| deb_version(&p.argv, &name)),
                name,
                scope: "system".into(),
                prefix: Some(root).filter(|r| !r.is_empty()),
                action: action.into(),
                pid: f.pid,
                evidence: evidence.to_string(),
                verdict: verdict(f.pid),
            });
        }
    }
    out
}

/// A package manifest's name and version as they are now: the `package_meta` record the
/// capture logs at the end (redacted as argv is; the count of redactions).
pub fn read_meta(path: &str) -> (PackageMeta, usize) {
    let mut meta = PackageMeta {
        path: path.to_string(),
        ..PackageMeta::default()
    };
    let mut redacted = 0;
    let mut clean = |s: &str| {
        let s: String = s.chars().take(200).collect();
        let (out, n) = crate::judge::redact::redact_argv(&[s]);
        redacted += n;
        out.into_iter().next()
    };
    // A cargo binary: the install record beside its bin directory names it.
    let (file, bin) = match cargo_bin(path).filter(|_| node_module(path).is_none()) {
        Some((root, bin)) => (format!("{root}/.crates2.json"), Some(bin)),
        None => (path.to_string(), None),
    };
    match crate::state::files::read_now(&file, 1 << 20, false) {
        Ok(b) => match serde_json::from_slice::<serde_json::Value>(&b) {
            Ok(v) => match bin {
                Some(bin) => match crate_of(&v, bin) {
                    Some((name, version)) => {
                        meta.name = clean(&name);
                        meta.version = clean(&version);
                    }
                    None => meta.skipped = Some(format!("{file} does not list {bin}")),
                },
                None => {
                    meta.name = v.get("name").and_then(|s| s.as_str()).and_then(&mut clean);
                    meta.version = v
                        .get("version")
                        .and_then(|s| s.as_str())
                        .and_then(&mut clean);
                }
            },
            Err(_) => meta.skipped = Some("not JSON at the end".into()),
        },
        Err(why) => meta.skipped = Some(why),
    }
    (meta, redacted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_packages_as_their_managers_lay_them_out() {
        assert_eq!(
            dist_info("/w/.venv/lib/python3.11/site-packages/six-1.17.0.dist-info/RECORD"),
            Some(("/w/.venv".into(), "six".into(), "1.17.0".into()))
        );
        assert_eq!(
            dist_info("/usr/lib/python3/dist-packages/rich-13.3.1.dist-info/METADATA")
                .map(|d| pip_scope(&d.0)),
            Some("system")
        );
        assert_eq!(dist_info("/w/six-1.0.dist-info/RECORD"), None);
        assert_eq!(
            node_module("/p/node_modules/@s/a/package.json"),
            Some(("/p".into(), "@s/a".into()))
        );
        assert_eq!(
            node_module("/p/node_modules/a/node_modules/b/package.json"),
            Some(("/p/node_modules/a".into(), "b".into()))
        );
        assert_eq!(node_module("/p/node_modules/a/lib/package.json"), None);
        assert_eq!(node_module("/p/node_modules/.package-lock.json"), None);
        assert_eq!(
            dpkg_list("/var/lib/dpkg/info/libc6:amd64.list"),
            Some((String::new(), "libc6".into()))
        );
        assert_eq!(dpkg_list("/var/lib/dpkg/info/tree.md5sums"), None);
        let argv = [
            "dpkg",
            "--unpack",
            "/var/cache/apt/archives/tree_1%3a2.1.1-1_amd64.deb",
        ]
        .map(String::from);
        assert_eq!(deb_version(&argv, "tree").as_deref(), Some("1:2.1.1-1"));
        assert_eq!(deb_version(&argv, "tre"), None);
        assert_eq!(cargo_bin("/r/.cargo/bin/rg"), Some(("/r/.cargo", "rg")));
        assert_eq!(cargo_bin("/r/bin/.cargo-x/rg"), None);
        assert_eq!(cargo_scope("/root/.cargo"), "user");
        let crates2: serde_json::Value = serde_json::from_str(
            r#"{"installs":{"ripgrep 14.1.0 (registry+https://x)":{"bins":["rg"]},"b 1.0.0 (path+file:///b)":{"bins":["b1","b2"]}}}"#,
        )
        .unwrap();
        assert_eq!(crate_of(&crates2, "b2"), Some(("b".into(), "1.0.0".into())));
        assert_eq!(crate_of(&crates2, "rg").map(|c| c.1), Some("14.1.0".into()));
        assert_eq!(crate_of(&crates2, "zz"), None);
    }

    #[test]
    fn a_list_dpkg_rewrites_and_then_deletes_is_a_removal_only() {
        let file = |pid: u32, op: &str, path: &str, new_path: Option<&str>| -> FileEntry {
            serde_json::from_value(serde_json::json!({"pid": pid, "op": op, "path": path,
                "new_path": new_path, "credential": false, "persistence": false}))
            .unwrap()
        };
        let list = "/var/lib/dpkg/info/t.list";
        let new = "/var/lib/dpkg/info/t.list-new";
        // dpkg -i (pid 10) puts the .list in place; dpkg -r (pid 20) rewrites it, then deletes it.
        let files = [
            file(10, "rename", new, Some(list)),
            file(20, "rename", new, Some(list)),
            file(20, "delete", list, None),
        ];
        let run = |pid: u32, argv: &[&str]| -> ProcessEntry {
            serde_json::from_value(serde_json::json!({"pid": pid, "ppid": 1, "exe": null,
                "argv": argv, "cwd": null, "uid": 0, "netns": 1, "ended_at": null,
                "exit_code": 0, "signal": null, "comm": "dpkg", "euid": 0, "gid": 0,
                "mntns": null, "pidns": null, "userns": null, "cgroup_id": null}))
            .unwrap()
        };
        let processes = [
            run(10, &["dpkg", "-i", "/d/t_1.0-1_amd64.deb"]),
            run(20, &["dpkg", "-r", "t"]),
        ];
        let got: Vec<(u32, String, Option<String>)> = derive(&processes, &files, &BTreeMap::new())
            .into_iter()
            .map(|p| (p.pid, p.action, p.version))
            .collect();
        assert_eq!(
            got,
            [
                (10, "install".into(), Some("1.0-1".into())),
                (20, "remove".into(), None)
            ]
        );
    }
}
