//! Tables handed to Python through the Arrow PyCapsule interface
//! (`__arrow_c_stream__`): polars takes them with `pl.DataFrame(obj)`,
//! zero-copy, and neither side imports pyarrow (about 50 ms of start-up that
//! a `cratrace model` or `replay` would otherwise pay for the hand-over).
//! Inputs come the same way: a polars frame exports the same interface (a
//! series exports bare arrays, not record batches, so frames it is).

use arrow::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow::pyarrow::PyArrowType;
use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// One table: a record batch exported once as an Arrow C stream.
#[pyclass(module = "cratrace._native", frozen)]
pub struct ArrowTable {
    batch: RecordBatch,
}

impl ArrowTable {
    pub fn new(batch: RecordBatch) -> Self {
        ArrowTable { batch }
    }
}

#[pymethods]
impl ArrowTable {
    /// The PyCapsule interface's stream export (`requested_schema` is not
    /// honoured: the table has one schema).
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], self.batch.schema());
        let stream =
            FFI_ArrowArrayStream::new(Box::new(reader) as Box<dyn RecordBatchReader + Send>);
        // The consumer moves the stream out (leaving `release` null); the
        // capsule's destructor drops whatever is left, releasing an
        // unconsumed stream.
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Rows in the table.
    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }
}

/// The record batches of an object that exports `__arrow_c_stream__` as a
/// stream of record batches (a polars frame), read without pyarrow.
pub fn read_stream(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<RecordBatch>> {
    if !obj.hasattr("__arrow_c_stream__")? {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected a polars frame (an object with __arrow_c_stream__)"
        )));
    }
    let reader: PyArrowType<RecordBatchStreamReader> = obj.extract().map_err(|e| {
        PyTypeError::new_err(format!(
            "{what}: expected a polars frame, whose stream is of record batches: {e}"
        ))
    })?;
    reader
        .0
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyRuntimeError::new_err(format!("{what}: {e}")))
}
