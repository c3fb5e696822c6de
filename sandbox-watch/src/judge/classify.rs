//! What a file access means: is the file a credential, is a write to it a way
//! to persist (run again later, log in again later), and can the recorded
//! access be trusted to have touched the real secret.
//!
//! Paths arrive from the kernel, absolute and resolved. Globs are matched with
//! `*` and `?` not crossing `/`; `**/` at the start matches any number of
//! leading directories, so the per-user entries match wherever the file lives
//! (any home, any workspace), not only under `$HOME`.
//!
//! Decisions on the borderline entries:
//! - `.envrc` (direnv) is not a credential: it is a shell script that is
//!   usually committed. `.env` and `.env.*` are, except the committed
//!   templates `.env.example`, `.env.sample` and `.env.template`. Add
//!   `--credential .envrc` to watch it as well.
//! - Only `/etc/shadow`, `/etc/gshadow` and their `-` backups are credentials:
//!   `/etc/shadow.d/...` (no such standard place) is not.
//! - In `.ssh/` only the private keys `id_*` (not `id_*.pub`) and the SSH-1
//!   `identity` file are credentials; `known_hosts`, `config` and the like are not.
//! - `.gnupg/secring.gpg` (GnuPG 1's secret keyring) counts like
//!   `.gnupg/private-keys-v1.d/*`.
//! - Writes to the account databases `/etc/passwd`, `/etc/shadow`,
//!   `/etc/group` and `/etc/gshadow` are persistence: a new uid-0 user, a
//!   password or a group membership outlives the session.
//! - `.local/share/applications` is not persistence (nothing starts from it
//!   by itself); autostart entries are.
//! - Git hooks are persistence in `.git/hooks/`, in bare repositories
//!   (`NAME.git/hooks/`) and in submodules (`.git/modules/**/hooks/`), except the
//!   `*.sample` files that git itself writes.
//! - A user glob without any `/` (such as `secrets.toml`) matches that file
//!   name in any directory, as if written `**/secrets.toml`.

use std::collections::HashMap;

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;

/// Superblock magics (include/uapi/linux/magic.h and the drivers that keep
/// theirs private).
mod magic {
    pub const EXT: u64 = 0xEF53;
    pub const XFS: u64 = 0x5846_5342;
    pub const BTRFS: u64 = 0x9123_683E;
    pub const BTRFS_TEST: u64 = 0x7372_7279;
    pub const TMPFS: u64 = 0x0102_1994;
    pub const PROC: u64 = 0x9fa0;
    pub const SYSFS: u64 = 0x6265_6572;
    pub const OVERLAY: u64 = 0x794c_7630;
    pub const FUSE: u64 = 0x6573_5546;
    pub const NFS: u64 = 0x6969;
    pub const V9FS: u64 = 0x0102_1997;
    pub const SQUASHFS: u64 = 0x7371_7368;
    pub const DEVPTS: u64 = 0x1cd1;
    pub const CGROUP: u64 = 0x0027_e0eb;
    pub const CGROUP2: u64 = 0x6367_7270;
    pub const DEBUGFS: u64 = 0x6462_6720;
    pub const TRACEFS: u64 = 0x7472_6163;
    pub const SECURITYFS: u64 = 0x7363_6673;
    pub const BPF: u64 = 0xcafe_4a11;
    pub const RAMFS: u64 = 0x8584_58f6;
    pub const VFAT: u64 = 0x4d44;
    pub const EXFAT: u64 = 0x2011_BAB0;
    pub const NTFS: u64 = 0x5346_544e;
    pub const NTFS3: u64 = 0x7366_746e;
    pub const F2FS: u64 = 0xF2F5_2010;
    pub const ZFS: u64 = 0x2fc1_2fc1;
    pub const BCACHEFS: u64 = 0xca45_1a4e;
    pub const CEPH: u64 = 0x00c3_6400;
    pub const CIFS: u64 = 0xFF53_4D42;
    pub const SMB2: u64 = 0xFE53_4D42;
    pub const SMB: u64 = 0x517B;
    pub const ECRYPTFS: u64 = 0xf15f;
    pub const EROFS: u64 = 0xE0F5_E1E2;
    pub const NSFS: u64 = 0x6e73_6673;
    pub const PIPEFS: u64 = 0x5049_5045;
    pub const SOCKFS: u64 = 0x534F_434B;
    pub const ANON_INODE: u64 = 0x0904_1934;
    pub const ISO9660: u64 = 0x9660;
    pub const UDF: u64 = 0x1501_3346;
    pub const BINFMT_MISC: u64 = 0x4249_4e4d;
    pub const HUGETLBFS: u64 = 0x9584_58f6;
    pub const MQUEUE: u64 = 0x1980_0202;
    pub const AUTOFS: u64 = 0x0187;
    pub const CONFIGFS: u64 = 0x6265_6570;
    pub const EFIVARFS: u64 = 0xde5e_81e4;
    pub const PSTORE: u64 = 0x6165_676C;
    pub const SELINUXFS: u64 = 0xf97c_ff8c;
    pub const SMACKFS: u64 = 0x4341_5d53;
    pub const BDEV: u64 = 0x6264_6576;
    pub const DMABUF: u64 = 0x444d_4142;
    pub const SECRETMEM: u64 = 0x5345_434d;
    pub const BINDERFS: u64 = 0x6c6f_6f70;
    pub const VBOXSF: u64 = 0x786f_4256;
    pub const HOSTFS: u64 = 0x00c0_ffee;
    pub const CRAMFS: u64 = 0x28cd_3d45;
    pub const JFFS2: u64 = 0x72b6;
    pub const NILFS: u64 = 0x3434;
    pub const REISERFS: u64 = 0x5265_4973;
    pub const GFS2: u64 = 0x0116_1970;
    pub const OCFS2: u64 = 0x7461_636f;
    pub const AFS: u64 = 0x5346_414F;
    pub const CODA: u64 = 0x7375_7245;
}

