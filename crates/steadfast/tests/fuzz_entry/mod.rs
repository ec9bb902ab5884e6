//! The entry points of the fuzz targets in `fuzz/`, shared with the proptest
//! in `deadline_decoders.rs` so the same code runs on stable too (cargo-fuzz
//! needs nightly). Each panics only when a property is broken.

use std::time::Duration;

use steadfast::deadline::{DeadlineHeader, GrpcTimeout, HeaderFormat};

/// Decodes `data` as a `grpc-timeout` value; what decodes must re-encode to
/// the same value and stay within the header's maximum.
pub fn grpc_timeout(data: &[u8]) {
    let parsed = GrpcTimeout::parse(data);
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(text.parse::<GrpcTimeout>(), parsed);
    }
    if let Ok(timeout) = parsed {
        assert!(timeout.to_duration() <= GrpcTimeout::MAX.to_duration());
        assert_eq!(
            GrpcTimeout::parse(timeout.to_text().as_bytes()),
            Ok(timeout)
        );
        let again = GrpcTimeout::from_duration(timeout.to_duration()).to_duration();
        assert_eq!(again, timeout.to_duration());
    }
}

/// Decodes `data` with every header format, and tries it as a header name;
/// what decodes must round-trip through the encoder unchanged.
pub fn deadline_header(data: &[u8]) {
    for format in [HeaderFormat::GrpcTimeout, HeaderFormat::Milliseconds] {
        let header = DeadlineHeader::new("x-fuzz", format).expect("a valid header name");
        if let Ok(left) = header.decode(data) {
            let encoded = header.encode(left);
            assert_eq!(header.decode(encoded.as_bytes()), Ok(left));
            assert!(left <= Duration::from_secs(u64::MAX / 1000));
        }
    }
    let name = String::from_utf8_lossy(data).into_owned();
    if let Ok(header) = DeadlineHeader::new(name, HeaderFormat::GrpcTimeout) {
        assert!(!header.name().is_empty());
        assert!(!header.name().bytes().any(|b| b.is_ascii_uppercase()));
        assert!(header.name().bytes().all(|b| b.is_ascii_graphic()));
    }
}
