//! Column builders: one per event column, fed with borrowed `Value`s.
//! A value of the wrong shape for its column is stored as null rather than
//! failing the row (the reader typed the columns, so this is only hit by
//! short payloads).

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float64Builder, Int16Builder, Int32Builder, Int64Builder,
    Int8Builder, ListBuilder, StringBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
    UInt8Builder,
};
use arrow_array::ArrayRef;
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
    // Narrow integers are stored at their own width as they arrive (the
    // values come from fields of that width, so `as` only drops zeros);
    // the builders keep no validity bitmap until the first null.
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
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
            ColumnType::I8 => ColumnBuilder::I8(Int8Builder::with_capacity(cap)),
            ColumnType::I16 => ColumnBuilder::I16(Int16Builder::with_capacity(cap)),
            ColumnType::I32 => ColumnBuilder::I32(Int32Builder::with_capacity(cap)),
            ColumnType::U8 => ColumnBuilder::U8(UInt8Builder::with_capacity(cap)),
            ColumnType::U16 => ColumnBuilder::U16(UInt16Builder::with_capacity(cap)),
            ColumnType::U32 => ColumnBuilder::U32(UInt32Builder::with_capacity(cap)),
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
            (ColumnBuilder::I8(b), v) => b.append_option(int(v).map(|x| x as i8)),
            (ColumnBuilder::I16(b), v) => b.append_option(int(v).map(|x| x as i16)),
            (ColumnBuilder::I32(b), v) => b.append_option(int(v).map(|x| x as i32)),
            (ColumnBuilder::U8(b), v) => b.append_option(int(v).map(|x| x as u8)),
            (ColumnBuilder::U16(b), v) => b.append_option(int(v).map(|x| x as u16)),
            (ColumnBuilder::U32(b), v) => b.append_option(int(v).map(|x| x as u32)),
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

    /// The rows so far as an array; the builder starts again empty, with
    /// room for `cap` rows (growing it again by doubling would cost a
    /// reallocation and fresh page faults per batch).
    pub(crate) fn finish(&mut self, ty: &ColumnType, cap: usize) -> ArrayRef {
        match std::mem::replace(self, ColumnBuilder::new(ty, cap)) {
            ColumnBuilder::Bool(mut b) => Arc::new(b.finish()),
            ColumnBuilder::I8(mut b) => Arc::new(b.finish()),
            ColumnBuilder::I16(mut b) => Arc::new(b.finish()),
            ColumnBuilder::I32(mut b) => Arc::new(b.finish()),
            ColumnBuilder::U8(mut b) => Arc::new(b.finish()),
            ColumnBuilder::U16(mut b) => Arc::new(b.finish()),
            ColumnBuilder::U32(mut b) => Arc::new(b.finish()),
            ColumnBuilder::I64(mut b) => Arc::new(b.finish()),
            ColumnBuilder::U64(mut b) => Arc::new(b.finish()),
            ColumnBuilder::F64(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Str(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Bytes(mut b) => Arc::new(b.finish()),
            ColumnBuilder::ListI(mut b) => Arc::new(b.finish()),
            ColumnBuilder::ListU(mut b) => Arc::new(b.finish()),
        }
    }
}

/// An integer value's bits (signed or not), None for anything else.
#[inline]
fn int(v: &Value<'_>) -> Option<i64> {
    match v {
        Value::I64(x) => Some(*x),
        Value::U64(x) => Some(*x as i64),
        _ => None,
    }
}
