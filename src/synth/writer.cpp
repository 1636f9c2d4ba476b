// Metadata and streamed tensor data of a synthetic model. Values are a pure function of (seed, tensor
// index, position), generated in fixed grains of kGrain elements so the output does not depend on the
// thread count or the chunking. Big models get random block bytes with every f16 scale set to 2^-10
// (no NaN/Inf, magnitudes ~1); `tiny` gets N(0, 0.06) weights quantized with ds::quant::quantize_row.
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>

#include "core/fp16.h"
#include "core/log.h"
#include "quant/quant.h"
#include "synth/synth.h"

namespace ds::synth {
namespace {

using gguf::Value;

constexpr uint64_t kGrain = 1 << 16;           // elements per independently seeded piece (x 256)
constexpr uint64_t kChunkBytes = 64ull << 20;  // bytes generated and written per step
constexpr uint16_t kScaleF16 = 0x1400;         // 2^-10 as an IEEE half
constexpr float kSigma = 0.06f;                // tiny weights, as the fixture models (N(0, 0.06))

// splitmix64: tiny state, good statistics, ~1 ns per 8 bytes.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return (float)(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float gauss() {
    float u1 = std::max(uniform(), 1e-7f), u2 = uniform();
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
  }
};

uint64_t grain_seed(uint64_t seed, size_t index, uint64_t grain) {
  Rng r(seed ^ (0xD1B54A32D192ED03ull * (index + 1)) ^ (0x8CB92BA72F3D8DD7ull * (grain + 1)));
  return r.next();
}

// Byte offsets of the f16 scale fields inside one block, for the types synth writes.
std::vector<size_t> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return {0, 2};  // d, dmin
    case GgmlType::Q6_K: return {208};   // d (after ql, qh, scales)
    case GgmlType::Q8_0: return {0};     // d
    case GgmlType::Q5_0: return {0};     // d
    case GgmlType::Q3_K: return {108};   // d (after hmask, qs, scales)
    case GgmlType::Q5_K: return {0, 2};  // d, dmin
    case GgmlType::Q5_1: return {0, 2};  // d, m
    case GgmlType::IQ4_NL: return {0};   // d
    default: return {};
  }
}

float f32_value(Init init, Rng& r) {
  switch (init) {
    case Init::Norm: return 1.0f + r.uniform(-0.1f, 0.1f);
    case Init::SsmA: return -std::exp(r.uniform(-1.0f, 1.0f));  // -exp(A_log)
    case Init::DtBias: return r.uniform(-0.5f, 0.5f);
    case Init::Conv: return r.uniform(-0.5f, 0.5f);  // HF init bound 1/sqrt(Kc)
    case Init::Matrix: return r.gauss() * kSigma;
  }
  return 0;
}

void fill_grain(const Shape& s, const PlannedTensor& t, const GgmlTypeInfo& info, Rng& r, uint64_t n, uint8_t* dst,
                std::vector<float>& scratch) {
  if (t.type == GgmlType::F32) {
    float* f = reinterpret_cast<float*>(dst);
    for (uint64_t i = 0; i < n; i++) f[i] = f32_value(t.init, r);
    return;
  }
  if (s.real_weights && quant::can_quantize(t.type)) {
    scratch.resize(n);
    for (uint64_t i = 0; i < n; i++) scratch[i] = r.gauss() * kSigma;
    quant::quantize_row(t.type, scratch.data(), dst, (int64_t)n);
    return;
  }
  if (t.type == GgmlType::BF16) {
    uint16_t* h = reinterpret_cast<uint16_t*>(dst);
    for (uint64_t i = 0; i < n;) {
      const uint64_t z = r.next();  // 4 values per draw: uniform in [-0.05, 0.05)
      for (int k = 0; k < 4 && i < n; k++, i++) {
        const float u = (float)((z >> (16 * k)) & 0xffff) * (1.0f / 65536.0f);
        h[i] = f32_to_bf16((u - 0.5f) * 0.1f);
      }
    }
    return;
  }
  const uint64_t bytes = n / info.block_size * info.type_size;
  uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t z = r.next();
    std::memcpy(dst + i, &z, 8);
  }
  if (i < bytes) {
    uint64_t z = r.next();
    std::memcpy(dst + i, &z, bytes - i);
  }
  const auto fields = f16_fields(t.type);
  for (uint64_t b = 0; b < bytes; b += info.type_size)
    for (size_t off : fields) std::memcpy(dst + b + off, &kScaleF16, 2);
}

