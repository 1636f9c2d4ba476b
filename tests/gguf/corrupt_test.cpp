// Corrupt, truncated and randomly mutated copies of the fixture GGUFs, made in memory at run time:
// each must give an Error that says what is wrong and where (formats.md §2.10), never a crash (run
// this binary in the sanitizer tree too). Byte positions are found from the file itself, so the
// cases follow the fixtures.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "model/config.h"
#include "testutil.h"

using namespace ds;
using namespace ds::gguf;
using Bytes = std::vector<uint8_t>;

namespace {

const std::string kModel = "models/tiny-gqa/tiny-gqa-q4_k_m.gguf";

Bytes load(const std::string& rel) {
  auto b = test::read_file(test::fixture(rel));
  return Bytes(b.begin(), b.end());
}

// Position of the GGUF string `s` (u64 length + bytes) in b[0, end): the last match.
uint64_t find_str(const Bytes& b, const std::string& s, uint64_t end) {
  Bytes pat(8 + s.size());
  uint64_t n = s.size();
  memcpy(pat.data(), &n, 8);
  memcpy(pat.data() + 8, s.data(), s.size());
  auto it = std::find_end(b.begin(), b.begin() + end, pat.begin(), pat.end());
  EXPECT_NE(it, b.begin() + end) << "not found: " << s;
  return it - b.begin();
}

struct Layout {
  Bytes bytes;
  uint64_t data_offset;
  std::vector<TensorInfo> tensors;
  // Where the value of key k starts (after its u32 type).
  uint64_t key_value(const std::string& k) const { return find_str(bytes, k, data_offset) + 8 + k.size() + 4; }
  uint64_t key_type(const std::string& k) const { return key_value(k) - 4; }
  // Fields of tensor record `name`.
  uint64_t rec(const std::string& name) const { return find_str(bytes, name, data_offset); }
  uint64_t n_dims_at(const std::string& name) const { return rec(name) + 8 + name.size(); }
  uint64_t ne_at(const std::string& name, int d) const { return n_dims_at(name) + 4 + 8 * d; }
  uint64_t type_at(const std::string& name) const { return n_dims_at(name) + 4 + 8 * info(name).n_dims; }
  uint64_t offset_at(const std::string& name) const { return type_at(name) + 4; }
  const TensorInfo& info(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return tensors[0];
  }
};

Layout layout(Bytes b) {
  auto f = File::from_bytes(b, "orig");
  EXPECT_TRUE(f.ok());
  return Layout{std::move(b), f->data_offset(), f->tensors()};
}

struct Case {
  std::string what;
  std::function<void(Layout&)> corrupt;
  std::vector<std::string> expect;  // substrings of the error message
};

void expect_error(const Bytes& b, const std::vector<std::string>& expect, const std::string& what) {
  auto f = File::from_bytes(b, "corrupt.gguf");
  ASSERT_FALSE(f.ok()) << what << ": accepted";
  const std::string& m = f.error().message;
  EXPECT_EQ(m.rfind("gguf: corrupt.gguf: ", 0), 0u) << what << ": " << m;
  EXPECT_NE(m.find("(offset 0x"), std::string::npos) << what << ": " << m;
  for (const auto& s : expect) EXPECT_NE(m.find(s), std::string::npos) << what << ": '" << s << "' not in: " << m;
}

}  // namespace

