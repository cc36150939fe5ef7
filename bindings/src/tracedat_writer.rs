//! `TraceDatSpool`: the pages of a trace.dat being generated, encoded a
//! batch of events at a time and spooled per buffer and CPU to files in a
//! scratch directory (issue #47), for `cratrace/synth/tracedat_writer.py`
//! to assemble into the file. The payload and page rules are
//! cratrace-format's `tracedat::writer`; this module reads the events'
//! Python values the way the Python writer did (`int(v)` masked to the
//! field, `str(v).encode()` for text, a missing field is `0`).

use cratrace_format::tracedat::writer::{
    FieldKind, FieldSlot, Layout, PageOptions, PageStream, Payload, StreamStats,
};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

/// Where a field's value comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Fields,
    TypeId,
    Flags,
    Preempt,
    Pid,
}

struct Field {
    name: Py<PyString>,
    /// the name, for events given by Rust code
    rname: String,
    slot: FieldSlot,
    source: Source,
}

struct Format {
    id: u64,
    static_size: usize,
    fields: Vec<Field>,
    /// encoded by the Python callback (`bprint`: its printk formats)
    python: bool,
}

type Stream = PageStream<BufWriter<File>>;

/// The spooled pages of one trace.dat's buffers.
#[pyclass(module = "cratrace._native")]
pub struct TraceDatSpool {
    dir: PathBuf,
    layout: Layout,
    page_size: usize,
    instance_page_sizes: HashMap<String, usize>,
    tail_padding: bool,
    abs_every: u64,
    lost: HashMap<(String, u32), HashMap<u64, u64>>,
    formats: Vec<Format>,
    by_name: HashMap<String, usize>,
    encode: Option<Py<PyAny>>,
    /// buffer instances in order of first use
    instances: Vec<String>,
    streams: HashMap<(usize, u32), Stream>,
    counts: Vec<(String, u64)>,
    count_at: HashMap<String, usize>,
    events: u64,
    payload: Payload,
    text: Vec<u8>,
}

fn kind(code: u8, array_len: usize, elem: usize) -> PyResult<FieldKind> {
    Ok(match code {
        0 => FieldKind::Int,
        1 => FieldKind::IntArray {
            len: array_len,
            elem,
        },
        2 => FieldKind::Chars,
        3 => FieldKind::DataLoc,
        4 => FieldKind::RelLoc,
        5 => FieldKind::Flex,
        _ => return Err(PyValueError::new_err(format!("field kind {code}"))),
    })
}

fn source(code: u8) -> PyResult<Source> {
    Ok(match code {
        0 => Source::Fields,
        1 => Source::TypeId,
        2 => Source::Flags,
        3 => Source::Preempt,
        4 => Source::Pid,
        _ => return Err(PyValueError::new_err(format!("field source {code}"))),
    })
}

/// `int(v)` masked to `size` bytes (two's complement for negatives).
fn int_value(v: &Bound<'_, PyAny>, size: usize) -> PyResult<u64> {
    if let Ok(x) = v.extract::<i64>() {
        return Ok(x as u64);
    }
    if let Ok(x) = v.extract::<u64>() {
        return Ok(x);
    }
    // a float, or an int beyond 64 bits: Python's int() and mask
    let py = v.py();
    let int = py.import("builtins")?.getattr("int")?.call1((v,))?;
    let mask = if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    };
    int.bitand(mask)?.extract::<u64>()
}

/// `v` as bytes into `buf`: bytes as they are, anything else
/// `str(v).encode()`; returns whether it was bytes.
fn text_value(v: &Bound<'_, PyAny>, buf: &mut Vec<u8>) -> PyResult<bool> {
    buf.clear();
    if let Ok(b) = v.cast::<PyBytes>() {
        buf.extend_from_slice(b.as_bytes());
        return Ok(true);
    }
    if let Ok(s) = v.cast::<PyString>() {
        buf.extend_from_slice(s.to_str()?.as_bytes());
    } else {
        buf.extend_from_slice(v.str()?.to_str()?.as_bytes());
    }
    Ok(false)
}

