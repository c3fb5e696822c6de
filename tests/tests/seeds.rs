//! What the seeds' reports answer, from the kernel: the git commits a session made and the
//! packages it installed (pip into a venv, npm into a project, dpkg), each checked against
//! what git, pip, npm and dpkg say afterwards.
use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::*;
use serde_json::Value;

fn ok(c: &mut Command) -> String {
    let out = c.output().expect("start a helper");
    assert!(
        out.status.success(),
        "{c:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn rev_parse(repo: &Path, what: &str) -> String {
    ok(Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", what]))
}

#[test]
fn commits_and_an_amend_are_named_with_the_ids_git_gives_afterwards() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let repo = dir.path().join("app");
    let bare = dir.path().join("bare.git");
    ok(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare));
    let script = format!(
        "set -e; export GIT_AUTHOR_NAME=A GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=A GIT_COMMITTER_EMAIL=a@x
         git init -q -b main {repo}; cd {repo}
         echo hi > greet.txt; git add greet.txt; git commit -q -m 'First'
         echo world >> greet.txt; git commit -q -a -m 'Greet the world'
         git commit -q --amend -m 'Greet the world again'
         git push -q {bare} main",
        repo = repo.display(),
        bare = bare.display()
    );
    let summary = dir.path().join("summary.md");
    let r = run(
        &["--summary", summary.to_str().unwrap()],
        &["sh", "-c", &script],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // The ids git gives now: the first commit, the one the amend replaced, the amend.
    let ids = [
        rev_parse(&repo, "HEAD~1"),
        rev_parse(&repo, "HEAD@{1}"),
        rev_parse(&repo, "HEAD"),
    ];
    let commits = &r.typed.git.commits;
    assert_eq!(
        commits
            .iter()
            .map(|c| c.commit.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        ids,
        "git.commits: {commits:#?}"
    );
    let repo_s = repo.to_str().unwrap();
    for (c, message) in commits.iter().zip([
        "commit (initial): First",
        "commit: Greet the world",
        "commit (amend): Greet the world again",
    ]) {
        assert_eq!(c.repo, repo_s);
        assert_eq!(c.branch.as_deref(), Some("main"));
        assert_eq!(c.command, "commit");
        assert_eq!(c.message.as_deref(), Some(message));
        // The pid is the git commit the kernel saw move the ref.
        let p = r
            .typed
            .processes
            .iter()
            .find(|p| p.pid == c.pid && !p.fork_only)
            .expect("the committing process");
        assert_eq!(p.argv.get(1).map(String::as_str), Some("commit"), "{p:?}");
    }
    // The amend's previous id is the commit it replaced.
    assert_eq!(commits[2].previous.as_deref(), Some(ids[1].as_str()));
    // The push to the local bare repository: named, with no host (no network).
    let pushes = &r.typed.git.pushes;
    assert_eq!(pushes.len(), 1, "{pushes:#?}");
    assert_eq!(pushes[0].remote.as_deref(), Some(bare.to_str().unwrap()));
    assert_eq!(pushes[0].repo.as_deref(), Some(repo_s));
    let text = std::fs::read_to_string(&summary).unwrap();
    let line = format!(
        "- **Git**: 3 commits on main in {repo_s} ({} 'First', {} 'Greet the world', {} 'Greet the world again'); push to {}",
        &ids[0][..7],
        &ids[1][..7],
        &ids[2][..7],
        bare.display()
    );
    assert!(text.contains(&line), "no line {line:?} in:\n{text}");
}

/// A wheel of one module, built by hand (a zip with its dist-info), so pip needs no network.
fn wheel(dir: &Path) -> std::path::PathBuf {
    let whl = dir.join("swseed-1.2.3-py3-none-any.whl");
    let py = format!(
        "import zipfile\nz = zipfile.ZipFile({:?}, 'w')\n\
         z.writestr('swseed/__init__.py', 'X = 1\\n')\n\
         z.writestr('swseed-1.2.3.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: swseed\\nVersion: 1.2.3\\n')\n\
         z.writestr('swseed-1.2.3.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('swseed-1.2.3.dist-info/RECORD', '')\nz.close()\n",
        whl.to_str().unwrap()
    );
    ok(Command::new("/usr/bin/python3").args(["-c", &py]));
    whl
}

/// A local npm package packed into a tarball.
fn npm_tarball(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name": "sw-seed-pad", "version": "0.4.2", "main": "index.js"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 1;\n").unwrap();
    ok(Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&pkg)
        .env("npm_config_cache", dir.join("npm-cache")));
    dir.join("sw-seed-pad-0.4.2.tgz")
}

/// A tiny .deb that installs one file.
fn deb(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("debroot");
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(root.join("usr/share/sw-seed-deb")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: sw-seed-deb\nVersion: 0.3-1\nArchitecture: all\nMaintainer: t <t@x>\nDescription: a test package\n",
    )
    .unwrap();
    std::fs::write(root.join("usr/share/sw-seed-deb/hello"), "hello\n").unwrap();
    let out = dir.join("sw-seed-deb_0.3-1_all.deb");
    ok(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "--build"])
        .arg(&root)
        .arg(&out));
    out
}