std::string model_name(const Shape& s) { return "Qwen3.5-" + s.size + " synthetic (random weights)"; }

}  // namespace

void fill_tensor(const Shape& s, const PlannedTensor& t, uint64_t seed, size_t index, uint64_t first, uint64_t n,
                 uint8_t* dst) {
  const auto info = *ggml_type_info(t.type);
  const uint64_t g0 = first / kGrain, g1 = (first + n + kGrain - 1) / kGrain;
#pragma omp parallel if (g1 - g0 > 1)
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic)
    for (int64_t g = (int64_t)g0; g < (int64_t)g1; g++) {
      const uint64_t e0 = (uint64_t)g * kGrain, e1 = std::min(e0 + kGrain, first + n);
      Rng r(grain_seed(seed, index, (uint64_t)g));
      fill_grain(s, t, info, r, e1 - e0, dst + (e0 - first) / info.block_size * info.type_size, scratch);
    }
  }
}

Result<Prepared> prepare(const Options& o) {
  DS_ASSIGN(Shape s, preset(o.size));
  Vocab vocab;
  if (o.vocab_path.empty()) {
    vocab = builtin_vocab();
  } else {
    DS_ASSIGN(vocab, vocab_from_gguf(o.vocab_path));
  }
  const int64_t n_vocab = std::max<int64_t>(s.n_vocab, vocab.size());
  vocab.pad_to(n_vocab);

  Prepared p{s, plan_tensors(s, o.mix, o.mtp, n_vocab), gguf::Writer(), 0, 0};
  p.n_params = count_params(p.plan);
  gguf::Writer& w = p.writer;
  const std::string a = "qwen35.";
  // Key order as llama-quantize writes it (the converter's keys, then quantization_version, file_type).
  w.set("general.architecture", Value::make_str("qwen35"));
  w.set("general.type", Value::make_str("model"));
  w.set("general.name", Value::make_str(model_name(s)));
  w.set("general.size_label", Value::make_str(size_label(p.n_params)));
  w.set(a + "block_count", Value::make_u32((uint32_t)(s.n_layer + (o.mtp ? 1 : 0))));
  w.set(a + "context_length", Value::make_u32((uint32_t)s.n_ctx_train));
  w.set(a + "embedding_length", Value::make_u32((uint32_t)s.n_embd));
  w.set(a + "feed_forward_length", Value::make_u32((uint32_t)s.n_ff));
  w.set(a + "attention.head_count", Value::make_u32((uint32_t)s.n_head));
  w.set(a + "attention.head_count_kv", Value::make_u32((uint32_t)s.n_head_kv));
  w.set(a + "rope.dimension_sections", Value::make_i32_array(s.rope_sections));
  w.set(a + "rope.freq_base", Value::make_f32((float)s.rope_base));
  w.set(a + "attention.layer_norm_rms_epsilon", Value::make_f32((float)s.rms_eps));
  w.set(a + "attention.key_length", Value::make_u32((uint32_t)s.head_dim));
  w.set(a + "attention.value_length", Value::make_u32((uint32_t)s.head_dim));
  w.set(a + "ssm.conv_kernel", Value::make_u32((uint32_t)s.conv_kernel));
  w.set(a + "ssm.state_size", Value::make_u32((uint32_t)s.d_state));
  w.set(a + "ssm.group_count", Value::make_u32((uint32_t)s.n_k_heads));
  w.set(a + "ssm.time_step_rank", Value::make_u32((uint32_t)s.n_v_heads));
  w.set(a + "ssm.inner_size", Value::make_u32((uint32_t)s.value_dim()));
  w.set(a + "full_attention_interval", Value::make_u32((uint32_t)s.full_attn_interval));
  w.set(a + "rope.dimension_count", Value::make_u32((uint32_t)s.n_rot));
  if (o.mtp) w.set(a + "nextn_predict_layers", Value::make_u32(1));
  for (auto& kv : vocab.keys) w.set(kv.key, std::move(kv.value));
  w.set("general.quantization_version", Value::make_u32(2));
  w.set("general.file_type", Value::make_u32(mix_file_type(o.mix)));
  for (const auto& t : p.plan) w.add_tensor(t.name, t.type, t.ne);
  // Header, then every tensor padded to the alignment (the last one too).
  const size_t last = w.n_tensors() - 1;
  p.file_bytes = w.header_bytes() + w.tensor_offset(last) + w.tensor_bytes(last);
  p.file_bytes += (w.alignment() - p.file_bytes % w.alignment()) % w.alignment();
  return p;
}

