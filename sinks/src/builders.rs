//! Column builders: one per event column, fed with borrowed `Value`s.
//! A value of the wrong shape for its column is stored as null rather than
//! failing the row (the reader typed the columns, so this is only hit by
//! short payloads).

use arrow_array::builder::{BinaryBuilder, BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, Int16Array, Int32Array, Int64Array, Int8Array, UInt16Array, UInt32Array, UInt64Array, UInt8Array};
use arrow_schema::{DataType, Field};
use cratrace_format::{ColumnType, Value};
use std::sync::Arc;

/// Arrow type of a column type.
pub fn arrow_type(t: &ColumnType) -> DataType {
    match t {
        ColumnType::Bool => DataType::Boolean,
        ColumnType::I8 => DataType::Int8,
        ColumnType::I16 => DataType::Int16,
        ColumnType::I32 => DataType::Int32,
        ColumnType::I64 => DataType::Int64,
        ColumnType::U8 => DataType::UInt8,
        ColumnType::U16 => DataType::UInt16,
        ColumnType::U32 => DataType::UInt32,
        ColumnType::U64 => DataType::UInt64,
        ColumnType::F64 => DataType::Float64,
        ColumnType::Str => DataType::Utf8,
        ColumnType::Bytes => DataType::Binary,
        ColumnType::ListI64 => DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ColumnType::ListU64 => DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
        _ => DataType::Null,
    }
}

pub(crate) enum ColumnBuilder {
    Bool(BooleanBuilder),
    /// Signed integers narrower than 64 bits are kept as i64 and narrowed
    /// when the batch is built (values come from fields of that width).
    Signed(Vec<Option<i64>>, u8),
    Unsigned(Vec<Option<u64>>, u8),
    I64(Int64Builder),
    U64(UInt64Builder),
    F64(Float64Builder),
    Str(StringBuilder),
    Bytes(BinaryBuilder),
    ListI(ListBuilder<Int64Builder>),
    ListU(ListBuilder<UInt64Builder>),
}