TEST(GgufCorrupt, HandCorruptedFixture) {
  const Layout base = layout(load(kModel));
  const std::string last = base.tensors.back().name;
  std::vector<Case> cases = {
      {"magic", [](Layout& l) { l.bytes[1] = 'X'; }, {"not a GGUF file", "\"GXUF\""}},
      {"version 1", [](Layout& l) { test::poke<uint32_t>(l.bytes, 4, 1); }, {"version 1"}},
      {"version 4", [](Layout& l) { test::poke<uint32_t>(l.bytes, 4, 4); }, {"unsupported GGUF version 4"}},
      {"big-endian", [](Layout& l) { test::poke<uint32_t>(l.bytes, 4, 0x03000000); }, {"big-endian"}},
      {"tensor count", [](Layout& l) { test::poke<uint64_t>(l.bytes, 8, uint64_t(1) << 40); }, {"tensor count 1099511627776"}},
      {"negative kv count", [](Layout& l) { test::poke<int64_t>(l.bytes, 16, -1); }, {"metadata count"}},
      // The first tensor record is then read as a metadata pair; where it fails depends on its bytes.
      {"one kv too many", [](Layout& l) { test::poke<uint64_t>(l.bytes, 16, test::peek<uint64_t>(l.bytes, 16) + 1); }, {}},
      {"key too long", [](Layout& l) { test::poke<uint64_t>(l.bytes, 24, 70000); }, {"key of metadata pair 0", "70000"}},
      {"empty key", [](Layout& l) { test::poke<uint64_t>(l.bytes, 24, 0); }, {"metadata pair 0: empty key"}},
      {"value type 13", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.key_type("general.name"), 13); },
       {"key 'general.name'", "value type id 13"}},
      {"array of arrays", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.key_value("tokenizer.ggml.tokens"), 9); },
       {"tokenizer.ggml.tokens", "arrays of arrays"}},
      {"array elem type", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.key_value("tokenizer.ggml.merges"), 77); },
       {"tokenizer.ggml.merges", "element type id 77"}},
      {"array count", [](Layout& l) { test::poke<uint64_t>(l.bytes, l.key_value("tokenizer.ggml.tokens") + 4, uint64_t(1) << 60); },
       {"tokenizer.ggml.tokens", "array of 1152921504606846976 STRING"}},
      {"array string length", [](Layout& l) { test::poke<uint64_t>(l.bytes, l.key_value("tokenizer.ggml.tokens") + 12, 1u << 30); },
       {"tokenizer.ggml.tokens", "string 0 of 4032", "runs past the end"}},
      {"string length", [](Layout& l) { test::poke<uint64_t>(l.bytes, l.key_value("tokenizer.chat_template"), ~uint64_t(0)); },
       {"key 'tokenizer.chat_template'", "runs past the end"}},
      {"duplicate key", [](Layout& l) { memcpy(&l.bytes[l.key_type("general.type") - 4], "name", 4); },
       {"duplicate metadata key 'general.name'"}},
      {"duplicate tensor", [](Layout& l) { l.bytes[l.rec("blk.0.ssm_a") + 8 + 4] = '1'; }, {"duplicate tensor name 'blk.1.ssm_a'"}},
      {"tensor name too long", [](Layout& l) { test::poke<uint64_t>(l.bytes, l.rec("output.weight"), 65); },
       {"name of tensor record 0", "limit of 64"}},
      {"n_dims 0", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.n_dims_at("output_norm.weight"), 0); },
       {"tensor 'output_norm.weight'", "n_dims is 0"}},
      {"n_dims 5", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.n_dims_at("output_norm.weight"), 5); },
       {"tensor 'output_norm.weight'", "n_dims is 5"}},
      {"negative dim", [](Layout& l) { test::poke<int64_t>(l.bytes, l.ne_at("token_embd.weight", 1), -4032); },
       {"tensor 'token_embd.weight'", "dimension 1 is negative"}},
      {"element overflow", [](Layout& l) { test::poke<int64_t>(l.bytes, l.ne_at("token_embd.weight", 1), int64_t(1) << 62); },
       {"tensor 'token_embd.weight'", "element count", "overflows"}},
      {"byte overflow", [](Layout& l) { test::poke<int64_t>(l.bytes, l.ne_at("output_norm.weight", 0), int64_t(1) << 62); },
       {"tensor 'output_norm.weight'", "byte size", "overflows"}},
      {"retired type", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.type_at("blk.0.ffn_up.weight"), 4); },
       {"tensor 'blk.0.ffn_up.weight'", "unknown tensor type id 4", "retired"}},
      {"unknown type", [](Layout& l) { test::poke<uint32_t>(l.bytes, l.type_at("blk.0.ffn_up.weight"), 42); },
       {"tensor 'blk.0.ffn_up.weight'", "unknown tensor type id 42"}},
      {"ne0 not a block multiple", [](Layout& l) { test::poke<int64_t>(l.bytes, l.ne_at("blk.0.ffn_up.weight", 0), 255); },
       {"tensor 'blk.0.ffn_up.weight'", "ne[0] = 255", "Q4_K block size 256"}},
      {"offset unaligned",
       [](Layout& l) { test::poke<uint64_t>(l.bytes, l.offset_at("output_norm.weight"), l.info("output_norm.weight").offset + 16); },
       {"tensor 'output_norm.weight'", "not a multiple of the alignment 32"}},
      {"past the end", [&](Layout& l) { test::poke<uint64_t>(l.bytes, l.offset_at(last), l.info(last).offset + 4096); },
       {"tensor '" + last + "'", "past the end"}},
      {"huge offset", [&](Layout& l) { test::poke<uint64_t>(l.bytes, l.offset_at(last), ~uint64_t(31)); },
       {"tensor '" + last + "'", "past the end"}},
      {"overlap",
       [](Layout& l) { test::poke<uint64_t>(l.bytes, l.offset_at("token_embd.weight"), l.info("output_norm.weight").offset); },
       {"overlaps", "token_embd.weight", "output_norm.weight"}},
      {"data section past end", [](Layout& l) { l.bytes.resize(l.data_offset - 1); }, {"data section"}},
      {"last tensor cut", [](Layout& l) { l.bytes.resize(l.tensors.back().file_offset + l.tensors.back().n_bytes - 1); },
       {"tensor '" + last + "'", "past the end"}},
  };
  for (const auto& c : cases) {
    Layout l = base;
    c.corrupt(l);
    expect_error(l.bytes, c.expect, c.what);
  }
}

