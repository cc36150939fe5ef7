//! What the three targets share: the input as a file (the readers take a
//! path, and map or read it as the importer's do) and a sink that drops
//! rows the way the Parquet sink takes full batches.

use cratrace_format::{ColumnType, EventSink, RowBatch, TableId, TableSpec};
use std::path::PathBuf;

/// Write `data` to this process's scratch file (in /dev/shm when there is
/// one) and return its path; each run overwrites the last.
pub fn scratch(data: &[u8], ext: &str) -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("cratrace-fuzz-{}.{ext}", std::process::id()));
    std::fs::write(&path, data).expect("write the scratch input");
    path
}

/// Counts rows and forgets them once a batch is full (4096 rows, the
/// importer's batch size), so a long input does not pile up in memory.
#[derive(Default)]
pub struct CountingSink {
    tables: Vec<(TableSpec, RowBatch)>,
    /// Rows the reader completed.
    pub rows: u64,
}

impl EventSink for CountingSink {
    fn set_instances(&mut self, _names: &[String]) {}

    fn declare_table(&mut self, spec: &TableSpec) -> Result<TableId, String> {
        if let Some(i) = self.tables.iter().position(|(s, _)| s.name == spec.name) {
            if self.tables[i].0.columns != spec.columns {
                return Err(format!(
                    "table {} declared twice with different columns",
                    spec.name
                ));
            }
            return Ok(TableId(i as u32));
        }
        let types: Vec<ColumnType> = spec.columns.iter().map(|c| c.ty.clone()).collect();
        self.tables.push((spec.clone(), RowBatch::new(&types, 0)));
        Ok(TableId(self.tables.len() as u32 - 1))
    }

    fn batch(&mut self, table: TableId) -> &mut RowBatch {
        &mut self.tables[table.0 as usize].1
    }

    fn row_done(&mut self, table: TableId) -> Result<(), String> {
        self.rows += 1;
        let b = &mut self.tables[table.0 as usize].1;
        if b.len() >= 4096 {
            b.clear();
        }
        Ok(())
    }
}
