//! Where and how to send: `--otlp [URL]` and the OpenTelemetry exporter environment variables,
//! read as the OTel specification says (signal-specific `…_LOGS_…` before the general one),
//! each bad value a sentence naming the variable (never its value: headers hold secrets).
//!
//! | what | from |
//! |---|---|
//! | endpoint | `--otlp URL` (a base URL: `/v1/logs` is appended), else `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/logs`), else `http://localhost:4318/v1/logs` |
//! | headers | `OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_LOGS_HEADERS` (same key: the latter wins); `k=v,k2=v2`, percent-decoded |
//! | protocol | `OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL`: `http/protobuf` (default) or `http/json` |
//! | compression | `OTEL_EXPORTER_OTLP_[LOGS_]COMPRESSION`: `none` (default) or `gzip` |
//! | request timeout | `OTEL_EXPORTER_OTLP_[LOGS_]TIMEOUT`: milliseconds, default 10000 |
//! | TLS | `OTEL_EXPORTER_OTLP_[LOGS_]CERTIFICATE` (PEM CAs to trust instead of the built-in roots), `…_CLIENT_CERTIFICATE` and `…_CLIENT_KEY` (PEM, for mutual TLS) |
//! | resource | `OTEL_RESOURCE_ATTRIBUTES` (`k=v,…`, percent-decoded), `OTEL_SERVICE_NAME` |
use std::time::Duration;

use ureq::http::Uri;

/// The endpoint when neither `--otlp URL` nor a variable names one (the OTLP/HTTP default).
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The variables that hold the collector's credentials (its auth headers, the client key of
/// mutual TLS): a capture with `--otlp` does not pass them on to the agent it starts.
pub const CREDENTIAL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY",
];

/// What `OTEL_EXPORTER_OTLP_TIMEOUT` defaults to.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A bad value: a sentence that names where it came from and what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadConfig(pub String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Protobuf,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// Everything the exporter needs to send, read once before the agent starts.
#[derive(Clone)]
pub struct Config {
    /// The URL the records are POSTed to.
    pub url: String,
    /// The URL as shown in messages and the report: no query string (it may hold a token).
    pub shown: String,
    /// Extra request headers. Never printed, logged or written anywhere.
    pub headers: Vec<(String, String)>,
    pub protocol: Protocol,
    pub compression: Compression,
    /// The longest one request may take.
    pub request_timeout: Duration,
    pub tls: ureq::tls::TlsConfig,
    /// Resource attributes from `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`, in order.
    pub resource: Vec<(String, String)>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        // Not the headers' values: they are credentials.
        f.debug_struct("Config")
            .field("shown", &self.shown)
            .field("headers", &self.headers.len())
            .field("protocol", &self.protocol)
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The configuration from `--otlp`'s value (`""`: given without a URL) and the process
    /// environment.
    pub fn from_env(flag: Option<&str>) -> Result<Config, BadConfig> {
        Config::new(flag, &|name| std::env::var(name).ok())
    }

