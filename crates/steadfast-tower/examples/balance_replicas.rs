//! One hyper client over three replicas of a service, one of which fails
//! every request: the calls spread by load over the other two once the bad
//! one has answered its first 500. It starts its own replicas on 127.0.0.1.
//!
//! ```sh
//! cargo run -p steadfast-tower --example balance_replicas
//! ```
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use http::{Request, StatusCode, Uri};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use steadfast::endpoint::{Answer, Endpoints};
use steadfast::{Classify, Verdict};
use steadfast_tower::balance::Balance;
use tower::discover::ServiceList;
use tower::{Service, ServiceExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let statuses = [
        StatusCode::OK,
        StatusCode::INTERNAL_SERVER_ERROR,
        StatusCode::OK,
    ];
    let mut replicas = Vec::new();
    for status in statuses {
        replicas.push(replica(status).await?);
    }

    // One service per replica: a GET of its URL, answering the status.
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut endpoints = Vec::new();
    for (addr, _) in &replicas {
        let uri: Uri = format!("http://{addr}/").parse()?;
        let client = client.clone();
        endpoints.push(tower::service_fn(move |()| {
            let request = Request::get(uri.clone()).body(Empty::new());
            let client = client.clone();
            async move { Ok::<_, Error>(client.request(request?).await?.status()) }
        }));
    }

    let set = Endpoints::builder().build()?;
    let mut balance = Balance::new(ServiceList::new(endpoints), set).classify(ByStatus);

    let mut ok = 0;
    for _ in 0..100 {
        if balance.ready().await?.call(()).await? == StatusCode::OK {
            ok += 1;
        }
    }
    for (addr, hits) in &replicas {
        println!("{addr}: {} requests", hits.load(Ordering::Relaxed));
    }
    println!("{ok} of 100 answered 200");
    assert!(ok >= 99);
    Ok(())
}

/// What a status says of the replica that sent it: a 5xx, or no answer at
/// all, is the replica's failure; a 4xx the request's own.
#[derive(Clone)]
struct ByStatus;

impl Classify<StatusCode, Error> for ByStatus {
    fn classify(&self, outcome: &Result<StatusCode, Error>) -> Verdict {
        match outcome {
            Ok(s) if s.is_server_error() => Verdict::Retry,
            Ok(s) if s.is_client_error() => Verdict::Stop,
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Retry,
        }
    }

    fn answer(&self, outcome: &Result<StatusCode, Error>, _: Verdict) -> Answer {
        match outcome {
            Ok(s) if s.is_server_error() => Answer::ServerError,
            Ok(s) if s.is_client_error() => Answer::ClientError,
            Ok(_) => Answer::Ok,
            Err(_) => Answer::GatewayError,
        }
    }
}

/// A replica on 127.0.0.1 answering `status`, and its request count.
async fn replica(status: StatusCode) -> Result<(std::net::SocketAddr, Arc<AtomicU32>), Error> {
    let hits = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&hits);
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async move { status }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, hits))
}
