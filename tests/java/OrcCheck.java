// Reads ORC files with the reference Java readers shipped in pyspark's jars (orc-core, and
// hive-exec for the ACID key index) and prints, per file, one JSON line: schema, footer facts,
// user metadata, every row decoded, the file and stripe statistics, and Hive's view of the
// ACID metadata. tests/javaorc.py compiles it, runs it, and compares with what pyarrow reads.
//
// Usage: java -cp <pyspark/jars/*>:<dir> OrcCheck < paths (one per line)

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.exec.vector.BytesColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DecimalColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DoubleColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ListColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.MapColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.StructColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.TimestampColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.orc.BinaryColumnStatistics;
import org.apache.orc.BooleanColumnStatistics;
import org.apache.orc.ColumnStatistics;
import org.apache.orc.DateColumnStatistics;
import org.apache.orc.DecimalColumnStatistics;
import org.apache.orc.DoubleColumnStatistics;
import org.apache.orc.IntegerColumnStatistics;
import org.apache.orc.OrcFile;
import org.apache.orc.Reader;
import org.apache.orc.RecordReader;
import org.apache.orc.StringColumnStatistics;
import org.apache.orc.StripeStatistics;
import org.apache.orc.TimestampColumnStatistics;
import org.apache.orc.TypeDescription;

