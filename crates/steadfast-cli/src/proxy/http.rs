//! HTTP mode: each client connection is served as HTTP/1.1 by hyper, its
//! requests forwarded over one connection to the target of its own (opened
//! when the first request comes, again if the target closed it), under
//! steadfast-http's server chaos layer, which injects the per-request
//! faults (the delay before a response, the status) from the plan's chaos
//! value — the same engine a service's own chaos layer runs.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use steadfast_http::server::ChaosLayer;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tower_layer::Layer;
use tower_service::Service;

use super::faults::ConnectionFaults;
use super::serve::{CONNECT_TIMEOUT, Shared};
use super::stats::bump;

/// A response's body: the target's, or one the proxy wrote.
type ProxyBody = Either<Incoming, Full<Bytes>>;

/// Serves connection `id` as HTTP/1.1, forwarding its requests.
pub(super) async fn forward(
    shared: Arc<Shared>,
    client: TcpStream,
    _faults: ConnectionFaults,
    id: u64,
) {
    let mut layer = ChaosLayer::new(shared.chaos.clone());
    if let Some((code, _, retry_after)) = shared.plan.status {
        if let Ok(status) = StatusCode::from_u16(code) {
            layer = layer.status(status);
        }
        if let Some(wait) = retry_after {
            layer = layer.retry_after(wait);
        }
    }
    let service = layer.layer(Forward {
        shared: Arc::clone(&shared),
        upstream: Arc::new(Mutex::new(None)),
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // A client that sends no request head within this is let go.
        .header_read_timeout(CONNECT_TIMEOUT * 3)
        .serve_connection(TokioIo::new(client), TowerToHyperService::new(service))
        .await;
    if let Err(e) = served {
        shared.log(id, format_args!("ended: {e}"));
    }
}

/// The connection to the target, and the task that drives it (aborted
/// when the client's connection ends).
struct Upstream {
    sender: SendRequest<Incoming>,
    driver: JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Forwards a request to the target over the client connection's own
/// connection to it; a `502 Bad Gateway` of the proxy's when the target
/// cannot be reached or fails mid-request (a request is sent at most once:
/// the proxy never resends one).
#[derive(Clone)]
struct Forward {
    shared: Arc<Shared>,
    upstream: Arc<Mutex<Option<Upstream>>>,
}

impl Service<Request<Incoming>> for Forward {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ProxyBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        let upstream = Arc::clone(&self.upstream);
        Box::pin(async move {
            bump(&shared.stats.requests);
            strip_hop_by_hop(request.headers_mut());
            // Only the path goes on: an absolute URI's authority is never
            // followed (the target is --to, always).
            *request.uri_mut() = origin_form(request.uri());
            let mut slot = upstream.lock().await;
            if slot.as_ref().is_none_or(|u| u.sender.is_closed()) {
                *slot = None;
                match connect(&shared).await {
                    Ok(u) => *slot = Some(u),
                    Err(why) => return Ok(bad_gateway(&why)),
                }
            }
            let Some(up) = slot.as_mut() else {
                return Ok(bad_gateway("no connection to the target"));
            };
            if up.sender.ready().await.is_err() {
                *slot = None;
                return Ok(bad_gateway("the target closed the connection"));
            }
            match up.sender.send_request(request).await {
                Ok(mut response) => {
                    strip_hop_by_hop(response.headers_mut());
                    Ok(response.map(Either::Left))
                }
                Err(e) => {
                    *slot = None;
                    Ok(bad_gateway(&format!("the target failed: {e}")))
                }
            }
        })
    }
}

/// Opens an HTTP/1.1 connection to the target.
async fn connect(shared: &Shared) -> Result<Upstream, String> {
    let stream = shared
        .connect()
        .await
        .map_err(|e| format!("cannot reach the target: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("cannot reach the target: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Upstream { sender, driver })
}

/// The proxy's own `502 Bad Gateway`, saying why.
fn bad_gateway(why: &str) -> Response<ProxyBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(format!(
        "steadfast proxy: {why}\n"
    )))));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `uri` without its scheme and authority: the path and query only.
fn origin_form(uri: &Uri) -> Uri {
    uri.path_and_query()
        .map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()))
}

/// Removes the hop-by-hop headers (RFC 9110, section 7.6.1): those of the
/// client's connection, not for the target's.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn absolute_uris_lose_their_authority() {
        let uri: Uri = "http://elsewhere.example:9/a/b?c=d".parse().unwrap();
        assert_eq!(origin_form(&uri), "/a/b?c=d");
        let uri: Uri = "/x".parse().unwrap();
        assert_eq!(origin_form(&uri), "/x");
        let uri: Uri = "*".parse().unwrap();
        assert_eq!(origin_form(&uri), "*");
    }

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, "keep-alive, x-private".parse().unwrap());
        headers.insert("x-private", "1".parse().unwrap());
        headers.insert("keep-alive", "timeout=5".parse().unwrap());
        headers.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        headers.insert(header::ACCEPT, "*/*".parse().unwrap());
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::ACCEPT));
    }
}
