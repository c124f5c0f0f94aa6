//! Reading inputs: files, folders, standard input, and splitting texts into documents.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

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

/// Files under `dir` with a manifest extension, recursively, hidden entries skipped. Only
/// regular files (and symlinks to them) are taken: a FIFO or a device named `x.yaml` in a folder
/// would block or never end. Each folder is entered once by its real (canonical) path, so a
/// symlink to an enclosing folder ends instead of looping.
fn walk(dir: &Path, seen: &mut HashSet<PathBuf>, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let real = std::fs::canonicalize(dir).map_err(|e| read_error(dir, e))?;
    if !seen.insert(real) {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| read_error(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| read_error(dir, e))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let file_type = entry.file_type().map_err(|e| read_error(&path, e))?;
        if file_type.is_dir() || (file_type.is_symlink() && path.is_dir()) {
            walk(&path, seen, out)?;
        } else if is_manifest(&path) && (file_type.is_file() || path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads at most `max_bytes` of `reader` as UTF-8; more is an error naming the limit, so that
/// `/dev/zero` or an endless pipe ends quickly instead of filling memory.
fn read_capped(reader: impl Read, path: &Path, max_bytes: u64) -> Result<String, Error> {
    let mut buf = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| read_error(path, e))?;
    if buf.len() as u64 > max_bytes {
        return Err(read_error(
            path,
            std::io::Error::other(format!(
                "input is larger than the limit of {max_bytes} bytes (--max-input-bytes)"
            )),
        ));
    }
    String::from_utf8(buf).map_err(|e| {
        read_error(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        )
    })
}

/// Reads every path: `-` is standard input, a folder contributes its regular manifest files in
/// sorted path order, anything else is read as a file whatever its extension (a named pipe
/// given explicitly is read; a device is refused). No more than `max_bytes` in all are read.
pub(super) fn read_paths(paths: &[String], max_bytes: u64) -> Result<Vec<Input>, Error> {
    let mut out = Vec::new();
    let mut left = max_bytes;
    // Real paths already read: a file reached twice (two symlinks, a folder given twice) is
    // read once.
    let mut files_seen = HashSet::new();
    for p in paths {
        if p == "-" {
            let text = read_capped(std::io::stdin().lock(), Path::new("<stdin>"), left)?;
            left -= text.len() as u64;
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
            walk(path, &mut HashSet::new(), &mut files)?;
            files.sort();
            files
        } else if meta.is_file() || is_fifo(&meta) {
            vec![path.to_path_buf()]
        } else {
            return Err(read_error(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file, folder or named pipe",
                ),
            ));
        };
        for f in files {
            if let Ok(real) = std::fs::canonicalize(&f)
                && !files_seen.insert(real)
            {
                continue;
            }
            let file = std::fs::File::open(&f).map_err(|e| read_error(&f, e))?;
            let text = read_capped(file, &f, left)?;
            left -= text.len() as u64;
            out.push(Input {
                name: f.display().to_string(),
                text,
            });
        }
    }
    Ok(out)
}

#[cfg(unix)]
fn is_fifo(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    meta.file_type().is_fifo()
}

#[cfg(not(unix))]
fn is_fifo(_: &std::fs::Metadata) -> bool {
    false
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

/// Deepest nesting of flow collections (`[`, `{`) a text may have. Kubernetes objects nest a
/// few dozen levels at most; the YAML parser's time grows with depth, so a hostile text is
/// refused before it is parsed.
pub(crate) const MAX_DEPTH: usize = 512;

/// The line (from 1) where `text` first nests flow collections deeper than `max`, else `None`.
/// A linear scan that skips quoted strings and comments; plain scalars holding brackets count
/// too, which errs towards refusing only texts far beyond any real object.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut chars = text.chars().peekable();
    let mut prev = '\n';
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '#' if prev.is_whitespace() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
                prev = '\n';
                continue;
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '\'' if !prev.is_alphanumeric() => {
                for c in chars.by_ref() {
                    match c {
                        '\'' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > max {
                    return Some(line);
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    None
}

/// One document of a text (or one item of a JSON `List`), not parsed yet.
pub(super) struct Unit<'a> {
    /// Document number in the text, from 1.
    pub(super) number: usize,
    /// Path prefix of the object in its document (`items[3].` for a List item).
    pub(super) prefix: String,
    body: Body<'a>,
}

enum Body<'a> {
    /// A YAML document: its text (with its `---` line) and the lines before it.
    Yaml { line_offset: usize, text: &'a str },
    /// A syntactically valid JSON value.
    Json(&'a str),
}

/// Shape of a JSON `List`, to split its items without building the whole value.
#[derive(Deserialize)]
struct ListShape<'a> {
    kind: Option<String>,
    #[serde(borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// Splits a text into units that can be parsed independently, in order. JSON when the source
/// ends in `.json` or the text starts with `{` or `[` and parses as JSON (a stream of values;
/// the items of a `List` or of a bare array are units of their own); YAML otherwise.
pub(super) fn units<'a>(text: &'a str, source: &str) -> Result<Vec<Unit<'a>>, Error> {
    let first = text.trim_start().chars().next();
    let is_json_file = source.ends_with(".json");
    if is_json_file || matches!(first, Some('{' | '[')) {
        let raws: Result<Vec<&RawValue>, Error> = serde_json::Deserializer::from_str(text)
            .into_iter::<&RawValue>()
            .enumerate()
            .map(|(i, v)| v.map_err(|e| syntax(source, i + 1, format!("invalid JSON: {e}"))))
            .collect();
        match raws {
            Ok(raws) => return Ok(json_units(&raws)),
            Err(e) if is_json_file => return Err(e),
            // A YAML flow mapping also starts with `{`: read it as YAML.
            Err(_) => {}
        }
    }
    Ok(split_yaml(text))
}

fn json_units<'a>(raws: &[&'a RawValue]) -> Vec<Unit<'a>> {
    let mut out = Vec::new();
    for (i, raw) in raws.iter().enumerate() {
        let number = i + 1;
        let text = raw.get();
        let items = match text.trim_start().as_bytes().first() {
            Some(b'[') => serde_json::from_str::<Vec<&RawValue>>(text).ok(),
            Some(b'{') => serde_json::from_str::<ListShape<'_>>(text)
                .ok()
                .filter(|l| l.kind.as_deref().is_some_and(|k| k.ends_with("List")))
                .and_then(|l| l.items),
            _ => None,
        };
        match items {
            Some(items) => out.extend(items.into_iter().enumerate().map(|(j, item)| Unit {
                number,
                prefix: format!("items[{j}]."),
                body: Body::Json(item.get()),
            })),
            None => out.push(Unit {
                number,
                prefix: String::new(),
                body: Body::Json(text),
            }),
        }
    }
    out
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
fn split_yaml(text: &str) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0usize;
    let mut explicit = false;
    let mut pos = 0usize;
    let mut push = |from: usize, to: usize, line: usize, explicit: bool| {
        let t = &text[from..to];
        if explicit || has_content(t) {
            out.push(Unit {
                number: out.len() + 1,
                prefix: String::new(),
                body: Body::Yaml {
                    line_offset: line,
                    text: t,
                },
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

/// Parses one unit; `None` for an empty document.
pub(super) fn parse_unit(unit: &Unit<'_>, source: &str) -> Result<Option<Value>, Error> {
    let (line_offset, text) = match unit.body {
        Body::Json(text) => {
            let super::strict::StrictValue(value) = serde_json::from_str(text)
                .map_err(|e| syntax(source, unit.number, format!("invalid JSON: {e}")))?;
            return Ok(document(value));
        }
        Body::Yaml { line_offset, text } => (line_offset, text),
    };
    if let Some(line) = too_deep(text, MAX_DEPTH) {
        return Err(syntax(
            source,
            unit.number,
            format!(
                "nesting deeper than {MAX_DEPTH} levels at line {}; no Kubernetes object nests this deep",
                line + line_offset
            ),
        ));
    }
    let mut docs = serde_yaml::Deserializer::from_str(text);
    let Some(doc) = docs.next() else {
        return Ok(None);
    };
    let value = super::strict::StrictValue::deserialize(doc)
        .map(|v| v.0)
        .map_err(|e| {
            // serde_yaml counts lines from the start of the document: count from the file's.
            let mut message = e.to_string();
            if let (Some(loc), Some(at)) = (e.location(), message.rfind(" at line ")) {
                message.truncate(at);
                message = format!(
                    "{message} at line {} column {}",
                    loc.line() + line_offset,
                    loc.column()
                );
            } else if let Some(line) = duplicate_line(text, &message) {
                // serde_yaml gives no position for the document's own mapping.
                message = format!("{message} at line {}", line + line_offset);
            }
            syntax(source, unit.number, message)
        })?;
    if docs.next().is_some() {
        return Err(syntax(
            source,
            unit.number,
            "more than one YAML document without a `---` line between them".to_string(),
        ));
    }
    Ok(document(value))
}

/// For `duplicate key "k"` without a position: the line (from 1) of the second top-level
/// `k:` of the document.
fn duplicate_line(text: &str, message: &str) -> Option<usize> {
    let key = message
        .strip_prefix("duplicate key \"")?
        .strip_suffix('"')?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .nth(1)
        .map(|(i, _)| i + 1)
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