/// A magic that went through a signed 32-bit `f_type` comes back
/// sign-extended (0xffffffffff534d42 for cifs); take its low 32 bits.
fn normalize_magic(magic: u64) -> u64 {
    if magic >> 32 == 0xFFFF_FFFF {
        magic & 0xFFFF_FFFF
    } else {
        magic
    }
}

/// Filesystem name for a superblock magic, `"unknown"` for one not listed.
///
/// ext2, ext3 and ext4 share one magic and are all named `"ext2/3/4"`.
/// devtmpfs has no magic of its own: on modern kernels it is tmpfs inside and
/// reports tmpfs's magic (ramfs's where the kernel has no tmpfs), so `/dev`
/// files are named `"tmpfs"`. virtiofs reports fuse's magic.
pub fn fs_name(magic: u64) -> &'static str {
    use magic::*;
    match normalize_magic(magic) {
        EXT => "ext2/3/4",
        XFS => "xfs",
        BTRFS => "btrfs",
        BTRFS_TEST => "btrfs_test",
        TMPFS => "tmpfs",
        PROC => "proc",
        SYSFS => "sysfs",
        OVERLAY => "overlay",
        FUSE => "fuse",
        NFS => "nfs",
        V9FS => "9p",
        SQUASHFS => "squashfs",
        DEVPTS => "devpts",
        CGROUP => "cgroup",
        CGROUP2 => "cgroup2",
        DEBUGFS => "debugfs",
        TRACEFS => "tracefs",
        SECURITYFS => "securityfs",
        BPF => "bpf",
        RAMFS => "ramfs",
        VFAT => "vfat",
        EXFAT => "exfat",
        NTFS => "ntfs",
        NTFS3 => "ntfs3",
        F2FS => "f2fs",
        ZFS => "zfs",
        BCACHEFS => "bcachefs",
        CEPH => "ceph",
        CIFS => "cifs",
        SMB2 => "smb2",
        SMB => "smb",
        ECRYPTFS => "ecryptfs",
        EROFS => "erofs",
        NSFS => "nsfs",
        PIPEFS => "pipefs",
        SOCKFS => "sockfs",
        ANON_INODE => "anon_inode",
        ISO9660 => "iso9660",
        UDF => "udf",
        BINFMT_MISC => "binfmt_misc",
        HUGETLBFS => "hugetlbfs",
        MQUEUE => "mqueue",
        AUTOFS => "autofs",
        CONFIGFS => "configfs",
        EFIVARFS => "efivarfs",
        PSTORE => "pstore",
        SELINUXFS => "selinuxfs",
        SMACKFS => "smackfs",
        BDEV => "bdev",
        DMABUF => "dmabuf",
        SECRETMEM => "secretmem",
        BINDERFS => "binderfs",
        VBOXSF => "vboxsf",
        HOSTFS => "hostfs",
        CRAMFS => "cramfs",
        JFFS2 => "jffs2",
        NILFS => "nilfs2",
        REISERFS => "reiserfs",
        GFS2 => "gfs2",
        OCFS2 => "ocfs2",
        AFS => "afs",
        CODA => "coda",
        _ => "unknown",
    }
}

/// The magic as lower-case hex with `0x` and no padding: `0xef53`.
pub fn magic_hex(magic: u64) -> String {
    format!("{magic:#x}")
}

/// Filesystems on which a credential file can really be stored (anything but
/// `/proc/...`).
const STORING_FILESYSTEMS: &[u64] = &[
    magic::EXT,
    magic::XFS,
    magic::BTRFS,
    magic::F2FS,
    magic::ZFS,
    magic::BCACHEFS,
    magic::OVERLAY,
    magic::TMPFS,
    magic::NFS,
    magic::CEPH,
    magic::CIFS,
    magic::SMB2,
    magic::VFAT,
    magic::EXFAT,
    magic::NTFS,
    magic::NTFS3,
    magic::EROFS,
    magic::SQUASHFS,
    magic::RAMFS,
    magic::ECRYPTFS,
];

/// What one access means. `verified` and `reason` only say something when
/// `credential` is true: then `verified` is whether the access touched a
/// file that can hold the secret, and `reason` says why not when it is
/// false. For a file that is not a credential they are `false` and `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Classification {
    pub credential: bool,
    pub persistence: bool,
    pub verified: bool,
    pub reason: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClassifyError {
    #[error("bad credential glob {glob:?}: {reason}")]
    BadGlob { glob: String, reason: String },
    #[error("empty credential glob")]
    EmptyGlob,
}

