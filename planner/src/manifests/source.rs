//! Reading inputs: files, folders, standard input, and splitting texts into documents.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{Error, Location};

/// One input text and the name errors use for it.
pub(super) struct Input {
    pub(super) name: String,
    pub(super) text: String,
}

fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::Read {
        path: path.display().to_string(),
        source,
    }
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Files under `dir` with a manifest extension, recursively, hidden entries skipped.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| read_error(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| read_error(dir, e))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let file_type = entry.file_type().map_err(|e| read_error(&path, e))?;
        if file_type.is_dir() || (file_type.is_symlink() && path.is_dir()) {
            walk(&path, out)?;
        } else if is_manifest(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads every path: `-` is standard input, a folder contributes its manifest files in sorted
/// path order, anything else is read as a file whatever its extension.
pub(super) fn read_paths(paths: &[String]) -> Result<Vec<Input>, Error> {
    let mut out = Vec::new();
    for p in paths {
        if p == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| read_error(Path::new("<stdin>"), e))?;
            out.push(Input {
                name: "<stdin>".to_string(),
                text,
            });
            continue;
        }
        let path = Path::new(p);
        let meta = std::fs::metadata(path).map_err(|e| read_error(path, e))?;
        let files = if meta.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files)?;
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| read_error(&f, e))?;
            out.push(Input {
                name: f.display().to_string(),
                text,
            });
        }
    }
    Ok(out)
}

fn syntax(source: &str, document: usize, message: String) -> Error {
    Error::Syntax {
        location: Location {
            source: source.to_string(),
            document: Some(document),
            object: None,
        },
        message,
    }
}

/// How a text is to be read.
pub(super) enum Documents<'a> {
    /// JSON values, already parsed (a stream; a top-level array is one `List` document).
    Json(Vec<Value>),
    /// YAML documents, each to be parsed on its own.
    Yaml(Vec<Segment<'a>>),
}

/// One YAML document of a text.
pub(super) struct Segment<'a> {
    /// Lines before it in the text (for error positions).
    line_offset: usize,
    /// Its text, including its `---` line when it has one.
    text: &'a str,
}

/// Splits a text into documents. JSON when the source ends in `.json` or the text starts with
/// `{` or `[` and parses as JSON; YAML otherwise.
pub(super) fn documents<'a>(text: &'a str, source: &str) -> Result<Documents<'a>, Error> {
    let first = text.trim_start().chars().next();
    let is_json_file = source.ends_with(".json");
    if is_json_file || matches!(first, Some('{' | '[')) {
        let docs: Result<Vec<Value>, Error> = serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
            .map(|(i, v)| v.map_err(|e| syntax(source, i + 1, format!("invalid JSON: {e}"))))
            .collect();
        match docs {
            Ok(docs) => return Ok(Documents::Json(docs)),
            Err(e) if is_json_file => return Err(e),
            // A YAML flow mapping also starts with `{`: read it as YAML.
            Err(_) => {}
        }
    }
    Ok(Documents::Yaml(split_yaml(text)))
}

/// True for a `---` or `...` marker line (the marker followed by nothing or whitespace).
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.chars().next().is_none_or(char::is_whitespace))
}

/// True when a text has something besides blank lines, comments and directives.
fn has_content(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#') && !l.starts_with('%')
    })
}

/// Splits multi-document YAML at its document markers. A marker is only recognised at the
/// start of a line, where YAML allows nothing else (block scalar content is indented and flow
/// scalars may not contain `---` at column 0), so documents are found without parsing them.
/// A document starts at each `---`; text before the first `---` or after a `...` is a document
/// only when it has content.
fn split_yaml(text: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0usize;
    let mut explicit = false;
    let mut pos = 0usize;
    let mut push = |from: usize, to: usize, line: usize, explicit: bool| {
        let t = &text[from..to];
        if explicit || has_content(t) {
            out.push(Segment {
                line_offset: line,
                text: t,
            });
        }
    };
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        if is_marker(line, "---") {
            push(start, pos, start_line, explicit);
            (start, start_line, explicit) = (pos, line_no, true);
        } else if is_marker(line, "...") {
            push(start, pos, start_line, explicit);
            (start, start_line, explicit) = (pos + line.len(), line_no + 1, false);
        }
        pos += line.len();
    }
    push(start, text.len(), start_line, explicit);
    out
}

/// Parses one YAML document; `number` is its number in the text, for errors.
pub(super) fn parse_segment(
    seg: &Segment<'_>,
    number: usize,
    source: &str,
) -> Result<Option<Value>, Error> {
    let mut docs = serde_yaml::Deserializer::from_str(seg.text);
    let Some(doc) = docs.next() else {
        return Ok(None);
    };
    let value = Value::deserialize(doc).map_err(|e| {
        // serde_yaml counts lines from the start of the document: count from the file's.
        let mut message = e.to_string();
        if let (Some(loc), Some(at)) = (e.location(), message.rfind(" at line ")) {
            message.truncate(at);
            message = format!(
                "{message} at line {} column {}",
                loc.line() + seg.line_offset,
                loc.column()
            );
        }
        syntax(source, number, message)
    })?;
    if docs.next().is_some() {
        return Err(syntax(
            source,
            number,
            "more than one YAML document without a `---` line between them".to_string(),
        ));
    }
    Ok(document(value))
}

/// A parsed JSON value as a document.
pub(super) fn json_document(value: Value) -> Option<Value> {
    document(value)
}

fn document(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Array(items) => Some(as_list(items)),
        other => Some(other),
    }
}

/// A bare array of objects reads like a `v1 List`.
fn as_list(items: Vec<Value>) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}
