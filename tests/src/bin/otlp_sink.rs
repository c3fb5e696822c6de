//! A small OTLP/HTTP logs receiver for the tests: the last hop after the real collector.
//! Every request to /v1/logs (protobuf or JSON, maybe gzip) is appended to OUT as one line of
//! OTLP/JSON, the format of the OpenTelemetry collector's file exporter, so that
//! `sandbox-watch verify --otlp-json OUT` reads what arrived.
//!
//! otlp-sink LISTEN_ADDR OUT [--answer ok|garbage|status:N] [--fail-first N] [--exit-after N]
//!           [--require NAME:VALUE]
//!
//! `--require` answers 401 to a request without that header (a collector's authentication).
//! `--fail-first N` answers 503 to the first N requests; `--exit-after N` exits after taking
//! N requests (a collector that goes away).
//! prints `listening on ADDR` once bound (port 0: one is picked).
use std::io::{Read as _, Write as _};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use prost::Message as _;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: otlp-sink LISTEN_ADDR OUT [--answer ok|garbage|status:N] [--fail-first N] [--exit-after N]"
        );
        std::process::exit(2);
    }
    let mut answer = "ok".to_string();
    let mut fail_first = 0u64;
    let mut exit_after = u64::MAX;
    let mut require: Option<(String, String)> = None;
    let mut rest = args[3..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--answer" => answer = rest.next().expect("--answer what").clone(),
            "--fail-first" => {
                fail_first = rest
                    .next()
                    .expect("--fail-first N")
                    .parse()
                    .expect("a number")
            }
            "--exit-after" => {
                exit_after = rest
                    .next()
                    .expect("--exit-after N")
                    .parse()
                    .expect("a number")
            }
            "--require" => {
                let (name, value) = rest
                    .next()
                    .and_then(|r| r.split_once(':'))
                    .expect("--require NAME:VALUE");
                require = Some((name.to_string(), value.to_string()));
            }
            other => panic!("unknown option {other}"),
        }
    }
    let server = tiny_http::Server::http(&args[1]).expect("bind");
    println!("listening on {}", server.server_addr());
    std::io::stdout().flush().unwrap();
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args[2])
        .expect("open OUT");
    let mut seen = 0u64;
    let mut taken = 0u64;
    for mut req in server.incoming_requests() {
        let header = |name: &str| {
            req.headers()
                .iter()
                .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str().to_ascii_lowercase())
                .unwrap_or_default()
        };
        let (gzip, json) = (
            header("content-encoding") == "gzip",
            header("content-type").contains("json"),
        );
        let mut body = Vec::new();
        if req.as_reader().read_to_end(&mut body).is_err() {
            continue;
        }
        seen += 1;
        if let Some((name, value)) = &require {
            let given = req
                .headers()
                .iter()
                .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str().to_string());
            if given.as_deref() != Some(value.as_str()) {
                let _ = req
                    .respond(tiny_http::Response::from_string("who are you").with_status_code(401));
                continue;
            }
        }
        if seen <= fail_first {
            let _ =
                req.respond(tiny_http::Response::from_string("warming up").with_status_code(503));
            continue;
        }
        if let Some(code) = answer.strip_prefix("status:") {
            let r = tiny_http::Response::from_string("not today")
                .with_status_code(code.parse::<u16>().expect("a status"))
                .with_header("Retry-After: 1".parse::<tiny_http::Header>().unwrap());
            let _ = req.respond(r);
            continue;
        }
        if answer == "garbage" {
            let r = tiny_http::Response::from_string("<html>hello</html>").with_header(
                "Content-Type: text/html"
                    .parse::<tiny_http::Header>()
                    .unwrap(),
            );
            let _ = req.respond(r);
            continue;
        }
        if req.url() != "/v1/logs" {
            let _ =
                req.respond(tiny_http::Response::from_string("no such path").with_status_code(404));
            continue;
        }
        if gzip {
            let mut plain = Vec::new();
            if flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut plain)
                .is_err()
            {
                let _ =
                    req.respond(tiny_http::Response::from_string("bad gzip").with_status_code(400));
                continue;
            }
            body = plain;
        }
        let parsed = if json {
            serde_json::from_slice::<ExportLogsServiceRequest>(&body).map_err(|e| e.to_string())
        } else {
            ExportLogsServiceRequest::decode(&body[..]).map_err(|e| e.to_string())
        };
        match parsed {
            Ok(request) => {
                let mut line = serde_json::to_vec(&request).expect("serialise");
                line.push(b'\n');
                out.write_all(&line).expect("write OUT");
                out.flush().unwrap();
                let r = tiny_http::Response::from_data(Vec::new()).with_header(
                    "Content-Type: application/x-protobuf"
                        .parse::<tiny_http::Header>()
                        .unwrap(),
                );
                let _ = req.respond(r);
                taken += 1;
                if taken >= exit_after {
                    std::process::exit(0);
                }
            }
            Err(e) => {
                let _ = req.respond(tiny_http::Response::from_string(e).with_status_code(400));
            }
        }
    }
}
