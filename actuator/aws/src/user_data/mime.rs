//! MIME multipart archives as cloud-init and nodeadm read them: parse a node class's own
//! multipart user data into parts, and write parts out with Karpenter's boundary `//`.

/// The boundary of the archives written here (Karpenter's).
pub const BOUNDARY: &str = "//";
/// Content type of a nodeadm `NodeConfig` part.
pub const CONTENT_TYPE_NODE_CONFIG: &str = "application/node.eks.aws";
/// Content type of a shell script part.
pub const CONTENT_TYPE_SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// Errors reading a multipart archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The header block has no `Content-Type: multipart/...; boundary=...`.
    #[error("user data: MIME header has no multipart Content-Type with a boundary")]
    NoBoundary,
    /// A part has no blank line between its headers and its body.
    #[error("user data: MIME part {index} has no header/body separator")]
    BadPart {
        /// Index of the part, from 0.
        index: usize,
    },
}

/// One part of an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The part's `Content-Type`.
    pub content_type: String,
    /// The body, without the line break before the next boundary.
    pub body: String,
}

/// True when `text` looks like a MIME document (Karpenter's test: it starts with a MIME header).
pub fn is_mime(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("MIME-Version:") || t.starts_with("Content-Type:")
}

/// Splits a multipart archive into its parts.
///
/// # Errors
/// [`Error::NoBoundary`] when the header names no boundary, [`Error::BadPart`] for a part
/// without headers.
pub fn parse(text: &str) -> Result<Vec<Part>, Error> {
    let text = text.replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").ok_or(Error::NoBoundary)?;
    let boundary = header(head, "content-type")
        .filter(|ct| ct.to_ascii_lowercase().starts_with("multipart/"))
        .and_then(|ct| {
            ct.split(';').find_map(|p| {
                let p = p.trim();
                p.strip_prefix("boundary=")
                    .map(|b| b.trim_matches('"').to_string())
            })
        })
        .ok_or(Error::NoBoundary)?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in body.lines() {
        let l = line.trim_end();
        if l == delimiter || l == format!("{delimiter}--") {
            if let Some(lines) = current.take() {
                parts.push(read_part(&lines, parts.len())?);
            }
            if l.ends_with("--") && l != delimiter {
                break;
            }
            current = Some(Vec::new());
        } else if let Some(lines) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some(lines) = current.take()
        && lines.iter().any(|l| !l.trim().is_empty())
    {
        parts.push(read_part(&lines, parts.len())?);
    }
    Ok(parts)
}

fn read_part(lines: &[&str], index: usize) -> Result<Part, Error> {
    let split = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .ok_or(Error::BadPart { index })?;
    let head = lines[..split].join("\n");
    let content_type = header(&head, "content-type").unwrap_or_else(|| "text/plain".to_string());
    let mut body = lines[split + 1..].join("\n");
    while body.ends_with('\n') {
        body.pop();
    }
    Ok(Part { content_type, body })
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_string())
    })
}

/// Writes `parts` as one archive with boundary [`BOUNDARY`].
pub fn serialize(parts: &[Part]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n{}\n\n",
            p.content_type,
            p.body.trim_end_matches('\n')
        ));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_parts() {
        let parts = vec![
            Part {
                content_type: CONTENT_TYPE_SHELL.into(),
                body: "#!/bin/bash\necho hi".into(),
            },
            Part {
                content_type: CONTENT_TYPE_NODE_CONFIG.into(),
                body: "kind: NodeConfig".into(),
            },
        ];
        let text = serialize(&parts);
        assert!(is_mime(&text));
        assert_eq!(parse(&text).unwrap(), parts);
    }

    #[test]
    fn reads_another_boundary_and_crlf() {
        let text = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\r\n\r\n--BOUNDARY\r\nContent-Type: text/x-shellscript\r\n\r\necho one\r\n--BOUNDARY--\r\n";
        assert_eq!(
            parse(text).unwrap(),
            vec![Part {
                content_type: "text/x-shellscript".into(),
                body: "echo one".into()
            }]
        );
    }

    #[test]
    fn names_a_missing_boundary() {
        assert_eq!(
            parse("MIME-Version: 1.0\nContent-Type: text/plain\n\nhello"),
            Err(Error::NoBoundary)
        );
    }
}
