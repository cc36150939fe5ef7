//! trace_marker lines as a name and `key=value` fields.
//!
//! `txn_end vm=a vcpu=1` has the name `txn_end` (up to the first space) and
//! the fields `vm=a`, `vcpu=1`: every space-separated token of the rest that
//! holds an `=`, its key up to the first `=` and its value after it. Tokens
//! without `=` are free text and are not fields. The model writes the
//! fields as a JSON object (keys in line order, repeats kept).

/// Name and the text after it ("" when the line has no space).
pub fn split_name(text: &str) -> (&str, &str) {
    text.split_once(' ').unwrap_or((text, ""))
}

/// The `key=value` tokens of the text after the name.
pub fn fields(rest: &str) -> impl Iterator<Item = (&str, &str)> {
    // memchr over the bytes: str's char searchers cost more in setting up
    // than in searching on lines this short.
    let mut toks = rest.as_bytes().split(|&b| b == b' ');
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let tok = toks.next()?;
        let start = at;
        at += tok.len() + 1;
        if let Some(eq) = memchr::memchr(b'=', tok) {
            // ' ' and '=' are ASCII, so these are char boundaries
            return Some((&rest[start..start + eq], &rest[start + eq + 1..start + tok.len()]));
        }
    })
}

/// One line parsed in a single pass: its name, its fields as a JSON object
/// (into `json`) and its first `vm=` and `vcpu=` values.
pub fn parse_line<'a>(text: &'a str, json: &mut String) -> (&'a str, Option<&'a str>, Option<&'a str>) {
    let (name, rest) = split_name(text);
    let (mut vm, mut vcpu) = (None, None);
    json.clear();
    json.push('{');
    let mut first = true;
    for (k, v) in fields(rest) {
        if !first {
            json.push(',');
        }
        first = false;
        json_str(json, k);
        json.push(':');
        json_str(json, v);
        match k {
            "vm" if vm.is_none() => vm = Some(v),
            "vcpu" if vcpu.is_none() => vcpu = Some(v),
            _ => {}
        }
    }
    json.push('}');
    (name, vm, vcpu)
}

/// Append `s` as a JSON string.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // the common case: nothing to escape
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> String {
        let mut s = String::new();
        parse_line(text, &mut s);
        s
    }

    #[test]
    fn name_fields_and_free_text() {
        assert_eq!(split_name("txn_end vm=a vcpu=1"), ("txn_end", "vm=a vcpu=1"));
        assert_eq!(split_name("hello"), ("hello", ""));
        assert_eq!(json("txn_end vm=a vcpu=1"), r#"{"vm":"a","vcpu":"1"}"#);
        assert_eq!(json("phase starting now k=v"), r#"{"k":"v"}"#);
        assert_eq!(json("x a=b=c =v k="), r#"{"a":"b=c","":"v","k":""}"#);
        assert_eq!(json("x  k=v"), r#"{"k":"v"}"#);
        assert_eq!(json("lonely"), "{}");
        assert_eq!(json("x q=\"a\\b\"\tz"), r#"{"q":"\"a\\b\"\tz"}"#);
    }

    #[test]
    fn vm_and_vcpu_come_from_tokens_after_the_name() {
        fn vm_vcpu(text: &str) -> (Option<&str>, Option<&str>) {
            let (_, vm, vcpu) = parse_line(text, &mut String::new());
            (vm, vcpu)
        }
        assert_eq!(vm_vcpu("txn_end vm=a vcpu=12 n=3").1, Some("12"));
        assert_eq!(vm_vcpu("txn_end vm=a vcpu=12").0, Some("a"));
        assert_eq!(vm_vcpu("vm=x other").0, None);
        assert_eq!(vm_vcpu("x xvm=1 vm=2").0, Some("2"));
        assert_eq!(vm_vcpu("x vm=").0, Some(""));
        assert_eq!(vm_vcpu("x vmx=1").0, None);
        let mut j = String::new();
        assert_eq!(parse_line("spin vcpu=2 vm=a vm=b", &mut j), ("spin", Some("a"), Some("2")));
    }
}
