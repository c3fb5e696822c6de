//! Signed records (`--sign-key`, `verify --pubkey`): the monitor signs its `start` record,
//! a `checkpoint` record every `--checkpoint` seconds and its `end` record with an Ed25519
//! key the agent cannot read. A signed record carries `signed_by` (the public key, 64 hex
//! digits) and `signature` (128 hex digits): the Ed25519 signature of [`DOMAIN`] followed by
//! the record's canonical form (see [`evidence`](super::evidence)) without `hash` and
//! `signature`. Its `hash` then covers the signature too, as any field.
//!
//! A signed record names its place (`seq`) and links to the record before it (`prev`), so its
//! signature vouches for every record up to it: a log rechained after it (records removed,
//! hashes recomputed) no longer matches the signature, and records forged after the monitor
//! ended (a new `end` among them) have none, for the key stayed with the monitor.
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde_json::{Map, Value};

use super::evidence::canonical_bytes;
use crate::error::Usage;

/// The field with the public key of a signed record.
pub const SIGNED_BY: &str = "signed_by";
/// The field with the signature of a signed record.
pub const SIGNATURE: &str = "signature";
/// The kind of the record written only to be signed, every `--checkpoint` seconds.
pub const CHECKPOINT_KIND: &str = "checkpoint";
/// What is signed starts with these bytes, so a signature over a log record is never one
/// over anything else made with the same key.
pub const DOMAIN: &[u8] = b"sandbox-watch log record\n";

/// No key file is longer than this.
const MAX_KEY_FILE: u64 = 64 << 10;

/// The kinds the monitor signs.
pub fn signs(kind: &str) -> bool {
    matches!(kind, "start" | CHECKPOINT_KIND | "end")
}

/// The bytes a record's signature is over: [`DOMAIN`], then the canonical form of the record
/// without `hash` and `signature`.
fn message(obj: &Map<String, Value>) -> Vec<u8> {
    let mut unsigned = obj.clone();
    unsigned.remove("hash");
    unsigned.remove(SIGNATURE);
    let mut m = DOMAIN.to_vec();
    m.extend_from_slice(&canonical_bytes(&unsigned));
    m
}

/// The monitor's signing key.
pub struct LogKey {
    key: SigningKey,
    /// The key file as opened: an open of it by a traced task is a `tamper` record.
    file: std::fs::Metadata,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogKey({})", self.public_hex())
    }
}

impl LogKey {
    /// Reads an Ed25519 private key in PKCS#8 PEM (what `openssl genpkey -algorithm ed25519`
    /// writes) from `path`, refusing a key file the agent could read: one readable or writable
    /// by its group or others, one owned by the (non-root) user the agent runs as (`agent_uid`),
    /// and one inside the directory the agent works in (`tree`).
    pub fn load(path: &Path, agent_uid: Option<u32>, tree: Option<&Path>) -> Result<LogKey, Usage> {
        let shown = path.display();
        let usage = |why: String| Usage(format!("--sign-key {shown}: {why}"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => usage(
                    "is a symbolic link; give the key file itself (a link can be swapped)".into(),
                ),
                _ => usage(format!("{e}; give an Ed25519 private key file")),
            })?;
        let meta = file.metadata().map_err(|e| usage(e.to_string()))?;
        if !meta.file_type().is_file() {
            return Err(usage("is not a regular file".into()));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(usage(format!(
                "its group or others may open it (mode {mode:04o}), and so may the agent; \
                 make it the owner's alone: chmod 600 {shown}"
            )));
        }
        if let Some(uid) = agent_uid
            && uid != 0
            && meta.uid() == uid
        {
            return Err(usage(format!(
                "it belongs to uid {uid}, the user the agent runs as, who can read it; give \
                 it to root (chown root {shown}) or keep it where the agent cannot reach it"
            )));
        }
        if let (Some(tree), Ok(real)) = (tree, std::fs::canonicalize(path))
            && let Ok(tree) = std::fs::canonicalize(tree)
            && tree != Path::new("/")
            && real.starts_with(&tree)
        {
            return Err(usage(format!(
                "it is inside the agent's working tree ({}), where the agent may read it; \
                 keep the key outside it",
                tree.display()
            )));
        }
        let mut text = String::new();
        file.take(MAX_KEY_FILE)
            .read_to_string(&mut text)
            .map_err(|e| usage(format!("{e}; give a PEM file")))?;
        let key = SigningKey::from_pkcs8_pem(&text).map_err(|e| {
            usage(format!(
                "not an Ed25519 private key in PKCS#8 PEM ({e}); make one with `openssl \
                 genpkey -algorithm ed25519 -out KEY` and its public key with `openssl pkey \
                 -in KEY -pubout -out KEY.pub`"
            ))
        })?;
        Ok(LogKey { key, file: meta })
    }

