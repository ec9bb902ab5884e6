//! URLs as telemetry may show them: no userinfo, no query values, no
//! fragment.

use std::fmt;

use reqwest::Url;

/// Displays a URL with its userinfo dropped, each query value replaced by
/// `REDACTED` (the keys stay) and no fragment. Formatted only when an event
/// is actually recorded.
///
/// ```
/// use steadfast_http::RedactedUrl;
///
/// let url = reqwest::Url::parse("https://bob:hunter2@api.example/v1/users?token=abc&page=2#top")?;
/// assert_eq!(
///     RedactedUrl(&url).to_string(),
///     "https://api.example/v1/users?token=REDACTED&page=REDACTED"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RedactedUrl<'a>(pub &'a Url);

impl fmt::Display for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = self.0;
        write!(f, "{}:", url.scheme())?;
        if let Some(host) = url.host_str() {
            f.write_str("//")?;
            f.write_str(host)?;
            if let Some(port) = url.port() {
                write!(f, ":{port}")?;
            }
        }
        f.write_str(url.path())?;
        if let Some(query) = url.query() {
            f.write_str("?")?;
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    f.write_str("&")?;
                }
                match pair.split_once('=') {
                    Some((key, _)) => write!(f, "{key}=REDACTED")?,
                    None => f.write_str(pair)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_host_port_path_and_keys() {
        let url = Url::parse("http://127.0.0.1:8080/a/b?x=1&flag").expect("url");
        assert_eq!(
            RedactedUrl(&url).to_string(),
            "http://127.0.0.1:8080/a/b?x=REDACTED&flag"
        );
    }

    proptest! {
        #[test]
        fn secrets_never_appear(user in "[a-z]{1,8}", pass in "[A-Z]{6,12}", value in "[A-Z]{6,12}", frag in "[A-Z]{6,12}") {
            let url = Url::parse(&format!("https://{user}:{pass}@h.example/p?k={value}#{frag}")).expect("url");
            let shown = RedactedUrl(&url).to_string();
            prop_assert!(!shown.contains(&pass));
            prop_assert!(!shown.contains(&value));
            prop_assert!(!shown.contains(&frag));
            prop_assert!(!shown.contains('@'));
        }
    }
}