#[test]
fn packages_installed_with_pip_npm_and_dpkg_are_named_with_version_and_scope() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let whl = wheel(dir.path());
    let tgz = npm_tarball(dir.path());
    let deb = deb(dir.path());
    let venv = dir.path().join("work/.venv");
    let project = dir.path().join("work/web");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name": "web", "version": "1.0.0"}"#,
    )
    .unwrap();
    let script = format!(
        "set -e
         /usr/bin/python3 -m venv --without-pip {venv}
         /usr/bin/python3 -m pip --python {venv}/bin/python install -q --no-index --no-deps --disable-pip-version-check {whl}
         cd {project}; npm install --offline --no-audit --no-fund --silent {tgz}
         dpkg -i {deb} > /dev/null; dpkg -r sw-seed-deb > /dev/null",
        venv = venv.display(),
        whl = whl.display(),
        project = project.display(),
        tgz = tgz.display(),
        deb = deb.display()
    );
    let summary = dir.path().join("summary.md");
    let r = {
        let mut c = command();
        // npm's cache in the test's directory (HOME is unset in CI).
        c.env("npm_config_cache", dir.path().join("npm-cache"));
        let report = dir.path().join("report.json");
        let log = dir.path().join("log.jsonl");
        let out = c
            .args(["run", "--headless", "--linger", "0.3", "--report"])
            .arg(&report)
            .arg("--log")
            .arg(&log)
            .arg("--summary")
            .arg(&summary)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let _ = Command::new("dpkg")
            .args(["--purge", "sw-seed-deb"])
            .output();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&report).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_replay_matches(&v, &log);
        serde_json::from_str::<Report>(&text).unwrap()
    };
    let find = |manager: &str, name: &str, action: &str| {
        r.packages
            .iter()
            .find(|p| p.manager == manager && p.name == name && p.action == action)
            .unwrap_or_else(|| panic!("no {manager} {name} {action}; packages: {:#?}", r.packages))
    };
    // pip: the dist-info directory pip made in the venv; what pip itself lists there.
    let pip = find("pip", "swseed", "install");
    assert_eq!(pip.version.as_deref(), Some("1.2.3"));
    assert_eq!(pip.scope, "venv");
    assert_eq!(pip.prefix.as_deref(), venv.to_str());
    let listed = ok(Command::new(venv.join("bin/python")).args([
        "-c",
        "import importlib.metadata as m; print(m.version('swseed'))",
    ]));
    assert_eq!(listed, "1.2.3");
    // npm: node_modules/<name>/package.json in the project; the version it holds.
    let npm = find("npm", "sw-seed-pad", "install");
    assert_eq!(npm.version.as_deref(), Some("0.4.2"));
    assert_eq!(npm.scope, "project");
    assert_eq!(npm.prefix.as_deref(), project.to_str());
    // dpkg: the .list put in place by dpkg -i, deleted by dpkg -r; the version from the .deb.
    let installed = find("dpkg", "sw-seed-deb", "install");
    assert_eq!(installed.version.as_deref(), Some("0.3-1"));
    assert_eq!(installed.scope, "system");
    assert_eq!(installed.evidence, "/var/lib/dpkg/info/sw-seed-deb.list");
    // dpkg -r rewrites the .list before deleting it: that is not a second install.
    let installs = r
        .packages
        .iter()
        .filter(|p| p.name == "sw-seed-deb" && p.action == "install");
    assert_eq!(installs.count(), 1, "packages: {:#?}", r.packages);
    let removed = find("dpkg", "sw-seed-deb", "remove");
    assert_ne!(removed.pid, installed.pid);
    for p in &r.packages {
        assert_eq!(p.verdict, Verdict::Inside);
    }
    let text = std::fs::read_to_string(&summary).unwrap();
    for part in [
        format!("pip swseed 1.2.3 (venv {})", venv.display()),
        format!("npm sw-seed-pad 0.4.2 (project {})", project.display()),
        // One group per manager and place, the manager named once: the install, the remove.
        "dpkg sw-seed-deb 0.3-1, ".to_string(),
        "sw-seed-deb removed".to_string(),
    ] {
        assert!(text.contains(&part), "no {part:?} in:\n{text}");
    }
}

