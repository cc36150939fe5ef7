//! `trace_printk` (bprint) rendering.
//!
//! A bprint record stores the format string's kernel address (`fmt`) and
//! the arguments packed by the kernel's `vbin_printf` (`buf`): each integer
//! aligned to its size (8-byte values to 4), pointers as longs, strings
//! inline with their NUL. The format strings themselves are in the file's
//! printk section (`0xADDR : "text"` lines). [`render`] unpacks the
//! arguments by walking the format, then formats them like C's printf.

use crate::bytes::Endian;
use std::collections::HashMap;

/// Parse the printk section: address → format string (C escapes undone).
pub fn parse_printk_formats(text: &str) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim().trim_start_matches("0x"), 16) else {
            continue;
        };
        let rest = rest.trim();
        let body = rest
            .strip_prefix('"')
            .map(|r| r.strip_suffix('"').unwrap_or(r))
            .unwrap_or(rest);
        out.insert(addr, unescape(body));
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

enum Arg {
    Int(i64, u64),
    Str(String),
}

struct ArgReader<'a> {
    buf: &'a [u8],
    pos: usize,
    endian: Endian,
    long_size: usize,
}

impl ArgReader<'_> {
    fn int(&mut self, size: usize) -> Option<(i64, u64)> {
        let align = size.min(4);
        self.pos = self.pos.div_ceil(align) * align;
        let v = self.endian.uint(self.buf, self.pos, size)?;
        self.pos += size;
        let shift = 64 - 8 * size as u32;
        Some((((v << shift) as i64) >> shift, v))
    }
    fn string(&mut self) -> Option<String> {
        let rest = self.buf.get(self.pos..)?;
        let n = memchr::memchr(0, rest)?;
        self.pos += n + 1;
        Some(String::from_utf8_lossy(&rest[..n]).into_owned())
    }
}

fn pad(body: String, spec: &Spec, numeric: bool) -> String {
    let w = spec.width.unwrap_or(0);
    let len = body.chars().count();
    if len >= w {
        return body;
    }
    let fill = w - len;
    if spec.left {
        body + &" ".repeat(fill)
    } else if spec.zero && numeric && spec.prec.is_none() {
        let (sign, digits) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), body[1..].to_string()),
            _ => (String::new(), body.clone()),
        };
        let (prefix, digits) = match digits
            .strip_prefix("0x")
            .or_else(|| digits.strip_prefix("0X"))
        {
            Some(d) => (digits[..2].to_string(), d.to_string()),
            None => (String::new(), digits),
        };
        sign + &prefix + &"0".repeat(fill) + &digits
    } else {
        " ".repeat(fill) + &body
    }
}

fn with_precision(digits: String, prec: Option<usize>) -> String {
    match prec {
        Some(p) if digits.len() < p => "0".repeat(p - digits.len()) + &digits,
        Some(0) if digits == "0" => String::new(),
        _ => digits,
    }
}

