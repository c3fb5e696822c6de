//! DNS query names from the UDP payloads the kernel hands over (up to the first 512 bytes of a
//! datagram sent to port 53, possibly cut short).
//!
//! The parser reads the header and the first question only, on any bytes: it never panics,
//! never follows a compression pointer (a query has nothing to point back to, and not following
//! them means no loop is possible) and reads each byte at most once.
//!
//! Names are returned as sent (case kept), dotted, without the trailing dot; the root is `.`.
//! A label byte outside `[A-Za-z0-9-_]` is written `\DDD` (decimal, as dig does), so a name is
//! always one line of printable ASCII. A name that cannot be read whole still shows what could
//! be read (`partial`): an exfiltration attempt through a too-long name stays visible.

/// What one datagram to port 53 asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// A well-formed question: the name (as sent, dotted, without the trailing dot; `.` for the
    /// root), the question type's name (`A`, `AAAA`, … or `TYPE<n>`) and the query id.
    Name {
        name: String,
        qtype: String,
        id: u16,
    },
    /// Not a query that can be read: why, and up to the first [`PARTIAL_MAX`] characters of the
    /// name as far as it could be read (escaped like a name).
    Malformed { reason: String, partial: String },
}

/// The longest a name may be on the wire (RFC 1035 §2.3.4): length bytes and the final zero
/// included.
pub const NAME_MAX: usize = 255;
/// The longest a label may be.
pub const LABEL_MAX: usize = 63;
/// How much of an unreadable name `Malformed::partial` keeps (characters).
pub const PARTIAL_MAX: usize = 253;

const HEADER_LEN: usize = 12;

/// Reads the first question of a DNS query. Never panics, on any input.
pub fn parse_query(payload: &[u8]) -> Query {
    if payload.len() < HEADER_LEN {
        return malformed("shorter than a DNS header", String::new());
    }
    let id = u16::from_be_bytes([payload[0], payload[1]]);
    let flags = u16::from_be_bytes([payload[2], payload[3]]);
    let qdcount = u16::from_be_bytes([payload[4], payload[5]]);
    let (name, end) = match read_name(payload, HEADER_LEN) {
        Ok(read) => read,
        Err((reason, partial)) => {
            // A response or a question-less packet is named as such first: those are what the
            // packet is, whatever its name bytes look like.
            let reason = header_problem(flags, qdcount).unwrap_or(reason);
            return malformed(reason, partial);
        }
    };
    if let Some(reason) = header_problem(flags, qdcount) {
        return malformed(reason, clip(name));
    }
    let Some(qtype) = payload.get(end..end + 2) else {
        return malformed("payload cut before the question type", clip(name));
    };
    let qtype = u16::from_be_bytes([qtype[0], qtype[1]]);
    Query::Name {
        name,
        qtype: type_name(qtype),
        id,
    }
}

/// The name of a question type, as dig prints it (`TYPE<n>` for the ones not listed).
pub fn type_name(qtype: u16) -> String {
    let name = match qtype {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        64 => "SVCB",
        65 => "HTTPS",
        255 => "ANY",
        n => return format!("TYPE{n}"),
    };
    name.to_string()
}

fn header_problem(flags: u16, qdcount: u16) -> Option<&'static str> {
    if flags & 0x8000 != 0 {
        Some("not a query (QR bit set)")
    } else if qdcount == 0 {
        Some("no question")
    } else {
        None
    }
}

fn malformed(reason: &str, partial: String) -> Query {
    Query::Malformed {
        reason: reason.to_string(),
        partial,
    }
}

/// At most [`PARTIAL_MAX`] characters (all ASCII, so bytes).
fn clip(mut s: String) -> String {
    s.truncate(PARTIAL_MAX);
    s
}

