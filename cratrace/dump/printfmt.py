"""The kernel's print formats, applied to an event's fields.

Every ftrace event's format file ends with a ``print fmt:`` line: a C
printf format and the C expressions of its arguments, e.g. sched_wakeup's

    "comm=%s pid=%d prio=%d target_cpu=%03d", REC->comm, REC->pid, ...

or kvm_exit's ternaries over ``__print_symbolic(REC->exit_reason, ...)``.
`compile_print_fmt` parses such a line once per event type into a
function from a row (field name → value, as the capture's Parquet holds
them) to the text `trace-cmd report` shows, evaluating the expressions as
libtraceevent does: arithmetic on integers, the length modifiers of the
conversion deciding width and sign (``%u`` of -1 is 4294967295, ``%lx`` is
the kernel's long), ``__print_symbolic`` / ``__print_flags`` tables
(``0x...`` when no entry matches), ``__get_str``, ``__print_hex``,
``__print_array`` and ``%ps``-style symbols from the capture's symbol map.

A format that uses a construct not covered here (statement expressions,
helpers only the kernel knows) raises `PrintFmtError` at compile time; the
caller then prints the raw fields instead (`raw_fields`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

Row = Mapping[str, Any]
Renderer = Callable[[Row], str]


class PrintFmtError(ValueError):
    """A print format this module cannot evaluate (the reason says what)."""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<chr>'(?:[^'\\]|\\.)')
    | (?P<num>0[xX][0-9a-fA-F]+|\d+)[uUlL]*
    | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
    | (?P<op>->|<<|>>|==|!=|<=|>=|&&|\|\||[-+*/%&|^~!<>?:(){}\[\],.])
    )""",
    re.X,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(body: str) -> str:
    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", lambda m: _esc(m.group(1)), body)


def _esc(code: str) -> str:
    if code[0] == "x":
        return chr(int(code[1:], 16))
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _ESCAPES.get(code, code)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise PrintFmtError(f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "str":
            out.append(("str", _unescape(m.group("str")[1:-1])))
        elif kind == "chr":
            out.append(("num", ord(_unescape(m.group("chr")[1:-1]))))
        elif kind == "num":
            out.append(("num", int(m.group("num"), 0) if not re.fullmatch(r"0\d+", m.group("num")) else int(m.group("num"), 8)))
        elif kind == "id":
            out.append(("id", m.group("id")))
        else:
            out.append(("op", m.group("op")))
    out.append(("end", None))
    return out


# Type names a parenthesised cast may be made of.
_TYPE_WORDS = {
    "unsigned", "signed", "int", "long", "short", "char", "bool", "_Bool", "void", "const", "volatile",
    "struct", "enum", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
    "__u8", "__u16", "__u32", "__u64", "__s8", "__s16", "__s32", "__s64", "__le16", "__le32", "__le64", "__be16", "__be32", "__be64",
}

# Binary operators by precedence (higher binds tighter), as in C.
_BINARY = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}

_M64 = (1 << 64) - 1


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "||": lambda a, b: int(bool(a) or bool(b)),
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "<<": lambda a, b: (a << b) & _M64,
    ">>": lambda a, b: a >> b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _cdiv,
    "%": lambda a, b: a - _cdiv(a, b) * b if b else 0,
}


class _Sym:
    """What ``%ps``-style conversions print: the name of an address."""

    def __init__(self, symbols: Mapping[int, str]):
        self.symbols = symbols


