// The GGUF reader on the real fixture files and on the worked example of formats.md §2.9.
#include <gtest/gtest.h>

#include <chrono>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "testutil.h"

using namespace ds;
using namespace ds::gguf;

namespace {

// formats.md §2.9, byte for byte.
std::vector<uint8_t> worked_example() {
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) { for (int k = 0; k < 4; k++) b.push_back(uint8_t(v >> (8 * k))); };
  auto u64 = [&](uint64_t v) { for (int k = 0; k < 8; k++) b.push_back(uint8_t(v >> (8 * k))); };
  auto str = [&](const std::string& s) { u64(s.size()); b.insert(b.end(), s.begin(), s.end()); };
  u32(0x46554747); u32(3); u64(1); u64(2);
  str("general.architecture"); u32(8); str("qwen35");
  str("qwen35.block_count"); u32(4); u32(2);
  str("output_norm.weight"); u32(1); u64(4); u32(0); u64(0);
  b.resize(160, 0);
  for (float f : {1.0f, 2.0f, 0.5f, -1.0f}) { uint32_t x; memcpy(&x, &f, 4); u32(x); }
  b.resize(192, 0);
  return b;
}

}  // namespace

TEST(GgufReader, WorkedExample) {
  auto bytes = worked_example();
  // Offsets from the table in formats.md §2.9.
  EXPECT_EQ(test::peek<uint32_t>(bytes, 0x60), 4u);
  EXPECT_EQ(test::peek<uint32_t>(bytes, 0x82), 1u);
  auto f = File::from_bytes(bytes, "example");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 160u);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(*f->get_string("general.architecture"), "qwen35");
  EXPECT_EQ(*f->get_uint("qwen35.block_count"), 2u);
  ASSERT_EQ(f->tensors().size(), 1u);
  const TensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.name, "output_norm.weight");
  EXPECT_EQ(t.n_dims, 1u);
  EXPECT_EQ(t.ne[0], 4);
  EXPECT_EQ(t.file_offset, 160u);
  EXPECT_EQ(t.n_bytes, 16u);
  float v[4];
  memcpy(v, f->tensor_data(t), 16);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[3], -1.0f);
  // The writer produces exactly the documented bytes.
  Writer w;
  w.set("general.architecture", Value::make_str("qwen35"));
  w.set("qwen35.block_count", Value::make_u32(2));
  size_t k = w.add_tensor("output_norm.weight", GgmlType::F32, {4});
  std::vector<uint8_t> data(16);
  memcpy(data.data(), &bytes[160], 16);
  w.set_tensor_data(k, data);
  EXPECT_EQ(w.to_bytes(), bytes);
}

TEST(GgufReader, AllModelFixturesOpen) {
  auto files = test::model_ggufs();
  ASSERT_GE(files.size(), 5u);
  for (const auto& p : files) {
    auto f = File::open(p);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->version(), 3u) << p;
    EXPECT_EQ(*f->get_string("general.architecture"), "qwen35") << p;
    EXPECT_GT(f->tensors().size(), 40u) << p;
    // Each tensor is aligned and inside the file; ggml's layout packs them in record order.
    uint64_t expect_off = 0;
    for (const auto& t : f->tensors()) {
      EXPECT_EQ(t.offset, expect_off) << p << " " << t.name;
      EXPECT_EQ(t.file_offset % f->alignment(), 0u);
      EXPECT_LE(t.file_offset + t.n_bytes, f->file_size());
      expect_off = t.offset + (t.n_bytes + f->alignment() - 1) / f->alignment() * f->alignment();
    }
    EXPECT_EQ(f->data_offset() + expect_off, f->file_size()) << p;
    auto emb = f->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->ne[0], 256);
    EXPECT_EQ(emb->ne[1], 4032);
    EXPECT_EQ(f->find_tensor("nope"), nullptr);
  }
}

TEST(GgufReader, TypedGetters) {
  auto f = File::open(test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f->get_uint("qwen35.embedding_length"), 256u);
  EXPECT_EQ(*f->get_int("qwen35.embedding_length"), 256);
  EXPECT_NEAR(*f->get_float("qwen35.attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
  EXPECT_EQ(*f->get_int_array("qwen35.rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
  auto toks = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(toks.ok());
  EXPECT_EQ(toks->size(), 4032u);
  EXPECT_EQ((*toks)[0], "!");
  EXPECT_EQ(f->find("tokenizer.ggml.token_type")->elem_type, ValueType::INT32);
  // Wrong type and missing keys name the key.
  auto bad = f->get_string("qwen35.embedding_length");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("qwen35.embedding_length"), std::string::npos);
  EXPECT_NE(bad.error().message.find("UINT32"), std::string::npos);
  auto missing = f->get_uint("qwen35.nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing key 'qwen35.nope'"), std::string::npos);
  EXPECT_FALSE(f->get_float("qwen35.embedding_length").ok());
  EXPECT_FALSE(f->get_bool("qwen35.embedding_length").ok());
  EXPECT_EQ(f->get_uint_or("qwen35.nope", 7), 7u);
  EXPECT_EQ(f->get_uint_or("general.architecture", 7), 7u);
  EXPECT_EQ(f->get_uint_or("qwen35.block_count", 7), 5u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->to_string(3), "[4032 × STRING] \"!\", \"\\\"\", \"#\", ...");
  EXPECT_EQ(f->find("qwen35.attention.layer_norm_rms_epsilon")->to_string(), "1e-06");
}

TEST(GgufReader, VocabOnlyFilesParseFast) {
  for (const char* name : {"vocab-qwen3", "vocab-qwen35re"}) {
    std::string p = test::vocab_gguf(name);
    ASSERT_FALSE(p.empty());
    auto t0 = std::chrono::steady_clock::now();
    auto f = File::open(p);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_LT(s, 1.0) << name;
    EXPECT_TRUE(f->tensors().empty());
    auto toks = f->find("tokenizer.ggml.tokens");
    ASSERT_NE(toks, nullptr);
    EXPECT_EQ(toks->arr_s.size(), 151936u);  // fixtures/README.md: padded to 151,936
    EXPECT_EQ(f->find("tokenizer.ggml.token_type")->array_size(), 151936u);
    EXPECT_GT(f->find("tokenizer.ggml.merges")->array_size(), 100000u);
    EXPECT_EQ(*f->get_string("tokenizer.ggml.pre"), std::string(name) == "vocab-qwen3" ? "qwen2" : "qwen35");
  }
}
