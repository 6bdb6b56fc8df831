// CSV files (data/readers/csv_reader.h): numeric columns packed as features (u8 when every value is
// a byte, else f32), the label column by name or convention, text labels mapped to classes, quoted
// values; ragged rows, empty and non-numeric values refused at file:line:column.
#include <catch2/catch.hpp>

#include "data/readers/csv_reader.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::TempDir;
using troupe::testing::write_text;

TEST_CASE("csv: features, the label column and type inference", "[data][csv]") {
  TempDir dir;
  write_text(dir.file("bytes.csv"), "a,label,b\n0,1,255\n7,0,3\r\n\n12,2,9\n");
  auto t = read_csv(dir.file("bytes.csv"));
  INFO(t.status().to_string());
  REQUIRE(t.ok());
  REQUIRE(t->fields.size() == 2);
  const Field& x = t->fields[0];
  CHECK(x.name == "features");
  CHECK(x.array.type == ElemType::u8);
  CHECK(x.array.shape == std::vector<int64_t>{3, 2});
  CHECK(x.columns == std::vector<std::string>{"a", "b"});
  CHECK(x.array.value(1) == 255);
  CHECK(x.array.value(4) == 12);
  const Field& y = t->fields[1];
  CHECK(y.name == "label");
  CHECK(y.array.type == ElemType::i32);
  CHECK(y.array.value(2) == 2);

  write_text(dir.file("floats.csv"), "x1,x2,species\n0.5,-1,setosa\n\"1e3\",2,virginica\n3,4,setosa\n");
  auto f = read_csv(dir.file("floats.csv"), CsvOptions{"species"});
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  CHECK(f->fields[0].array.type == ElemType::f32);
  CHECK(f->fields[0].array.value(0) == 0.5);
  CHECK(f->fields[0].array.value(2) == 1000);
  const Field& s = f->fields[1];
  CHECK(s.classes == std::vector<std::string>{"setosa", "virginica"});
  CHECK(s.array.value(0) == 0);
  CHECK(s.array.value(1) == 1);
  CHECK(s.array.value(2) == 0);

  write_text(dir.file("bom.csv"), "\xEF\xBB\xBFlabel,x\n1,2\n");  // Excel's byte order mark
  auto bom = read_csv(dir.file("bom.csv"));
  REQUIRE(bom.ok());
  CHECK(bom->find("label"));

  write_text(dir.file("quoted.csv"), "name,label\n\"1,5\",1\n");  // a quoted comma is part of the value
  auto q = read_csv(dir.file("quoted.csv"));
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().message().find("quoted.csv:2:1") != std::string::npos);
}

TEST_CASE("csv: bad rows are refused at file:line:column", "[data][csv][errors]") {
  TempDir dir;
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"a,b,label\n1,2,0\n3,4\n", "ragged.csv:3: 2 values, the header has 3 columns"},
      {"a,b,label\n1,2,0\n3,x7,1\n", "ragged.csv:3:3: 'x7' in column 'b' is not a finite number"},
      {"a,b,label\n1,,0\n", "ragged.csv:2:3: an empty value in column 'b'"},
      {"a,b,label\n1,nan,0\n", "ragged.csv:2:3: 'nan' in column 'b' is not a finite number"},
      {"a,b,label\n\"1,2,0\n", "ragged.csv:2:1: unterminated quote"},
      {"", "empty CSV file"},
      {"a,b,label\n", "no data rows"},
      {"a,label\n1,0\n2,1\n3,n/a\n", "ragged.csv:4:3: 'n/a' in the label column 'label', whose first labels are numbers"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    write_text(dir.file("ragged.csv"), c.text);
    auto t = read_csv(dir.file("ragged.csv"));
    REQUIRE_FALSE(t.ok());
    INFO(t.status().to_string());
    CHECK(t.status().code() == Code::invalid_argument);
    CHECK(t.status().message().find(c.says) != std::string::npos);
  }
  write_text(dir.file("t.csv"), "a,b\n1,2\n");
  auto named = read_csv(dir.file("t.csv"), CsvOptions{"kind"});
  REQUIRE_FALSE(named.ok());
  CHECK(named.status().message().find("no column named 'kind'") != std::string::npos);
}

}  // namespace
}  // namespace troupe::data
