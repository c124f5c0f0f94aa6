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

/// Splits a text into documents (`None` for an empty one). JSON when the source ends in
/// `.json` or the text starts with `{` or `[` (a stream of values; a top-level array is one
/// document whose elements are objects); YAML otherwise.
pub(super) fn documents(text: &str, source: &str) -> Result<Vec<Option<Value>>, Error> {
    let first = text.trim_start().chars().next();
    let looks_json = source.ends_with(".json") || matches!(first, Some('{' | '['));
    if looks_json {
        match json_documents(text, source) {
            Ok(docs) => return Ok(docs),
            Err(e) if source.ends_with(".json") => return Err(e),
            // A YAML flow mapping also starts with `{`: try YAML before giving up.
            Err(_) => {}
        }
    }
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| syntax(source, i + 1, e.to_string()))?;
        out.push(match value {
            Value::Null => None,
            Value::Array(items) => Some(as_list(items)),
            other => Some(other),
        });
    }
    Ok(out)
}

fn json_documents(text: &str, source: &str) -> Result<Vec<Option<Value>>, Error> {
    let mut out = Vec::new();
    for (i, v) in serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .enumerate()
    {
        let v = v.map_err(|e| syntax(source, i + 1, format!("invalid JSON: {e}")))?;
        out.push(match v {
            Value::Null => None,
            // A bare array of objects reads like a List.
            Value::Array(items) => Some(as_list(items)),
            other => Some(other),
        });
    }
    Ok(out)
}

/// A bare array of objects reads like a `v1 List`.
fn as_list(items: Vec<Value>) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}
