//! Client-supplied strings (client ids, topic names, group and member ids, SASL user names) as
//! they go into log lines: cut to a fixed length, so one request cannot write kilobytes of its
//! own text into the log per line (docs/operating.md, "Logs").

use std::fmt;

/// The most bytes of one client-supplied string a log line shows.
pub const LOG_STRING_MAX_BYTES: usize = 128;

/// `text` for a log line: its first [`LOG_STRING_MAX_BYTES`] bytes, cut on a character boundary,
/// then the length of the whole when it was cut. Formats without allocating.
pub fn clip(text: &str) -> Clipped<'_> {
    Clipped(text)
}

/// See [`clip`].
#[derive(Clone, Copy)]
pub struct Clipped<'a>(&'a str);

impl Clipped<'_> {
    fn shown(&self) -> &str {
        let text = self.0;
        if text.len() <= LOG_STRING_MAX_BYTES {
            return text;
        }
        let mut end = LOG_STRING_MAX_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    }
}

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.shown();
        f.write_str(shown)?;
        if shown.len() < self.0.len() {
            write!(f, "…({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

/// Quoted and escaped, as `{:?}` shows a string, then the cut mark.
impl fmt::Debug for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.shown();
        write!(f, "{shown:?}")?;
        if shown.len() < self.0.len() {
            write!(f, "…({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_shown_whole() {
        assert_eq!(clip("orders").to_string(), "orders");
        assert_eq!(format!("{:?}", clip("a\"b")), "\"a\\\"b\"");
    }

    #[test]
    fn long_strings_are_cut_on_a_character_boundary_with_their_length() {
        let long = "é".repeat(1000); // 2 bytes each: 128 is a boundary, 127 is not
        let shown = clip(&long).to_string();
        assert!(shown.starts_with(&"é".repeat(64)), "{shown}");
        assert!(shown.ends_with("…(2000 bytes)"), "{shown}");
        let odd = format!("x{long}");
        let shown = clip(&odd).to_string();
        assert!(shown.len() <= LOG_STRING_MAX_BYTES + "…(2001 bytes)".len(), "{shown}");
        assert!(shown.ends_with("…(2001 bytes)"));
        assert!(format!("{:?}", clip(&long)).ends_with("\"…(2000 bytes)"));
    }
}