/// The payload of an event of format `fmt` from its `fields` (a dict).
fn encode_fields(
    fmt: &Format,
    layout: Layout,
    payload: &mut Payload,
    fields: &Bound<'_, PyDict>,
    (pid, flags, preempt): (i64, i64, i64),
    text: &mut Vec<u8>,
) -> PyResult<()> {
    let py = fields.py();
    payload.start(layout, fmt.static_size);
    for fld in &fmt.fields {
        let slot = &fld.slot;
        let given = match fld.source {
            Source::TypeId => {
                payload.int(slot, 0, fmt.id);
                continue;
            }
            Source::Flags => {
                payload.int(slot, 0, flags as u64);
                continue;
            }
            Source::Preempt => {
                payload.int(slot, 0, preempt as u64);
                continue;
            }
            Source::Pid => {
                payload.int(slot, 0, pid as u64);
                continue;
            }
            Source::Fields => fields.get_item(fld.name.bind(py))?,
        };
        match slot.kind {
            FieldKind::Int => {
                if let Some(v) = given {
                    payload.int(slot, 0, int_value(&v, slot.size)?);
                }
            }
            FieldKind::Chars => {
                if let Some(v) = given {
                    if v.is_truthy()? {
                        text_value(&v, text)?;
                        payload.chars(slot, text);
                    }
                }
            }
            FieldKind::IntArray { len, elem } => {
                if let Some(v) = given {
                    if v.is_truthy()? {
                        for (i, x) in v.try_iter()?.take(len).enumerate() {
                            payload.int(slot, i, int_value(&x?, elem)?);
                        }
                    }
                }
            }
            FieldKind::DataLoc | FieldKind::RelLoc | FieldKind::Flex => {
                // a missing field is the text "0", as str(0) is
                let v = match given {
                    Some(v) => v,
                    None => 0i64.into_pyobject(py)?.into_any(),
                };
                let is_bytes = text_value(&v, text)?;
                // a location's text ends with a NUL unless given as bytes;
                // a flexible array's only when given as a str
                let nul = if slot.kind == FieldKind::Flex {
                    v.cast::<PyString>().is_ok()
                } else {
                    !is_bytes
                };
                if nul {
                    text.push(0);
                }
                payload.data(slot, text);
            }
        }
    }
    Ok(())
}

/// A field's value given by Rust code (the native scenario generators).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val<'a> {
    /// An integer (negative values as their two's complement).
    Int(u64),
    /// Text, as a Python `str` would be given.
    Str(&'a str),
}

/// The payload of an event of format `fmt` from `vals`, the bytes
/// [`encode_fields`] gives for the same values as Python ints and strs.
fn encode_native(
    fmt: &Format,
    layout: Layout,
    payload: &mut Payload,
    pid: i64,
    vals: &[(&str, Val<'_>)],
    text: &mut Vec<u8>,
) {
    payload.start(layout, fmt.static_size);
    for fld in &fmt.fields {
        let slot = &fld.slot;
        let given = match fld.source {
            Source::TypeId => {
                payload.int(slot, 0, fmt.id);
                continue;
            }
            Source::Flags | Source::Preempt => {
                payload.int(slot, 0, 0);
                continue;
            }
            Source::Pid => {
                payload.int(slot, 0, pid as u64);
                continue;
            }
            Source::Fields => vals.iter().find(|(n, _)| *n == fld.rname).map(|(_, v)| *v),
        };
        match (slot.kind, given) {
            (FieldKind::Int, Some(Val::Int(x))) => payload.int(slot, 0, x),
            (FieldKind::Chars, Some(Val::Str(s))) if !s.is_empty() => {
                payload.chars(slot, s.as_bytes())
            }
            (FieldKind::DataLoc | FieldKind::RelLoc | FieldKind::Flex, v) => {
                text.clear();
                // a missing field is the text "0" (str(0)); an int is its
                // decimal text; only a str ends with a NUL in a flexible
                // array, any text does in a location
                let is_str = match v {
                    Some(Val::Str(s)) => {
                        text.extend_from_slice(s.as_bytes());
                        true
                    }
                    Some(Val::Int(x)) => {
                        text.extend_from_slice(x.to_string().as_bytes());
                        false
                    }
                    None => {
                        text.push(b'0');
                        false
                    }
                };
                if is_str || slot.kind != FieldKind::Flex {
                    text.push(0);
                }
                payload.data(slot, text);
            }
            // integers in text or array fields: not given by the generators
            _ => {}
        }
    }
}

fn io_err(e: std::io::Error) -> PyErr {
    PyOSError::new_err(format!("cannot spool trace pages: {e}"))
}

impl TraceDatSpool {
    fn open_stream(&mut self, instance: usize, cpu: u32) -> PyResult<()> {
        if !self.streams.contains_key(&(instance, cpu)) {
            let name = &self.instances[instance];
            let path = self.dir.join(format!("{instance}-{cpu}.pages"));
            let file = File::create(&path).map_err(io_err)?;
            let opts = PageOptions {
                layout: self.layout,
                page_size: *self
                    .instance_page_sizes
                    .get(name)
                    .unwrap_or(&self.page_size),
                tail_padding: self.tail_padding,
                abs_every: self.abs_every,
                lost: self
                    .lost
                    .get(&(name.clone(), cpu))
                    .cloned()
                    .unwrap_or_default(),
            };
            self.streams.insert(
                (instance, cpu),
                PageStream::new(opts, BufWriter::with_capacity(1 << 16, file)),
            );
        }
        Ok(())
    }

    fn instance(&mut self, name: &str) -> usize {
        match self.instances.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.instances.push(name.to_string());
                self.instances.len() - 1
            }
        }
    }

    /// Encode and spool an event of the top buffer given by Rust code.
    pub(crate) fn push_native(
        &mut self,
        ts: u64,
        cpu: u32,
        name: &str,
        pid: i64,
        vals: &[(&str, Val<'_>)],
    ) -> PyResult<()> {
        let f = *self.by_name.get(name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown event {name:?} (no format bundled or given)"
            ))
        })?;
        if self.formats[f].python {
            return Err(PyValueError::new_err(format!(
                "{name}: its events are encoded in Python"
            )));
        }
        self.open_stream(0, cpu)?;
        encode_native(
            &self.formats[f],
            self.layout,
            &mut self.payload,
            pid,
            vals,
            &mut self.text,
        );
        let stream = self.streams.get_mut(&(0, cpu)).expect("opened");
        stream
            .push(ts, self.payload.finish())
            .map_err(|e| match e {
                cratrace_format::tracedat::writer::WriteError::Io(e) => io_err(e),
                e => PyValueError::new_err(e.to_string()),
            })?;
        self.count(name);
        self.events += 1;
        Ok(())
    }

    fn count(&mut self, name: &str) {
        match self.count_at.get(name) {
            Some(&i) => self.counts[i].1 += 1,
            None => {
                self.count_at.insert(name.to_string(), self.counts.len());
                self.counts.push((name.to_string(), 1));
            }
        }
    }
}

