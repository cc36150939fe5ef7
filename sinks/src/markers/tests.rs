use super::*;

fn prints(
    ts: Vec<i64>,
    pid: Vec<Option<i64>>,
    inst: Vec<&str>,
    buf: Vec<Option<&str>>,
) -> RecordBatch {
    let n = ts.len();
    RecordBatch::try_from_iter([
        ("ts", Arc::new(Int64Array::from(ts)) as ArrayRef),
        ("cpu", Arc::new(Int32Array::from(vec![1; n])) as _),
        ("pid", Arc::new(Int64Array::from(pid)) as _),
        ("instance", Arc::new(StringArray::from(inst)) as _),
        ("buf", Arc::new(StringArray::from(buf)) as _),
    ])
    .unwrap()
}

/// Thread 9 writes for VM `w`, vCPU 3.
fn writer_9_of_w_vcpu_3() -> WriterVms {
    let threads = RecordBatch::try_from_iter([
        ("tid", Arc::new(Int64Array::from(vec![9])) as ArrayRef),
        ("vm", Arc::new(StringArray::from(vec!["w"])) as _),
        ("vcpu", Arc::new(Int32Array::from(vec![3])) as _),
    ])
    .unwrap();
    WriterVms::from_batches(&[threads]).unwrap()
}

fn i32s(b: &RecordBatch, name: &str) -> Vec<Option<i32>> {
    b.column_by_name(name)
        .unwrap()
        .as_primitive::<Int32Type>()
        .iter()
        .collect()
}

fn strs(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    b.column_by_name(name)
        .unwrap()
        .as_string::<i32>()
        .iter()
        .map(|s| s.map(str::to_string))
        .collect()
}