class _Parser:
    """Recursive descent over the tokens of a print fmt's argument list;
    each expression becomes a closure ``row -> value``."""

    def __init__(self, tokens: list[tuple[str, Any]], long_size: int):
        self.t = tokens
        self.i = 0
        self.long_size = long_size

    def peek(self, k: int = 0) -> tuple[str, Any]:
        return self.t[min(self.i + k, len(self.t) - 1)]

    def take(self, kind: str | None = None, value: Any = None) -> tuple[str, Any]:
        tok = self.peek()
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise PrintFmtError(f"expected {value or kind}, found {tok[1]!r}")
        self.i += 1
        return tok

    def at(self, value: str) -> bool:
        return self.peek()[0] == "op" and self.peek()[1] == value

    # expression := ternary
    def expr(self) -> Callable[[Row], Any]:
        cond = self.binary(0)
        if self.at("?"):
            self.take()
            yes = self.expr()
            self.take("op", ":")
            no = self.expr()
            if isinstance(cond, _Const):
                return yes if _truth(cond.value) else no
            return lambda r: yes(r) if _truth(cond(r)) else no(r)
        return cond

    def binary(self, floor: int) -> Callable[[Row], Any]:
        left = self.unary()
        while True:
            tok = self.peek()
            prec = _BINARY.get(tok[1]) if tok[0] == "op" else None
            if prec is None or prec <= floor:
                return left
            self.take()
            right = self.binary(prec)
            left = _binary(_OPS[tok[1]], left, right)

    def unary(self) -> Callable[[Row], Any]:
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("-", "~", "!", "+", "&", "*"):
            self.take()
            inner = self.unary()
            f = {
                "-": lambda r: -_int(inner(r)),
                "~": lambda r: ~_int(inner(r)) & _M64,
                "!": lambda r: int(not _truth(inner(r))),
            }.get(tok[1], inner)  # unary + and the address/deref of a field: the value
            return _Const(f({})) if isinstance(inner, _Const) else f
        if tok == ("op", "(") and self._is_cast():
            self.take()
            words = []
            while not self.at(")"):
                words.append(str(self.take()[1]))
            self.take("op", ")")
            inner = self.unary()
            cast = _cast(words, inner, self.long_size)
            return _Const(cast({})) if isinstance(inner, _Const) else cast
        return self.postfix(self.primary())

    def _is_cast(self) -> bool:
        kind, word = self.peek(1)
        return kind == "id" and (word in _TYPE_WORDS or word.endswith("_t"))

    def postfix(self, node: Callable[[Row], Any]) -> Callable[[Row], Any]:
        while self.at("["):
            self.take()
            index = self.expr()
            self.take("op", "]")
            node = (lambda base, ix: lambda r: _index(base(r), _int(ix(r))))(node, index)
        return node

    def primary(self) -> Callable[[Row], Any]:
        kind, value = self.take()
        if kind == "num":
            return _Const(value)
        if kind == "str":
            while self.peek()[0] == "str":
                value += self.take()[1]
            return _Const(value)
        if kind == "op" and value == "(":
            inner = self.expr()
            self.take("op", ")")
            return inner
        if kind == "id" and value == "REC":
            self.take("op", "->")
            name = self.take("id")[1]
            return lambda r, n=name: r.get(n)
        if kind == "id" and self.at("("):
            return self.call(value)
        if kind == "id" and value in ("true", "false"):
            return _Const(int(value == "true"))
        raise PrintFmtError(f"unsupported {value!r}")

    def args(self) -> list[Any]:
        """A call's arguments: expressions, or `{ value, "name" }` pairs."""
        out: list[Any] = []
        self.take("op", "(")
        while not self.at(")"):
            if self.at("{"):
                self.take()
                if self.peek()[0] == "id" and self.peek(1) == ("op", ","):
                    # an enum name the kernel left unexpanded: libtraceevent
                    # reads it with strtoull, as 0
                    self.take()
                    key = lambda r: 0  # noqa: E731
                else:
                    key = self.expr()
                self.take("op", ",")
                name = self.take("str")[1]
                while self.peek()[0] == "str":
                    name += self.take()[1]
                self.take("op", "}")
                out.append((key({}), name))  # the table's values are constants
            else:
                out.append(self.expr())
            if not self.at(")"):
                self.take("op", ",")
        self.take("op", ")")
        return out

    def call(self, name: str) -> Callable[[Row], Any]:
        if name == "sizeof":
            raise PrintFmtError("sizeof")
        if name in _FIELD_GETTERS:
            # `__get_str(field)`: the argument is the field's bare name
            self.take("op", "(")
            field = self.take("id")[1]
            self.take("op", ")")
            if name == "__get_dynamic_array_len":
                return lambda r, n=field: len(r.get(n) or ())
            return lambda r, n=field: r.get(n)
        a = self.args()
        if name == "__print_symbolic" or name == "__print_symbolic_u64":
            value, table = a[0], dict(a[1:])
            return lambda r: _symbolic(_int(value(r)), table)
        if name in ("__print_flags", "__print_flags_u64"):
            value, delim, table = a[0], a[1]({}), a[2:]
            return lambda r: _flags(_int(value(r)), delim, table)
        if name in ("__print_hex", "__print_hex_str"):
            sep = " " if name == "__print_hex" else ""
            buf, length = a[0], a[1]
            return lambda r: sep.join(f"{b:02x}" for b in _bytes(buf(r))[: _int(length(r))])
        if name == "__print_array":
            arr, count, _size = a[0], a[1], a[2]
            return lambda r: "{" + ",".join(f"0x{_int(v) & _M64:x}" for v in list(_seq(arr(r)))[: _int(count(r))]) + "}"
        raise PrintFmtError(f"function {name}()")