Status write_model(const Options& o, const ProgressFn& progress) {
  if (o.out.empty()) return err("synth: no output path given");
  DS_ASSIGN(Prepared p, prepare(o));
  if (p.shape.real_weights) {
    for (const auto& t : p.plan)
      if (t.type != GgmlType::F32 && !quant::can_quantize(t.type)) {
        spdlog::warn("synth: no quantizer for {} in this build: {} and other matrices get random blocks",
                     ggml_type_name(t.type), t.name);
        break;
      }
  }
  namespace fs = std::filesystem;
  const fs::path out(o.out);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return err("synth: output folder '{}' does not exist", dir.string());
  auto space = fs::space(dir, ec);
  if (!ec && space.available < p.file_bytes)
    return err("synth: {} needs {:.2f} GB but only {:.2f} GB are free in '{}'", o.out, p.file_bytes / 1e9,
               space.available / 1e9, dir.string());
  if (o.threads > 0) omp_set_num_threads(o.threads);

  const std::string tmp = o.out + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return err("synth: cannot create '{}': {}", tmp, std::strerror(errno));
  std::vector<char> iobuf(4 << 20);
  std::setvbuf(f, iobuf.data(), _IOFBF, iobuf.size());
  auto fail = [&](Error e) -> Status {
    std::fclose(f);
    fs::remove(tmp, ec);
    return e;
  };
  if (auto st = p.writer.write_header(f); !st.ok()) return fail(st.error());

  uint64_t total = 0, done = 0;
  for (const auto& t : p.plan) total += t.n_bytes();
  // Two buffers: one is written (on another thread) while the next is generated.
  std::vector<uint8_t> buf[2];
  std::future<bool> pending;
  int cur = 0;
  auto wait_pending = [&]() -> bool { return !pending.valid() || pending.get(); };
  for (size_t i = 0; i < p.plan.size(); i++) {
    const PlannedTensor& t = p.plan[i];
    const auto info = *ggml_type_info(t.type);
    const uint64_t n_el = t.n_elements();
    // Elements per step: a whole number of grains (the seeding unit).
    const uint64_t step = std::max<uint64_t>(kChunkBytes / info.type_size * info.block_size / kGrain, 1) * kGrain;
    for (uint64_t e = 0; e < n_el; e += step) {
      const uint64_t n = std::min(step, n_el - e);
      const uint64_t bytes = n / info.block_size * info.type_size;
      buf[cur].resize(bytes);
      fill_tensor(p.shape, t, o.seed, i, e, n, buf[cur].data());
      if (!wait_pending()) return fail(err("synth: write to '{}' failed: {}", tmp, std::strerror(errno)));
      pending = std::async(std::launch::async, [f, data = buf[cur].data(), bytes] {
        return std::fwrite(data, 1, bytes, f) == bytes;
      });
      cur ^= 1;
      done += bytes;
      if (progress) progress(done, total);
    }
    if (!wait_pending()) return fail(err("synth: write to '{}' failed: {}", tmp, std::strerror(errno)));
    if (auto st = p.writer.write_tensor_padding(f, i); !st.ok()) return fail(st.error());
  }
  if (std::fflush(f) != 0 || std::ferror(f)) return fail(err("synth: write to '{}' failed: {}", tmp, std::strerror(errno)));
  if (std::fclose(f) != 0) {
    fs::remove(tmp, ec);
    return err("synth: closing '{}' failed: {}", tmp, std::strerror(errno));
  }
  fs::rename(tmp, out, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);  // a whole model's bytes must not stay behind
    return err("synth: cannot rename '{}' to '{}': {}", tmp, o.out, ec.message());
  }
  return {};
}

}  // namespace ds::synth