impl ColumnBuilder {
    pub(crate) fn new(t: &ColumnType, cap: usize) -> Self {
        match t {
            ColumnType::Bool => ColumnBuilder::Bool(BooleanBuilder::with_capacity(cap)),
            ColumnType::I8 => ColumnBuilder::Signed(Vec::with_capacity(cap), 1),
            ColumnType::I16 => ColumnBuilder::Signed(Vec::with_capacity(cap), 2),
            ColumnType::I32 => ColumnBuilder::Signed(Vec::with_capacity(cap), 4),
            ColumnType::U8 => ColumnBuilder::Unsigned(Vec::with_capacity(cap), 1),
            ColumnType::U16 => ColumnBuilder::Unsigned(Vec::with_capacity(cap), 2),
            ColumnType::U32 => ColumnBuilder::Unsigned(Vec::with_capacity(cap), 4),
            ColumnType::U64 => ColumnBuilder::U64(UInt64Builder::with_capacity(cap)),
            ColumnType::F64 => ColumnBuilder::F64(Float64Builder::with_capacity(cap)),
            ColumnType::Str => ColumnBuilder::Str(StringBuilder::with_capacity(cap, cap * 16)),
            ColumnType::Bytes => ColumnBuilder::Bytes(BinaryBuilder::with_capacity(cap, cap * 16)),
            ColumnType::ListI64 => ColumnBuilder::ListI(ListBuilder::new(Int64Builder::new())),
            ColumnType::ListU64 => ColumnBuilder::ListU(ListBuilder::new(UInt64Builder::new())),
            _ => ColumnBuilder::I64(Int64Builder::with_capacity(cap)),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, v: &Value<'_>) {
        match (self, v) {
            (ColumnBuilder::Bool(b), Value::Bool(x)) => b.append_value(*x),
            (ColumnBuilder::Bool(b), Value::I64(x)) => b.append_value(*x != 0),
            (ColumnBuilder::Bool(b), Value::U64(x)) => b.append_value(*x != 0),
            (ColumnBuilder::Bool(b), _) => b.append_null(),
            (ColumnBuilder::Signed(b, _), Value::I64(x)) => b.push(Some(*x)),
            (ColumnBuilder::Signed(b, _), Value::U64(x)) => b.push(Some(*x as i64)),
            (ColumnBuilder::Signed(b, _), _) => b.push(None),
            (ColumnBuilder::Unsigned(b, _), Value::U64(x)) => b.push(Some(*x)),
            (ColumnBuilder::Unsigned(b, _), Value::I64(x)) => b.push(Some(*x as u64)),
            (ColumnBuilder::Unsigned(b, _), _) => b.push(None),
            (ColumnBuilder::I64(b), Value::I64(x)) => b.append_value(*x),
            (ColumnBuilder::I64(b), Value::U64(x)) => b.append_value(*x as i64),
            (ColumnBuilder::I64(b), _) => b.append_null(),
            (ColumnBuilder::U64(b), Value::U64(x)) => b.append_value(*x),
            (ColumnBuilder::U64(b), Value::I64(x)) => b.append_value(*x as u64),
            (ColumnBuilder::U64(b), _) => b.append_null(),
            (ColumnBuilder::F64(b), Value::F64(x)) => b.append_value(*x),
            (ColumnBuilder::F64(b), _) => b.append_null(),
            (ColumnBuilder::Str(b), Value::Str(s)) => b.append_value(s),
            (ColumnBuilder::Str(b), _) => b.append_null(),
            (ColumnBuilder::Bytes(b), Value::Bytes(s)) => b.append_value(s),
            (ColumnBuilder::Bytes(b), _) => b.append_null(),
            (ColumnBuilder::ListI(b), Value::ListI64(xs)) => {
                b.values().append_slice(xs);
                b.append(true);
            }
            (ColumnBuilder::ListI(b), _) => b.append(false),
            (ColumnBuilder::ListU(b), Value::ListU64(xs)) => {
                b.values().append_slice(xs);
                b.append(true);
            }
            (ColumnBuilder::ListU(b), _) => b.append(false),
        }
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Signed(v, w) => {
                let v = std::mem::replace(v, Vec::with_capacity(v.capacity()));
                match w {
                    1 => Arc::new(v.into_iter().map(|x| x.map(|x| x as i8)).collect::<Int8Array>()),
                    2 => Arc::new(v.into_iter().map(|x| x.map(|x| x as i16)).collect::<Int16Array>()),
                    4 => Arc::new(v.into_iter().map(|x| x.map(|x| x as i32)).collect::<Int32Array>()),
                    _ => Arc::new(v.into_iter().collect::<Int64Array>()),
                }
            }
            ColumnBuilder::Unsigned(v, w) => {
                let v = std::mem::replace(v, Vec::with_capacity(v.capacity()));
                match w {
                    1 => Arc::new(v.into_iter().map(|x| x.map(|x| x as u8)).collect::<UInt8Array>()),
                    2 => Arc::new(v.into_iter().map(|x| x.map(|x| x as u16)).collect::<UInt16Array>()),
                    4 => Arc::new(v.into_iter().map(|x| x.map(|x| x as u32)).collect::<UInt32Array>()),
                    _ => Arc::new(v.into_iter().collect::<UInt64Array>()),
                }
            }
            ColumnBuilder::I64(b) => Arc::new(b.finish()),
            ColumnBuilder::U64(b) => Arc::new(b.finish()),
            ColumnBuilder::F64(b) => Arc::new(b.finish()),
            ColumnBuilder::Str(b) => Arc::new(b.finish()),
            ColumnBuilder::Bytes(b) => Arc::new(b.finish()),
            ColumnBuilder::ListI(b) => Arc::new(b.finish()),
            ColumnBuilder::ListU(b) => Arc::new(b.finish()),
        }
    }
}
