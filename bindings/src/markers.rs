//! `parse_markers`: trace_marker texts → name, fields (JSON), vm, vcpu,
//! one Arrow stream in and one table out (the model's `markers` table spent
//! most of its time in regular expressions over every line).

use crate::arrow_stream::{read_stream, ArrowTable};
use arrow_array::builder::{Int32Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use cratrace_format::ftrace::marker;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::sync::Arc;

/// Parse each text (the first column of a polars frame; nulls
/// stay null) into the columns `name`, `fields` (JSON object), `vm` and
/// `vcpu` (the `vm=`/`vcpu=` fields, vcpu as an integer or null).
#[pyfunction]
pub fn parse_markers(py: Python<'_>, texts: Bound<'_, PyAny>) -> PyResult<ArrowTable> {
    let batches = read_stream(&texts, "parse_markers")?;
    let mut all: Vec<Option<&str>> = Vec::new();
    for b in &batches {
        let arr = b.columns().first().ok_or_else(|| PyTypeError::new_err("parse_markers: no column"))?;
        match arr.data_type() {
            DataType::Utf8 => all.extend(arr.as_string::<i32>().iter()),
            DataType::LargeUtf8 => all.extend(arr.as_string::<i64>().iter()),
            DataType::Utf8View => all.extend(arr.as_string_view().iter()),
            other => return Err(PyTypeError::new_err(format!("parse_markers: expected a string column, got {other}"))),
        }
    }
    let batch = py.detach(|| parse(&all));
    Ok(ArrowTable::new(batch.map_err(|e| PyTypeError::new_err(e.to_string()))?))
}

fn parse(texts: &[Option<&str>]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = texts.len();
    let mut name = StringBuilder::with_capacity(n, n * 8);
    let mut fields = StringBuilder::with_capacity(n, n * 32);
    let mut vm = StringBuilder::with_capacity(n, n * 4);
    let mut vcpu = Int32Builder::with_capacity(n);
    let mut json = String::new();
    for t in texts {
        let Some(t) = t else {
            name.append_null();
            fields.append_null();
            vm.append_null();
            vcpu.append_null();
            continue;
        };
        let (nm, v, c) = marker::parse_line(t, &mut json);
        name.append_value(nm);
        fields.append_value(&json);
        vm.append_option(v);
        vcpu.append_option(c.and_then(|c| c.parse::<i32>().ok()));
    }
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("name", Arc::new(name.finish())),
        ("fields", Arc::new(fields.finish())),
        ("vm", Arc::new(vm.finish())),
        ("vcpu", Arc::new(vcpu.finish())),
    ];
    RecordBatch::try_from_iter(cols)
}