/// Credential files matched wherever they live.
const CREDENTIAL_GLOBS: &[&str] = &[
    "**/.ssh/id_*",
    "**/.ssh/identity",
    "**/.aws/credentials",
    "**/.aws/config",
    "**/.netrc",
    "**/.git-credentials",
    "**/.docker/config.json",
    "**/.kube/config",
    "**/.config/gh/hosts.yml",
    "**/.npmrc",
    "**/.pypirc",
    "**/.config/gcloud/credentials.db",
    "**/.config/gcloud/access_tokens.db",
    "**/.config/gcloud/application_default_credentials.json",
    "**/.config/gcloud/legacy_credentials/**",
    "**/.azure/accessTokens.json",
    "**/.azure/msal_token_cache.*",
    "**/.azure/azureProfile.json",
    "**/.gnupg/private-keys-v1.d/*",
    "**/.gnupg/secring.gpg",
    "**/.env",
    "**/.env.*",
    "**/.vault-token",
    "**/.pgpass",
    "**/.my.cnf",
    "**/.terraform.d/credentials.tfrc.json",
    "**/.cargo/credentials",
    "**/.cargo/credentials.toml",
    "**/serviceaccount/token",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/run/secrets/**",
    // `/var/run` is normally a link to `/run` (and resolved away), but not
    // everywhere; this also covers `/var/run/secrets/kubernetes.io/**`.
    "/var/run/secrets/**",
];

/// Matches of [`CREDENTIAL_GLOBS`] that are not credentials.
const CREDENTIAL_EXCEPT_GLOBS: &[&str] = &[
    "**/.ssh/id_*.pub",
    "**/.env.example",
    "**/.env.sample",
    "**/.env.template",
];

/// A process's environment: a credential that only proc can serve.
const ENVIRON_GLOBS: &[&str] = &["/proc/*/environ", "/proc/*/task/*/environ"];

/// Whether `path` is a process's environment in proc (`/proc/PID/environ`,
/// `/proc/PID/task/TID/environ`): the files the report groups into one finding per reader.
pub fn is_environ(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let word = |s: &str| !s.is_empty();
    match parts.as_slice() {
        ["", "proc", p, "environ"] => word(p),
        ["", "proc", p, "task", t, "environ"] => word(p) && word(t),
        _ => false,
    }
}