    /// The key file's metadata, as it was opened (its inode, for the kernel's list of the
    /// monitor's files).
    pub fn file(&self) -> &std::fs::Metadata {
        &self.file
    }

    /// The public key as 64 lower-case hex digits (the `signed_by` of every signed record).
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    /// Adds `signed_by` and `signature` to a record that has every other field (its `seq`,
    /// `prev`, `at` and `kind` included) and no `hash` yet.
    pub fn sign(&self, obj: &mut Map<String, Value>) {
        obj.insert(SIGNED_BY.into(), Value::from(self.public_hex()));
        let sig = self.key.sign(&message(obj));
        obj.insert(SIGNATURE.into(), Value::from(hex::encode(sig.to_bytes())));
    }
}

/// Reads a public key for `verify --pubkey`: PEM (`openssl pkey -pubout` writes it), or the
/// 64 hex digits the capture printed (the `signed_by` of its records).
pub fn load_public(path: &Path) -> Result<VerifyingKey, Usage> {
    let shown = path.display();
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_KEY_FILE).read_to_string(&mut text))
        .map_err(|e| Usage(format!("--pubkey {shown}: {e}; give a public key file")))?;
    let hex_key = text.trim();
    if hex_key.len() == 64
        && let Ok(bytes) = hex::decode(hex_key)
    {
        let bytes: [u8; 32] = bytes.try_into().expect("32 bytes from 64 hex digits");
        return VerifyingKey::from_bytes(&bytes)
            .map_err(|e| Usage(format!("--pubkey {shown}: not an Ed25519 public key ({e})")));
    }
    if text.contains("PRIVATE KEY") {
        return Err(Usage(format!(
            "--pubkey {shown}: is a private key; give its public half (`openssl pkey -in KEY \
             -pubout -out KEY.pub`), which need not be kept secret"
        )));
    }
    VerifyingKey::from_public_key_pem(&text).map_err(|e| {
        Usage(format!(
            "--pubkey {shown}: not an Ed25519 public key in PEM ({e}); make it with `openssl \
             pkey -in KEY -pubout -out KEY.pub`"
        ))
    })
}

