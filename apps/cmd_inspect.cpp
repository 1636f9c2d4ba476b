// `deltaserve inspect MODEL.gguf [--json]`: the GGUF's metadata (long arrays and strings summarised),
// its tensor table and, for a qwen35 model, the derived model config (qwen35-spec.md "How deltaserve
// must treat this"). Reads only metadata and tensor records; never touches a GPU.
// Exit codes: 0 = printed; 1 = unreadable/corrupt file, inconsistent config, or unsupported architecture.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "command.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/qwen35.h"

namespace ds::app {
namespace {

using ojson = nlohmann::ordered_json;
using gguf::ValueType;

struct InspectOpts {
  std::string path;
  bool json = false;
  size_t max_items = 8;
};

ojson value_json(const gguf::Value& v, size_t max_items) {
  auto scalar = [](ValueType t, uint64_t u, int64_t i, double f, const std::string* s) -> ojson {
    switch (t) {
      case ValueType::STRING: return *s;
      case ValueType::BOOL: return u != 0;
      case ValueType::FLOAT32: return (double)(float)f;
      case ValueType::FLOAT64: return f;
      case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return i;
      default: return u;
    }
  };
  ojson j;
  j["type"] = gguf::value_type_name(v.type);
  if (v.type != ValueType::ARRAY) {
    j["value"] = scalar(v.type, v.u, v.i, v.f, &v.s);
    return j;
  }
  size_t n = v.array_size();
  j["elem_type"] = gguf::value_type_name(v.elem_type);
  j["count"] = n;
  ojson items = ojson::array();
  for (size_t k = 0; k < n && k < max_items; k++) {
    switch (v.elem_type) {
      case ValueType::STRING: items.push_back(v.arr_s[k]); break;
      case ValueType::FLOAT32: case ValueType::FLOAT64: items.push_back(scalar(v.elem_type, 0, 0, v.arr_f[k], nullptr)); break;
      case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: items.push_back(v.arr_i[k]); break;
      default: items.push_back(scalar(v.elem_type, v.arr_u[k], 0, 0, nullptr));
    }
  }
  j["value"] = std::move(items);
  if (n > max_items) j["truncated"] = true;
  return j;
}

std::vector<int64_t> shape(const gguf::TensorInfo& t) { return std::vector<int64_t>(t.ne, t.ne + t.n_dims); }

std::string schedule_string(const Qwen35Config& c) {
  std::string s;
  for (auto k : c.layers) s += k == LayerKind::FullAttention ? 'A' : 'L';
  return s;
}

ojson config_json(const Qwen35Config& c) {
  ojson j;
  j["arch"] = c.arch;
  j["n_embd"] = c.n_embd;
  j["n_ff"] = c.n_ff;
  j["n_block"] = c.n_block;
  j["n_layer"] = c.n_layer;
  j["n_mtp"] = c.n_mtp;
  ojson layers = ojson::array();
  for (auto k : c.layers) layers.push_back(k == LayerKind::FullAttention ? "full_attention" : "gated_deltanet");
  j["layers"] = std::move(layers);
  j["full_attention_interval"] = c.full_attn_interval;
  j["n_full_attn"] = c.n_full_attn();
  j["n_gdn"] = c.n_gdn();
  j["n_head"] = c.n_head;
  j["n_head_kv"] = c.n_head_kv;
  j["head_dim"] = c.head_dim;
  j["n_rot"] = c.n_rot;
  j["rope_base"] = c.rope_base;
  j["rope_sections"] = c.rope_sections;
  j["n_k_heads"] = c.n_k_heads;
  j["n_v_heads"] = c.n_v_heads;
  j["d_k"] = c.d_k;
  j["d_v"] = c.d_v;
  j["key_dim"] = c.key_dim();
  j["value_dim"] = c.value_dim();
  j["conv_dim"] = c.conv_dim();
  j["conv_kernel"] = c.conv_kernel;
  j["rms_eps"] = c.rms_eps;
  j["n_ctx_train"] = c.n_ctx_train;
  j["n_vocab"] = c.n_vocab;
  j["tied_embeddings"] = c.tied_embeddings;
  return j;
}

void print_config(const Qwen35Config& c) {
  fmt::print("\nmodel config (qwen35):\n");
  auto row = [](std::string_view k, const std::string& v) { fmt::print("  {:<26} {}\n", k, v); };
  row("trunk layers (L)", fmt::format("{}  (block_count {} - nextn_predict_layers {})", c.n_layer, c.n_block, c.n_mtp));
  row("MTP layers", fmt::format("{}{}", c.n_mtp, c.n_mtp ? "  (loaded, not executed)" : ""));
  row("layer schedule", fmt::format("{}  (L = Gated DeltaNet x{}, A = full attention x{}; interval {})", schedule_string(c),
                                    c.n_gdn(), c.n_full_attn(), c.full_attn_interval));
  row("hidden (H)", fmt::format("{}", c.n_embd));
  row("feed-forward (I)", fmt::format("{}", c.n_ff));
  row("attention heads", fmt::format("{} query, {} key/value, head dim {}", c.n_head, c.n_head_kv, c.head_dim));
  row("rope", fmt::format("{} rotary dims, base {}, sections [{}]", c.n_rot, c.rope_base, fmt::join(c.rope_sections, ", ")));
  row("GDN heads", fmt::format("{} key, {} value ({} value heads per key head)", c.n_k_heads, c.n_v_heads, c.n_v_heads / c.n_k_heads));
  row("GDN head dims", fmt::format("dk {}, dv {}", c.d_k, c.d_v));
  row("GDN dims", fmt::format("key {}, value {}, conv {} (kernel {})", c.key_dim(), c.value_dim(), c.conv_dim(), c.conv_kernel));
  row("rms eps", fmt::format("{:g}", c.rms_eps));
  row("context (training)", fmt::format("{}", c.n_ctx_train));
  row("vocabulary (V)", fmt::format("{}", c.n_vocab));
  row("embeddings", c.tied_embeddings ? "tied (no output.weight; logits use token_embd.weight)" : "untied (output.weight)");
}

// The config, with every tensor checked against it (names, types, shapes) as run and serve load them: a
// tensor whose shape was corrupted passed inspect (exit 0) and failed run.
Result<Qwen35Config> checked_config(const gguf::File& f) {
  DS_ASSIGN(Qwen35Model m, Qwen35Model::load(f));
  return m.cfg;
}

int run_inspect(const InspectOpts& o) {
  if (o.path.empty()) {
    spdlog::error("inspect: give the GGUF file: deltaserve inspect MODEL.gguf (or -m MODEL.gguf)");
    return 2;
  }
  auto fr = gguf::File::open(o.path);
  if (!fr.ok()) {
    spdlog::error("{}", fr.error().message);
    return 1;
  }
  const gguf::File& f = *fr;
  const gguf::Value* arch = f.find("general.architecture");
  if (!arch || arch->type != ValueType::STRING) {
    spdlog::error("inspect: {}: no general.architecture string; deltaserve reads only qwen35 GGUF files", o.path);
    return 1;
  }
  if (arch->s != "qwen35") {
    spdlog::error("inspect: {}: architecture '{}' is not supported; deltaserve reads only qwen35 (dense Qwen3.5) GGUF files",
                  o.path, arch->s);
    return 1;
  }
  // A vocabulary-only GGUF (converter --vocab-only) is a valid file with no weights: show what is
  // there and say why there is no model config, without failing.
  bool vocab_only = f.tensors().empty();
  Result<Qwen35Config> cfg = vocab_only ? Result<Qwen35Config>(err("no tensors")) : checked_config(f);
  const char* vocab_note = "vocabulary-only GGUF (no tensors): metadata only, no model config";

  uint64_t total = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;
  for (const auto& t : f.tensors()) {
    total += t.n_bytes;
    auto& e = by_type[std::string(ggml_type_name(t.type))];
    e.first++;
    e.second += t.n_bytes;
  }

  if (o.json) {
    ojson j;
    j["file"] = o.path;
    j["version"] = f.version();
    j["file_size"] = f.file_size();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    ojson md = ojson::object();
    for (const auto& kv : f.metadata()) md[kv.key] = value_json(kv.value, o.max_items);
    j["metadata"] = std::move(md);
    ojson ts = ojson::array();
    for (const auto& t : f.tensors())
      ts.push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"shape", shape(t)}, {"n_bytes", t.n_bytes},
                    {"file_offset", t.file_offset}});
    j["tensors"] = std::move(ts);
    j["tensor_bytes"] = total;
    if (cfg.ok()) j["config"] = config_json(*cfg);
    else j["config"] = nullptr;
    if (vocab_only) j["note"] = vocab_note;
    else if (!cfg.ok()) j["error"] = cfg.error().message;
    fmt::print("{}\n", j.dump(2, ' ', false, ojson::error_handler_t::replace));
  } else {
    fmt::print("file: {}\nGGUF v{}, {} bytes, alignment {}, data section at {:#x}, {} metadata keys, {} tensors\n", o.path,
               f.version(), f.file_size(), f.alignment(), f.data_offset(), f.metadata().size(), f.tensors().size());
    fmt::print("\nmetadata:\n");
    size_t kw = 0;
    for (const auto& kv : f.metadata()) kw = std::max(kw, kv.key.size());
    for (const auto& kv : f.metadata())
      fmt::print("  {:<{}}  {:<7}  {}\n", kv.key, kw, kv.value.type == ValueType::ARRAY ? "ARRAY" : gguf::value_type_name(kv.value.type),
                 kv.value.to_string(o.max_items));
    if (!vocab_only) {
      size_t nw = 4;
      for (const auto& t : f.tensors()) nw = std::max(nw, t.name.size());
      fmt::print("\ntensors:\n  {:<{}}  {:<7}  {:<14}  {:>12}  {:>10}\n", "name", nw, "type", "shape", "bytes", "offset");
      for (const auto& t : f.tensors())
        fmt::print("  {:<{}}  {:<7}  {:<14}  {:>12}  {:>#10x}\n", t.name, nw, ggml_type_name(t.type), t.shape_string(), t.n_bytes,
                   t.file_offset);
      fmt::print("  total: {} tensors, {} bytes (", f.tensors().size(), total);
      bool first = true;
      for (const auto& [name, e] : by_type) {
        fmt::print("{}{} x{}", first ? "" : ", ", name, e.first);
        first = false;
      }
      fmt::print(")\n");
    }
    if (cfg.ok()) print_config(*cfg);
    else if (vocab_only) fmt::print("\nmodel config: none; {}\n", vocab_note);
  }
  if (!vocab_only && !cfg.ok()) {
    spdlog::error("{}", cfg.error().message);
    return 1;
  }
  return 0;
}