/// Files whose change makes something run (or let someone in) later.
const PERSISTENCE_GLOBS: &[&str] = &[
    // Shell start files.
    "**/.bashrc",
    "**/.bash_profile",
    "**/.bash_login",
    "**/.bash_logout",
    "**/.profile",
    "**/.zshrc",
    "**/.zprofile",
    "**/.zshenv",
    "**/.zlogin",
    "**/.zlogout",
    "**/.config/fish/config.fish",
    "**/.config/fish/conf.d/*",
    "/etc/profile",
    "/etc/profile.d/*",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/zsh/*",
    "/etc/zshrc",
    "/etc/zshenv",
    "/etc/zprofile",
    // Crontabs.
    "/etc/crontab",
    "/etc/anacrontab",
    "/etc/cron.*/**",
    "/etc/cron.d/*",
    "/var/spool/cron/**",
    // systemd units, system and user.
    "/etc/systemd/system/**",
    "/etc/systemd/user/**",
    "/lib/systemd/system/**",
    "/lib/systemd/user/**",
    "/usr/lib/systemd/system/**",
    "/usr/lib/systemd/user/**",
    "**/.config/systemd/user/**",
    "**/.local/share/systemd/user/**",
    // Logins.
    "**/.ssh/authorized_keys",
    "**/.ssh/authorized_keys2",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d/*",
    // Git hooks: work trees, bare repositories, submodules.
    "**/.git/hooks/*",
    "**/?*.git/hooks/*",
    "**/.git/modules/**/hooks/*",
    // Desktop autostart.
    "**/.config/autostart/*.desktop",
    "/etc/xdg/autostart/*",
    // Boot and loader.
    "/etc/ld.so.preload",
    "/etc/rc.local",
    "/etc/init.d/*",
];

/// Matches of [`PERSISTENCE_GLOBS`] that are not persistence: the sample
/// hooks git writes itself.
const PERSISTENCE_EXCEPT_GLOBS: &[&str] = &[
    "**/.git/hooks/*.sample",
    "**/?*.git/hooks/*.sample",
    "**/.git/modules/**/hooks/*.sample",
];

/// What a rule glob means, for finding the files it names at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleKind {
    Credential,
    Persistence,
}

/// A file a rule named at start, known by its inode: any path to that inode is judged as the
/// rule's file (hard links, bind mounts, `open_tree`, `pivot_root`, `open_by_handle_at`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeRule {
    /// The path the rule matched at start.
    pub path: String,
    pub credential: bool,
    pub persistence: bool,
}

/// The built-in lists (and the user's credential globs), compiled once.
#[derive(Clone, Debug)]
pub struct Classifier {
    /// The user's credential globs as compiled (a name without `/` prefixed with `**/`).
    extra_globs: Vec<String>,
    /// The rules' files that existed at start, by (kernel dev, inode number).
    inodes: HashMap<(u32, u64), InodeRule>,
    credential: GlobSet,
    credential_except: GlobSet,
    environ: GlobSet,
    extra_credential: GlobSet,
    persistence: GlobSet,
    persistence_except: GlobSet,
}

fn glob_set<S: AsRef<str>>(globs: &[S]) -> Result<GlobSet, ClassifyError> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let glob = glob.as_ref();
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| ClassifyError::BadGlob {
                glob: glob.to_owned(),
                reason: e.kind().to_string(),
            })?;
        builder.add(compiled);
    }
    builder.build().map_err(|e| ClassifyError::BadGlob {
        glob: e.glob().unwrap_or_default().to_owned(),
        reason: e.kind().to_string(),
    })
}

impl Classifier {
    /// The built-in lists plus extra credential globs (from `--credential
    /// GLOB` or a config file). A glob without `/` matches that name in any
    /// directory. A bad or empty glob is an error naming it.
    pub fn new(extra_credential_globs: &[String]) -> Result<Classifier, ClassifyError> {
        let mut extra = Vec::with_capacity(extra_credential_globs.len());
        for glob in extra_credential_globs {
            if glob.is_empty() {
                return Err(ClassifyError::EmptyGlob);
            }
            if glob.contains('/') {
                extra.push(glob.clone());
            } else {
                extra.push(format!("**/{glob}"));
            }
        }
        // Name the glob as the user wrote it, not with the added `**/`.
        let extra_credential = glob_set(&extra).map_err(|e| match e {
            ClassifyError::BadGlob { glob, reason } => ClassifyError::BadGlob {
                glob: extra_credential_globs
                    .iter()
                    .find(|g| glob == **g || glob == format!("**/{g}"))
                    .cloned()
                    .unwrap_or(glob),
                reason,
            },
            other => other,
        })?;
        Ok(Classifier {
            extra_globs: extra.clone(),
            inodes: HashMap::new(),
            credential: glob_set(CREDENTIAL_GLOBS)?,
            credential_except: glob_set(CREDENTIAL_EXCEPT_GLOBS)?,
            environ: glob_set(ENVIRON_GLOBS)?,
            extra_credential,
            persistence: glob_set(PERSISTENCE_GLOBS)?,
            persistence_except: glob_set(PERSISTENCE_EXCEPT_GLOBS)?,
        })
    }

    /// Every rule as a glob with what it means: the built-in lists and the user's globs.
    pub fn rule_globs(&self) -> Vec<(String, RuleKind)> {
        let credential = CREDENTIAL_GLOBS
            .iter()
            .map(|g| g.to_string())
            .chain(self.extra_globs.iter().cloned())
            .map(|g| (g, RuleKind::Credential));
        let persistence = PERSISTENCE_GLOBS
            .iter()
            .map(|g| (g.to_string(), RuleKind::Persistence));
        credential.chain(persistence).collect()
    }

    /// Knows these files by their inode from now on (see [`InodeRule`]).
    pub fn set_inodes(&mut self, inodes: HashMap<(u32, u64), InodeRule>) {
        self.inodes = inodes;
    }

    /// The rule file that is this inode, if any.
    pub fn inode_rule(&self, dev: u32, ino: u64) -> Option<&InodeRule> {
        self.inodes.get(&(dev, ino))
    }

    /// Classify an open of a file, by its path and by its inode: a file the rules named at
    /// start is the rule's file whatever path reached it (`same_inode_as` then names it when
    /// the path alone would not have matched).
    pub fn classify_file(
        &self,
        path: &str,
        magic: u64,
        path_cut: bool,
        write: bool,
        inode: (u32, u64),
    ) -> (Classification, Option<String>) {
        let mut c = self.classify(path, magic, path_cut, write);
        let Some(rule) = self.inode_rule(inode.0, inode.1) else {
            return (c, None);
        };
        let by_inode_credential = rule.credential && !c.credential;
        let by_inode_persistence = rule.persistence && write && !c.persistence;
        if !(by_inode_credential || by_inode_persistence) {
            return (c, None);
        }
        if by_inode_credential {
            c.credential = true;
            (c.verified, c.reason) = verify(&rule.path, false, magic, path_cut);
        }
        c.persistence |= by_inode_persistence;
        (c, Some(rule.path.clone()))
    }

    /// Whether what a directory at `dir` holds would be persistence: a directory renamed or
    /// linked there (a hooks directory built in /tmp and moved to `.git/hooks`, a directory
    /// renamed to `~/.config/autostart`) plants every file in it at once. Judged by a file
    /// of each shape the rules name (`x`, `x.desktop`, `x/y`) inside it, and a repository's
    /// hooks (`hooks/x`: a `.git` directory moved into place brings its hooks).
    pub fn holds_persistence(&self, dir: &str) -> bool {
        let dir = dir.trim_end_matches('/');
        ["x", "x.desktop", "x/y", "hooks/x"].iter().any(|leaf| {
            let path = format!("{dir}/{leaf}");
            let c = Candidate::new(&path);
            self.persistence.is_match_candidate(&c)
                && !self.persistence_except.is_match_candidate(&c)
        })
    }

    /// Classify one access to `path`.
    ///
    /// `write` is true for write/create/delete/rename ops (persistence applies
    /// only to those; credential to every op, reads included). `magic` is the
    /// superblock magic of the file, `path_cut` whether the kernel cut the
    /// path.
    pub fn classify(&self, path: &str, magic: u64, path_cut: bool, write: bool) -> Classification {
        let candidate = Candidate::new(path);
        let environ = self.environ.is_match_candidate(&candidate);
        let credential = environ
            || (self.credential.is_match_candidate(&candidate)
                && !self.credential_except.is_match_candidate(&candidate))
            || self.extra_credential.is_match_candidate(&candidate);
        let persistence = write
            && self.persistence.is_match_candidate(&candidate)
            && !self.persistence_except.is_match_candidate(&candidate);
        let (verified, reason) = if credential {
            verify(path, environ, magic, path_cut)
        } else {
            (false, None)
        };
        Classification {
            credential,
            persistence,
            verified,
            reason,
        }
    }
}

