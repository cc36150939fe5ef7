//! Parser for ftrace `format` files.
//!
//! ```text
//! name: sched_switch (fields are tab-indented in the file)
//! ID: 316
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!     field:char prev_comm[16];    offset:8;    size:16;    signed:0;
//!
//! print fmt: "prev_comm=%s ..."
//! ```
//!
//! Fields whose names start with `common_` form the common header; the
//! rest are the event's own fields, which become table columns.

use super::field::FieldKind;

/// One field line of a format file.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldFormat {
    /// Field name (array brackets removed).
    pub name: String,
    /// The C declaration's type part, e.g. `unsigned long`, `__data_loc char[]`.
    pub c_type: String,
    /// Byte offset in the record payload.
    pub offset: usize,
    /// Byte size in the record (0 for a trailing dynamic array).
    pub size: usize,
    /// The `signed:` flag.
    pub signed: bool,
    /// Element count of a fixed array declared `name[N]`, if N is numeric.
    pub array_len: Option<usize>,
    /// Declared as an array (`[N]`, `[]` or symbolic).
    pub is_array: bool,
}

/// A parsed event format.
#[derive(Clone, Debug, PartialEq)]
pub struct EventFormat {
    /// Subsystem (directory), e.g. `sched`, `ftrace`.
    pub system: String,
    /// Event name.
    pub name: String,
    /// Event id (`common_type` value).
    pub id: u32,
    /// Common fields (`common_*`).
    pub common: Vec<FieldFormat>,
    /// The event's own fields, in format order.
    pub fields: Vec<FieldFormat>,
    /// The `print fmt:` text.
    pub print_fmt: String,
}

/// Why a format could not be parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct FormatError(pub String);

fn field_value<'a>(part: &'a str, key: &str) -> Option<&'a str> {
    part.trim().strip_prefix(key).map(str::trim)
}

/// Parse one field line (`field:...;\toffset:N;\tsize:N;\tsigned:N;`).
pub fn parse_field_line(line: &str) -> Result<FieldFormat, FormatError> {
    let mut parts = line.trim().split(';');
    let decl = parts
        .next()
        .and_then(|p| field_value(p, "field:"))
        .ok_or_else(|| FormatError(format!("bad field line {line:?}")))?;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for p in parts {
        if let Some(v) = field_value(p, "offset:") {
            offset = v.parse::<usize>().ok();
        } else if let Some(v) = field_value(p, "size:") {
            size = v.parse::<usize>().ok();
        } else if let Some(v) = field_value(p, "signed:") {
            signed = v == "1";
        }
    }
    let (offset, size) = match (offset, size) {
        (Some(o), Some(s)) => (o, s),
        _ => return Err(FormatError(format!("field without offset/size: {line:?}"))),
    };
    // Split "type name[len]" into type and name.
    let decl = decl.trim();
    let (head, array) = match decl.find('[') {
        Some(i) if decl.ends_with(']') => (&decl[..i], Some(&decl[i + 1..decl.len() - 1])),
        _ => (decl, None),
    };
    let head = head.trim();
    let split = head
        .rfind(|c: char| c.is_whitespace() || c == '*')
        .ok_or_else(|| FormatError(format!("no type in {decl:?}")))?;
    let name = head[split + 1..].trim().to_string();
    let mut c_type = head[..=split].trim().to_string();
    // `__data_loc char[] name` has the brackets on the type.
    let mut is_array = array.is_some();
    if c_type.ends_with("[]") {
        is_array = true;
    }
    let array_len = array.and_then(|a| a.trim().parse::<usize>().ok());
    if let Some(a) = array {
        if !c_type.contains("__data_loc") && !c_type.contains("__rel_loc") {
            c_type.push_str(&format!("[{a}]"));
        }
    }
    if name.is_empty() {
        return Err(FormatError(format!("no field name in {decl:?}")));
    }
    Ok(FieldFormat {
        name,
        c_type,
        offset,
        size,
        signed,
        array_len,
        is_array,
    })
}

