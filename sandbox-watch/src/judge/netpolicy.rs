//! `--allow-net` rules: which destinations the traced processes may reach. With at least one
//! rule given, a connection (or DNS question) no rule allows is a `network` violation; with
//! none, everything is allowed.
//!
//! Rule syntax (`--allow-net RULE`, repeatable):
//! - `10.0.0.0/8`, `127.0.0.1` (= `/32`), `127.0.0.0/8:8000`: an IPv4 network, any port or one.
//! - `::1`, `fd00::/8`, `[::1]:443`, `[fd00::/8]:53`: an IPv6 network; with a port the address
//!   must be in brackets. An unbracketed IPv6 address whose last group could be read as a port
//!   (`::1:443`, `fd00::1:53`) is refused as ambiguous: write `[::1]:443` for the port or
//!   `[::1:443]` for the address.
//! - `example.com:443`, `example.com` (any port), `*.example.com:443` (its subdomains at any
//!   depth, not `example.com` itself). Host names are compared without case and without a
//!   trailing dot.
//!
//! Host bits of a network are cleared (`10.1.2.3/8` is `10.0.0.0/8`), and v4-mapped IPv6
//! (`::ffff:a.b.c.d`, in rules and in addresses) is compared as IPv4.
//!
//! The kernel side sees DNS questions, not answers: a host rule allows a connection when the
//! caller passes, among the names the process looked up, one the rule matches. A name resolved
//! without DNS (`/etc/hosts`) is not seen; only `localhost` is special, matching the loopback
//! addresses it always resolves to (RFC 6761).
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// One `--allow-net` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// An address network (host bits cleared); `port: None` is any port.
    Cidr {
        net: IpAddr,
        prefix: u8,
        port: Option<u16>,
    },
    /// A host name (lower-case, no trailing dot), or `*.domain` for its subdomains.
    Host { host: String, port: Option<u16> },
}

/// A rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--allow-net {input}: {reason}")]
pub struct RuleError {
    pub input: String,
    pub reason: String,
}

/// Reads one `--allow-net` value.
pub fn parse_rule(s: &str) -> Result<Rule, RuleError> {
    parse(s).map_err(|reason| RuleError {
        input: s.to_string(),
        reason,
    })
}

fn parse(s: &str) -> Result<Rule, String> {
    if s.trim().is_empty() {
        return Err("empty rule".into());
    }
    if s.chars().any(char::is_whitespace) {
        return Err("contains whitespace".into());
    }
    if let Some(rest) = s.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err("no closing `]`".into());
        };
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(p) => Some(parse_port(p)?),
                None => return Err(format!("unexpected `{after}` after `]` (expected `:PORT`)")),
            },
        };
        if !inside.contains(':') {
            return Err("brackets are for IPv6 addresses".into());
        }
        let (net, prefix) = parse_net(inside)?;
        return Ok(Rule::Cidr { net, prefix, port });
    }
    if s.matches(':').count() >= 2 {
        // IPv6 without brackets: no port can follow.
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        if let Some((bits, port)) = prefix.and_then(|p| p.split_once(':')) {
            return Err(format!(
                "bad prefix `/{bits}:{port}`: an IPv6 network with a port must be in brackets \
                 ([{addr}/{bits}]:{port})"
            ));
        }
        if prefix.is_none()
            && let Some((head, last)) = s.rsplit_once(':')
            && !last.is_empty()
            && last.bytes().all(|b| b.is_ascii_digit())
            && head.parse::<Ipv6Addr>().is_ok()
            && s.parse::<Ipv6Addr>().is_ok()
        {
            return Err(format!(
                "ambiguous: an IPv6 address with a port must be in brackets: write [{head}]:{last} \
                 for port {last}, or [{s}] for the address"
            ));
        }
        let (net, prefix) = parse_net(s)?;
        return Ok(Rule::Cidr {
            net,
            prefix,
            port: None,
        });
    }
    let (host, port) = match s.split_once(':') {
        Some((h, p)) => (h, Some(parse_port(p)?)),
        None => (s, None),
    };
    if host.is_empty() {
        return Err("no address or host before the port".into());
    }
    if host.contains('/') || host.parse::<Ipv4Addr>().is_ok() {
        let (net, prefix) = parse_net(host)?;
        return Ok(Rule::Cidr { net, prefix, port });
    }
    Ok(Rule::Host {
        host: parse_host(host)?,
        port,
    })
}