/// Render a bprint record: `fmt` with arguments packed in `args`.
/// Missing or short arguments render as nothing rather than failing.
pub fn render(fmt: &str, args: &[u8], endian: Endian, long_size: usize) -> String {
    let mut rd = ArgReader {
        buf: args,
        pos: 0,
        endian,
        long_size,
    };
    let mut out = String::with_capacity(fmt.len() + 16);
    let b = fmt.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            let start = i;
            while i < b.len() && b[i] != b'%' {
                i += 1;
            }
            out.push_str(&fmt[start..i]);
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'%' {
            out.push('%');
            i += 1;
            continue;
        }
        let mut spec = Spec::default();
        while i < b.len() {
            match b[i] {
                b'-' => spec.left = true,
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                _ => break,
            }
            i += 1;
        }
        if i < b.len() && b[i] == b'*' {
            spec.width = rd.int(4).map(|(v, _)| v.max(0) as usize);
            i += 1;
        } else {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            spec.width = fmt[s..i].parse().ok();
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            if i < b.len() && b[i] == b'*' {
                spec.prec = rd.int(4).map(|(v, _)| v.max(0) as usize);
                i += 1;
            } else {
                let s = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                spec.prec = Some(fmt[s..i].parse().unwrap_or(0));
            }
        }
        let mut size = 4;
        let mut longs = 0;
        while i < b.len() && matches!(b[i], b'h' | b'l' | b'L' | b'z' | b'Z' | b'j' | b't' | b'q') {
            size = match b[i] {
                b'h' if size == 4 => 2,
                b'h' => 1,
                b'l' => {
                    // `l` is the kernel's long; `ll` is always 8 bytes
                    longs += 1;
                    if longs >= 2 {
                        8
                    } else {
                        rd.long_size
                    }
                }
                b'L' | b'q' | b'j' => 8,
                _ => rd.long_size,
            };
            i += 1;
        }
        let Some(&conv) = b.get(i) else { break };
        i += 1;
        let arg = match conv {
            b's' => rd.string().map(Arg::Str),
            b'p' => {
                // %p extensions (%pS, %pF...) read one pointer; skip their letters.
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                rd.int(rd.long_size).map(|(s, u)| Arg::Int(s, u))
            }
            b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'c' => {
                rd.int(size).map(|(s, u)| Arg::Int(s, u))
            }
            _ => None,
        };
        let Some(arg) = arg else {
            continue;
        };
        let text = match (conv, arg) {
            (b's', Arg::Str(s)) => {
                let s = match spec.prec {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                };
                pad(s, &spec, false)
            }
            (b'c', Arg::Int(_, u)) => pad(((u as u8) as char).to_string(), &spec, false),
            (b'd' | b'i', Arg::Int(s, _)) => {
                let digits = with_precision(s.unsigned_abs().to_string(), spec.prec);
                let sign = if s < 0 {
                    "-"
                } else if spec.plus {
                    "+"
                } else if spec.space {
                    " "
                } else {
                    ""
                };
                pad(format!("{sign}{digits}"), &spec, true)
            }
            (b'u', Arg::Int(_, u)) => pad(with_precision(u.to_string(), spec.prec), &spec, true),
            (b'x', Arg::Int(_, u)) => {
                let d = with_precision(format!("{u:x}"), spec.prec);
                pad(
                    if spec.alt && u != 0 {
                        format!("0x{d}")
                    } else {
                        d
                    },
                    &spec,
                    true,
                )
            }
            (b'X', Arg::Int(_, u)) => {
                let d = with_precision(format!("{u:X}"), spec.prec);
                pad(
                    if spec.alt && u != 0 {
                        format!("0X{d}")
                    } else {
                        d
                    },
                    &spec,
                    true,
                )
            }
            (b'o', Arg::Int(_, u)) => {
                let d = with_precision(format!("{u:o}"), spec.prec);
                pad(if spec.alt { format!("0{d}") } else { d }, &spec, true)
            }
            (b'p', Arg::Int(_, u)) => pad(format!("0x{u:x}"), &spec, true),
            _ => String::new(),
        };
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn renders_packed_arguments_like_printf() {
        // %d (4) | %s "ab\0" | pad to 4 | %llx (8, aligned to 4) | %5u
        let args = pack(&[
            &(-12i32).to_le_bytes(),
            b"ab\0",
            &[0],
            &0xdead_beefu64.to_le_bytes(),
            &42u32.to_le_bytes(),
        ]);
        let s = render("v=%d s=%s x=%llx u=%5u %%", &args, Endian::Little, 8);
        assert_eq!(s, "v=-12 s=ab x=deadbeef u=   42 %");
    }

    #[test]
    fn zero_padding_precision_and_long_size() {
        let args = pack(&[&7u32.to_le_bytes(), &0xffu32.to_le_bytes()]);
        assert_eq!(
            render(
                "[%04d][%#x][%-3d]",
                &[args.clone(), 5u32.to_le_bytes().to_vec()].concat(),
                Endian::Little,
                4
            ),
            "[0007][0xff][5  ]"
        );
        // %ld on a 32-bit kernel is 4 bytes, %lld always 8
        assert_eq!(render("%ld", &(-3i32).to_be_bytes(), Endian::Big, 4), "-3");
        assert_eq!(
            render("%lld", &(1u64 << 40).to_le_bytes(), Endian::Little, 4),
            "1099511627776"
        );
    }

    #[test]
    fn short_arguments_do_not_panic() {
        // the int cannot be read (2 bytes left); the string still can
        assert_eq!(
            render("a=%d b=%s", &[1, 0], Endian::Little, 8),
            "a= b=\u{1}"
        );
        assert_eq!(render("%", &[], Endian::Little, 8), "");
    }

    #[test]
    fn parses_the_printk_section() {
        let m = parse_printk_formats("0xffffffff81a0 : \"hello %d\\n\"\n0x10 : \"x\"\n");
        assert_eq!(m[&0xffffffff81a0], "hello %d\n");
        assert_eq!(m[&0x10], "x");
    }
}