#[test]
fn a_crate_cargo_installed_is_named_with_the_version_its_install_record_gives() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let krate = dir.path().join("hello");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"sw-seed-crate\"\nversion = \"0.7.3\"\nedition = \"2021\"\n\n\
         [[bin]]\nname = \"sw-hello\"\npath = \"src/main.rs\"\n",
    )
    .unwrap();
    std::fs::write(krate.join("src/main.rs"), "fn main() {}\n").unwrap();
    let root = dir.path().join("root");
    // The toolchain's own cargo and rustc (the test runs under cargo), and nothing of this
    // build's settings, so the install is the same on a bare CI machine.
    let cargo = PathBuf::from(std::env::var("CARGO").expect("the test runs under cargo"));
    let rustc = cargo.with_file_name("rustc");
    let report = dir.path().join("report.json");
    let log = dir.path().join("log.jsonl");
    let summary = dir.path().join("summary.md");
    let mut c = command();
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
        c.env_remove(var);
    }
    let out = c
        .env("CARGO_HOME", dir.path().join("cargo-home"))
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .env("RUSTC", &rustc)
        .args(["run", "--headless", "--linger", "0.3", "--report"])
        .arg(&report)
        .arg("--log")
        .arg(&log)
        .arg("--summary")
        .arg(&summary)
        .arg("--")
        .arg(&cargo)
        .args(["install", "--offline", "--quiet", "--path"])
        .arg(&krate)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(root.join("bin/sw-hello").exists(), "cargo did not install");
    let text = std::fs::read_to_string(&report).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_replay_matches(&v, &log);
    let r: Report = serde_json::from_str(&text).unwrap();
    let p = r
        .packages
        .iter()
        .find(|p| p.manager == "cargo")
        .unwrap_or_else(|| panic!("no cargo package; packages: {:#?}", r.packages));
    assert_eq!(p.name, "sw-seed-crate");
    assert_eq!(p.version.as_deref(), Some("0.7.3"));
    assert_eq!(p.scope, "root");
    assert_eq!(p.prefix.as_deref(), root.to_str());
    assert_eq!(p.action, "install");
    assert_eq!(
        p.evidence,
        root.join("bin/sw-hello").to_str().unwrap(),
        "the binary cargo put in place"
    );
    assert_eq!(
        r.packages.iter().filter(|p| p.manager == "cargo").count(),
        1
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    let line = format!("cargo sw-seed-crate 0.7.3 (root {})", root.display());
    assert!(text.contains(&line), "no {line:?} in:\n{text}");
}

/// Issue 15 item 7: `git config core.hooksPath` or an include pointing outside the repository
/// is persistence (git runs those hooks at the next commit); a global config's always is.
/// Hooks kept in the repository are not.
#[test]
fn git_hooks_and_includes_pointed_outside_the_repository_are_persistence() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let repo = dir.path().join("app");
    let own = dir.path().join("own");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    for r in [&repo, &own] {
        ok(Command::new("git").args(["init", "-q"]).arg(r));
    }
    let script = format!(
        "set -e
         git -C {repo} config core.hooksPath /tmp/sw-hooks
         git -C {repo} config include.path /tmp/sw-more.inc
         git -C {own} config core.hooksPath .githooks
         HOME={home} git config --global core.hooksPath {home}/.hooks",
        repo = repo.display(),
        own = own.display(),
        home = home.display()
    );
    let r = run(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let config = &r.typed.git.config;
    let setting = |path: &Path, key: &str| {
        config
            .iter()
            .find(|s| s.path == path.to_str().unwrap() && s.key == key)
            .unwrap_or_else(|| panic!("no {key} of {}: {config:#?}", path.display()))
    };
    let repo_config = repo.join(".git/config");
    let hooks = setting(&repo_config, "core.hooksPath");
    assert_eq!(hooks.value, "/tmp/sw-hooks");
    assert!(hooks.outside);
    assert!(setting(&repo_config, "include.path").outside);
    assert!(!setting(&own.join(".git/config"), "core.hooksPath").outside);
    assert!(setting(&home.join(".gitconfig"), "core.hooksPath").outside);
    let found: Vec<&str> = r
        .typed
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Persistence)
        .map(|v| v.summary.as_str())
        .collect();
    for part in [
        format!(
            "core.hooksPath = /tmp/sw-hooks in {}",
            repo_config.display()
        ),
        format!(
            "include.path = /tmp/sw-more.inc in {}",
            repo_config.display()
        ),
        format!("in {}", home.join(".gitconfig").display()),
    ] {
        assert!(
            found.iter().any(|s| s.contains(&part)),
            "no finding with {part:?}: {found:#?}"
        );
    }
    assert!(
        !found.iter().any(|s| s.contains(".githooks")),
        "hooks in the repository are not persistence: {found:#?}"
    );
}

/// The demo (`sandbox-watch` with no arguments) is the first thing a person runs: its summary
/// answers the seeds' questions, the package its agent installed and the commits it made among
/// them.
#[test]
fn the_demo_summary_names_its_package_and_its_commits() {
    let out = Command::new(bin())
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = |label: &str| -> PathBuf {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} line in:\n{stdout}"));
        PathBuf::from(line.split_whitespace().next().unwrap())
    };
    let summary = std::fs::read_to_string(path("Summary:")).unwrap();
    let demo_dir = path("Report:").parent().unwrap().to_path_buf();
    let _ = std::fs::remove_dir_all(&demo_dir);
    let has = |prefix: &str| summary.lines().any(|l| l.starts_with(prefix));
    assert!(
        has("- **Packages**: pip leapcal 1.0.0 (venv "),
        "no package line:\n{summary}"
    );
    assert!(
        has("- **Git**: 2 commits on "),
        "no commits line:\n{summary}"
    );
}
