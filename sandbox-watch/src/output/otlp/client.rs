//! One OTLP/HTTP request: encode (protobuf or JSON, maybe gzip), POST, and read the answer
//! into "accepted" (with what the collector rejected, if it said so) or a failure whose
//! sentence says what went wrong. Every failure is retried by the caller: at-least-once
//! delivery drops nothing because a collector said no.
use std::io::Write as _;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use prost::Message as _;

use super::config::{Compression, Config, Protocol};

/// What the collector said to a request it took.
#[derive(Debug, Default, PartialEq)]
pub struct Accepted {
    /// Records it said it rejected (OTLP partial success): they will not be sent again.
    pub rejected: u64,
    /// Its message about them.
    pub message: Option<String>,
}

/// A request that did not get through: send it again later.
#[derive(Debug)]
pub struct Failure {
    /// A sentence, for `last_error` (never a header value).
    pub message: String,
    /// The collector asked to wait this long (Retry-After).
    pub retry_after: Option<Duration>,
    /// HTTP 413: the request was too large; send fewer records at a time.
    pub too_large: bool,
}

impl Failure {
    fn new(message: String) -> Failure {
        Failure {
            message,
            retry_after: None,
            too_large: false,
        }
    }
}

/// Sends requests to one endpoint.
pub struct Client {
    agent: ureq::Agent,
    config: Config,
}

/// The most of an answer read.
const ANSWER_LIMIT: u64 = 1 << 20;