/// Reads an uncompressed name at `start`: the text and the offset just past it, or why not
/// with the text read so far (clipped).
fn read_name(p: &[u8], start: usize) -> Result<(String, usize), (&'static str, String)> {
    let mut text = String::new();
    let mut pos = start;
    // Wire length so far: each label's length byte and bytes, plus the final zero.
    let mut wire = 1usize;
    loop {
        let Some(&len) = p.get(pos) else {
            return Err(("payload cut inside the name", clip(text)));
        };
        pos += 1;
        match len {
            0 => break,
            0xC0..=0xFF => return Err(("compression pointer in a query", clip(text))),
            // 0x40..=0xBF: the extended and reserved label types, or what a naive encoder
            // writes for a label of 64 to 191 bytes.
            n if usize::from(n) > LABEL_MAX => {
                return Err(("label longer than 63 bytes", clip(text)));
            }
            _ => {}
        }
        let len = usize::from(len);
        if !text.is_empty() {
            text.push('.');
        }
        let available = p.len().saturating_sub(pos).min(len);
        for &b in &p[pos..pos + available] {
            push_escaped(&mut text, b);
        }
        if available < len {
            return Err(("payload cut inside the name", clip(text)));
        }
        pos += len;
        wire += 1 + len;
        if wire > NAME_MAX {
            return Err(("name longer than 255 bytes", clip(text)));
        }
    }
    if text.is_empty() {
        text.push('.');
    }
    Ok((text, pos))
}