    /// As [`Config::from_env`], with the environment looked up through `env`.
    pub fn new(
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, BadConfig> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        // The logs variable, else the general one: (name, value).
        let pick = |what: &str| -> Option<(String, String)> {
            let logs = format!("OTEL_EXPORTER_OTLP_LOGS_{what}");
            let all = format!("OTEL_EXPORTER_OTLP_{what}");
            var(&logs)
                .map(|v| (logs, v))
                .or_else(|| var(&all).map(|v| (all, v)))
        };

        let (url, source) = match flag.filter(|f| !f.is_empty()) {
            Some(base) => (logs_url(base, "--otlp")?, "--otlp".to_string()),
            None => match var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") {
                Some(u) => {
                    let name = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT";
                    check_url(&u, name)?;
                    (u.trim().to_string(), name.to_string())
                }
                None => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(u) => (
                        logs_url(&u, "OTEL_EXPORTER_OTLP_ENDPOINT")?,
                        "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
                    ),
                    None => (
                        logs_url(DEFAULT_ENDPOINT, "the default")?,
                        "the default".into(),
                    ),
                },
            },
        };
        let shown = shown_url(&url);

        let mut headers: Vec<(String, String)> = Vec::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        ] {
            let Some(text) = var(name) else { continue };
            for (key, value) in key_values(&text, name)? {
                ureq::http::HeaderName::from_bytes(key.as_bytes()).map_err(|_| {
                    BadConfig(format!(
                        "{name}: a header name is not valid in HTTP; give key=value pairs \
                         separated by commas"
                    ))
                })?;
                ureq::http::HeaderValue::from_str(&value).map_err(|_| {
                    BadConfig(format!(
                        "{name}: the value of a header holds characters HTTP does not allow \
                         (percent-encode them)"
                    ))
                })?;
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
                headers.push((key, value));
            }
        }

        let protocol = match pick("PROTOCOL") {
            None => Protocol::Protobuf,
            Some((name, v)) => match v.trim() {
                "http/protobuf" => Protocol::Protobuf,
                "http/json" => Protocol::Json,
                "grpc" => {
                    return Err(BadConfig(format!(
                        "{name}=grpc: sandbox-watch sends OTLP over HTTP; give http/protobuf or \
                         http/json and the collector's OTLP/HTTP address (port 4318)"
                    )));
                }
                other => {
                    return Err(BadConfig(format!(
                        "{name}={other}: unknown protocol; give http/protobuf or http/json"
                    )));
                }
            },
        };
        let compression = match pick("COMPRESSION") {
            None => Compression::None,
            Some((name, v)) => match v.trim() {
                "none" => Compression::None,
                "gzip" => Compression::Gzip,
                other => {
                    return Err(BadConfig(format!(
                        "{name}={other}: unknown compression; give gzip or none"
                    )));
                }
            },
        };
        let request_timeout = match pick("TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some((name, v)) => match v.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(BadConfig(format!(
                        "{name}={v}: give the request timeout in milliseconds, e.g. 10000"
                    )));
                }
            },
        };
        let tls = tls_config(&pick)?;
        if url.starts_with("http://") && pick("CERTIFICATE").is_some() {
            log::info!("a CA certificate is set but {source} is not https: it is not used");
        }

        let mut resource = Vec::new();
        if let Some(text) = var("OTEL_RESOURCE_ATTRIBUTES") {
            resource = key_values(&text, "OTEL_RESOURCE_ATTRIBUTES")?;
        }
        if let Some(name) = var("OTEL_SERVICE_NAME") {
            resource.retain(|(k, _)| k != "service.name");
            resource.push(("service.name".into(), name.trim().to_string()));
        }
        Ok(Config {
            url,
            shown,
            headers,
            protocol,
            compression,
            request_timeout,
            tls,
            resource,
        })
    }
}

/// `base` with `/v1/logs` appended to its path (unless it already ends so).
fn logs_url(base: &str, source: &str) -> Result<String, BadConfig> {
    let base = base.trim();
    let uri = check_url(base, source)?;
    let path = uri.path().trim_end_matches('/');
    let path = if path.ends_with("/v1/logs") {
        path.to_string()
    } else {
        format!("{path}/v1/logs")
    };
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let scheme = uri.scheme_str().unwrap_or("http");
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    Ok(format!("{scheme}://{authority}{path}{query}"))
}

/// An http or https URL with a host, and no user name or password in it.
fn check_url(text: &str, source: &str) -> Result<Uri, BadConfig> {
    let text = text.trim();
    // The message never quotes a URL that holds credentials.
    let quoted = if text.contains('@') {
        "the URL".to_string()
    } else {
        format!("'{text}'")
    };
    let example = "give the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318";
    if !text.contains("://") {
        return Err(BadConfig(format!(
            "{source} {quoted}: not a URL (no scheme); {example}"
        )));
    }
    let uri: Uri = text.parse().map_err(|e| {
        BadConfig(format!(
            "{source} {quoted}: not a valid URL ({e}); {example}"
        ))
    })?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            return Err(BadConfig(format!(
                "{source} {quoted}: unknown scheme '{other}'; OTLP/HTTP goes over http:// or \
                 https://; {example}"
            )));
        }
        None => {
            return Err(BadConfig(format!(
                "{source} {quoted}: not a URL (no scheme); {example}"
            )));
        }
    }
    let Some(authority) = uri.authority() else {
        return Err(BadConfig(format!("{source} {quoted}: no host; {example}")));
    };
    if authority.as_str().contains('@') {
        return Err(BadConfig(format!(
            "{source}: the URL holds a user name or password; put credentials in \
             OTEL_EXPORTER_OTLP_HEADERS (e.g. Authorization=Basic%20…) instead, where they are \
             never printed"
        )));
    }
    if authority.host().is_empty() {
        return Err(BadConfig(format!("{source} {quoted}: no host; {example}")));
    }
    // The port, if any, after the host (an IPv6 host is in brackets).
    let text_authority = authority.as_str();
    let after_host = text_authority
        .rsplit_once(']')
        .map_or(text_authority, |(_, rest)| rest);
    if let Some((_, port)) = after_host.rsplit_once(':') {
        if port.is_empty() {
            return Err(BadConfig(format!(
                "{source} {quoted}: the port is empty; {example}"
            )));
        }
        if !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(BadConfig(format!(
                "{source} {quoted}: {port} is not a port number (1 to 65535); {example}"
            )));
        }
    }
    Ok(uri)
}