/// Parse a whole format file of subsystem `system`.
pub fn parse_format(system: &str, text: &str) -> Result<EventFormat, FormatError> {
    let mut name = None;
    let mut id = None;
    let mut common = Vec::new();
    let mut fields = Vec::new();
    let mut print_fmt = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = v.trim().parse::<u32>().ok();
        } else if t.starts_with("field:") {
            let f = parse_field_line(t)?;
            if f.name.starts_with("common_") {
                common.push(f);
            } else {
                fields.push(f);
            }
        } else if let Some(v) = t.strip_prefix("print fmt:") {
            print_fmt = v.trim().to_string();
        }
    }
    let name = name.ok_or_else(|| FormatError("format has no name".into()))?;
    let id = id.ok_or_else(|| FormatError(format!("format of {name} has no ID")))?;
    Ok(EventFormat {
        system: system.to_string(),
        name,
        id,
        common,
        fields,
        print_fmt,
    })
}

/// What header_page says about the ring buffer's page header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderPage {
    /// Size of the `commit` field: the kernel's long size (4 or 8).
    pub commit_size: usize,
    /// Offset of `data`: where records start in a page.
    pub data_offset: usize,
}

/// Parse header_page text.
pub fn parse_header_page(text: &str) -> Result<HeaderPage, FormatError> {
    let mut commit = None;
    let mut data = None;
    for line in text.lines().filter(|l| l.trim().starts_with("field:")) {
        let f = parse_field_line(line)?;
        match f.name.as_str() {
            "commit" => commit = Some(f.size),
            "data" => data = Some(f.offset),
            _ => {}
        }
    }
    match (commit, data) {
        (Some(c @ (4 | 8)), Some(d)) => Ok(HeaderPage {
            commit_size: c,
            data_offset: d,
        }),
        (Some(c), _) if c != 4 && c != 8 => Err(FormatError(format!(
            "header_page commit size {c}, expected 4 or 8"
        ))),
        _ => Err(FormatError("header_page lacks commit or data field".into())),
    }
}

impl FieldFormat {
    /// How this field decodes, given the kernel long size.
    pub fn kind(&self, long_size: usize) -> FieldKind {
        FieldKind::classify(self, long_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch\nID: 316\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:const char * fmt;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:unsigned long args[TASK_LEN];\toffset:40;\tsize:16;\tsigned:0;\n\nprint fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn parses_fields_arrays_and_data_loc() {
        let f = parse_format("sched", SCHED_SWITCH).unwrap();
        assert_eq!(
            (f.name.as_str(), f.id, f.common.len(), f.fields.len()),
            ("sched_switch", 316, 4, 5)
        );
        let comm = &f.fields[0];
        assert_eq!(
            (
                comm.name.as_str(),
                comm.c_type.as_str(),
                comm.array_len,
                comm.size
            ),
            ("prev_comm", "char[16]", Some(16), 16)
        );
        assert_eq!(f.fields[1].c_type, "pid_t");
        assert!(f.fields[1].signed);
        assert_eq!(
            (f.fields[2].name.as_str(), f.fields[2].c_type.as_str()),
            ("name", "__data_loc char[]")
        );
        assert_eq!(
            (f.fields[3].name.as_str(), f.fields[3].c_type.as_str()),
            ("fmt", "const char *")
        );
        assert_eq!((f.fields[4].array_len, f.fields[4].is_array), (None, true));
        assert_eq!(f.print_fmt, "\"prev_comm=%s\", REC->prev_comm");
    }

    #[test]
    fn header_page_gives_kernel_long_size() {
        let hp64 = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
        assert_eq!(
            parse_header_page(hp64).unwrap(),
            HeaderPage {
                commit_size: 8,
                data_offset: 16
            }
        );
        let hp32 = hp64
            .replace("size:8;\tsigned:1", "size:4;\tsigned:1")
            .replace("offset:16", "offset:12");
        assert_eq!(
            parse_header_page(&hp32).unwrap(),
            HeaderPage {
                commit_size: 4,
                data_offset: 12
            }
        );
    }

    #[test]
    fn malformed_formats_are_errors_not_panics() {
        assert!(parse_format("x", "ID: 3\n").is_err());
        assert!(parse_format("x", "name: a\n").is_err());
        assert!(parse_field_line("field:int;\toffset:0;\tsize:4;").is_err());
        assert!(parse_field_line("field:int x;\toffset:zz;\tsize:4;").is_err());
    }
}
