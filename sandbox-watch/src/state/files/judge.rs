//! What an access means, by the path used and by the inode: a file the kernel knew from the
//! start (`Probe::register`) is judged by the rule's path as well, whatever path reached it.
use sandbox_watch_common::{
    ID_CREDENTIAL, ID_CREDENTIAL_DIR, ID_PARENT_SHIFT, ID_PERSISTENCE, ID_PERSISTENCE_DIR,
    InodeKey,
};

use super::{Files, Op};
use crate::judge::classify::{Classification, Classifier};

/// A file or directory the kernel knows by its inode: the rule's path it was found at and its
/// `ID_*` flags.
#[derive(Clone, Debug)]
pub struct Known {
    pub path: String,
    pub flags: u32,
}

/// An access judged.
#[derive(Clone, Debug, Default)]
pub(super) struct Judged {
    pub c: Classification,
    pub same_inode_as: Option<String>,
    pub escalation: Option<String>,
}

/// What the kernel said about the inode of an access.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Inode {
    /// `ID_*` flags, and a created file's directory's above `ID_PARENT_SHIFT`.
    pub identity: u32,
    pub key: Option<InodeKey>,
    /// A created file's directory.
    pub parent: Option<InodeKey>,
}

fn merge(into: &mut Classification, other: Classification) {
    if other.credential && !into.credential {
        into.credential = true;
        into.verified = other.verified;
        into.reason = other.reason;
    }
    into.persistence |= other.persistence;
}

impl Files {
    /// The kernel knows this inode (registered at start, or found a credential by its path).
    pub fn know(&mut self, key: InodeKey, path: String, flags: u32) {
        self.known
            .entry(key)
            .and_modify(|k| k.flags |= flags)
            .or_insert(Known { path, flags });
    }

    /// How many inodes the kernel knows.
    pub fn known_count(&self) -> usize {
        self.known.len()
    }

    pub(super) fn judge(
        &self,
        classifier: &Classifier,
        path: &str,
        magic: u64,
        cut: bool,
        op: Op,
        inode: Inode,
    ) -> Judged {
        let write = op.changes();
        let mut j = Judged {
            c: classifier.classify(path, magic, cut, write),
            ..Default::default()
        };
        let own = inode.identity & 0xff;
        if own & (ID_CREDENTIAL | ID_PERSISTENCE) != 0 {
            if let Some(known) = inode.key.and_then(|k| self.known.get(&k)) {
                merge(&mut j.c, classifier.classify(&known.path, magic, cut, write));
                if known.path != path {
                    j.same_inode_as = Some(known.path.clone());
                }
            }
            // The kernel's word stands even without the rule's path.
            if own & ID_CREDENTIAL != 0 && !j.c.credential {
                j.c.credential = true;
                j.c.verified = false;
                j.c.reason = Some("known to the kernel as a credential's inode".into());
            }
            if own & ID_PERSISTENCE != 0 && write {
                j.c.persistence = true;
            }
        }
        let dir = (inode.identity >> ID_PARENT_SHIFT) & 0xff;
        if dir & (ID_PERSISTENCE_DIR | ID_CREDENTIAL_DIR) != 0
            && let Some(known) = inode.parent.and_then(|k| self.known.get(&k))
        {
            let name = path.rsplit('/').next().unwrap_or_default();
            let there = format!("{}/{name}", known.path);
            merge(&mut j.c, classifier.classify(&there, magic, cut, write));
            if there != path {
                j.same_inode_as = Some(there);
            }
        }
        if op == Op::Path {
            // An O_PATH descriptor reads nothing and changes nothing.
            j.c = Classification::default();
        }
        if matches!(op, Op::Write | Op::Create | Op::Truncate) {
            j.escalation = classifier.escalation(path, magic).map(str::to_string);
        }
        j
    }
}