/// Checks a signed record (`obj` without its `hash`): None when its signature is the key's
/// over its content, else why not, as a sentence's end.
pub fn check(obj: &Map<String, Value>, key: &VerifyingKey) -> Option<String> {
    let want = hex::encode(key.as_bytes());
    match obj.get(SIGNED_BY).and_then(Value::as_str) {
        Some(by) if by.eq_ignore_ascii_case(&want) => {}
        Some(by) => return Some(format!("it is signed by key {by}, not by the key given")),
        None => return Some("it has a signature but no signed_by".into()),
    }
    let sig = obj
        .get(SIGNATURE)
        .and_then(Value::as_str)
        .and_then(|s| hex::decode(s).ok())
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .map(|b| Signature::from_bytes(&b));
    let Some(sig) = sig else {
        return Some("its signature is not 128 hex digits".into());
    };
    match key.verify(&message(obj), &sig) {
        Ok(()) => None,
        Err(_) => Some(
            "its signature does not match its content: it, or a record before it, was \
             changed after the monitor signed it"
                .into(),
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A fixed test key (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` writes it).
    pub(crate) const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
MC4CAQAwBQYDK2VwBCIEIDtDGH8yhnF2Lxk01Ow4OJQoYws+xB7ibuPMSAT6Stnt\n\
-----END PRIVATE KEY-----\n";

    pub(crate) fn key_file(dir: &Path) -> std::path::PathBuf {
        let p = dir.join("log.key");
        std::fs::write(&p, TEST_KEY).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    #[test]
    fn a_key_others_can_read_or_inside_the_tree_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = key_file(dir.path());
        let outside = tempfile::tempdir().unwrap();
        assert!(LogKey::load(&p, None, Some(outside.path())).is_ok());
        let e = LogKey::load(&p, None, Some(dir.path())).unwrap_err();
        assert!(e.0.contains("inside the agent's working tree"), "{e}");
        let me = nix::unistd::geteuid().as_raw();
        if me != 0 {
            let e = LogKey::load(&p, Some(me), None).unwrap_err();
            assert!(e.0.contains("the user the agent runs as"), "{e}");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = LogKey::load(&p, None, None).unwrap_err();
        assert!(e.0.contains("chmod 600"), "{e}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = LogKey::load(&link, None, None).unwrap_err();
        assert!(e.0.contains("symbolic link"), "{e}");
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "not a key").unwrap();
        std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = LogKey::load(&junk, None, None).unwrap_err();
        assert!(e.0.contains("openssl genpkey"), "{e}");
    }

    #[test]
    fn a_signature_checks_only_for_its_content_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = LogKey::load(&key_file(dir.path()), None, None).unwrap();
        let public = key.key.verifying_key();
        let mut obj = Map::new();
        obj.insert("seq".into(), 3.into());
        obj.insert("prev".into(), "ab".into());
        obj.insert("kind".into(), "checkpoint".into());
        key.sign(&mut obj);
        assert_eq!(check(&obj, &public), None);
        let mut changed = obj.clone();
        changed.insert("prev".into(), "cd".into());
        assert!(check(&changed, &public).unwrap().contains("does not match"));
        let other = SigningKey::from_bytes(&[7; 32]).verifying_key();
        assert!(
            check(&obj, &other)
                .unwrap()
                .contains("not by the key given")
        );
        // The public key as hex or PEM.
        let hex_file = dir.path().join("pub.hex");
        std::fs::write(&hex_file, key.public_hex() + "\n").unwrap();
        assert_eq!(load_public(&hex_file).unwrap(), public);
        let pem = dir.path().join("pub.pem");
        std::fs::write(
            &pem,
            "-----BEGIN PUBLIC KEY-----\n\
             MCowBQYDK2VwAyEAAeHyal03V02GI+kh4pJE5bWPldUrjt0DLLTP7/7RV3c=\n\
             -----END PUBLIC KEY-----\n",
        )
        .unwrap();
        assert_eq!(
            load_public(&pem).unwrap(),
            public,
            "openssl pkey -pubout's PEM"
        );
        let e = load_public(&dir.path().join("log.key")).unwrap_err();
        assert!(e.0.contains("public half"), "{e}");
    }

    /// A signed log: start, one exec, a checkpoint, another exec, the end.
    fn signed_log(dir: &Path) -> (std::path::PathBuf, VerifyingKey) {
        use crate::output::evidence::LogWriter;
        use std::time::{Duration, UNIX_EPOCH};
        let key = LogKey::load(&key_file(dir), None, None).unwrap();
        let public = key.key.verifying_key();
        let p = dir.join("log.jsonl");
        let mut w = LogWriter::create(&p, false).unwrap();
        w.set_key(key);
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        let mut f = Map::new();
        f.insert("session_id".into(), "s1".into());
        w.append(at(1), "start", f).unwrap();
        let mut f = Map::new();
        f.insert("path".into(), "/root/.ssh/id_rsa".into());
        w.append(at(2), "file", f).unwrap();
        w.checkpoint(at(3)).unwrap();
        w.append(at(4), "exec", Map::new()).unwrap();
        w.finish(at(5), Map::new()).unwrap();
        (p, public)
    }

    /// Rewrites a log's records with `edit`, then recomputes every seq, prev and hash (what
    /// the attacks' swlog.rechain does).
    fn rechain(path: &Path, edit: impl Fn(Vec<Map<String, Value>>) -> Vec<Map<String, Value>>) {
        let records: Vec<Map<String, Value>> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut prev = crate::output::evidence::ZERO_HASH.to_string();
        let mut out = String::new();
        for (seq, mut r) in edit(records).into_iter().enumerate() {
            r.remove("hash");
            r.insert("seq".into(), seq.into());
            r.insert("prev".into(), prev.clone().into());
            let h = crate::output::evidence::record_hash(&r);
            r.insert("hash".into(), h.clone().into());
            out.push_str(&serde_json::to_string(&r).unwrap());
            out.push('\n');
            prev = h;
        }
        std::fs::write(path, out).unwrap();
    }

    fn judged(path: &Path, key: &VerifyingKey) -> (u8, String) {
        let (verdict, vouch) = crate::output::verify::verify_signed(path, key).unwrap();
        vouch.judge(&verdict, "L")
    }

    #[test]
    fn verify_pubkey_passes_the_signed_log_and_fails_each_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let (log, key) = signed_log(dir.path());
        let (code, msg) = judged(&log, &key);
        assert_eq!(code, 0, "{msg}");
        assert!(msg.contains("intact and signed: 5 records"), "{msg}");
        let original = std::fs::read_to_string(&log).unwrap();
        let signed: Vec<&str> = original
            .lines()
            .filter(|l| l.contains("\"signature\""))
            .collect();
        assert_eq!(signed.len(), 3, "start, checkpoint, end: {original}");
        let reset = || std::fs::write(&log, &original).unwrap();

        // Rechain: the key read removed, every hash recomputed. The chain is intact...
        rechain(&log, |mut r| {
            r.remove(1);
            r
        });
        assert_eq!(
            crate::output::verify::verify(&log).unwrap(),
            crate::output::verify::Verdict::Intact { records: 4 }
        );
        // ...but the checkpoint's signature was over another prev.
        let (code, msg) = judged(&log, &key);
        assert_eq!(code, crate::error::exit::UNSIGNED, "{msg}");
        assert!(msg.contains("SIGNATURE CHECK FAILED at record 1"), "{msg}");
        assert!(msg.contains("vouch for records 0 to 0 only"), "{msg}");

        // The signatures taken out as well: nothing vouches.
        reset();
        rechain(&log, |r| {
            r.into_iter()
                .filter(|x| x["kind"] != "file")
                .map(|mut x| {
                    x.remove(SIGNATURE);
                    x.remove(SIGNED_BY);
                    x
                })
                .collect()
        });
        let (code, msg) = judged(&log, &key);
        assert_eq!(code, crate::error::exit::UNSIGNED, "{msg}");
        assert!(msg.contains("NOT SIGNED"), "{msg}");

        // Forged after the end: the signed part kept up to the checkpoint, the rest (and a
        // new end) written without the key.
        reset();
        rechain(&log, |r| {
            let mut kept: Vec<_> = r.into_iter().take(3).collect();
            let mut end = Map::new();
            end.insert("at".into(), "1970-01-01T00:00:09.000000000Z".into());
            end.insert("kind".into(), "end".into());
            kept.push(end);
            kept
        });
        let (code, msg) = judged(&log, &key);
        assert_eq!(code, crate::error::exit::UNSIGNED, "{msg}");
        assert!(msg.contains("END NOT SIGNED"), "{msg}");
        assert!(msg.contains("records 0 to 2 only"), "{msg}");

        // Cut after the exec that follows the checkpoint (a killed monitor): unended, and
        // the signatures vouch up to the checkpoint.
        reset();
        let cut: String = original.lines().take(4).map(|l| format!("{l}\n")).collect();
        std::fs::write(&log, cut).unwrap();
        let (code, msg) = judged(&log, &key);
        assert_eq!(code, crate::error::exit::UNENDED, "{msg}");
        assert!(msg.contains("records 0 to 2 only"), "{msg}");
        assert!(msg.contains("the 1 after"), "{msg}");

        // Another key vouches for nothing.
        reset();
        let other = SigningKey::from_bytes(&[9; 32]).verifying_key();
        let (code, msg) = judged(&log, &other);
        assert_eq!(code, crate::error::exit::UNSIGNED, "{msg}");
        assert!(msg.contains("not by the key given"), "{msg}");
    }
}
