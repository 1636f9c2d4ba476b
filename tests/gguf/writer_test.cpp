// GGUF writer: byte-identical re-writes of the fixtures (written by llama.cpp's converter and
// llama-quantize), streaming writes, and read(write(x)) == x for every value type.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "testutil.h"

using namespace ds;
using namespace ds::gguf;

namespace {
std::vector<uint8_t> bytes_of(const std::string& path) {
  auto b = test::read_file(path);
  return std::vector<uint8_t>(b.begin(), b.end());
}
}  // namespace

TEST(GgufWriter, RewritesEveryFixtureByteForByte) {
  std::vector<std::string> files = test::model_ggufs();
  files.push_back(test::vocab_gguf("vocab-qwen3"));
  files.push_back(test::vocab_gguf("vocab-qwen35re"));
  for (const auto& p : files) {
    SCOPED_TRACE(p);
    auto f = File::open(p);
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto orig = bytes_of(p);
    auto again = writer_from(*f).to_bytes();
    ASSERT_EQ(again.size(), orig.size());
    EXPECT_TRUE(again == orig);
  }
}

TEST(GgufWriter, StreamingWriteMatchesFixture) {
  std::string src = test::fixture("models/tiny-sym/tiny-sym-q4_k_m.gguf");
  auto f = File::open(src);
  ASSERT_TRUE(f.ok()) << f.error().message;
  // Build the writer from records only (no data copies), then stream the data from the mapping,
  // the big ones in pieces with write_tensor_padding, as `synth` will for multi-GB files.
  Writer w;
  w.set_version(f->version());
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
  EXPECT_EQ(w.header_bytes(), f->data_offset());
  std::string out = test::temp_dir() + "/stream.gguf";
  std::FILE* fp = std::fopen(out.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  ASSERT_TRUE(w.write_header(fp).ok());
  for (size_t k = 0; k < f->tensors().size(); k++) {
    const auto& t = f->tensors()[k];
    EXPECT_EQ(w.tensor_offset(k), t.offset);
    EXPECT_EQ(w.tensor_bytes(k), t.n_bytes);
    if (t.n_bytes > 4096) {
      for (uint64_t off = 0; off < t.n_bytes; off += 1000)
        ASSERT_EQ(std::fwrite(f->tensor_data(t) + off, 1, std::min<uint64_t>(1000, t.n_bytes - off), fp),
                  std::min<uint64_t>(1000, t.n_bytes - off));
      ASSERT_TRUE(w.write_tensor_padding(fp, k).ok());
    } else {
      auto st = w.write_tensor_data(fp, k, f->tensor_data(t), t.n_bytes);
      ASSERT_TRUE(st.ok()) << st.error().message;
    }
  }
  std::fclose(fp);
  EXPECT_TRUE(bytes_of(out) == bytes_of(src));
}

TEST(GgufWriter, StreamingMisuseIsAnError) {
  Writer w;
  w.set("general.architecture", Value::make_str("qwen35"));
  w.add_tensor("a", GgmlType::F32, {8});
  w.add_tensor("b", GgmlType::Q8_0, {64, 2});
  EXPECT_EQ(w.tensor_bytes(1), 2u * 2 * 34);
  std::string out = test::temp_dir() + "/misuse.gguf";
  std::FILE* fp = std::fopen(out.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  ASSERT_TRUE(w.write_header(fp).ok());
  std::vector<uint8_t> data(136);
  auto wrong_size = w.write_tensor_data(fp, 0, data.data(), 31);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.error().message.find("tensor 'a'"), std::string::npos) << wrong_size.error().message;
  auto out_of_order = w.write_tensor_data(fp, 1, data.data(), 136);
  ASSERT_FALSE(out_of_order.ok());
  EXPECT_NE(out_of_order.error().message.find("in order"), std::string::npos) << out_of_order.error().message;
  EXPECT_FALSE(w.write_tensor_data(fp, 2, data.data(), 1).ok());
  std::fclose(fp);
  EXPECT_FALSE(w.write_file("/nonexistent-dir/x.gguf").ok());
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  Writer w(64);  // records general.alignment first
  Value v;
  auto scalar = [&](ValueType t, uint64_t u, int64_t i, double f) {
    Value x;
    x.type = t;
    x.u = u;
    x.i = i;
    x.f = f;
    return x;
  };
  w.set("t.u8", scalar(ValueType::UINT8, 255, 0, 0));
  w.set("t.i8", scalar(ValueType::INT8, 0, -128, 0));
  w.set("t.u16", scalar(ValueType::UINT16, 65535, 0, 0));
  w.set("t.i16", scalar(ValueType::INT16, 0, -32768, 0));
  w.set("t.u32", Value::make_u32(4000000000u));
  w.set("t.i32", Value::make_i32(-2000000000));
  w.set("t.f32", Value::make_f32(-1.5e-7f));
  w.set("t.bool", Value::make_bool(true));
  w.set("t.str", Value::make_str(std::string("nul\0inside ✓", 14)));
  w.set("t.u64", Value::make_u64(std::numeric_limits<uint64_t>::max()));
  w.set("t.i64", scalar(ValueType::INT64, 0, std::numeric_limits<int64_t>::min(), 0));
  w.set("t.f64", scalar(ValueType::FLOAT64, 0, 0, 1.0 / 3));
  w.set("t.strs", Value::make_str_array({"", "a", std::string(300, 'x'), "Ġ"}));
  w.set("t.i32s", Value::make_i32_array({1, -2, 3}));
  w.set("t.f32s", Value::make_f32_array({0.25, -8}));
  w.set("t.bools", Value::make_bool_array({true, false, true}));
  w.set("t.empty", Value::make_i32_array({}));
  Value u16s;
  u16s.type = ValueType::ARRAY;
  u16s.elem_type = ValueType::UINT16;
  u16s.arr_u = {1, 65535};
  w.set("t.u16s", u16s);
  Value f64s;
  f64s.type = ValueType::ARRAY;
  f64s.elem_type = ValueType::FLOAT64;
  f64s.arr_f = {1e300, -0.0};
  w.set("t.f64s", f64s);
  w.set("t.u32", Value::make_u32(7));  // replaced in place, order kept
  w.set_version(2);
  size_t a = w.add_tensor("a", GgmlType::Q4_K, {512, 3});
  size_t b = w.add_tensor("b", GgmlType::BF16, {5, 1, 1, 2});
  std::vector<uint8_t> da(w.tensor_bytes(a)), db(w.tensor_bytes(b));
  for (size_t k = 0; k < da.size(); k++) da[k] = uint8_t(k * 31);
  for (size_t k = 0; k < db.size(); k++) db[k] = uint8_t(k + 1);
  w.set_tensor_data(a, da);
  w.set_tensor_data(b, db);

  auto bytes = w.to_bytes();
  auto f = File::from_bytes(bytes, "roundtrip");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->metadata()[0].key, "general.alignment");
  EXPECT_EQ(f->metadata()[5].key, "t.u32");
  EXPECT_EQ(*f->get_uint("t.u32"), 7u);
  EXPECT_EQ(*f->get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f->get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(f->get_int("t.u64").ok());  // does not fit
  EXPECT_FALSE(f->get_uint("t.i8").ok());  // negative
  EXPECT_EQ(*f->get_float("t.f32"), (double)-1.5e-7f);
  EXPECT_EQ(f->get_string("t.str")->size(), 14u);
  EXPECT_EQ(*f->get_bool("t.bool"), true);
  EXPECT_EQ(*f->get_int_array("t.u16s"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(f->find("t.bools")->arr_u, (std::vector<uint64_t>{1, 0, 1}));
  EXPECT_EQ(f->find("t.empty")->array_size(), 0u);
  const Writer& cw = w;
  ASSERT_EQ(f->metadata().size(), 20u);
  // read(write(x)) == x: same keys, stored types and values; tensors with the same records and bytes.
  Writer w2 = writer_from(*f);
  EXPECT_TRUE(w2.to_bytes() == bytes);
  auto g = File::from_bytes(w2.to_bytes());
  ASSERT_TRUE(g.ok());
  for (size_t k = 0; k < f->metadata().size(); k++) {
    EXPECT_EQ(g->metadata()[k].key, f->metadata()[k].key);
    EXPECT_TRUE(g->metadata()[k].value == f->metadata()[k].value) << f->metadata()[k].key;
  }
  ASSERT_EQ(f->tensors().size(), 2u);
  const auto& tb = f->tensors()[1];
  EXPECT_EQ(tb.n_dims, 4u);
  EXPECT_EQ(tb.ne[3], 2);
  EXPECT_EQ(tb.file_offset % 64, 0u);
  EXPECT_TRUE(std::equal(db.begin(), db.end(), f->tensor_data(tb)));
  EXPECT_TRUE(std::equal(da.begin(), da.end(), f->tensor_data(f->tensors()[0])));
  EXPECT_EQ(cw.n_tensors(), 2u);
}

TEST(GgufWriter, WriteFileThenOpen) {
  Writer w;
  w.set("general.architecture", Value::make_str("qwen35"));
  size_t k = w.add_tensor("x", GgmlType::F32, {3});
  w.add_tensor("zeros", GgmlType::F16, {16, 4});  // no data: written as zeros
  w.set_tensor_data(k, {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 0, 0});
  std::string out = test::temp_dir() + "/wf.gguf";
  ASSERT_TRUE(w.write_file(out).ok());
  EXPECT_TRUE(bytes_of(out) == w.to_bytes());
  auto f = File::open(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  float x[3];
  memcpy(x, f->tensor_data(f->tensors()[0]), 12);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(f->tensors()[1].n_bytes, 128u);
}