TEST(GgufCorrupt, BadAlignmentAndBool) {
  // Written with a stand-in key name (the writer refuses bad alignments), then renamed in place.
  auto make = [](Value v) {
    Writer w;
    w.set("general.alignmenX", std::move(v));
    w.set("flag", Value::make_bool(true));
    w.add_tensor("t", GgmlType::F32, {8});
    auto b = w.to_bytes();
    b[24 + 8 + 16] = 't';
    return b;
  };
  expect_error(make(Value::make_i32(32)), {"general.alignment has type INT32, expected UINT32"}, "INT32 alignment");
  expect_error(make(Value::make_u32(48)), {"general.alignment is 48", "power of two"}, "alignment 48");
  expect_error(make(Value::make_u32(0)), {"general.alignment is 0"}, "alignment 0");
  expect_error(make(Value::make_u32(4)), {"general.alignment is 4"}, "alignment 4");
  auto ok = make(Value::make_u32(64));
  auto f = File::from_bytes(ok);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  // BOOL bytes other than 0/1. The bool value is the last metadata byte before the tensor record.
  auto b = make(Value::make_u32(32));
  uint64_t pos = find_str(b, "flag", b.size()) + 8 + 4 + 4;
  ASSERT_EQ(b[pos], 1);
  b[pos] = 2;
  expect_error(b, {"key 'flag'", "BOOL byte is 2"}, "bool 2");
}

TEST(GgufCorrupt, EveryTruncationOfTheHeaderFails) {
  const Layout l = layout(load(kModel));
  // Every cut inside the header and records (step 1 near the start, then every 53 bytes), then cuts
  // inside the data: a file fails exactly when it ends before the last tensor's last byte.
  uint64_t need = 0;
  for (const auto& t : l.tensors) need = std::max(need, t.file_offset + t.n_bytes);
  std::vector<uint64_t> cuts;
  for (uint64_t n = 0; n < 600; n++) cuts.push_back(n);
  for (uint64_t n = 600; n < l.data_offset; n += 53) cuts.push_back(n);
  for (uint64_t n : {l.data_offset, l.data_offset + 1, need / 2, need - 1, need, (uint64_t)l.bytes.size() - 1}) cuts.push_back(n);
  size_t n_ok = 0, expect_ok = 0;
  for (uint64_t n : cuts) {
    expect_ok += n >= need;
    Bytes b(l.bytes.begin(), l.bytes.begin() + n);
    auto f = File::from_bytes(std::move(b), "cut.gguf");
    if (n < need) {
      ASSERT_FALSE(f.ok()) << "cut at " << n << " accepted";
      EXPECT_NE(f.error().message.find("offset 0x"), std::string::npos) << f.error().message;
    } else {
      ASSERT_TRUE(f.ok()) << "cut at " << n << ": " << f.error().message;
      n_ok++;
    }
  }
  EXPECT_EQ(n_ok, expect_ok);  // cuts that remove only the last tensor's padding
  EXPECT_GE(n_ok, 1u);
}

