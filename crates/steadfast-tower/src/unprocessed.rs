//! Telling a request the server provably never processed from one it may
//! have: the one rule the HTTP client and the gRPC layer share for a
//! requeue over HTTP/2 (RFC 9113 §8.7, gRFC A6's transparent retry).

use std::error::Error;

/// Whether `error` carries, anywhere in its chain of sources, an HTTP/2
/// stream error the server sent for a request it never processed:
/// - the stream reset with `REFUSED_STREAM` (RFC 9113 §8.7: closed before
///   any processing, safe to send again);
/// - the stream left out by the server's `GOAWAY` (its id above the
///   frame's last stream id: h2 reports the `GOAWAY` received from the
///   peer on those streams alone; the streams at or below it run on, or
///   fail with another error).
///
/// A reset or `GOAWAY` the client itself sent, or any other error, says
/// nothing of what the server did: `false`. The walk down the chain is
/// bounded, so a cyclic or hostile chain ends it.
///
/// ```
/// use steadfast_tower::unprocessed;
/// // A reset the client made says nothing of the server.
/// assert!(!unprocessed(&h2::Error::from(h2::Reason::REFUSED_STREAM)));
/// assert!(!unprocessed(&std::io::Error::other("reset")));
/// ```
#[must_use]
pub fn unprocessed(error: &(dyn Error + 'static)) -> bool {
    let mut next = Some(error);
    for _ in 0..32 {
        let Some(e) = next else { return false };
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return h2.is_remote()
                && (h2.is_go_away()
                    || (h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM)));
        }
        next = e.source();
    }
    false
}
