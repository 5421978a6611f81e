//! Parsing collection files (JSONL and CSV) into [`Exhibit`]s. Pure apart from reading the
//! given reader: every bad row is rejected with its line number and the reason, the good rows
//! are kept.
//!
//! Field names: the canonical names of [`Exhibit`] or the names of the shared demo data
//! (`artist_or_maker`, `culture_or_period`, `gallery_or_department`) and a few common aliases.
//! Any other field goes to `extra` (its string values are indexed, e.g. `aliases`, `tags`).

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Exhibit;

/// Longest accepted line of a JSONL file.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 100_000;
/// Longest value of any other field, in characters.
pub const MAX_FIELD_CHARS: usize = 2_000;
/// Longest id, in characters.
pub const MAX_ID_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// 1-based line number in the file (for CSV: the line the record starts on).
    pub line: u64,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Parsed {
    /// Good rows with their line numbers, in file order.
    pub rows: Vec<(u64, Exhibit)>,
    pub rejected: Vec<Rejected>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// By file extension: `.jsonl`/`.ndjson` or `.csv`.
    pub fn for_path(path: &Path) -> Result<Format, String> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("jsonl" | "ndjson") => Ok(Format::Jsonl),
            Some("csv") => Ok(Format::Csv),
            _ => Err(format!(
                "{}: unsupported file type (expected .jsonl, .ndjson or .csv)",
                path.display()
            )),
        }
    }
}

/// (field, accepted names in order of preference)
const FIELDS: &[(&str, &[&str])] = &[
    (
        "id",
        &[
            "id",
            "object_id",
            "identifier",
            "object_number",
            "accession_number",
        ],
    ),
    ("title", &["title", "name", "object_name"]),
    (
        "maker",
        &["maker", "artist_or_maker", "artist", "creator", "author"],
    ),
    ("date", &["date", "dated", "date_made", "year", "made"]),
    (
        "period",
        &["period", "culture_or_period", "culture", "dynasty"],
    ),
    ("medium", &["medium", "material", "materials"]),
    ("dimensions", &["dimensions", "size"]),
    (
        "gallery",
        &["gallery", "gallery_or_department", "department"],
    ),
    (
        "description",
        &["description", "notes", "label_text", "summary"],
    ),
    ("language", &["language", "lang"]),
    ("source", &["source"]),
    ("license", &["license", "licence"]),
];

fn scalar(name: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.trim().to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("field `{name}` must be a string")),
    }
}

/// Builds an exhibit from one row's fields, or says why the row is refused.
pub fn exhibit_from_map(mut map: Map<String, Value>) -> Result<Exhibit, String> {
    let mut vals: HashMap<&str, String> = HashMap::new();
    for (field, names) in FIELDS {
        let mut chosen = String::new();
        for name in *names {
            if let Some(v) = map.remove(*name) {
                let s = scalar(name, &v)?;
                if chosen.is_empty() {
                    chosen = s;
                }
            }
        }
        let max = match *field {
            "description" => MAX_DESCRIPTION_CHARS,
            "id" => MAX_ID_CHARS,
            _ => MAX_FIELD_CHARS,
        };
        let n = chosen.chars().count();
        if n > max {
            return Err(format!(
                "field `{field}` is too long ({n} characters, at most {max})"
            ));
        }
        vals.insert(field, chosen);
    }
    let id = vals.remove("id").unwrap_or_default();
    if id.is_empty() {
        return Err("missing `id`".into());
    }
    if id.chars().any(|c| c.is_control()) {
        return Err("`id` contains control characters".into());
    }
    let title = vals.remove("title").unwrap_or_default();
    if title.is_empty() {
        return Err("missing `title`".into());
    }
    let mut extra = Map::new();
    if let Some(v) = map.remove("extra") {
        match v {
            Value::Object(m) => extra.extend(m),
            Value::Null => {}
            _ => return Err("field `extra` must be an object".into()),
        }
    }
    for (k, v) in map {
        if !(v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty())) {
            extra.insert(k, v);
        }
    }
    let extra_len = Value::Object(extra.clone()).to_string().chars().count();
    if extra_len > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "extra fields are too long ({extra_len} characters, at most {MAX_DESCRIPTION_CHARS})"
        ));
    }
    let mut take = |k: &str| vals.remove(k).unwrap_or_default();
    let mut e = Exhibit {
        id,
        title,
        maker: take("maker"),
        date: take("date"),
        period: take("period"),
        medium: take("medium"),
        dimensions: take("dimensions"),
        gallery: take("gallery"),
        description: take("description"),
        language: take("language"),
        source: take("source"),
        license: take("license"),
        extra,
    };
    if e.language.is_empty() {
        let cjk = format!("{}{}", e.title, e.description)
            .chars()
            .any(super::text::is_cjk);
        e.language = if cjk { "zh" } else { "en" }.into();
    }
    Ok(e)
}

