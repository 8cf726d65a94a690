//! Where the figures go besides stdout: a node_exporter textfile, replaced whole, and an
//! HTTP endpoint for Prometheus to scrape (`metrics --listen`, the db-branch-metrics
//! service). tiny_http parses the requests; this answers GET /metrics and nothing else.

use super::{exposition, gather};
use crate::error::{Error, Kind};
use crate::host::Host;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// What the exposition format's consumers expect (Prometheus's text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Writes the figures to `path` through a temporary file beside it (node_exporter reads
/// only `*.prom`, so it never sees the temporary one) and a rename.
pub fn write_textfile(host: &Host, path: &Path) -> Result<()> {
    let text = exposition(&gather(host)?)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        return Err(Error::new(
            Kind::NotFound,
            format!("{} does not exist to write {} in", dir.display(), path.display()),
        )
        .hint("create it, or point metrics.textfile at node_exporter's --collector.textfile.directory")
        .into());
    }
    crate::store::files::write_atomic(path, text.as_bytes(), 0o644)
}

/// After a timer's run: rewrites `metrics.textfile` when one is configured. A failure is
/// a warning: the run itself did what it was for.
pub fn refresh_textfile(host: &Host) {
    let path = &host.config.metrics.textfile;
    if path.as_os_str().is_empty() {
        return;
    }
    if let Err(e) = write_textfile(host, path) {
        host.printer.warn(format!(
            "metrics.textfile {} was not refreshed: {e:#}",
            path.display()
        ));
    }
}

/// How long one gathering serves scrapes: a local user hammering the endpoint costs the
/// host one gathering a second, not one per request.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// Serves /metrics on `addr` until the process is stopped; `ready` is told the address
/// once it listens (port 0 picks a free one).
pub fn serve(host: &Host, addr: SocketAddr, ready: &dyn Fn(SocketAddr)) -> Result<()> {
    if !addr.ip().is_loopback() {
        host.printer.warn(format!(
            "serving on {addr}, not a loopback address: whoever reaches it reads the branches' \
             owners and counts"
        ));
    }
    let server = tiny_http::Server::http(addr).map_err(|e| {
        Error::new(
            Kind::Refused,
            format!("cannot listen on {addr} for the metrics endpoint: {e}"),
        )
        .hint(format!(
            "another process may hold the port (`ss -ltnp 'sport = :{}'`); choose another with \
             --listen ADDR or metrics.listen",
            addr.port()
        ))
    })?;
    let bound = server
        .server_addr()
        .to_ip()
        .context("the metrics endpoint's address")?;
    ready(bound);
    let mut cached: Option<(Instant, Result<String, String>)> = None;
    for request in server.incoming_requests() {
        let answer = route(request.method(), request.url(), &mut || match &cached {
            Some((at, body)) if at.elapsed() < FRESH_FOR => body.clone(),
            _ => {
                let body = gather(host)
                    .and_then(|m| exposition(&m))
                    .map_err(|e| format!("{e:#}"));
                cached = Some((Instant::now(), body.clone()));
                body
            }
        });
        let header = tiny_http::Header::from_bytes("Content-Type", answer.content_type)
            .expect("a valid header");
        let response = tiny_http::Response::from_string(answer.body)
            .with_status_code(answer.status)
            .with_header(header);
        // A scraper that went away is its own business.
        let _ = request.respond(response);
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// The answer to `method url`: the figures for GET or HEAD /metrics (any query), a pointer
/// to them at /, 404 elsewhere, 405 for other methods.
pub fn route(
    method: &tiny_http::Method,
    url: &str,
    figures: &mut dyn FnMut() -> Result<String, String>,
) -> Answer {
    let text = |status, body: &str| Answer {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_string(),
    };
    if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        return text(405, "only GET and HEAD\n");
    }
    match url.split('?').next().unwrap_or_default() {
        "/metrics" => match figures() {
            Ok(body) => Answer {
                status: 200,
                content_type: CONTENT_TYPE,
                body,
            },
            Err(e) => text(500, &format!("db-branch metrics failed: {e}\n")),
        },
        "/" => text(200, "db-branch: the figures are at /metrics\n"),
        _ => text(404, "not found: the figures are at /metrics\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiny_http::Method;

    #[test]
    fn only_get_of_metrics_gathers() {
        let mut calls = 0;
        let mut figures = || {
            calls += 1;
            Ok("db_branch_trash_entries 0\n".to_string())
        };
        let a = route(&Method::Get, "/metrics?x=1", &mut figures);
        assert_eq!((a.status, a.content_type), (200, CONTENT_TYPE));
        assert_eq!(a.body, "db_branch_trash_entries 0\n");
        assert_eq!(route(&Method::Head, "/metrics", &mut figures).status, 200);
        assert_eq!(route(&Method::Get, "/", &mut figures).status, 200);
        assert_eq!(route(&Method::Get, "/../etc", &mut figures).status, 404);
        assert_eq!(route(&Method::Get, "/metrics/x", &mut figures).status, 404);
        assert_eq!(route(&Method::Post, "/metrics", &mut figures).status, 405);
        assert_eq!(calls, 2, "only the two scrapes gathered");
    }

    #[test]
    fn a_failed_gathering_is_a_500_naming_it() {
        let a = route(&Method::Get, "/metrics", &mut || Err("no pool".into()));
        assert_eq!(a.status, 500);
        assert!(a.body.contains("no pool"), "{}", a.body);
    }

    #[test]
    fn the_textfile_is_written_whole_and_a_missing_directory_is_named() {
        let sim = crate::ops::testing::sim_host();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db-branch.prom");
        write_textfile(&sim.host, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("db_branch_baseline_generations 1"), "{text}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
        let err = write_textfile(&sim.host, &dir.path().join("absent/x.prom")).unwrap_err();
        assert!(format!("{err:#}").contains("absent"), "{err:#}");
    }
}