/// `ADDR` or `ADDR/PREFIX`: the network (canonical: v4-mapped as v4, host bits cleared).
fn parse_net(text: &str) -> Result<(IpAddr, u8), String> {
    let (addr_text, prefix_text) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr: IpAddr = addr_text
        .parse()
        .map_err(|_| format!("`{addr_text}` is not an IP address"))?;
    let max = max_prefix(addr);
    let prefix = match prefix_text {
        None => max,
        Some(p) => {
            let bad = || {
                format!(
                    "bad prefix `/{p}` (0 to {max} for an {} network)",
                    family(addr)
                )
            };
            if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let n: u8 = p.parse().map_err(|_| bad())?;
            if n > max {
                return Err(bad());
            }
            n
        }
    };
    Ok(canonical(addr, prefix))
}

/// v4-mapped IPv6 networks as IPv4, host bits cleared.
fn canonical(addr: IpAddr, prefix: u8) -> (IpAddr, u8) {
    let (addr, prefix) = match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) if prefix >= 96 => (IpAddr::V4(v4), prefix - 96),
            _ => (addr, prefix),
        },
        v4 => (v4, prefix),
    };
    (mask(addr, prefix), prefix)
}

fn family(addr: IpAddr) -> &'static str {
    if addr.is_ipv4() { "IPv4" } else { "IPv6" }
}

fn max_prefix(addr: IpAddr) -> u8 {
    IpNet::from(addr).max_prefix_len()
}

/// The network `addr/prefix` (a prefix at most the address length: checked by the callers).
fn network(addr: IpAddr, prefix: u8) -> IpNet {
    IpNet::new(addr, prefix)
        .expect("the prefix was checked against the address length")
        .trunc()
}

/// `addr` with the host bits of `/prefix` cleared.
fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    network(addr, prefix).network()
}

fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() {
        return Err("no port after `:`".into());
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port `{p}` is not a number"));
    }
    match p.parse::<u32>() {
        Ok(0) => Err("port 0 cannot be connected to (ports are 1 to 65535)".into()),
        Ok(n) if n <= 65535 => Ok(n as u16),
        _ => Err(format!("port {p} is out of range (1 to 65535)")),
    }
}