fn keep(parsed: &mut Parsed, seen: &mut HashMap<String, u64>, line: u64, e: Exhibit) {
    if let Some(first) = seen.get(&e.id) {
        parsed.rejected.push(Rejected {
            line,
            reason: format!("duplicate id `{}` (first on line {first})", e.id),
        });
        return;
    }
    seen.insert(e.id.clone(), line);
    parsed.rows.push((line, e));
}

/// One JSON object a line; blank lines are skipped. Only an I/O error fails the whole file.
pub fn parse_jsonl(mut reader: impl BufRead) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut seen = HashMap::new();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        // Read at most one byte past the limit, so a huge line costs bounded memory.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.len() > MAX_LINE_BYTES && !buf.ends_with(b"\n") {
            // Skip the rest of the over-long line.
            loop {
                let mut rest = Vec::new();
                let m = (&mut reader).take(64 * 1024).read_until(b'\n', &mut rest)?;
                if m == 0 || rest.ends_with(b"\n") {
                    break;
                }
            }
            parsed.rejected.push(Rejected {
                line: line_no,
                reason: format!("line longer than {MAX_LINE_BYTES} bytes"),
            });
            continue;
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            parsed.rejected.push(Rejected {
                line: line_no,
                reason: "not valid UTF-8".into(),
            });
            continue;
        };
        let text = text.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            continue;
        }
        let row = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => exhibit_from_map(m),
            Ok(_) => Err("not a JSON object".to_string()),
            Err(e) => Err(format!("invalid JSON: {e}")),
        };
        match row {
            Ok(e) => keep(&mut parsed, &mut seen, line_no, e),
            Err(reason) => parsed.rejected.push(Rejected {
                line: line_no,
                reason,
            }),
        }
    }
    Ok(parsed)
}

/// A header row, then one exhibit a record. Empty cells are absent fields; columns that are not
/// exhibit fields go to `extra`. A malformed record is rejected; an I/O error fails the file.
pub fn parse_csv(reader: impl Read) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut seen = HashMap::new();
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(reader);
    let headers = match rdr.headers() {
        Ok(h) => h
            .iter()
            // "Date made", "Date-made" and "date_made" are one header.
            .map(|h| {
                h.trim_start_matches('\u{feff}')
                    .trim()
                    .to_ascii_lowercase()
                    .replace([' ', '-'], "_")
            })
            .collect::<Vec<_>>(),
        Err(e) => return Err(csv_io(e, 1, &mut parsed)),
    };
    if headers.is_empty() || headers.iter().all(|h| h.is_empty()) {
        parsed.rejected.push(Rejected {
            line: 1,
            reason: "no header row".into(),
        });
        return Ok(parsed);
    }
    let mut record = csv::StringRecord::new();
    loop {
        let line = rdr.position().line() + 1;
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let line = record.position().map_or(line, |p| p.line());
                let mut map = Map::new();
                for (h, v) in headers.iter().zip(record.iter()) {
                    if !h.is_empty() && !v.trim().is_empty() {
                        map.insert(h.clone(), Value::String(v.to_string()));
                    }
                }
                if map.is_empty() {
                    continue;
                }
                match exhibit_from_map(map) {
                    Ok(e) => keep(&mut parsed, &mut seen, line, e),
                    Err(reason) => parsed.rejected.push(Rejected { line, reason }),
                }
            }
            Err(e) => {
                let at = e.position().map_or(line, |p| p.line());
                if let csv::ErrorKind::Io(_) = e.kind() {
                    return Err(csv_io(e, at, &mut parsed));
                }
                parsed.rejected.push(Rejected {
                    line: at,
                    reason: csv_reason(&e),
                });
                // After a UTF-8 or length error the reader continues with the next record.
            }
        }
    }
    Ok(parsed)
}