/// Whether a credential access touched a file that can hold the secret, and
/// if not, why (every reason found, joined with `"; "`).
fn verify(path: &str, environ: bool, magic: u64, path_cut: bool) -> (bool, Option<String>) {
    let magic = normalize_magic(magic);
    let mut reasons = Vec::new();
    if path_cut {
        reasons.push("path was cut at the kernel-side limit".to_owned());
    }
    let name = fs_name(magic);
    if environ || path.starts_with("/proc/") {
        if magic != magic::PROC {
            let what = if environ { "environ" } else { "/proc file" };
            reasons.push(format!("{what} not on proc (on {})", describe(magic)));
        }
    } else if !STORING_FILESYSTEMS.contains(&magic) {
        reasons.push(match magic {
            magic::FUSE => "on fuse: the content comes from a userspace process".to_owned(),
            magic::V9FS => {
                "on 9p: the content is served by the host or a userspace server".to_owned()
            }
            magic::VBOXSF | magic::HOSTFS => {
                format!("on {name}: the content is served by the host")
            }
            _ if name == "unknown" => format!("on an unknown filesystem ({})", magic_hex(magic)),
            _ => format!("on {name}: not a filesystem that stores this file"),
        });
    }
    if reasons.is_empty() {
        (true, None)
    } else {
        (false, Some(reasons.join("; ")))
    }
}