_FIELD_GETTERS = {
    "__get_str", "__get_rel_str", "__get_dynamic_array", "__get_rel_dynamic_array", "__get_dynamic_array_len",
    "__get_bitmask", "__get_rel_bitmask", "__get_cpumask", "__get_rel_cpumask", "__get_sockaddr", "__get_rel_sockaddr",
}


class _Const:
    """A constant subexpression (folded when the format is compiled: the
    kernel's formats are full of expanded macros such as sched_switch's
    state masks)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __call__(self, row: Row) -> Any:
        return self.value


def _binary(op: Callable[[Any, Any], Any], a: Callable[[Row], Any], b: Callable[[Row], Any]) -> Callable[[Row], Any]:
    if isinstance(a, _Const) and isinstance(b, _Const):
        return _Const(op(_int(a.value), _int(b.value)))
    if isinstance(b, _Const):
        c = _int(b.value)

        def with_constant(r: Row) -> Any:
            x = a(r)
            return op(x if x.__class__ is int else _int(x), c)

        return with_constant

    def both(r: Row) -> Any:
        x, y = a(r), b(r)
        return op(x if x.__class__ is int else _int(x), y if y.__class__ is int else _int(y))

    return both


def _truth(v: Any) -> bool:
    return bool(v)


def _int(v: Any) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if v is None:
        return 0
    if isinstance(v, float):
        return int(v)
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v[:8], "little")
    if isinstance(v, str):
        return 1 if v else 0  # a string in a condition: its pointer, non-null
    raise PrintFmtError(f"not a number: {type(v).__name__}")


def _index(v: Any, i: int) -> Any:
    try:
        return v[i]
    except (TypeError, IndexError, KeyError):
        return 0


def _bytes(v: Any) -> bytes:
    if v is None:
        return b""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    return bytes(_int(x) & 0xFF for x in v)


def _seq(v: Any) -> list:
    if v is None:
        return []
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    return list(v)


def _symbolic(value: int, table: dict[int, str]) -> str:
    name = table.get(value)
    if name is None and value < 0:
        name = table.get(value & _M64)
    if name is None:
        for k, v in table.items():  # a table of negative values matched as unsigned
            if k & _M64 == value & _M64:
                return v
        return f"0x{value & _M64:x}"
    return name


def _flags(value: int, delim: str, table: list[tuple[int, str]]) -> str:
    parts = []
    value &= _M64
    for flag, name in table:
        flag &= _M64
        if not value and flag == 0:
            parts.append(name)
            break
        if flag and value & flag == flag:
            parts.append(name)
            value &= ~flag
    if value:
        parts.append(f"0x{value:x}")
    return delim.join(parts)


def _cast(words: list[str], inner: Callable[[Row], Any], long_size: int) -> Callable[[Row], Any]:
    if "*" in words:
        return inner  # a pointer: the value as it is
    text = " ".join(w for w in words if w not in ("const", "volatile"))
    bits = _type_bits(text, long_size)
    if bits is None:
        return inner
    signed = not (text.startswith("unsigned") or text.startswith("u") or text.startswith("__u") or text in ("bool", "_Bool") or text.startswith("__le") or text.startswith("__be") or text == "size_t")
    if text in ("bool", "_Bool"):
        return lambda r: int(_truth(inner(r)))
    return lambda r: _wrap(_int(inner(r)), bits, signed)


def _type_bits(text: str, long_size: int) -> int | None:
    core = text.replace("unsigned", "").replace("signed", "").strip() or "int"
    m = re.fullmatch(r"(?:__)?[us](8|16|32|64)|__(?:le|be)(16|32|64)", core)
    if m:
        return int(m.group(1) or m.group(2))
    return {
        "char": 8, "short": 16, "short int": 16, "int": 32, "long": long_size * 8, "long int": long_size * 8,
        "long long": 64, "long long int": 64, "bool": 8, "_Bool": 8, "pid_t": 32, "size_t": long_size * 8,
        "gfp_t": 32, "dev_t": 32, "uid_t": 32, "gid_t": 32,
    }.get(core)


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


# A conversion of the format string: flags, width, precision, length, and
# the conversion (for %p, the letters of its extension).
_SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?(?P<len>hh|h|ll|l|L|q|z|Z|j|t)?(?P<conv>[diouxXcsp%])")
_P_EXT = re.compile(r"[sSfFBKMmIiUxhbEa][a-zA-Z0-9]*")


class _Conv:
    __slots__ = ("flags", "width", "prec", "length", "conv", "ext")

    def __init__(self, m: re.Match, ext: str):
        self.flags = m.group("flags")
        self.width = m.group("width")
        self.prec = m.group("prec")
        self.length = m.group("len") or ""
        self.conv = m.group("conv")
        self.ext = ext


def _split_format(fmt: str) -> list[str | _Conv]:
    parts: list[str | _Conv] = []
    pos = 0
    while True:
        at = fmt.find("%", pos)
        if at < 0:
            parts.append(fmt[pos:])
            return parts
        m = _SPEC.match(fmt, at)
        if not m:
            raise PrintFmtError(f"conversion {fmt[at:at + 6]!r}")
        parts.append(fmt[pos:at])
        end = m.end()
        ext = ""
        if m.group("conv") == "p":
            e = _P_EXT.match(fmt, end)
            if e:
                ext = e.group(0)
                # only the letters libtraceevent reads as part of %p
                if ext[0] in "sSfFBKx":
                    ext = ext[0]
                elif ext[0] in "Ii":
                    ext = ext[:2]
                elif ext[0] in "Mm":
                    ext = ext[0]
                elif ext[0] == "U":
                    ext = ext[:2] if len(ext) > 1 and ext[1] in "bBlL" else "U"
                else:
                    ext = ""
                end += len(ext)
        parts.append("%" if m.group("conv") == "%" else _Conv(m, ext))
        pos = end


def _int_bits(length: str, long_size: int) -> int:
    return {"hh": 8, "h": 16, "": 32, "l": long_size * 8, "ll": 64, "L": 64, "q": 64, "z": long_size * 8, "Z": long_size * 8, "j": 64, "t": long_size * 8}[length]


def _pyspec(c: _Conv, width: int | None, prec: int | None, conv: str) -> str:
    flags = c.flags.replace("#", "") if conv in "do" else c.flags
    return "%" + flags + ("" if width is None else str(width)) + ("" if prec is None else f".{prec}") + conv


def _format_one(c: _Conv, value: Any, width: int | None, prec: int | None, long_size: int, symbols: Mapping[int, str]) -> str:
    conv = c.conv
    if conv == "s":
        if value is None:
            value = "(null)"
        elif isinstance(value, (bytes, bytearray)):
            value = bytes(value).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif isinstance(value, (list, tuple)):
            value = bytes(_int(x) & 0xFF for x in value).split(b"\0", 1)[0].decode("utf-8", "replace")
        elif not isinstance(value, str):
            value = str(value)
        return _pyspec(c, width, prec, "s") % value
    if conv == "p":
        return _pointer(c, value, width, prec, long_size, symbols)
    v = _int(value)
    if conv == "c":
        return _pyspec(c, width, None, "s") % chr(v & 0xFF)
    bits = _int_bits(c.length, long_size)
    if conv in "di":
        return _pyspec(c, width, prec, "d") % _wrap(v, bits, True)
    v = _wrap(v, bits, False)
    if conv == "u":
        return _pyspec(c, width, prec, "d") % v
    if conv == "o":
        # C's %#o prefixes a 0 (Python's, 0o)
        digits = ("0" if "#" in c.flags and v else "") + (_pyspec(c, None, prec, "o") % v)
        flags = c.flags.replace("#", "").replace("0", "" if "-" in c.flags else "0")
        return ("%" + flags + ("" if width is None else str(width)) + "s") % digits if "0" not in flags else digits.rjust(width or 0, "0")
    return _pyspec(c, width, prec, conv) % v


def _pointer(c: _Conv, value: Any, width: int | None, prec: int | None, long_size: int, symbols: Mapping[int, str]) -> str:
    ext = c.ext
    if ext in ("s", "S", "f", "F", "B"):
        addr = _int(value) & _M64
        name = symbols.get(addr)
        if name is None:
            text = f"0x{addr:x}"
        elif ext in ("s", "f"):
            text = name.split("+", 1)[0]  # the function alone; %pS adds +0xoffset
        else:
            text = name
        return _pyspec(c, width, prec, "s") % text
    if ext in ("M", "m") and isinstance(value, (bytes, bytearray, list, str)):
        b = _bytes(value)[:6]
        return (":" if ext == "M" else "").join(f"{x:02x}" for x in b)
    if ext in ("I4", "i4") and isinstance(value, (bytes, bytearray, list, str)):
        return ".".join(str(x) for x in _bytes(value)[:4])
    if isinstance(value, (str, bytes, bytearray, list)):
        # a pointer to data the record holds: libtraceevent prints its address,
        # which the capture does not keep; show the data
        return _format_one(_plain_s(c), value, width, prec, long_size, symbols)
    addr = _int(value) & ((1 << (long_size * 8)) - 1)
    # glibc's %p: 0x... or (nil)
    text = f"0x{addr:x}" if addr else "(nil)"
    return _pyspec(c, width, None, "s") % text


def _plain_s(c: _Conv) -> _Conv:
    m = _SPEC.match("%s")
    assert m is not None
    s = _Conv(m, "")
    s.flags = c.flags
    return s


def compile_print_fmt(print_fmt: str, *, long_size: int = 8, symbols: Mapping[int, str] | None = None) -> Renderer:
    """A function from a row of an event's fields to the text its kernel
    print format `print_fmt` (the text after ``print fmt:``) gives."""
    symbols = symbols if symbols is not None else {}
    tokens = _tokens(print_fmt)
    if tokens[0][0] != "str":
        raise PrintFmtError("the format does not start with a string")
    p = _Parser(tokens, long_size)
    fmt = p.take("str")[1]
    while p.peek()[0] == "str":
        fmt += p.take()[1]
    args: list[Callable[[Row], Any]] = []
    while p.at(","):
        p.take()
        args.append(p.expr())
    if p.peek()[0] != "end":
        raise PrintFmtError(f"unexpected {p.peek()[1]!r}")
    parts = _split_format(fmt)
    # bind each conversion to its argument(s) now: `*` widths take one more
    plan: list[Any] = []
    k = 0
    for part in parts:
        if isinstance(part, str):
            if part:
                plan.append(part)
            continue
        width_arg = prec_arg = None
        if part.width == "*":
            width_arg, k = args[k] if k < len(args) else None, k + 1
        if part.prec == "*":
            prec_arg, k = args[k] if k < len(args) else None, k + 1
        if k >= len(args):
            raise PrintFmtError("fewer arguments than conversions")
        plan.append(_conversion(part, args[k], width_arg, prec_arg, long_size, symbols))
        k += 1
    if len(plan) == 1 and not isinstance(plan[0], str):
        return plan[0]

    def render(row: Row) -> str:
        return "".join([step if step.__class__ is str else step(row) for step in plan])

    return render


def _conversion(c: _Conv, arg: Callable[[Row], Any], width_arg: Any, prec_arg: Any, long_size: int, symbols: Mapping[int, str]) -> Callable[[Row], str]:
    """One conversion of the format, bound to its argument: the common
    integer and string cases specialised (a dump prints millions of them),
    the rest through `_format_one`."""
    if width_arg is not None or prec_arg is not None:

        def dynamic(row: Row) -> str:
            width = _int(width_arg(row)) if width_arg else (int(c.width) if c.width else None)
            prec = _int(prec_arg(row)) if prec_arg else (int(c.prec) if c.prec is not None else None)
            conv = c
            if width is not None and width < 0:
                conv = _Conv.__new__(_Conv)
                for slot in _Conv.__slots__:
                    setattr(conv, slot, getattr(c, slot))
                conv.flags, width = c.flags + "-", -width
            return _format_one(conv, arg(row), width, prec, long_size, symbols)

        return dynamic
    width = int(c.width) if c.width else None
    prec = int(c.prec) if c.prec is not None else None
    if c.conv in "diuxX":
        bits = _int_bits(c.length, long_size)
        mask, sign = (1 << bits) - 1, 1 << (bits - 1)
        signed = c.conv in "di"
        spec = _pyspec(c, width, prec, "d" if c.conv in "diu" else c.conv)

        def integer(row: Row) -> str:
            v = arg(row)
            if v.__class__ is not int:
                v = _int(v)
            v &= mask
            if signed and v & sign:
                v -= mask + 1
            return spec % v

        return integer
    if c.conv == "s":
        spec = _pyspec(c, width, prec, "s")
        plain = spec == "%s"

        def string(row: Row) -> str:
            v = arg(row)
            if v.__class__ is str:
                return v if plain else spec % v
            return _format_one(c, v, width, prec, long_size, symbols)

        return string
    return lambda row: _format_one(c, arg(row), width, prec, long_size, symbols)


def pointer_fields(print_fmt: str) -> list[str]:
    """The fields a format prints as symbols (``%ps``, ``%pS``, ``%pF``...,
    ``REC->field`` arguments only): the import resolves their values
    against the trace's kallsyms."""
    try:
        tokens = _tokens(print_fmt)
    except PrintFmtError:
        return []
    if not tokens or tokens[0][0] != "str":
        return []
    fmt = "".join(v for k, v in _leading_strings(tokens))
    try:
        parts = [p for p in _split_format(fmt) if not isinstance(p, str)]
    except PrintFmtError:
        return []
    # the top-level arguments' texts, split at commas outside brackets
    args, depth, cur = [], 0, []
    for kind, v in tokens[len(_leading_strings(tokens)):]:
        if kind == "end":
            break
        if kind == "op" and v in "({[":
            depth += 1
        elif kind == "op" and v in ")}]":
            depth -= 1
        if kind == "op" and v == "," and depth == 0:
            if cur:
                args.append(cur)
            cur = []
            continue
        cur.append((kind, v))
    if cur:
        args.append(cur)
    out = []
    k = 0
    for part in parts:
        k += (part.width == "*") + (part.prec == "*")
        if k >= len(args):
            break
        if part.conv == "p" and part.ext in ("s", "S", "f", "F", "B"):
            ids = [v for kind, v in args[k] if kind == "id"]
            if "REC" in ids:
                out.append(ids[ids.index("REC") + 1])
        k += 1
    return out


def _leading_strings(tokens: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    out = []
    for t in tokens:
        if t[0] != "str":
            break
        out.append(t)
    return out


def raw_fields(row: Row, names: list[str]) -> str:
    """The fields as ``name=value`` pairs (`trace-cmd report -R`'s form):
    what is printed for an event whose format cannot be evaluated."""
    out = []
    for n in names:
        v = row.get(n)
        if isinstance(v, (bytes, bytearray)):
            v = "".join(f"{b:02x}" for b in v)
        elif isinstance(v, list):
            v = "[" + ",".join(str(x) for x in v) + "]"
        out.append(f"{n}={v}")
    return " ".join(out)