fn csv_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("expected {expected_len} fields, found {len}"),
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".into(),
        _ => e.to_string(),
    }
}

fn csv_io(e: csv::Error, line: u64, parsed: &mut Parsed) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io,
        other => {
            let reason = format!("{other:?}");
            parsed.rejected.push(Rejected {
                line,
                reason: reason.clone(),
            });
            std::io::Error::new(std::io::ErrorKind::InvalidData, reason)
        }
    }
}

/// Parses a file by its extension.
pub fn parse_file(path: &Path) -> Result<Parsed, String> {
    let format = Format::for_path(path)?;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let reader = std::io::BufReader::new(file);
    match format {
        Format::Jsonl => parse_jsonl(reader),
        Format::Csv => parse_csv(reader),
    }
    .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// A digest of the exhibit's content and the analyzer version: re-ingesting an unchanged row
/// is a no-op, and a new analyzer re-indexes everything.
pub fn content_hash(e: &Exhibit) -> String {
    let mut h = Sha256::new();
    h.update(super::text::ANALYZER_VERSION.as_bytes());
    h.update([0]);
    h.update(serde_json::to_vec(e).unwrap_or_default());
    hex::encode(&h.finalize()[..16])
}

/// SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_keeps_good_rows_and_names_bad_lines() {
        let input = concat!(
            r#"{"id": "a1", "title": "Jar", "artist_or_maker": "Potter", "culture_or_period": "Ming", "aliases": ["vase"]}"#,
            "\n\n",
            "{not json\n",
            "[1, 2]\n",
            r#"{"id": "", "title": "No id"}"#,
            "\n",
            r#"{"id": "a2"}"#,
            "\n",
            r#"{"id": "a3", "title": ["x"]}"#,
            "\n",
            r#"{"id": "a1", "title": "Again"}"#,
            "\n",
            r#"{"id": "a4", "title": "碑", "description": "唐代墓誌", "year": 1990}"#,
        );
        let p = parse_jsonl(input.as_bytes()).unwrap();
        let ids: Vec<_> = p.rows.iter().map(|(l, e)| (*l, e.id.as_str())).collect();
        assert_eq!(ids, vec![(1, "a1"), (9, "a4")]);
        let a1 = &p.rows[0].1;
        assert_eq!((a1.maker.as_str(), a1.period.as_str()), ("Potter", "Ming"));
        assert_eq!(a1.extra["aliases"], serde_json::json!(["vase"]));
        assert_eq!(a1.language, "en");
        assert_eq!(p.rows[1].1.language, "zh");
        assert_eq!(p.rows[1].1.date, "1990", "`year` is a date");
        let bad: Vec<_> = p
            .rejected
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(bad[0].0, 3);
        assert!(bad[0].1.starts_with("invalid JSON"), "{bad:?}");
        assert_eq!(bad[1], (4, "not a JSON object"));
        assert_eq!(bad[2], (5, "missing `id`"));
        assert_eq!(bad[3], (6, "missing `title`"));
        assert_eq!(bad[4], (7, "field `title` must be a string"));
        assert_eq!(bad[5], (8, "duplicate id `a1` (first on line 1)"));
    }

    #[test]
    fn jsonl_rejects_invalid_utf8_and_huge_lines_and_goes_on() {
        let mut input = b"{\"id\": \"x\", \"title\": \"\xff\"}\n".to_vec();
        input.extend(vec![b' '; MAX_LINE_BYTES + 10]);
        input.extend(b"\n{\"id\": \"ok\", \"title\": \"Fine\"}\n");
        let p = parse_jsonl(&input[..]).unwrap();
        assert_eq!(p.rows.len(), 1);
        assert_eq!(p.rows[0].0, 3);
        assert_eq!(p.rejected[0].line, 1);
        assert_eq!(p.rejected[0].reason, "not valid UTF-8");
        assert_eq!(p.rejected[1].line, 2);
        assert!(p.rejected[1].reason.contains("longer than"));
    }

    #[test]
    fn too_long_fields_are_rejected() {
        let long = "x".repeat(MAX_FIELD_CHARS + 1);
        let line = serde_json::json!({"id": "a", "title": long}).to_string();
        let p = parse_jsonl(line.as_bytes()).unwrap();
        assert!(p.rejected[0].reason.contains("`title` is too long"));
    }

    #[test]
    fn common_csv_headers_map_to_fields() {
        let input = "Object Number,Title,Artist,Date made,Notes,Gallery\n\
                     M-1,Vase,Anon,1750,A blue vase.,Room 3\n";
        let p = parse_csv(input.as_bytes()).unwrap();
        let e = &p.rows[0].1;
        assert_eq!(
            (&*e.id, &*e.maker, &*e.date, &*e.description, &*e.gallery),
            ("M-1", "Anon", "1750", "A blue vase.", "Room 3")
        );
        let p = parse_csv("id,title,Year\nb,Bowl,1900\n".as_bytes()).unwrap();
        assert_eq!(p.rows[0].1.date, "1900");
    }

    #[test]
    fn csv_rows_with_quotes_extra_columns_and_errors() {
        let input = "id,title,maker,description,tags\n\
                     c1,\"Bowl, blue\",Anon,\"A \"\"fine\"\" bowl.\nSecond line.\",ceramic\n\
                     c2,Cup\n\
                     ,Nameless,,,\n\
                     c3,Plate,,,\n";
        let p = parse_csv(input.as_bytes()).unwrap();
        assert_eq!(p.rows.len(), 2, "{:?}", p.rejected);
        let c1 = &p.rows[0].1;
        assert_eq!(c1.title, "Bowl, blue");
        assert_eq!(c1.description, "A \"fine\" bowl.\nSecond line.");
        assert_eq!(c1.extra["tags"], "ceramic");
        assert_eq!(p.rows[0].0, 2);
        assert_eq!(p.rows[1].1.id, "c3");
        assert_eq!(p.rows[1].0, 6);
        assert_eq!(
            p.rejected,
            vec![
                Rejected {
                    line: 4,
                    reason: "expected 5 fields, found 2".into()
                },
                Rejected {
                    line: 5,
                    reason: "missing `id`".into()
                },
            ]
        );
    }

    #[test]
    fn format_by_extension() {
        assert_eq!(Format::for_path(Path::new("a.JSONL")), Ok(Format::Jsonl));
        assert_eq!(Format::for_path(Path::new("a.csv")), Ok(Format::Csv));
        assert!(Format::for_path(Path::new("a.xlsx")).is_err());
    }

    #[test]
    fn content_hash_changes_with_content_only() {
        let e = Exhibit {
            id: "a".into(),
            title: "T".into(),
            ..Default::default()
        };
        let mut f = e.clone();
        assert_eq!(content_hash(&e), content_hash(&f));
        f.description = "new".into();
        assert_ne!(content_hash(&e), content_hash(&f));
    }
}