TEST(GgufCorrupt, RandomMutationsNeverCrash) {
  // A small but complete qwen35 file (the fixture's metadata with short arrays, three tensors), so
  // that mutations reach the tensor checks and the config checks too.
  auto src = File::open(test::fixture(kModel));
  ASSERT_TRUE(src.ok());
  Writer w;
  for (const auto& kv : src->metadata()) {
    Value v = kv.value;
    if (kv.key == "tokenizer.ggml.tokens") v.arr_s.resize(8);
    if (kv.key == "tokenizer.ggml.token_type") v.arr_i.resize(8);
    if (kv.key == "tokenizer.ggml.merges") v.arr_s.resize(4);
    if (kv.key == "tokenizer.chat_template") v.s.resize(40);
    w.set(kv.key, v);
  }
  w.add_tensor("token_embd.weight", GgmlType::Q4_K, {256, 8});
  w.add_tensor("output_norm.weight", GgmlType::F32, {256});
  w.add_tensor("output.weight", GgmlType::Q6_K, {256, 8});
  const Bytes mini = w.to_bytes();
  {
    auto f = File::from_bytes(mini);
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto c = qwen35_config_from_gguf(*f);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->n_vocab, 8);
  }
  std::mt19937_64 rng(1234);
  size_t accepted = 0, configs = 0;
  const int kIters = 4000;
  for (int it = 0; it < kIters; it++) {
    Bytes b = mini;
    int n_mut = 1 + rng() % 4;
    for (int m = 0; m < n_mut; m++) {
      uint64_t pos = rng() % b.size();
      switch (rng() % 6) {
        case 0: b[pos] = uint8_t(rng()); break;
        case 1: b[pos] ^= uint8_t(1u << (rng() % 8)); break;
        case 2: {  // an interesting integer over 1, 4 or 8 bytes
          static const uint64_t vals[] = {0, 1, 2, 3, 4, 9, 12, 13, 31, 32, 33, 64, 255, 256, 65535, 1ull << 31,
                                          1ull << 32, 1ull << 62, ~0ull, ~0ull - 7};
          uint64_t v = vals[rng() % std::size(vals)];
          size_t w8 = std::min<size_t>(b.size() - pos, (size_t[]){1, 4, 8}[rng() % 3]);
          memcpy(&b[pos], &v, w8);
          break;
        }
        case 3: b.resize(pos); break;
        case 4: b.erase(b.begin() + pos, b.begin() + std::min<uint64_t>(b.size(), pos + 1 + rng() % 16)); break;
        default: b.insert(b.begin() + pos, 1 + rng() % 16, uint8_t(rng())); break;
      }
      if (b.empty()) break;
    }
    auto f = File::from_bytes(b, "mut.gguf");
    if (!f.ok()) {
      EXPECT_EQ(f.error().message.rfind("gguf: mut.gguf: ", 0), 0u) << f.error().message;
      continue;
    }
    accepted++;
    auto c = qwen35_config_from_gguf(*f);
    configs += c.ok();
    // Whatever parses re-writes canonically and reads back the same.
    auto again = writer_from(*f).to_bytes();
    auto g = File::from_bytes(again);
    ASSERT_TRUE(g.ok()) << g.error().message;
    ASSERT_EQ(g->metadata().size(), f->metadata().size());
    for (size_t k = 0; k < f->metadata().size(); k++) {
      EXPECT_EQ(g->metadata()[k].key, f->metadata()[k].key);
      EXPECT_TRUE(g->metadata()[k].value == f->metadata()[k].value);
    }
    EXPECT_TRUE(writer_from(*g).to_bytes() == again);
  }
  // Most single-byte changes hit token strings or tensor data and leave a valid file; make sure the
  // loop exercised both outcomes.
  EXPECT_GT(accepted, 100u);
  EXPECT_LT(accepted, (size_t)kIters);
  EXPECT_GT(configs, 50u);
}