fn push_escaped(out: &mut String, b: u8) {
    if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
        out.push(char::from(b));
    } else {
        out.push_str(&format!("\\{b:03}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query packet: header (id, flags, one question), the labels, a type and class IN.
    fn packet(id: u16, flags: u16, labels: &[&[u8]], qtype: u16) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&flags.to_be_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
        for l in labels {
            p.push(l.len() as u8);
            p.extend_from_slice(l);
        }
        p.push(0);
        p.extend_from_slice(&qtype.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        p
    }

    fn name(q: &Query) -> &str {
        match q {
            Query::Name { name, .. } => name,
            Query::Malformed { reason, partial } => panic!("malformed ({reason}): {partial:?}"),
        }
    }

    fn reason(q: &Query) -> (&str, &str) {
        match q {
            Query::Malformed { reason, partial } => (reason, partial),
            Query::Name { name, .. } => panic!("read as a name: {name}"),
        }
    }

    #[test]
    fn example_com_a_by_hand() {
        // What `dig example.com A` sends (RD set, id 0x1234), written out byte by byte.
        let bytes = [
            0x12, 0x34, // id
            0x01, 0x00, // flags: RD
            0x00, 0x01, // QDCOUNT
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // AN, NS, AR
            7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3, b'c', b'o', b'm', 0, // name
            0x00, 0x01, // A
            0x00, 0x01, // IN
        ];
        assert_eq!(
            parse_query(&bytes),
            Query::Name {
                name: "example.com".into(),
                qtype: "A".into(),
                id: 0x1234
            }
        );
    }

    #[test]
    fn aaaa_and_other_types() {
        let q = parse_query(&packet(7, 0x0100, &[b"Example", b"ORG"], 28));
        assert_eq!(
            q,
            Query::Name {
                name: "Example.ORG".into(),
                qtype: "AAAA".into(),
                id: 7
            }
        );
        for (t, want) in [(16, "TXT"), (65, "HTTPS"), (255, "ANY"), (99, "TYPE99")] {
            match parse_query(&packet(1, 0, &[b"a"], t)) {
                Query::Name { qtype, .. } => assert_eq!(qtype, want),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn root_and_escapes() {
        assert_eq!(name(&parse_query(&packet(1, 0, &[], 2))), ".");
        let q = parse_query(&packet(1, 0, &[b"a.b", b"x y\xff", b"_srv-1"], 33));
        assert_eq!(name(&q), "a\\046b.x\\032y\\255._srv-1");
    }

    #[test]
    fn label_63_ok_64_rejected() {
        let l63 = [b'a'; 63];
        let q = parse_query(&packet(1, 0, &[&l63, b"com"], 1));
        assert_eq!(name(&q), format!("{}.com", "a".repeat(63)));
        // A 64-byte label written naively: its length byte 0x40 is not a label length.
        let l64 = [b'b'; 64];
        let q = parse_query(&packet(1, 0, &[b"x", &l64, b"com"], 1));
        assert_eq!(reason(&q), ("label longer than 63 bytes", "x"));
    }

    #[test]
    fn name_longer_than_255_keeps_partial() {
        // Five 63-byte labels: 5 * 64 + 1 = 321 bytes on the wire.
        let labels: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i; 63]).collect();
        let refs: Vec<&[u8]> = labels.iter().map(|l| l.as_slice()).collect();
        let q = parse_query(&packet(1, 0, &refs, 16));
        let (why, partial) = reason(&q);
        assert_eq!(why, "name longer than 255 bytes");
        assert_eq!(partial.len(), PARTIAL_MAX);
        assert!(partial.starts_with(&format!("{}.{}", "a".repeat(63), "b".repeat(63))));
        // The longest legal name (255 on the wire) is still a name.
        let labels: Vec<Vec<u8>> = [63, 63, 63, 61].iter().map(|&n| vec![b'z'; n]).collect();
        let refs: Vec<&[u8]> = labels.iter().map(|l| l.as_slice()).collect();
        assert_eq!(name(&parse_query(&packet(1, 0, &refs, 1))).len(), 253);
        let labels: Vec<Vec<u8>> = [63, 63, 63, 62].iter().map(|&n| vec![b'z'; n]).collect();
        let refs: Vec<&[u8]> = labels.iter().map(|l| l.as_slice()).collect();
        let q = parse_query(&packet(1, 0, &refs, 1));
        assert_eq!(reason(&q).0, "name longer than 255 bytes");
    }

    #[test]
    fn pointers_are_never_followed() {
        // A pointer to itself (offset 12): a loop if it were followed.
        let mut p = packet(1, 0, &[], 1);
        p[12] = 0xC0;
        p.insert(13, 12);
        assert_eq!(
            parse_query(&p),
            malformed("compression pointer in a query", "".into())
        );
        // After a label, pointing back at the header.
        let mut p = packet(1, 0, &[b"www"], 1);
        p[16] = 0xC0;
        p.insert(17, 0);
        assert_eq!(
            reason(&parse_query(&p)),
            ("compression pointer in a query", "www")
        );
    }

    #[test]
    fn every_cut_of_a_valid_packet() {
        let full = packet(0xBEEF, 0x0100, &[b"www", b"example", b"com"], 1);
        for len in 0..full.len() - 2 {
            let q = parse_query(&full[..len]);
            let Query::Malformed { reason, partial } = q else {
                panic!("cut at {len} read as a name: {q:?}");
            };
            let want = match len {
                0..12 => "shorter than a DNS header",
                12..29 => "payload cut inside the name",
                _ => "payload cut before the question type",
            };
            assert_eq!(reason, want, "cut at {len}");
            assert!(
                "www.example.com".starts_with(&partial),
                "cut at {len}: {partial}"
            );
        }
        // The type is enough: the class may be cut off.
        assert_eq!(
            name(&parse_query(&full[..full.len() - 2])),
            "www.example.com"
        );
        assert_eq!(name(&parse_query(&full)), "www.example.com");
    }

    #[test]
    fn responses_and_questionless_packets_are_not_queries() {
        let q = parse_query(&packet(1, 0x8180, &[b"example", b"com"], 1));
        assert_eq!(reason(&q), ("not a query (QR bit set)", "example.com"));
        let mut p = packet(1, 0x0100, &[b"example", b"com"], 1);
        p[5] = 0;
        assert_eq!(reason(&parse_query(&p)), ("no question", "example.com"));
        // A response whose name cannot be read is still named as a response.
        let q = parse_query(&[0, 1, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12]);
        assert_eq!(reason(&q).0, "not a query (QR bit set)");
    }

    #[test]
    fn exfil_name_is_returned_whole() {
        let chunk = b"mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpjqwe3dd";
        let q = parse_query(&packet(9, 0x0100, &[chunk, b"x1", b"attacker", b"net"], 16));
        assert_eq!(
            q,
            Query::Name {
                name: "mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpjqwe3dd.x1.attacker.net".into(),
                qtype: "TXT".into(),
                id: 9
            }
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut names = 0;
        for i in 0..100_000 {
            let len = (next() % 520) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Half the inputs get a plausible header so the name reader is exercised.
            if i % 2 == 0 && p.len() >= 12 {
                p[2] &= 0x7F;
                p[4] = 0;
                p[5] = 1;
                let mut pos = 12;
                while pos < p.len() {
                    let l = (next() % 70) as u8;
                    p[pos] = if next() % 9 == 0 { 0 } else { l };
                    pos += 1 + usize::from(p[pos]);
                }
            }
            match parse_query(&p) {
                Query::Name { name, qtype, .. } => {
                    names += 1;
                    assert!(name.len() <= 4 * 253 && !qtype.is_empty());
                    assert!(name.bytes().all(|b| b.is_ascii_graphic()));
                }
                Query::Malformed { reason, partial } => {
                    assert!(!reason.is_empty());
                    assert!(partial.len() <= PARTIAL_MAX);
                    assert!(partial.bytes().all(|b| b.is_ascii_graphic()));
                }
            }
        }
        assert!(
            names > 100,
            "the fuzz should reach whole names too ({names})"
        );
    }
}