#[test]
fn lines_take_their_writers_vm_unless_they_name_one() {
    let p = prints(
        vec![30, 10, 20, 20],
        vec![Some(7), Some(7), None, Some(8)],
        vec!["", "", "", "inst"],
        vec![
            Some("txn_end vcpu=x n=1\n"),
            Some("spin_begin vm=a vcpu=2\n\n"),
            None,
            Some("elsewhere"),
        ],
    );
    // thread 11 makes VM `a` one the threads table knows
    let threads = RecordBatch::try_from_iter([
        (
            "tid",
            Arc::new(Int64Array::from(vec![7, 7, 11])) as ArrayRef,
        ),
        (
            "vm",
            Arc::new(StringArray::from(vec![Some("w"), Some("other"), Some("a")])) as _,
        ),
        (
            "vcpu",
            Arc::new(Int32Array::from(vec![Some(5), None, Some(0)])) as _,
        ),
    ])
    .unwrap();
    let lines = MarkerLines::from_batches(&[p]).unwrap();
    assert_eq!(lines.len(), 3);
    let t = lines
        .table(
            &WriterVms::from_batches(std::slice::from_ref(&threads)).unwrap(),
            None,
        )
        .unwrap();
    assert_eq!(
        t.column(0).as_primitive::<Int64Type>().values(),
        &[10, 20, 30]
    );
    assert_eq!(
        strs(&t, "text"),
        [
            Some("spin_begin vm=a vcpu=2".into()),
            Some("".into()),
            Some("txn_end vcpu=x n=1".into())
        ]
    );
    assert_eq!(
        strs(&t, "name"),
        [
            Some("spin_begin".into()),
            Some("".into()),
            Some("txn_end".into())
        ]
    );
    assert_eq!(strs(&t, "vm"), [Some("a".into()), None, Some("w".into())]);
    // `vcpu=x` is not a number: the writer's vCPU stands
    let vcpu = i32s(&t, "vcpu");
    assert_eq!(vcpu, [Some(2), None, Some(5)]);
    assert_eq!(
        strs(&t, "fields")[2].as_deref(),
        Some(r#"{"vcpu":"x","n":"1"}"#)
    );
    let spins = lines
        .table(
            &WriterVms::from_batches(&[threads]).unwrap(),
            Some(&["spin_begin", "spin_end"]),
        )
        .unwrap();
    assert_eq!(spins.num_rows(), 1);
}

#[test]
fn a_line_naming_a_vm_the_threads_do_not_know_takes_its_writers() {
    // a guest calling itself `vm0` where the host's VM is `w`
    let p = prints(
        vec![1, 2, 3, 4],
        vec![Some(9), None, Some(9), Some(4)],
        vec!["", "", "", ""],
        vec![
            Some("txn_end vm=vm0 vcpu=0"),
            Some("txn_end vm=vm0 vcpu=1"),
            Some("txn_end vm=w vcpu=7"),
            Some("txn_end vm=vm0"),
        ],
    );
    let t = MarkerLines::from_batches(&[p])
        .unwrap()
        .table(&writer_9_of_w_vcpu_3(), None)
        .unwrap();
    // the writer's VM and vCPU; no writer (or one of no VM): the name
    // stays; a known name keeps its line's vCPU
    assert_eq!(
        strs(&t, "vm"),
        [
            Some("w".into()),
            Some("vm0".into()),
            Some("w".into()),
            Some("vm0".into())
        ]
    );
    let vcpu = i32s(&t, "vcpu");
    assert_eq!(vcpu, [Some(3), Some(1), Some(7), None]);
    assert_eq!(
        strs(&t, "fields")[0].as_deref(),
        Some(r#"{"vm":"vm0","vcpu":"0"}"#)
    );
}

#[test]
fn the_written_file_holds_the_table_encoded_ahead_or_not() {
    let p = prints(
        vec![5, 1, 3],
        vec![Some(7), Some(9), None],
        vec!["", "", ""],
        vec![Some("a vm=x"), Some("b k=\"q\""), Some("c")],
    );
    let w = writer_9_of_w_vcpu_3();
    let lines = MarkerLines::from_batches(&[p]).unwrap();
    let want = lines.table(&w, None).unwrap();
    for ahead in [false, true] {
        let path = std::env::temp_dir().join(format!(
            "cratrace-markers-{}-{ahead}.parquet",
            std::process::id()
        ));
        let early = ahead.then(|| lines.encode_ahead(Codec::Zstd).unwrap());
        assert_eq!(lines.write(&w, early, Codec::Zstd, &path).unwrap(), 3);
        let schema = want.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let back = crate::read_columns(&path, &names).unwrap();
        assert_eq!(back, std::slice::from_ref(&want));
        std::fs::remove_file(&path).ok();
    }
}

#[test]
fn a_streamed_read_writes_the_same_table_and_keeps_the_named_lines() {
    let dir = std::env::temp_dir();
    let src = dir.join(format!("cratrace-print-{}.parquet", std::process::id()));
    let n = 600_000i64; // three batches of the reader
    let texts: Vec<String> = (0..n)
        .map(|i| {
            if i % 100_000 == 7 {
                format!("spin_begin vm=v vcpu={}", i % 3)
            } else {
                format!("txn_end n={i} q=\"x\"\n")
            }
        })
        .collect();
    let batch = prints(
        (0..n).collect(),
        (0..n).map(|i| (i % 5 != 0).then_some(9)).collect(),
        vec![""; n as usize],
        texts.iter().map(|t| Some(t.as_str())).collect(),
    );
    crate::write_batch(&src, &batch, Codec::Lz4, &crate::Encodings::default()).unwrap();
    let w = writer_9_of_w_vcpu_3();
    let full = MarkerLines::from_reader(
        crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
    )
    .unwrap();
    let (streamed, ahead) = MarkerLines::stream(
        crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
        Codec::Lz4,
        &["spin_begin"],
    )
    .unwrap()
    .unwrap();
    assert_eq!(streamed.len(), n as usize);
    // the kept lines are the full parse's but for their text and fields,
    // which are not kept
    let (kept, whole) = (
        streamed.table(&w, Some(&["spin_begin"])).unwrap(),
        full.table(&w, Some(&["spin_begin"])).unwrap(),
    );
    for c in ["ts", "cpu", "tid", "vm", "vcpu", "name"] {
        assert_eq!(kept.column_by_name(c), whole.column_by_name(c), "{c}");
    }
    for c in ["fields", "text"] {
        let col = kept.column_by_name(c).unwrap().as_string::<i32>();
        assert!((0..col.len()).all(|i| col.value(i).is_empty()), "{c}");
    }
    assert_eq!(
        streamed
            .table(&w, Some(&["spin_begin"]))
            .unwrap()
            .num_rows(),
        6
    );
    assert!(streamed.table(&w, None).is_err() && streamed.encode_ahead(Codec::Lz4).is_err());
    let out = dir.join(format!(
        "cratrace-markers-streamed-{}.parquet",
        std::process::id()
    ));
    streamed.write(&w, Some(ahead), Codec::Lz4, &out).unwrap();
    let want = full.table(&w, None).unwrap();
    let schema = want.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let got =
        arrow_select::concat::concat_batches(&schema, &crate::read_columns(&out, &names).unwrap())
            .unwrap();
    assert_eq!(got, want);
    // out of time order: not streamed (the caller reads it whole, sorted)
    let unsorted = prints(
        vec![2, 1],
        vec![Some(9), Some(9)],
        vec!["", ""],
        vec![Some("a"), Some("b")],
    );
    crate::write_batch(&src, &unsorted, Codec::Lz4, &crate::Encodings::default()).unwrap();
    assert!(MarkerLines::stream(
        crate::TableReader::open(&src, &["ts", "cpu", "pid", "instance", "buf"]).unwrap(),
        Codec::Lz4,
        &[]
    )
    .unwrap()
    .is_none());
    std::fs::remove_file(&src).ok();
    std::fs::remove_file(&out).ok();
}

#[test]
fn a_batch_without_the_text_column_is_an_error_naming_it() {
    let b = RecordBatch::try_from_iter([("ts", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
        .unwrap();
    assert_eq!(
        MarkerLines::from_batches(&[b]).err().unwrap(),
        "print: no column buf"
    );
}
