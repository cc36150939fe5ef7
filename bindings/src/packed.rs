//! Phase columns cross the boundary as packed native-endian bytes (what a
//! Python `array.array`'s `tobytes()` gives and `frombytes()` takes), as
//! an `array.array` itself (read in place), or as lists: a list of Python
//! ints costs about 40 bytes an element where the packed column costs its
//! width, and the replay's demand is millions of phases.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A fixed-width value of a packed column.
pub(crate) trait Packed:
    Copy + for<'a, 'py> FromPyObject<'a, 'py, Error = PyErr> + 'static
{
    const WIDTH: usize;
    /// The `array.array` typecodes of this type (of this width here).
    const TYPECODES: &'static str;
    fn read(b: &[u8]) -> Self;
    fn write(self, out: &mut [u8]);
}

macro_rules! packed {
    ($($t:ty: $codes:literal),*) => {$(
        impl Packed for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            const TYPECODES: &'static str = $codes;
            fn read(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("a chunk of the width"))
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes())
            }
        }
    )*};
}
packed!(u8: "B", u32: "IL", i64: "ql");

/// `v` as packed bytes.
pub(crate) fn to_bytes<'py, T: Packed>(py: Python<'py>, v: &[T]) -> PyResult<Bound<'py, PyBytes>> {
    to_bytes_with(py, v, |x| *x)
}

/// `f` of each of `items`, as packed bytes: one field of a slice of
/// records, written without a column of it first.
pub(crate) fn to_bytes_with<'py, S, T: Packed>(
    py: Python<'py>,
    items: &[S],
    f: impl Fn(&S) -> T,
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, items.len() * T::WIDTH, |buf| {
        for (out, x) in buf.chunks_exact_mut(T::WIDTH).zip(items) {
            f(x).write(out);
        }
        Ok(())
    })
}

/// A column as the caller holds it: a view of its packed bytes (a `bytes`,
/// or an `array.array`'s buffer) or the values of a sequence. Reading the
/// caller's bytes in place saves a copy of the column (the replay's demand
/// was held three times over while the engine's phases were built).
pub(crate) enum Column<'a, T> {
    Packed(&'a [u8]),
    Values(Vec<T>),
}

impl<T: Packed> Column<'_, T> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Column::Packed(b) => b.len() / T::WIDTH,
            Column::Values(v) => v.len(),
        }
    }

    /// Value `i` (< `len()`).
    pub(crate) fn get(&self, i: usize) -> T {
        match self {
            Column::Packed(b) => T::read(&b[i * T::WIDTH..(i + 1) * T::WIDTH]),
            Column::Values(v) => v[i],
        }
    }
}

/// Column `name` of `obj`: packed bytes, an `array.array` of a typecode of
/// `T` (viewed in place: valid while `obj` is borrowed with the GIL held,
/// as nothing can resize it then), or a sequence of ints.
pub(crate) fn column<'a, T: Packed>(
    obj: &'a Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Column<'a, T>> {
    let whole = |b: &'a [u8]| {
        if b.len().is_multiple_of(T::WIDTH) {
            Ok(Column::Packed(b))
        } else {
            Err(PyValueError::new_err(format!(
                "{name}: {} bytes is not a whole number of {}-byte values",
                b.len(),
                T::WIDTH
            )))
        }
    };
    if let Ok(b) = obj.cast::<PyBytes>() {
        return whole(b.as_bytes());
    }
    if obj.get_type().name()?.to_cow()? == "array" && obj.get_type().module()?.to_cow()? == "array"
    {
        let code: String = obj.getattr("typecode")?.extract()?;
        let size: usize = obj.getattr("itemsize")?.extract()?;
        if size != T::WIDTH || !T::TYPECODES.contains(code.as_str()) {
            return Err(PyValueError::new_err(format!(
                "{name}: an array of typecode {code:?} ({size} bytes); expected one of {:?} of {} bytes",
                T::TYPECODES,
                T::WIDTH
            )));
        }
        let (addr, n): (usize, usize) = obj.call_method0("buffer_info")?.extract()?;
        if n == 0 {
            return Ok(Column::Packed(&[]));
        }
        // SAFETY: buffer_info() gives the array's own storage, `n` items of
        // `size` bytes; it stays put while `obj` is alive and not resized,
        // which holding the GIL for as long as `'a` guarantees (no Python
        // code runs while the view is read).
        return whole(unsafe { std::slice::from_raw_parts(addr as *const u8, n * size) });
    }
    obj.extract::<Vec<T>>()
        .map(Column::Values)
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}