RunFn setup_inspect(CLI::App& app) {
  auto o = std::make_shared<InspectOpts>();
  // Every other command takes its model with -m: so does inspect, besides the positional file.
  auto* positional = app.add_option("model", o->path, "GGUF file to inspect (or -m FILE)");
  app.add_option("-m,--model", o->path, "GGUF file to inspect (as the positional argument)")->excludes(positional);
  app.add_flag("--json", o->json, "Print one JSON object (metadata, tensors, config) instead of text");
  app.add_option("--max-items", o->max_items, "Array elements shown per metadata array (long arrays are summarised)")
      ->capture_default_str();
  app.footer(
      "Prints a GGUF file's metadata, its tensor table (name, type, shape ne[0] first, bytes, file offset)\n"
      "and, for general.architecture = qwen35, the model config derived from the metadata: trunk and MTP\n"
      "layers, layer schedule, head counts and dims, vocabulary size, tied or untied embeddings.\n"
      "Every structural fact of the file is validated first; a corrupt file or an inconsistent config is\n"
      "reported on stderr with exit code 1. Other architectures are refused. A vocabulary-only GGUF (no\n"
      "tensors) prints its metadata and says that it has no model config (exit code 0).");
  return [o] { return run_inspect(*o); };
}

}  // namespace

DS_COMMAND("inspect", "Show a GGUF file's metadata, tensors and derived model config", setup_inspect);

}  // namespace ds::app