#[pymethods]
impl TraceDatSpool {
    /// A spool writing into `directory` (which must exist). `formats`:
    /// (names, id, static size, python-encoded, fields) with each field
    /// (name, offset, size, kind, array length, element size, source);
    /// `encode(name, pid, fields, flags, preempt) -> bytes` encodes the
    /// python-encoded formats' events.
    #[new]
    #[pyo3(signature = (directory, *, little, long_size, page_size, instance_page_sizes, tail_padding, abs_every, lost, formats, encode = None))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn new(
        py: Python<'_>,
        directory: PathBuf,
        little: bool,
        long_size: usize,
        page_size: usize,
        instance_page_sizes: HashMap<String, usize>,
        tail_padding: bool,
        abs_every: u64,
        lost: HashMap<(String, u32), HashMap<u64, u64>>,
        formats: Vec<(
            Vec<String>,
            u64,
            usize,
            bool,
            Vec<(Py<PyString>, usize, usize, u8, usize, usize, u8)>,
        )>,
        encode: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let mut fmts = Vec::new();
        let mut by_name = HashMap::new();
        for (names, id, static_size, python, fields) in formats {
            let mut fs = Vec::new();
            for (name, offset, size, k, array_len, elem, src) in fields {
                fs.push(Field {
                    rname: name.bind(py).to_str()?.to_owned(),
                    name,
                    slot: FieldSlot {
                        offset,
                        size,
                        kind: kind(k, array_len, elem)?,
                    },
                    source: source(src)?,
                });
            }
            for n in names {
                by_name.insert(n, fmts.len());
            }
            fmts.push(Format {
                id,
                static_size,
                fields: fs,
                python,
            });
        }
        Ok(TraceDatSpool {
            dir: directory,
            layout: Layout { little, long_size },
            page_size,
            instance_page_sizes,
            tail_padding,
            abs_every,
            lost,
            formats: fmts,
            by_name,
            encode,
            instances: vec![String::new()],
            streams: HashMap::new(),
            counts: Vec::new(),
            count_at: HashMap::new(),
            events: 0,
            payload: Payload::default(),
            text: Vec::new(),
        })
    }

    /// Encode and spool `events`: tuples (ts, cpu, name, pid, fields) or
    /// (ts, cpu, name, pid, fields, instance, flags, preempt), `fields` a
    /// dict of the event's own fields or its payload as bytes. Each CPU's
    /// events must come in time order. A bad event raises ValueError
    /// naming it by its place among all events added.
    fn add(&mut self, events: &Bound<'_, PyList>) -> PyResult<()> {
        let mut text = Vec::new();
        // formats by the name object's address, valid while `events` holds them
        let mut seen: Vec<(usize, usize)> = Vec::with_capacity(16);
        for item in events.iter() {
            let idx = self.events;
            let t = item.cast::<PyTuple>()?;
            let ts: u64 = t.get_item(0)?.extract()?;
            let cpu: i64 = t.get_item(1)?.extract()?;
            let name_obj = t.get_item(2)?;
            let name = name_obj.cast::<PyString>()?;
            let key = name.as_ptr() as usize;
            let f = match seen.iter().find(|(k, _)| *k == key) {
                Some(&(_, f)) => f,
                None => {
                    let s = name.to_str()?;
                    let f = *self.by_name.get(s).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "event #{idx}: unknown event {s:?} (no format bundled or given)"
                        ))
                    })?;
                    seen.push((key, f));
                    f
                }
            };
            if cpu < 0 {
                return Err(PyValueError::new_err(format!(
                    "event #{idx}: negative cpu {cpu}"
                )));
            }
            let pid: i64 = t.get_item(3)?.extract()?;
            let fields = t.get_item(4)?;
            let (inst, flags, preempt) = if t.len() >= 8 {
                let i = t.get_item(5)?;
                let i = self.instance(i.cast::<PyString>()?.to_str()?);
                (i, t.get_item(6)?.extract()?, t.get_item(7)?.extract()?)
            } else {
                (0, 0i64, 0i64)
            };
            let py = events.py();
            self.open_stream(inst, cpu as u32)?;
            let encoded;
            let bytes: &[u8] = if let Ok(b) = fields.cast::<PyBytes>() {
                b.as_bytes()
            } else if self.formats[f].python {
                let enc = self.encode.as_ref().ok_or_else(|| {
                    PyValueError::new_err("no encoder for python-encoded formats")
                })?;
                encoded = enc.call1(py, (&name_obj, pid, &fields, flags, preempt))?;
                encoded.bind(py).cast::<PyBytes>()?.as_bytes()
            } else {
                let d = fields.cast::<PyDict>()?;
                encode_fields(
                    &self.formats[f],
                    self.layout,
                    &mut self.payload,
                    d,
                    (pid, flags, preempt),
                    &mut text,
                )?;
                self.payload.finish()
            };
            let stream = self.streams.get_mut(&(inst, cpu as u32)).expect("opened");
            stream.push(ts, bytes).map_err(|e| match e {
                cratrace_format::tracedat::writer::WriteError::Io(e) => io_err(e),
                e => PyValueError::new_err(e.to_string()),
            })?;
            self.count(name.to_str()?);
            self.events += 1;
        }
        Ok(())
    }

    /// Events added so far.
    fn __len__(&self) -> usize {
        self.events as usize
    }

    /// Events added per name, in order of first use.
    fn counts(&self) -> Vec<(String, u64)> {
        self.counts.clone()
    }

    /// Close every stream's last page; returns, per buffer instance in
    /// order of first use and CPU: (instance, cpu, spool path, page bytes,
    /// records, payload bytes, first ts, last ts).
    #[allow(clippy::type_complexity)]
    fn finish(
        &mut self,
    ) -> PyResult<
        Vec<(
            String,
            u32,
            PathBuf,
            u64,
            u64,
            u64,
            Option<u64>,
            Option<u64>,
        )>,
    > {
        let mut keys: Vec<(usize, u32)> = self.streams.keys().copied().collect();
        keys.sort_unstable();
        let mut out = Vec::new();
        for key in keys {
            let s = self.streams.remove(&key).expect("listed");
            let page_size = *self
                .instance_page_sizes
                .get(&self.instances[key.0])
                .unwrap_or(&self.page_size);
            let (_, st): (_, StreamStats) =
                s.finish().map_err(|e| PyOSError::new_err(e.to_string()))?;
            out.push((
                self.instances[key.0].clone(),
                key.1,
                self.dir.join(format!("{}-{}.pages", key.0, key.1)),
                st.pages * page_size as u64,
                st.records,
                st.payload_bytes,
                st.first_ts,
                st.last_ts,
            ));
        }
        Ok(out)
    }
}