/// A URL without its query string (which may hold a token), for messages and the report.
pub fn shown_url(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or_default().to_string()
}

/// `k=v,k2=v2` as the OTel specification writes headers and resource attributes: each key
/// and value trimmed and percent-decoded. A bad entry is named by its position, not quoted.
fn key_values(text: &str, name: &str) -> Result<Vec<(String, String)>, BadConfig> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let Some((k, v)) = entry.split_once('=') else {
            return Err(BadConfig(format!(
                "{name}: entry {n} has no '='; give key=value pairs separated by commas"
            )));
        };
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s.trim())
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| {
                    BadConfig(format!(
                        "{name}: entry {n} is not UTF-8 once percent-decoded"
                    ))
                })
        };
        let (k, v) = (decode(k)?, decode(v)?);
        if k.is_empty() {
            return Err(BadConfig(format!("{name}: entry {n} has an empty key")));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// The TLS settings: the built-in (Mozilla) roots, or the CAs in `…_CERTIFICATE`; a client
/// certificate and key for mutual TLS.
fn tls_config(
    pick: &dyn Fn(&str) -> Option<(String, String)>,
) -> Result<ureq::tls::TlsConfig, BadConfig> {
    use ureq::tls::{ClientCert, PemItem, RootCerts, TlsConfig};
    let read =
        |(name, path): (String, String)| -> Result<(String, Vec<PemItem<'static>>), BadConfig> {
            let bytes = std::fs::read(path.trim())
                .map_err(|e| BadConfig(format!("{name} {}: {e}", path.trim())))?;
            let items: Result<Vec<_>, _> = ureq::tls::parse_pem(&bytes).collect();
            let items =
                items.map_err(|e| BadConfig(format!("{name} {}: not PEM ({e})", path.trim())))?;
            Ok((format!("{name} {}", path.trim()), items))
        };
    let mut builder = TlsConfig::builder();
    if let Some(spec) = pick("CERTIFICATE") {
        let (what, items) = read(spec)?;
        let certs: Vec<_> = items
            .into_iter()
            .filter_map(|i| match i {
                PemItem::Certificate(c) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(BadConfig(format!(
                "{what}: holds no certificate (-----BEGIN CERTIFICATE-----)"
            )));
        }
        builder = builder.root_certs(RootCerts::new_with_certs(&certs));
    }
    match (pick("CLIENT_CERTIFICATE"), pick("CLIENT_KEY")) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            let (cert_what, certs) = read(cert)?;
            let chain: Vec<_> = certs
                .into_iter()
                .filter_map(|i| match i {
                    PemItem::Certificate(c) => Some(c),
                    _ => None,
                })
                .collect();
            if chain.is_empty() {
                return Err(BadConfig(format!("{cert_what}: holds no certificate")));
            }
            let (key_what, keys) = read(key)?;
            let Some(key) = keys.into_iter().find_map(|i| match i {
                PemItem::PrivateKey(k) => Some(k),
                _ => None,
            }) else {
                return Err(BadConfig(format!("{key_what}: holds no private key")));
            };
            builder = builder.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        (Some((name, _)), None) | (None, Some((name, _))) => {
            return Err(BadConfig(format!(
                "{name} is set without its pair: mutual TLS needs both \
                 OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"
            )));
        }
    }
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)], flag: Option<&str>) -> Result<Config, BadConfig> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::new(flag, &move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_endpoint_as_the_specification_says() {
        assert_eq!(
            with(&[], None).unwrap().url,
            "http://localhost:4318/v1/logs"
        );
        assert_eq!(
            with(&[], Some("")).unwrap().url,
            "http://localhost:4318/v1/logs"
        );
        // A base URL gets /v1/logs, whatever its trailing slash.
        for base in ["http://c:4318", "http://c:4318/", "http://c:4318/v1/logs"] {
            assert_eq!(
                with(&[], Some(base)).unwrap().url,
                "http://c:4318/v1/logs",
                "{base}"
            );
        }
        assert_eq!(
            with(&[], Some("https://c/otlp/")).unwrap().url,
            "https://c/otlp/v1/logs"
        );
        let general = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://g:1")];
        assert_eq!(with(&general, None).unwrap().url, "http://g:1/v1/logs");
        // The logs variable is used as it is, and wins over the general one.
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://g:1"),
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://l:2/custom"),
        ];
        assert_eq!(with(&both, None).unwrap().url, "http://l:2/custom");
        // --otlp URL wins over both.
        assert_eq!(
            with(&both, Some("http://f:3")).unwrap().url,
            "http://f:3/v1/logs"
        );
        // The query stays in the request but not in what is shown.
        let c = with(&[], Some("http://c:1/?token=abc")).unwrap();
        assert_eq!(c.url, "http://c:1/v1/logs?token=abc");
        assert_eq!(c.shown, "http://c:1/v1/logs");
    }

    #[test]
    fn bad_urls_are_sentences() {
        let msg = |flag: &str| with(&[], Some(flag)).unwrap_err().0;
        assert!(
            msg("localhost:4318").contains("no scheme"),
            "{}",
            msg("localhost:4318")
        );
        assert!(msg("ftp://c:21").contains("unknown scheme 'ftp'"));
        assert!(msg("grpc://c:4317").contains("unknown scheme"));
        assert!(
            msg("http://").contains("http://127.0.0.1:4318"),
            "{}",
            msg("http://")
        );
        assert!(
            msg("http://c:99999").contains("not a port number"),
            "{}",
            msg("http://c:99999")
        );
        assert!(
            msg("http://c:/x").contains("port"),
            "{}",
            msg("http://c:/x")
        );
        assert!(msg("http://exa mple").contains("not a valid URL"));
        let creds = msg("http://user:hunter2@c:4318");
        assert!(creds.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{creds}");
        assert!(!creds.contains("hunter2"), "{creds}");
        let e = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "nope")], None)
            .unwrap_err()
            .0;
        assert!(e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
    }

    #[test]
    fn headers_are_decoded_merged_and_never_quoted() {
        let c = with(
            &[
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "Authorization=Bearer%20s3cret, x-a = 1",
                ),
                ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "X-A=2"),
            ],
            None,
        )
        .unwrap();
        assert_eq!(
            c.headers,
            vec![
                ("Authorization".to_string(), "Bearer s3cret".to_string()),
                ("X-A".to_string(), "2".to_string())
            ]
        );
        assert!(!format!("{c:?}").contains("s3cret"));
        for bad in [
            "Bearer s3cret",
            "a=b,=s3cret",
            "bad header=s3cret",
            "a=s3cret%0A",
        ] {
            let e = with(&[("OTEL_EXPORTER_OTLP_HEADERS", bad)], None)
                .unwrap_err()
                .0;
            assert!(e.starts_with("OTEL_EXPORTER_OTLP_HEADERS"), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn protocol_compression_timeout_and_resource() {
        let c = with(
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
                ("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "deployment.environment=ci,team=a%2Cb",
                ),
                ("OTEL_SERVICE_NAME", "runner-7"),
            ],
            None,
        )
        .unwrap();
        assert_eq!(c.protocol, Protocol::Json);
        assert_eq!(c.compression, Compression::Gzip);
        assert_eq!(c.request_timeout, Duration::from_millis(2500));
        assert_eq!(
            c.resource,
            vec![
                ("deployment.environment".to_string(), "ci".to_string()),
                ("team".to_string(), "a,b".to_string()),
                ("service.name".to_string(), "runner-7".to_string()),
            ]
        );
        let e = with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], None)
            .unwrap_err()
            .0;
        assert!(e.contains("http/protobuf"), "{e}");
        assert!(with(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")], None).is_err());
        assert!(with(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")], None).is_err());
        let e = with(&[("OTEL_RESOURCE_ATTRIBUTES", "a=1,b")], None)
            .unwrap_err()
            .0;
        assert!(e.contains("entry 2"), "{e}");
        let e = with(
            &[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem")],
            None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let e = with(&[("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem")], None)
            .unwrap_err()
            .0;
        assert!(e.contains("both"), "{e}");
    }
}
