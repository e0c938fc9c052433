// The rows Hive 4's vectorized ACID reader returns for one split: VectorizedOrcAcidRowBatchReader,
// the reader Hive 4 queries use by default (hive.vectorized.execution.enabled), which filters
// rows of invalid write ids and applies the delete deltas' events batch by batch. In ORC's
// package for the constructor that takes the batch context directly (Hive's own tests use it),
// so no query plan is needed. Called by Hive4AcidRead's "vrows" command.

package org.apache.hadoop.hive.ql.io.orc;

import org.apache.hadoop.hive.common.type.HiveDecimal;
import org.apache.hadoop.hive.ql.exec.vector.BytesColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.Decimal64ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DoubleColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatchCtx;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfo;
import org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;
import org.apache.orc.TypeDescription;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;

public final class Hive4VectorizedRows {
  private Hive4VectorizedRows() {}

  /** Each row of `split` as its column values: Long, Double, Boolean, String, or the text Hive
   * prints for dates, decimals and timestamps (the row reader's form); null for SQL NULL. */
  public static List<Object[]> read(InputSplit split, JobConf job, String columns, String types)
      throws Exception {
    String[] names = columns.split(",");
    TypeDescription schema = TypeDescription.fromString(
        "struct<" + String.join(",", zip(names, TypeInfoUtils.getTypeInfosFromTypeString(types)))
        + ">");
    VectorizedRowBatch batch = schema.createRowBatchV2();
    batch.setPartitionInfo(names.length, 0);
    List<Object[]> rows = new ArrayList<>();
    VectorizedOrcAcidRowBatchReader reader = new VectorizedOrcAcidRowBatchReader(
        (OrcSplit) split, job, Reporter.NULL, new VectorizedRowBatchCtx());
    try {
      while (reader.next(null, batch)) {
        for (int i = 0; i < batch.size; i++) {
          int r = batch.selectedInUse ? batch.selected[i] : i;
          Object[] row = new Object[names.length];
          for (int c = 0; c < names.length; c++) {
            row[c] = value(batch.cols[c], schema.getChildren().get(c), r);
          }
          rows.add(row);
        }
      }
    } finally {
      reader.close();
    }
    return rows;
  }

  static Object value(ColumnVector v, TypeDescription type, int r) {
    int at = v.isRepeating ? 0 : r;
    if (!v.noNulls && v.isNull[at]) {
      return null;
    }
    // Dates, booleans and short decimals travel as longs: days, 0/1, unscaled values.
    if (type.getCategory() == TypeDescription.Category.DATE) {
      return LocalDate.ofEpochDay(((LongColumnVector) v).vector[at]).toString();
    }
    if (type.getCategory() == TypeDescription.Category.BOOLEAN) {
      return ((LongColumnVector) v).vector[at] != 0;
    }
    if (v instanceof Decimal64ColumnVector) {
      return HiveDecimal.create(BigDecimal.valueOf(((Decimal64ColumnVector) v).vector[at],
          type.getScale())).toString();
    }
    if (v instanceof LongColumnVector) {
      return ((LongColumnVector) v).vector[at];
    }
    if (v instanceof DoubleColumnVector) {
      return ((DoubleColumnVector) v).vector[at];
    }
    if (v instanceof BytesColumnVector) {
      BytesColumnVector b = (BytesColumnVector) v;
      return new String(b.vector[at], b.start[at], b.length[at], StandardCharsets.UTF_8);
    }
    StringBuilder text = new StringBuilder();
    v.stringifyValue(text, at);
    return text.toString();
  }

  static List<String> zip(String[] names, List<TypeInfo> types) {
    List<String> fields = new ArrayList<>();
    for (int i = 0; i < names.length; i++) {
      fields.add(names[i] + ":" + types.get(i).getTypeName());
    }
    return fields;
  }
}