public class OrcCheck {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    ObjectMapper json = new ObjectMapper();
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isEmpty()) {
        continue;
      }
      Map<String, Object> result = new LinkedHashMap<>();
      result.put("path", line);
      try {
        check(conf, line, result);
      } catch (Throwable e) {
        result.put("error", e.toString());
      }
      out.println(json.writeValueAsString(result));
    }
  }

  static void check(Configuration conf, String file, Map<String, Object> result) throws Exception {
    Path path = new Path(file);
    // Proleptic Gregorian and UTC: what Spark and Hive 4 read with, and what the files declare.
    OrcFile.ReaderOptions options = OrcFile.readerOptions(conf).useUTCTimestamp(true)
        .convertToProlepticGregorian(true);
    try (Reader reader = OrcFile.createReader(path, options)) {
      TypeDescription schema = reader.getSchema();
      result.put("schema", schema.toString());
      result.put("rows", reader.getNumberOfRows());
      result.put("proleptic", reader.writerUsedProlepticGregorian());
      Map<String, String> metadata = new LinkedHashMap<>();
      for (String key : reader.getMetadataKeys()) {
        metadata.put(key, StandardCharsets.UTF_8.decode(reader.getMetadataValue(key).duplicate()).toString());
      }
      result.put("metadata", metadata);
      List<Long> stripes = new ArrayList<>();
      reader.getStripes().forEach(s -> stripes.add(s.getNumberOfRows()));
      result.put("stripes", stripes);

      List<Object> rows = new ArrayList<>();
      VectorizedRowBatch batch = schema.createRowBatch();
      try (RecordReader records = reader.rows()) {
        while (records.nextBatch(batch)) {
          for (int r = 0; r < batch.size; r++) {
            List<Object> row = new ArrayList<>();
            for (int c = 0; c < batch.numCols; c++) {
              row.add(value(batch.cols[c], schema.getChildren().get(c), r));
            }
            rows.add(row);
          }
        }
      }
      result.put("values", rows);
      result.put("file_stats", stats(reader.getStatistics(), schema));
      List<Object> stripeStats = new ArrayList<>();
      for (StripeStatistics s : reader.getStripeStatistics()) {
        stripeStats.add(stats(s.getColumnStatistics(), schema));
      }
      result.put("stripe_stats", stripeStats);
    }
    if (metadataHasKeyIndex(result)) {
      result.put("hive_key_index", hiveKeyIndex(conf, path));
    }
  }

  @SuppressWarnings("unchecked")
  static boolean metadataHasKeyIndex(Map<String, Object> result) {
    return ((Map<String, String>) result.get("metadata")).containsKey("hive.acid.key.index");
  }

  /** Hive's own parse of hive.acid.key.index (OrcRecordUpdater.parseKeyIndex, package private). */
  static List<Object> hiveKeyIndex(Configuration conf, Path path) throws Exception {
    org.apache.hadoop.hive.ql.io.orc.Reader hive = org.apache.hadoop.hive.ql.io.orc.OrcFile.createReader(
        path, org.apache.hadoop.hive.ql.io.orc.OrcFile.readerOptions(conf));
    Class<?> updater = Class.forName("org.apache.hadoop.hive.ql.io.orc.OrcRecordUpdater");
    Method parse = updater.getDeclaredMethod("parseKeyIndex", org.apache.hadoop.hive.ql.io.orc.Reader.class);
    parse.setAccessible(true);
    List<Object> keys = new ArrayList<>();
    for (org.apache.hadoop.hive.ql.io.RecordIdentifier id :
        (org.apache.hadoop.hive.ql.io.RecordIdentifier[]) parse.invoke(null, hive)) {
      keys.add(List.of(id.getTransactionId(), id.getBucketId(), id.getRowId()));  // Hive 2.3 names
    }
    return keys;
  }

  static Object value(ColumnVector vector, TypeDescription type, int row) {
    int r = vector.isRepeating ? 0 : row;
    if (!vector.noNulls && vector.isNull[r]) {
      return null;
    }
    switch (type.getCategory()) {
      case BOOLEAN: case BYTE: case SHORT: case INT: case LONG: case DATE:
        return ((LongColumnVector) vector).vector[r];
      case FLOAT: case DOUBLE:
        return Double.doubleToLongBits(((DoubleColumnVector) vector).vector[r]);
      case STRING: case CHAR: case VARCHAR: {
        BytesColumnVector b = (BytesColumnVector) vector;
        return new String(b.vector[r], b.start[r], b.length[r], StandardCharsets.UTF_8);
      }
      case BINARY: {
        BytesColumnVector b = (BytesColumnVector) vector;
        StringBuilder hex = new StringBuilder();
        for (int i = 0; i < b.length[r]; i++) {
          hex.append(String.format("%02x", b.vector[r][b.start[r] + i]));
        }
        return hex.toString();
      }
      case DECIMAL:
        return ((DecimalColumnVector) vector).vector[r].toString();
      case TIMESTAMP: {
        TimestampColumnVector t = (TimestampColumnVector) vector;
        return List.of(Math.floorDiv(t.time[r], 1000L), t.nanos[r]);
      }
      case STRUCT: {
        StructColumnVector s = (StructColumnVector) vector;
        List<Object> fields = new ArrayList<>();
        for (int i = 0; i < s.fields.length; i++) {
          fields.add(value(s.fields[i], type.getChildren().get(i), row));
        }
        return fields;
      }
      case LIST: {
        ListColumnVector l = (ListColumnVector) vector;
        List<Object> items = new ArrayList<>();
        for (long i = l.offsets[r]; i < l.offsets[r] + l.lengths[r]; i++) {
          items.add(value(l.child, type.getChildren().get(0), (int) i));
        }
        return items;
      }
      case MAP: {
        MapColumnVector m = (MapColumnVector) vector;
        List<Object> entries = new ArrayList<>();
        for (long i = m.offsets[r]; i < m.offsets[r] + m.lengths[r]; i++) {
          entries.add(List.of(value(m.keys, type.getChildren().get(0), (int) i),
              nullable(value(m.values, type.getChildren().get(1), (int) i))));
        }
        return entries;
      }
      default:
        throw new IllegalArgumentException("unsupported type " + type);
    }
  }

  static Object nullable(Object v) {
    return v == null ? "__null__" : v;
  }

  /** Per column id: count, hasNull, and the type's min/max/sum, read the way readers read them. */
  static List<Object> stats(ColumnStatistics[] columns, TypeDescription schema) {
    List<Object> out = new ArrayList<>();
    for (int id = 0; id < columns.length; id++) {
      ColumnStatistics c = columns[id];
      Map<String, Object> s = new LinkedHashMap<>();
      s.put("count", c.getNumberOfValues());
      s.put("has_null", c.hasNull());
      s.put("type", schema.findSubtype(id).getCategory().getName());
      if (c.getNumberOfValues() > 0) {
        if (c instanceof IntegerColumnStatistics) {
          IntegerColumnStatistics i = (IntegerColumnStatistics) c;
          s.put("min", i.getMinimum());
          s.put("max", i.getMaximum());
        } else if (c instanceof DoubleColumnStatistics) {
          DoubleColumnStatistics d = (DoubleColumnStatistics) c;
          s.put("min", Double.doubleToLongBits(d.getMinimum()));
          s.put("max", Double.doubleToLongBits(d.getMaximum()));
        } else if (c instanceof StringColumnStatistics) {
          StringColumnStatistics t = (StringColumnStatistics) c;
          s.put("min", t.getMinimum());
          s.put("max", t.getMaximum());
        } else if (c instanceof DecimalColumnStatistics) {
          DecimalColumnStatistics d = (DecimalColumnStatistics) c;
          s.put("min", d.getMinimum().toString());
          s.put("max", d.getMaximum().toString());
        } else if (c instanceof DateColumnStatistics) {
          DateColumnStatistics d = (DateColumnStatistics) c;
          s.put("min", d.getMinimumDayOfEpoch());
          s.put("max", d.getMaximumDayOfEpoch());
        } else if (c instanceof TimestampColumnStatistics) {
          TimestampColumnStatistics t = (TimestampColumnStatistics) c;
          Timestamp min = t.getMinimumUTC();
          Timestamp max = t.getMaximumUTC();
          s.put("min", List.of(Math.floorDiv(min.getTime(), 1000L), min.getNanos()));
          s.put("max", List.of(Math.floorDiv(max.getTime(), 1000L), max.getNanos()));
        } else if (c instanceof BooleanColumnStatistics) {
          BooleanColumnStatistics b = (BooleanColumnStatistics) c;
          s.put("true_count", b.getTrueCount());
        } else if (c instanceof BinaryColumnStatistics) {
          s.put("sum", ((BinaryColumnStatistics) c).getSum());
        }
      }
      out.add(s);
    }
    return out;
  }
}