/// `"tmpfs"`, or `"unknown 0x1234"` for a magic without a name.
fn describe(magic: u64) -> String {
    match fs_name(magic) {
        "unknown" => format!("unknown {}", magic_hex(magic)),
        name => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXT4: u64 = 0xEF53;
    const TMPFS: u64 = 0x0102_1994;
    const OVERLAY: u64 = 0x794c_7630;
    const PROC: u64 = 0x9fa0;
    const FUSE: u64 = 0x6573_5546;
    const V9FS: u64 = 0x0102_1997;

    const PREFIXES: &[&str] = &["/home/alice", "/root", "/workspace/proj", "/tmp/x"];

    fn classifier() -> Classifier {
        Classifier::new(&[]).expect("built-in globs compile")
    }

    fn is_credential(c: &Classifier, path: &str) -> bool {
        c.classify(path, EXT4, false, false).credential
    }

    fn is_persistence(c: &Classifier, path: &str) -> bool {
        c.classify(path, EXT4, false, true).persistence
    }

    #[test]
    fn fs_names_of_listed_magics() {
        let table: &[(u64, &str)] = &[
            (0xEF53, "ext2/3/4"),
            (0x5846_5342, "xfs"),
            (0x9123_683E, "btrfs"),
            (0x0102_1994, "tmpfs"),
            (0x9fa0, "proc"),
            (0x6265_6572, "sysfs"),
            (0x794c_7630, "overlay"),
            (0x6573_5546, "fuse"),
            (0x6969, "nfs"),
            (0x0102_1997, "9p"),
            (0x7371_7368, "squashfs"),
            (0x1cd1, "devpts"),
            (0x0027_e0eb, "cgroup"),
            (0x6367_7270, "cgroup2"),
            (0x6462_6720, "debugfs"),
            (0x7472_6163, "tracefs"),
            (0x7363_6673, "securityfs"),
            (0xcafe_4a11, "bpf"),
            (0x8584_58f6, "ramfs"),
            (0x4d44, "vfat"),
            (0x2011_BAB0, "exfat"),
            (0x5346_544e, "ntfs"),
            (0xF2F5_2010, "f2fs"),
            (0x2fc1_2fc1, "zfs"),
            (0x00c3_6400, "ceph"),
            (0xFF53_4D42, "cifs"),
            (0xFE53_4D42, "smb2"),
            (0xf15f, "ecryptfs"),
            (0xE0F5_E1E2, "erofs"),
            (0x6e73_6673, "nsfs"),
            (0x5049_5045, "pipefs"),
            (0x534F_434B, "sockfs"),
            (0x0904_1934, "anon_inode"),
            (0x9660, "iso9660"),
            (0x4249_4e4d, "binfmt_misc"),
            (0x9584_58f6, "hugetlbfs"),
            (0x1980_0202, "mqueue"),
            (0x0187, "autofs"),
            (0x6265_6570, "configfs"),
            (0xde5e_81e4, "efivarfs"),
            (0x6165_676C, "pstore"),
        ];
        for &(magic, name) in table {
            assert_eq!(fs_name(magic), name, "magic {magic:#x}");
        }
        assert_eq!(fs_name(0), "unknown");
        assert_eq!(fs_name(0x1234_5678), "unknown");
        // Magics above 32 bits that are not sign extension stay unknown.
        assert_eq!(fs_name(0x1_0000_EF53), "unknown");
        // A sign-extended 32-bit f_type still names the filesystem.
        assert_eq!(fs_name(0xFFFF_FFFF_FF53_4D42), "cifs");
        assert_eq!(fs_name(0xFFFF_FFFF_F2F5_2010), "f2fs");
    }

    #[test]
    fn magic_hex_is_lower_case_unpadded() {
        assert_eq!(magic_hex(0xEF53), "0xef53");
        assert_eq!(magic_hex(0x9123_683E), "0x9123683e");
        assert_eq!(magic_hex(0x0187), "0x187");
        assert_eq!(magic_hex(0), "0x0");
    }

    /// Entries relative to a home or workspace, one example file each.
    const CREDENTIAL_FILES: &[&str] = &[
        ".ssh/id_rsa",
        ".ssh/id_ed25519",
        ".ssh/id_ecdsa_sk",
        ".ssh/identity",
        ".aws/credentials",
        ".aws/config",
        ".netrc",
        ".git-credentials",
        ".docker/config.json",
        ".kube/config",
        ".config/gh/hosts.yml",
        ".npmrc",
        ".pypirc",
        ".config/gcloud/credentials.db",
        ".config/gcloud/access_tokens.db",
        ".config/gcloud/application_default_credentials.json",
        ".config/gcloud/legacy_credentials/alice@example.com/adc.json",
        ".azure/accessTokens.json",
        ".azure/msal_token_cache.json",
        ".azure/msal_token_cache.bin",
        ".azure/azureProfile.json",
        ".gnupg/private-keys-v1.d/0123456789ABCDEF.key",
        ".gnupg/secring.gpg",
        ".env",
        ".env.local",
        ".env.production",
        ".vault-token",
        ".pgpass",
        ".my.cnf",
        ".terraform.d/credentials.tfrc.json",
        ".cargo/credentials",
        ".cargo/credentials.toml",
        "var/run/secrets/kubernetes.io/serviceaccount/token",
        "serviceaccount/token",
    ];

    #[test]
    fn credentials_anywhere() {
        let c = classifier();
        for prefix in PREFIXES {
            for file in CREDENTIAL_FILES {
                let path = format!("{prefix}/{file}");
                let got = c.classify(&path, EXT4, false, false);
                assert!(got.credential, "{path} should be a credential");
                assert!(got.verified, "{path} on ext4 should be verified");
                assert_eq!(got.reason, None, "{path}");
                assert!(!got.persistence, "{path} read is no persistence");
            }
        }
    }

    #[test]
    fn absolute_credentials() {
        let c = classifier();
        for path in [
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/gshadow",
            "/etc/gshadow-",
            "/run/secrets/db_password",
            "/run/secrets/app/api/key",
            "/run/secrets/kubernetes.io/serviceaccount/..2024_01_01/token",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
            "/var/run/secrets/db_password",
        ] {
            assert!(is_credential(&c, path), "{path} should be a credential");
        }
        for path in [
            "/proc/1/environ",
            "/proc/4242/environ",
            "/proc/self/environ",
            "/proc/thread-self/environ",
            "/proc/4242/task/4243/environ",
        ] {
            let got = c.classify(path, PROC, false, false);
            assert!(got.credential, "{path} should be a credential");
            assert!(got.verified, "{path} on proc should be verified");
            assert_eq!(got.reason, None);
        }
    }

    #[test]
    fn look_alikes_are_not_credentials() {
        let c = classifier();
        for path in [
            "/workspace/proj/docs/credentials-guide.md",
            "/workspace/proj/src/aws/credentials.rs",
            "/home/u/.ssh/id_ed25519.pub",
            "/home/u/.ssh/id_rsa-cert.pub",
            "/home/u/.ssh/known_hosts",
            "/home/u/.ssh/config",
            "/home/u/.ssh/authorized_keys",
            "/workspace/proj/notes/.envelope",
            "/workspace/proj/.envrc",
            "/workspace/proj/.env.example",
            "/workspace/proj/.env.sample",
            "/workspace/proj/.env.template",
            "/workspace/proj/environment.yml",
            "/etc/shadow.d/readme",
            "/etc/shadow.bak/x",
            "/etc/passwd",
            "/proc/1/environ-notes",
            "/proc/1/cmdline",
            "/proc/1/task/2/status",
            "/home/u/project/aws/credentials",
            "/home/u/.kube/cache/discovery/x.json",
            "/home/u/.docker/config.json.bak",
            "/home/u/.cargo/config.toml",
            "/home/u/.gnupg/pubring.kbx",
            "/run/secretsx/token",
            "/run/secrets",
            "/tmp/work/src/main.rs",
        ] {
            let got = c.classify(path, EXT4, false, false);
            assert_eq!(got, Classification::default(), "{path}");
        }
    }

    #[test]
    fn credential_applies_to_writes_too() {
        let c = classifier();
        let got = c.classify("/home/alice/.aws/credentials", EXT4, false, true);
        assert!(got.credential);
        assert!(got.verified);
        assert!(!got.persistence);
    }

    #[test]
    fn verified_by_filesystem() {
        let c = classifier();
        let key = "/home/alice/.ssh/id_ed25519";
        for magic in [EXT4, TMPFS, OVERLAY] {
            let got = c.classify(key, magic, false, false);
            assert!(got.verified, "{}", fs_name(magic));
            assert_eq!(got.reason, None);
        }
        assert_eq!(
            c.classify(key, FUSE, false, false),
            Classification {
                credential: true,
                persistence: false,
                verified: false,
                reason: Some("on fuse: the content comes from a userspace process".into()),
            }
        );
        let on_9p = c.classify(key, V9FS, false, false);
        assert!(on_9p.credential);
        assert!(!on_9p.verified);
        assert_eq!(
            on_9p.reason.as_deref(),
            Some("on 9p: the content is served by the host or a userspace server")
        );
        let on_proc = c.classify(key, PROC, false, false);
        assert!(!on_proc.verified);
        assert_eq!(
            on_proc.reason.as_deref(),
            Some("on proc: not a filesystem that stores this file")
        );
        let unknown = c.classify(key, 0xabcd, false, false);
        assert!(!unknown.verified);
        assert_eq!(
            unknown.reason.as_deref(),
            Some("on an unknown filesystem (0xabcd)")
        );
    }

    #[test]
    fn cut_path_is_not_verified() {
        let c = classifier();
        let got = c.classify("/home/alice/.aws/credentials", EXT4, true, false);
        assert!(got.credential);
        assert!(!got.verified);
        assert_eq!(
            got.reason.as_deref(),
            Some("path was cut at the kernel-side limit")
        );
        let both = c.classify("/home/alice/.aws/credentials", FUSE, true, false);
        assert_eq!(
            both.reason.as_deref(),
            Some(
                "path was cut at the kernel-side limit; \
                 on fuse: the content comes from a userspace process"
            )
        );
        let environ = c.classify("/proc/7/environ", PROC, true, false);
        assert!(environ.credential);
        assert!(!environ.verified);
    }

    #[test]
    fn environ_only_verified_on_proc() {
        let c = classifier();
        let on_tmpfs = c.classify("/proc/1/environ", TMPFS, false, false);
        assert!(on_tmpfs.credential);
        assert!(!on_tmpfs.verified);
        assert_eq!(
            on_tmpfs.reason.as_deref(),
            Some("environ not on proc (on tmpfs)")
        );
        let on_ext4 = c.classify("/proc/self/task/9/environ", EXT4, false, false);
        assert!(!on_ext4.verified);
        assert_eq!(
            on_ext4.reason.as_deref(),
            Some("environ not on proc (on ext2/3/4)")
        );
        let on_unknown = c.classify("/proc/1/environ", 0x42, false, false);
        assert_eq!(
            on_unknown.reason.as_deref(),
            Some("environ not on proc (on unknown 0x42)")
        );
    }

    #[test]
    fn other_filesystems_that_store_files() {
        let c = classifier();
        let key = "/root/.netrc";
        for magic in [
            0x5846_5342u64, // xfs
            0x9123_683E,    // btrfs
            0xF2F5_2010,    // f2fs
            0x2fc1_2fc1,    // zfs
            0x6969,         // nfs
            0x00c3_6400,    // ceph
            0xFF53_4D42,    // cifs
            0xFFFF_FFFF_FF53_4D42,
            0xFE53_4D42, // smb2
            0x4d44,      // vfat
            0x2011_BAB0, // exfat
            0x5346_544e, // ntfs
            0xE0F5_E1E2, // erofs
            0x7371_7368, // squashfs
            0x8584_58f6, // ramfs
            0xf15f,      // ecryptfs
        ] {
            assert!(c.classify(key, magic, false, false).verified, "{magic:#x}");
        }
        for magic in [
            0x6265_6572u64,
            0x1cd1,
            0x6462_6720,
            0xcafe_4a11,
            0x786f_4256,
        ] {
            assert!(!c.classify(key, magic, false, false).verified, "{magic:#x}");
        }
    }

    /// Entries relative to a home or workspace, one example file each.
    const PERSISTENCE_FILES: &[&str] = &[
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".zlogout",
        ".config/fish/config.fish",
        ".config/fish/conf.d/evil.fish",
        ".config/systemd/user/agent.service",
        ".config/systemd/user/default.target.wants/agent.service",
        ".local/share/systemd/user/agent.timer",
        ".ssh/authorized_keys",
        ".ssh/authorized_keys2",
        ".git/hooks/pre-commit",
        ".git/hooks/post-checkout",
        ".git/modules/vendor/lib/hooks/post-merge",
        "srv/repo.git/hooks/post-receive",
        ".config/autostart/agent.desktop",
    ];

    #[test]
    fn persistence_anywhere() {
        let c = classifier();
        for prefix in PREFIXES {
            for file in PERSISTENCE_FILES {
                let path = format!("{prefix}/{file}");
                let got = c.classify(&path, EXT4, false, true);
                assert!(got.persistence, "{path} write should be persistence");
                assert!(!got.credential, "{path} is no credential");
                assert_eq!(got.reason, None);
            }
        }
    }

    #[test]
    fn absolute_persistence() {
        let c = classifier();
        for path in [
            "/etc/profile",
            "/etc/profile.d/agent.sh",
            "/etc/bash.bashrc",
            "/etc/environment",
            "/etc/zsh/zshrc",
            "/etc/zshrc",
            "/etc/crontab",
            "/etc/anacrontab",
            "/etc/cron.d/agent",
            "/etc/cron.daily/agent",
            "/etc/cron.hourly/agent",
            "/var/spool/cron/crontabs/root",
            "/var/spool/cron/root",
            "/etc/systemd/system/agent.service",
            "/etc/systemd/system/multi-user.target.wants/agent.service",
            "/etc/systemd/user/agent.service",
            "/lib/systemd/system/agent.service",
            "/usr/lib/systemd/system/agent.service",
            "/usr/lib/systemd/user/agent.service",
            "/etc/xdg/autostart/agent.desktop",
            "/etc/ld.so.preload",
            "/etc/rc.local",
            "/etc/init.d/agent",
            "/etc/sudoers",
            "/etc/sudoers.d/agent",
            "/etc/passwd",
            "/etc/group",
        ] {
            assert!(
                is_persistence(&c, path),
                "{path} write should be persistence"
            );
            assert!(!is_credential(&c, path), "{path} is no credential");
        }
        // /etc/shadow is both.
        let shadow = c.classify("/etc/shadow", EXT4, false, true);
        assert!(shadow.credential && shadow.persistence && shadow.verified);
    }

    #[test]
    fn a_directory_whose_files_would_run_holds_persistence() {
        let c = Classifier::new(&[]).unwrap();
        for dir in [
            "/w/app/.git/hooks",
            "/home/u/.config/autostart/",
            "/home/u/.config/systemd/user",
            "/etc/cron.d",
            "/etc/profile.d",
            "/w/app/.git",
        ] {
            assert!(c.holds_persistence(dir), "{dir}");
        }
        for dir in ["/w/app/src", "/w/app/hooks", "/home/u/.config", "/tmp/h"] {
            assert!(!c.holds_persistence(dir), "{dir}");
        }
    }

    #[test]
    fn persistence_only_when_writing() {
        let c = classifier();
        for path in [
            "/home/alice/.bashrc",
            "/etc/crontab",
            "/root/.ssh/authorized_keys",
            "/workspace/proj/.git/hooks/pre-commit",
        ] {
            assert!(is_persistence(&c, path), "{path}");
            assert_eq!(
                c.classify(path, EXT4, false, false),
                Classification::default(),
                "{path} read"
            );
        }
    }

    #[test]
    fn ordinary_writes_are_not_persistence() {
        let c = classifier();
        for path in [
            "/tmp/work/src/main.rs",
            "/home/u/project/.git/objects/ab/cdef",
            "/home/u/project/.git/index",
            "/home/u/project/.git/HEAD",
            "/home/u/project/.git/config",
            "/home/u/project/.gitignore",
            "/home/u/.bash_history",
            "/home/u/.cache/pip/x",
            "/home/u/.local/share/applications/agent.desktop",
            "/home/u/.config/autostart/notes.txt",
            "/home/u/project/hooks/pre-commit",
            "/home/u/.git/hooks/sub/dir",
            "/etc/profile.d/sub/dir.sh",
            "/etc/cron.allow",
            "/etc/hostname",
            "/home/u/.bashrc.d/x",
        ] {
            assert_eq!(
                c.classify(path, EXT4, false, true),
                Classification::default(),
                "{path}"
            );
        }
    }

    #[test]
    fn sample_hooks_are_not_persistence() {
        let c = classifier();
        for path in [
            "/workspace/proj/.git/hooks/pre-commit.sample",
            "/home/alice/src/.git/hooks/post-update.sample",
            "/srv/repo.git/hooks/update.sample",
            "/workspace/proj/.git/modules/lib/hooks/pre-push.sample",
        ] {
            assert!(!is_persistence(&c, path), "{path}");
        }
        assert!(is_persistence(&c, "/workspace/proj/.git/hooks/pre-commit"));
    }

    #[test]
    fn extra_credential_globs() {
        let c = Classifier::new(&["**/secrets.toml".into()]).unwrap();
        for prefix in PREFIXES {
            let path = format!("{prefix}/config/secrets.toml");
            let got = c.classify(&path, EXT4, false, false);
            assert!(got.credential && got.verified, "{path}");
        }
        assert!(!is_credential(&c, "/workspace/proj/secrets.toml.example"));
        // The built-ins stay.
        assert!(is_credential(&c, "/root/.netrc"));
        // Without the extra glob the file is nothing.
        assert!(!is_credential(&classifier(), "/root/secrets.toml"));

        // A bare name matches in any directory; a glob with `/` as written.
        let c = Classifier::new(&["token.json".into(), "/srv/keys/*".into()]).unwrap();
        assert!(is_credential(&c, "/home/alice/app/token.json"));
        assert!(is_credential(&c, "/srv/keys/a.pem"));
        assert!(!is_credential(&c, "/srv/keys/sub/a.pem"));
        assert!(!is_credential(&c, "/home/alice/srv/keys/a.pem"));
    }

    #[test]
    fn bad_glob_is_an_error_naming_it() {
        let err = Classifier::new(&["**/ok".into(), "a/[b".into()]).unwrap_err();
        match &err {
            ClassifyError::BadGlob { glob, .. } => assert_eq!(glob, "a/[b"),
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("\"a/[b\""), "{err}");

        let err = Classifier::new(&["{x".into()]).unwrap_err();
        match &err {
            ClassifyError::BadGlob { glob, .. } => assert_eq!(glob, "{x"),
            other => panic!("unexpected error {other:?}"),
        }

        assert!(matches!(
            Classifier::new(&[String::new()]),
            Err(ClassifyError::EmptyGlob)
        ));
    }
}