/// A host name or `*.domain`, lower-cased, without a trailing dot.
fn parse_host(host: &str) -> Result<String, String> {
    let lower = host.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    let (wild, domain) = match name.strip_prefix("*.") {
        Some(d) => (true, d),
        None => (false, name),
    };
    if domain.contains('*') {
        return Err("a wildcard must be the whole first label (*.example.com)".into());
    }
    if domain.is_empty() {
        return Err("no host name".into());
    }
    if domain.len() > 253 {
        return Err("host name longer than 253 characters".into());
    }
    for label in domain.split('.') {
        if label.is_empty() {
            return Err(format!("`{host}` has an empty label"));
        }
        if label.len() > 63 {
            return Err(format!("`{host}` has a label longer than 63 characters"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!("`{host}` is not a host name (character {c:?})"));
        }
    }
    let last = domain.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{host}` is not a valid IPv4 address"));
    }
    Ok(if wild {
        format!("*.{domain}")
    } else {
        domain.to_string()
    })
}

impl fmt::Display for Rule {
    /// The canonical spelling, which `parse_rule` reads back to the same rule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Cidr { net, prefix, port } => {
                let net = if *prefix == max_prefix(*net) {
                    net.to_string()
                } else {
                    format!("{net}/{prefix}")
                };
                match (port, net.contains(':')) {
                    (None, _) => write!(f, "{net}"),
                    (Some(p), true) => write!(f, "[{net}]:{p}"),
                    (Some(p), false) => write!(f, "{net}:{p}"),
                }
            }
            Rule::Host { host, port: None } => write!(f, "{host}"),
            Rule::Host {
                host,
                port: Some(p),
            } => write!(f, "{host}:{p}"),
        }
    }
}

impl Rule {
    fn port_ok(&self, port: u16) -> bool {
        let (Rule::Cidr { port: p, .. } | Rule::Host { port: p, .. }) = self;
        p.is_none_or(|p| p == port)
    }
}

/// Does the network `net/prefix` hold `addr` (both canonical; an address of the other family
/// is never held)?
fn contains(net: IpAddr, prefix: u8, addr: IpAddr) -> bool {
    network(net, prefix).contains(&addr)
}

/// Does a host rule's name (`example.com` or `*.example.com`) match `name`?
fn host_matches(pattern: &str, name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            name.len() > domain.len() + 1
                && name.is_char_boundary(name.len() - domain.len())
                && name[name.len() - domain.len()..].eq_ignore_ascii_case(domain)
                && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
        }
        None => name.eq_ignore_ascii_case(pattern),
    }
}

/// The `--allow-net` rules of a run.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// The policy of these rules. Network rules built by hand are made canonical here as
    /// `parse_rule` makes them (v4-mapped as IPv4, host bits cleared, prefix at most the
    /// address length).
    pub fn new(rules: Vec<Rule>) -> Policy {
        let rules = rules
            .into_iter()
            .map(|rule| match rule {
                Rule::Cidr { net, prefix, port } => {
                    let prefix = prefix.min(max_prefix(net));
                    let (net, prefix) = canonical(net, prefix);
                    Rule::Cidr { net, prefix, port }
                }
                host => host,
            })
            .collect();
        Policy { rules }
    }

    /// No rule: everything is allowed and no `network` violation is raised.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Is a connection to `addr`:`port` allowed? `names` are the DNS names the process (or the
    /// traced processes) asked for most recently: answers are not seen, so a host rule matches
    /// when one of them matches it. `localhost` rules also match loopback addresses.
    /// Always true with no rules.
    pub fn allows(&self, addr: IpAddr, port: u16, names: &[&str]) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let addr = addr.to_canonical();
        self.rules.iter().any(|rule| {
            rule.port_ok(port)
                && match rule {
                    Rule::Cidr { net, prefix, .. } => contains(*net, *prefix, addr),
                    Rule::Host { host, .. } => {
                        (host == "localhost" && addr.is_loopback())
                            || names.iter().any(|n| host_matches(host, n))
                    }
                }
        })
    }

    /// Is a DNS question for `name` sent to `server` allowed? Yes when a host rule matches the
    /// name (whatever its port: the lookup comes before the connection), or when a network rule
    /// for port 53 or any port holds the server. Always true with no rules.
    pub fn allows_dns(&self, name: &str, server: IpAddr) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let server = server.to_canonical();
        self.rules.iter().any(|rule| match rule {
            Rule::Host { host, .. } => host_matches(host, name),
            Rule::Cidr { net, prefix, port } => {
                port.is_none_or(|p| p == 53) && contains(*net, *prefix, server)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn cidr(net: &str, prefix: u8, port: Option<u16>) -> Rule {
        Rule::Cidr {
            net: ip(net),
            prefix,
            port,
        }
    }

    fn host(h: &str, port: Option<u16>) -> Rule {
        Rule::Host {
            host: h.into(),
            port,
        }
    }

    fn err(s: &str) -> String {
        match parse_rule(s) {
            Err(e) => {
                assert_eq!(e.input, s);
                assert_eq!(e.to_string(), format!("--allow-net {s}: {}", e.reason));
                e.reason
            }
            Ok(r) => panic!("{s:?} was accepted as {r:?}"),
        }
    }

    fn policy(rules: &[&str]) -> Policy {
        Policy::new(rules.iter().map(|r| parse_rule(r).unwrap()).collect())
    }

    #[test]
    fn parses_every_documented_form() {
        let cases = [
            ("10.0.0.0/8", cidr("10.0.0.0", 8, None)),
            ("127.0.0.1", cidr("127.0.0.1", 32, None)),
            ("127.0.0.0/8:8000", cidr("127.0.0.0", 8, Some(8000))),
            ("1.2.3.4:65535", cidr("1.2.3.4", 32, Some(65535))),
            ("0.0.0.0/0", cidr("0.0.0.0", 0, None)),
            ("::1", cidr("::1", 128, None)),
            ("[::1]:443", cidr("::1", 128, Some(443))),
            ("[::1]", cidr("::1", 128, None)),
            ("fd00::/8", cidr("fd00::", 8, None)),
            ("[fd00::/8]:53", cidr("fd00::", 8, Some(53))),
            ("::/0", cidr("::", 0, None)),
            ("example.com:443", host("example.com", Some(443))),
            ("example.com", host("example.com", None)),
            ("Example.COM.:80", host("example.com", Some(80))),
            ("*.example.com:443", host("*.example.com", Some(443))),
            ("localhost", host("localhost", None)),
            ("_dmarc.x-y.example", host("_dmarc.x-y.example", None)),
        ];
        for (text, want) in cases {
            let got = parse_rule(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{text}");
            // The canonical spelling reads back to the same rule.
            assert_eq!(parse_rule(&got.to_string()).unwrap(), got, "{got}");
        }
    }

    #[test]
    fn canonical_networks() {
        assert_eq!(parse_rule("10.1.2.3/8").unwrap(), cidr("10.0.0.0", 8, None));
        assert_eq!(
            parse_rule("fd12:3456::1/16").unwrap(),
            cidr("fd12::", 16, None)
        );
        // v4-mapped IPv6 is IPv4.
        assert_eq!(
            parse_rule("::ffff:10.0.0.1").unwrap(),
            cidr("10.0.0.1", 32, None)
        );
        assert_eq!(
            parse_rule("[::ffff:10.0.0.0/104]:80").unwrap(),
            cidr("10.0.0.0", 8, Some(80))
        );
        assert_eq!(parse_rule("[::1]:443").unwrap().to_string(), "[::1]:443");
        assert_eq!(
            parse_rule("127.0.0.0/8:8000").unwrap().to_string(),
            "127.0.0.0/8:8000"
        );
    }

    #[test]
    fn bad_prefixes() {
        assert!(err("10.0.0.0/33").contains("bad prefix `/33` (0 to 32"));
        assert!(err("fd00::/129").contains("bad prefix `/129` (0 to 128"));
        assert!(err("10.0.0.0/").contains("bad prefix"));
        assert!(err("10.0.0.0/-1").contains("bad prefix"));
        assert!(err("10.0.0.0/8a").contains("bad prefix"));
        assert!(err("10.0.0.0/0008").contains("bad prefix"));
        assert!(err("[fd00::/200]:53").contains("bad prefix"));
        assert!(err("10.0.0/8").contains("not an IP address"));
        assert!(err("example.com/8").contains("not an IP address"));
    }

    #[test]
    fn bad_ports() {
        assert!(err("10.0.0.1:0").contains("port 0"));
        assert!(err("example.com:65536").contains("out of range"));
        assert!(err("example.com:99999999999999999999").contains("out of range"));
        assert!(err("example.com:https").contains("not a number"));
        assert!(err("example.com:-1").contains("not a number"));
        assert!(err("example.com:+443").contains("not a number"));
        assert!(err("example.com:").contains("no port"));
        assert!(err("[::1]:").contains("no port"));
        assert!(err("[::1]:0").contains("port 0"));
        assert!(err(":443").contains("no address or host"));
    }

    #[test]
    fn empty_and_spaces() {
        assert_eq!(err(""), "empty rule");
        assert_eq!(err("   "), "empty rule");
        assert_eq!(err("exa mple.com"), "contains whitespace");
        assert_eq!(err(" example.com"), "contains whitespace");
        assert_eq!(err("example.com:44 3"), "contains whitespace");
    }

    #[test]
    fn bad_hosts() {
        assert!(err("exa$mple.com").contains("not a host name"));
        assert!(err("example..com").contains("empty label"));
        assert!(err(".example.com").contains("empty label"));
        assert!(err(&format!("{}.com", "a".repeat(64))).contains("longer than 63"));
        assert!(err(&format!("{}a", "a.".repeat(127))).contains("longer than 253"));
        assert!(err("ex*ample.com").contains("wildcard"));
        assert!(err("*").contains("wildcard"));
        assert!(err("*.").contains("wildcard"));
        assert!(err("*..").contains("no host name"));
        assert!(err("a.*.example.com").contains("wildcard"));
        assert!(err("10.0.0.256").contains("not a valid IPv4"));
        assert!(err("10.0.0.256:80").contains("not a valid IPv4"));
        assert!(err("[example.com]:80").contains("brackets are for IPv6"));
        assert!(err("[10.0.0.1]:80").contains("brackets are for IPv6"));
        assert!(err("[::1").contains("no closing"));
        assert!(err("[::1]443").contains("unexpected"));
    }

    #[test]
    fn ipv6_with_a_port_needs_brackets() {
        let why = err("::1:443");
        assert!(
            why.contains("ambiguous") && why.contains("[::1]:443") && why.contains("[::1:443]")
        );
        assert!(err("fd00::1:53").contains("ambiguous"));
        assert!(err("fd00::/8:53").contains("[fd00::/8]:53"));
        assert!(err("fe80::zz").contains("not an IP address"));
        // Bracketed, the same text is an address; unambiguous ones need no brackets.
        assert_eq!(parse_rule("[::1:443]").unwrap(), cidr("::1:443", 128, None));
        assert_eq!(parse_rule("fd00::1").unwrap(), cidr("fd00::1", 128, None));
        assert_eq!(
            parse_rule("2001:db8::ab").unwrap(),
            cidr("2001:db8::ab", 128, None)
        );
        assert_eq!(
            parse_rule("fd00::1:53/64").unwrap(),
            cidr("fd00::", 64, None)
        );
    }

    #[test]
    fn rules_built_by_hand_are_made_canonical() {
        // As main.rs builds them from resolved addresses: unmasked, v4-mapped, too long.
        let p = Policy::new(vec![
            cidr("10.1.2.3", 8, Some(80)),
            cidr("::ffff:192.0.2.1", 128, None),
            cidr("198.51.100.7", 200, None),
        ]);
        assert!(p.allows(ip("10.200.0.1"), 80, &[]));
        assert!(p.allows(ip("192.0.2.1"), 5, &[]));
        assert!(p.allows(ip("198.51.100.7"), 5, &[]));
        assert!(!p.allows(ip("198.51.100.8"), 5, &[]));
    }

    #[test]
    fn empty_policy_allows_everything() {
        let p = Policy::new(Vec::new());
        assert!(p.is_empty());
        assert!(p.allows(ip("203.0.113.9"), 22, &[]));
        assert!(p.allows_dns("anything.example", ip("8.8.8.8")));
    }

    #[test]
    fn cidr_rules() {
        let p = policy(&[
            "10.0.0.0/8",
            "127.0.0.0/8:8000",
            "[fd00::/8]:53",
            "192.0.2.7",
        ]);
        assert!(!p.is_empty());
        assert!(p.allows(ip("10.255.1.2"), 1, &[]));
        assert!(!p.allows(ip("11.0.0.1"), 1, &[]));
        assert!(p.allows(ip("127.0.0.1"), 8000, &[]));
        assert!(!p.allows(ip("127.0.0.1"), 8001, &[]));
        assert!(p.allows(ip("fdab::1"), 53, &[]));
        assert!(!p.allows(ip("fdab::1"), 443, &[]));
        assert!(!p.allows(ip("fe80::1"), 53, &[]));
        assert!(p.allows(ip("192.0.2.7"), 443, &[]));
        assert!(!p.allows(ip("192.0.2.8"), 443, &[]));
        // v4-mapped addresses are compared as IPv4; an IPv4 rule never matches real IPv6.
        assert!(p.allows(ip("::ffff:10.1.1.1"), 80, &[]));
        assert!(p.allows(ip("::ffff:127.0.0.1"), 8000, &[]));
        assert!(!p.allows(ip("::a01:101"), 80, &[]));
        // Names do not widen a network rule.
        assert!(!p.allows(ip("11.0.0.1"), 80, &["10.0.0.1"]));
        assert!(err("::/0:443").contains("[::/0]:443"));
        let all = policy(&["0.0.0.0/0", "[::/0]:443"]);
        assert!(all.allows(ip("1.2.3.4"), 9, &[]));
        assert!(all.allows(ip("2001:db8::1"), 443, &[]));
        assert!(!all.allows(ip("2001:db8::1"), 80, &[]));
    }

    #[test]
    fn host_rules_match_the_names_looked_up() {
        let p = policy(&["example.com:443", "*.pypi.org", "localhost:8000"]);
        let addr = ip("93.184.216.34");
        assert!(p.allows(addr, 443, &["example.com"]));
        assert!(p.allows(addr, 443, &["other.net", "EXAMPLE.com."]));
        assert!(!p.allows(addr, 80, &["example.com"]));
        assert!(!p.allows(addr, 443, &["www.example.com"]));
        assert!(!p.allows(addr, 443, &[]));
        assert!(!p.allows(addr, 443, &["notexample.com"]));
        // A wildcard is for subdomains at any depth, not the domain itself.
        assert!(p.allows(addr, 1, &["files.pypi.org"]));
        assert!(p.allows(addr, 1, &["a.b.PyPI.org"]));
        assert!(!p.allows(addr, 1, &["pypi.org"]));
        assert!(!p.allows(addr, 1, &["evilpypi.org"]));
        assert!(!p.allows(addr, 1, &[".pypi.org"]));
        assert!(!p.allows(addr, 1, &["é.pypi.org.x"]));
        // localhost is the loopback addresses, looked up or not.
        assert!(p.allows(ip("127.0.0.1"), 8000, &[]));
        assert!(p.allows(ip("::1"), 8000, &[]));
        assert!(!p.allows(ip("127.0.0.1"), 8001, &[]));
        assert!(!p.allows(ip("10.0.0.1"), 8000, &[]));
    }

    #[test]
    fn dns_questions() {
        let p = policy(&["example.com:443", "*.corp.example"]);
        let resolver = ip("127.0.0.53");
        assert!(p.allows_dns("example.com", resolver));
        assert!(p.allows_dns("Example.Com.", resolver));
        assert!(p.allows_dns("git.corp.example", resolver));
        assert!(!p.allows_dns("corp.example", resolver));
        assert!(!p.allows_dns("aGVsbG8.attacker.net", resolver));
        // A network rule holding the server allows every question sent to it: on port 53 or
        // any port, not on another.
        let p = policy(&["127.0.0.53/32:53", "10.0.0.0/8", "192.168.0.0/16:443"]);
        assert!(p.allows_dns("anything.example", resolver));
        assert!(p.allows_dns("anything.example", ip("10.0.0.2")));
        assert!(p.allows_dns("anything.example", ip("::ffff:10.0.0.2")));
        assert!(!p.allows_dns("anything.example", ip("192.168.1.1")));
        assert!(!p.allows_dns("anything.example", ip("8.8.8.8")));
    }
}