impl Client {
    pub fn new(config: Config) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(config.tls.clone())
            // A POST is not redirected: a 3xx is a failure that says where to point --otlp.
            .max_redirects(0)
            .user_agent(format!("sandbox-watch/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Client { agent, config }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The request's bytes as this endpoint wants them.
    pub fn encode(&self, request: &ExportLogsServiceRequest) -> Vec<u8> {
        let bytes = match self.config.protocol {
            Protocol::Protobuf => request.encode_to_vec(),
            Protocol::Json => {
                serde_json::to_vec(request).expect("an OTLP request serialises into memory")
            }
        };
        self.compress(bytes)
    }

    /// An encoded request (as the protocol wants it), compressed if the endpoint wants that.
    pub fn compress(&self, bytes: Vec<u8>) -> Vec<u8> {
        match self.config.compression {
            Compression::None => bytes,
            Compression::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(
                    Vec::with_capacity(bytes.len() / 4),
                    flate2::Compression::fast(),
                );
                gz.write_all(&bytes)
                    .and_then(|_| gz.finish())
                    .expect("gzip into memory cannot fail")
            }
        }
    }

    /// POSTs an encoded request, waiting at most `timeout` for the whole exchange.
    pub fn post(&self, body: &[u8], timeout: Duration) -> Result<Accepted, Failure> {
        let shown = &self.config.shown;
        let content_type = match self.config.protocol {
            Protocol::Protobuf => "application/x-protobuf",
            Protocol::Json => "application/json",
        };
        let mut req = self
            .agent
            .post(&self.config.url)
            .config()
            .timeout_global(Some(timeout.max(Duration::from_millis(50))))
            .build()
            .header("Content-Type", content_type);
        if self.config.compression == Compression::Gzip {
            req = req.header("Content-Encoding", "gzip");
        }
        for (k, v) in &self.config.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut resp = req
            .send(body)
            .map_err(|e| Failure::new(transport_error(&e, shown, timeout)))?;
        let status = resp.status().as_u16();
        let answer_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let answer = resp
            .body_mut()
            .with_config()
            .limit(ANSWER_LIMIT)
            .read_to_vec()
            .map_err(|e| {
                Failure::new(format!(
                    "{shown}: the answer (HTTP {status}) could not be read: {}",
                    transport_error(&e, shown, timeout)
                ))
            })?;
        if (200..300).contains(&status) {
            return self.accepted(status, &answer_type, &answer);
        }
        let detail = printable(&answer);
        let message = match status {
            300..=399 => format!(
                "{shown} answered HTTP {status} (a redirect, not followed for a POST): point \
                 --otlp at the collector itself"
            ),
            404 => format!(
                "{shown} answered HTTP 404: no OTLP logs receiver at that path (the base URL \
                 given to --otlp gets /v1/logs appended){detail}"
            ),
            401 | 403 => format!(
                "{shown} answered HTTP {status}: it wants credentials; give them in \
                 OTEL_EXPORTER_OTLP_HEADERS (e.g. Authorization=Bearer%20…){detail}"
            ),
            413 => format!("{shown} answered HTTP 413: the request was too large{detail}"),
            429 => format!("{shown} answered HTTP 429: the collector is busy{detail}"),
            _ => format!("{shown} answered HTTP {status}{detail}"),
        };
        Err(Failure {
            message,
            retry_after,
            too_large: status == 413,
        })
    }

    fn accepted(&self, status: u16, answer_type: &str, answer: &[u8]) -> Result<Accepted, Failure> {
        let shown = &self.config.shown;
        if answer.is_empty() {
            return Ok(Accepted::default());
        }
        let as_protobuf = answer_type.contains("protobuf")
            || (answer_type.is_empty() && self.config.protocol == Protocol::Protobuf);
        let as_json = answer_type.contains("json")
            || (answer_type.is_empty() && self.config.protocol == Protocol::Json);
        let parsed = if as_protobuf {
            ExportLogsServiceResponse::decode(answer).map_err(|e| e.to_string())
        } else if as_json {
            serde_json::from_slice::<ExportLogsServiceResponse>(answer).map_err(|e| e.to_string())
        } else {
            Err(format!("its content type is {answer_type}"))
        };
        match parsed {
            Ok(r) => {
                let partial = r.partial_success.unwrap_or_default();
                let rejected = partial.rejected_log_records.max(0) as u64;
                let message = (!partial.error_message.is_empty() || rejected > 0).then(|| {
                    format!(
                        "{shown} rejected {rejected} of the records sent: {}",
                        printable_text(&partial.error_message)
                    )
                });
                Ok(Accepted { rejected, message })
            }
            Err(why) => Err(Failure::new(format!(
                "{shown} answered HTTP {status} with something that is not an OTLP response \
                 ({why}): is it an OTLP/HTTP collector?"
            ))),
        }
    }
}

/// What a transport error means, in a sentence.
fn transport_error(e: &ureq::Error, shown: &str, timeout: Duration) -> String {
    use std::io::ErrorKind;
    let tls = || {
        format!(
            "{shown}: TLS failed ({e}); for a collector whose certificate is signed by a \
             private CA, give that CA (PEM) in OTEL_EXPORTER_OTLP_CERTIFICATE"
        )
    };
    match e {
        ureq::Error::Io(io)
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            tls()
        }
        ureq::Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => {
                format!(
                    "{shown}: connection refused (is the collector running and listening there?)"
                )
            }
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                format!("{shown}: the connection was closed before the collector answered ({io})")
            }
            ErrorKind::NetworkUnreachable | ErrorKind::HostUnreachable => {
                format!("{shown}: the host cannot be reached ({io})")
            }
            ErrorKind::TimedOut => format!("{shown}: no answer within {timeout:.1?}"),
            _ => format!("{shown}: {io}"),
        },
        ureq::Error::HostNotFound => format!("{shown}: the host name cannot be resolved"),
        ureq::Error::Timeout(what) => {
            format!("{shown}: no answer within {timeout:.1?} ({what} timed out)")
        }
        ureq::Error::Protocol(p) => format!(
            "{shown}: the answer is not HTTP ({p}): is it an OTLP/HTTP collector (port 4318, \
             not the gRPC port 4317)?"
        ),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_) => tls(),
        ureq::Error::ConnectionFailed => format!("{shown}: the connection failed"),
        other => format!("{shown}: {other}"),
    }
}

/// A collector's error text, short and on one line, for a message: `: text`, or nothing.
fn printable(answer: &[u8]) -> String {
    let text = printable_text(&String::from_utf8_lossy(answer));
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

fn printable_text(s: &str) -> String {
    let mut t: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if s.chars().count() > 200 {
        t.push('…');
    }
    t.trim().to_string()
}
