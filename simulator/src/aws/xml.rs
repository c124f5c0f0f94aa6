//! A small XML writer for EC2 Query responses (`<CreateFleetResponse xmlns=…>`), with escaping.

use std::fmt::{Display, Write as _};

/// The EC2 API namespace of the responses.
pub(crate) const EC2_NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

/// An XML document being written.
#[derive(Debug, Default)]
pub(crate) struct Xml {
    out: String,
}

// === impl Xml ===

impl Xml {
    /// A response document `<{action}Response xmlns=…><requestId>…</requestId>…`; `body` writes
    /// the members.
    pub(crate) fn response(action: &str, request_id: &str, body: impl FnOnce(&mut Xml)) -> String {
        let mut x = Xml::default();
        x.out
            .push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = write!(x.out, "<{action}Response xmlns=\"{EC2_NAMESPACE}\">");
        x.leaf("requestId", request_id);
        body(&mut x);
        let _ = write!(x.out, "</{action}Response>");
        x.out
    }

    /// What was written.
    pub(crate) fn into_string(self) -> String {
        self.out
    }

    /// `<tag>…</tag>` with `body` inside.
    pub(crate) fn elem(&mut self, tag: &str, body: impl FnOnce(&mut Xml)) {
        let _ = write!(self.out, "<{tag}>");
        body(self);
        let _ = write!(self.out, "</{tag}>");
    }

    /// `<tag>value</tag>`, escaped.
    pub(crate) fn leaf(&mut self, tag: &str, value: impl Display) {
        let _ = write!(self.out, "<{tag}>");
        escape_into(&mut self.out, &value.to_string());
        let _ = write!(self.out, "</{tag}>");
    }

    /// Escaped text content.
    pub(crate) fn text(&mut self, value: impl Display) {
        escape_into(&mut self.out, &value.to_string());
    }

    /// `<tag>value</tag>` when there is a value.
    pub(crate) fn opt(&mut self, tag: &str, value: Option<impl Display>) {
        if let Some(v) = value {
            self.leaf(tag, v);
        }
    }

    /// `<tag><item>…</item>…</tag>`, EC2's list shape.
    pub(crate) fn list<T>(
        &mut self,
        tag: &str,
        items: impl IntoIterator<Item = T>,
        mut each: impl FnMut(&mut Xml, T),
    ) {
        self.elem(tag, |x| {
            for item in items {
                x.elem("item", |x| each(x, item));
            }
        });
    }

    /// `<tagSet><item><key>k</key><value>v</value></item>…</tagSet>`.
    pub(crate) fn tags<'a>(
        &mut self,
        tag: &str,
        tags: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) {
        self.list(tag, tags, |x, (k, v)| {
            x.leaf("key", k);
            x.leaf("value", v);
        });
    }
}

/// Escapes text for element content and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_escaped_lists() {
        let doc = Xml::response("CreateTags", "req-1", |x| {
            x.list("instanceIds", ["i-1", "a<b&c"], |x, id| x.leaf("id", id));
        });
        assert!(doc.contains("<CreateTagsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>req-1</requestId>"));
        assert!(doc.contains("<instanceIds><item><id>i-1</id></item><item><id>a&lt;b&amp;c</id></item></instanceIds>"), "{doc}");
    }
}
