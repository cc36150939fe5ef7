//! trace_marker lines as a name and `key=value` fields.
//!
//! `txn_end vm=a vcpu=1` has the name `txn_end` (up to the first space) and
//! the fields `vm=a`, `vcpu=1`: every space-separated token of the rest that
//! holds an `=`, its key up to the first `=` and its value after it. Tokens
//! without `=` are free text and are not fields. The model writes the
//! fields as a JSON object (keys in line order, repeats kept).

/// One line parsed in a single pass: its name, its fields as a JSON object
/// (into `json`) and its first `vm=` and `vcpu=` values.
pub fn parse_line<'a>(
    text: &'a str,
    json: &mut String,
) -> (&'a str, Option<&'a str>, Option<&'a str>) {
    json.clear();
    parse_line_onto(text, json)
}

/// [`parse_line`], appending the JSON object to `json` (a column's value
/// buffer) instead of replacing its contents.
///
/// One pass over the bytes finds the token ends, the first `=` of each
/// token and whether it needs escaping: marker lines are short, and
/// setting up a search per token cost more than the search (this runs once
/// per transaction of a traced workload).
pub fn parse_line_onto<'a>(
    text: &'a str,
    json: &mut String,
) -> (&'a str, Option<&'a str>, Option<&'a str>) {
    let b = text.as_bytes();
    let name_end = b.iter().position(|&c| c == b' ').unwrap_or(b.len());
    let (mut vm, mut vcpu) = (None, None);
    json.reserve(b.len() - name_end + 8);
    json.push('{');
    let mut first = true;
    let (mut start, mut eq, mut escape) = (name_end + 1, None, false);
    for j in name_end + 1..=b.len() {
        let c = if j < b.len() { b[j] } else { b' ' };
        if c != b' ' {
            if c == b'=' && eq.is_none() {
                eq = Some(j);
            } else if c < 0x20 || c == b'"' || c == b'\\' {
                escape = true;
            }
            continue;
        }
        if let Some(e) = eq {
            // ' ' and '=' are ASCII, so these are char boundaries
            let (k, v) = (&text[start..e], &text[e + 1..j]);
            if !first {
                json.push(',');
            }
            first = false;
            if escape {
                json_str(json, k);
                json.push(':');
                json_str(json, v);
            } else {
                json.push('"');
                json.push_str(k);
                json.push_str("\":\"");
                json.push_str(v);
                json.push('"');
            }
            match k {
                "vm" if vm.is_none() => vm = Some(v),
                "vcpu" if vcpu.is_none() => vcpu = Some(v),
                _ => {}
            }
        }
        (start, eq, escape) = (j + 1, None, false);
    }
    json.push('}');
    (&text[..name_end], vm, vcpu)
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
        assert_eq!(
            parse_line("txn_end vm=a vcpu=1", &mut String::new()).0,
            "txn_end"
        );
        assert_eq!(parse_line("hello", &mut String::new()).0, "hello");
        assert_eq!(parse_line(" lead k=v", &mut String::new()).0, "");
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
        assert_eq!(
            parse_line("spin vcpu=2 vm=a vm=b", &mut j),
            ("spin", Some("a"), Some("2"))
        );
    }

    /// The obvious implementation, token by token, as the reference.
    fn reference(text: &str) -> (String, String, Option<String>, Option<String>) {
        let (name, rest) = text.split_once(' ').unwrap_or((text, ""));
        let (mut json, mut vm, mut vcpu) = (Vec::new(), None, None);
        for (k, v) in rest.split(' ').filter_map(|t| t.split_once('=')) {
            let (mut a, mut b) = (String::new(), String::new());
            json_str(&mut a, k);
            json_str(&mut b, v);
            json.push(format!("{a}:{b}"));
            match k {
                "vm" if vm.is_none() => vm = Some(v.to_string()),
                "vcpu" if vcpu.is_none() => vcpu = Some(v.to_string()),
                _ => {}
            }
        }
        (
            name.to_string(),
            format!("{{{}}}", json.join(",")),
            vm,
            vcpu,
        )
    }

    proptest::proptest! {
        #[test]
        fn one_pass_parse_equals_the_token_by_token_reference(text in "[a =\"\\\\\n\té]{0,24}|(vm|vcpu|k)=[a-c]{0,2}( (vm|vcpu|x)=[a=]{0,3})*") {
            let mut json = String::from("kept");
            let (name, vm, vcpu) = parse_line_onto(&text, &mut json);
            let (rname, rjson, rvm, rvcpu) = reference(&text);
            proptest::prop_assert_eq!(name, rname);
            proptest::prop_assert_eq!(json, format!("kept{rjson}"));
            proptest::prop_assert_eq!(vm.map(str::to_string), rvm);
            proptest::prop_assert_eq!(vcpu.map(str::to_string), rvcpu);
        }
    }
}
