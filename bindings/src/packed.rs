//! Phase columns cross the boundary as packed native-endian bytes (what a
//! Python `array.array`'s `tobytes()` gives and `frombytes()` takes), or
//! as lists: a list of Python ints costs about 40 bytes an element where
//! the packed column costs its width, and the replay's demand is millions
//! of phases.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A fixed-width value of a packed column.
pub(crate) trait Packed:
    Copy + for<'a, 'py> FromPyObject<'a, 'py, Error = PyErr> + 'static
{
    const WIDTH: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, out: &mut [u8]);
}

macro_rules! packed {
    ($($t:ty),*) => {$(
        impl Packed for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("a chunk of the width"))
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes())
            }
        }
    )*};
}
packed!(u8, u32, i64);

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

/// Column `name` from packed bytes or from a sequence of ints.
pub(crate) fn from_py<T: Packed>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<T>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        let b = b.as_bytes();
        if b.len() % T::WIDTH != 0 {
            return Err(PyValueError::new_err(format!(
                "{name}: {} bytes is not a whole number of {}-byte values",
                b.len(),
                T::WIDTH
            )));
        }
        return Ok(b.chunks_exact(T::WIDTH).map(T::read).collect());
    }
    obj.extract::<Vec<T>>()
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}
