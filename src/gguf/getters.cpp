// Typed metadata getters: every integer type converts to the requested width (range-checked), every
// float type to double; anything else is an Error naming the key, the expected and the actual type.
#include <limits>

#include "gguf/gguf.h"

namespace ds::gguf {
namespace {

bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_int(ValueType t) {
  return is_signed(t) || t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
bool is_flt(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

std::string type_desc(const Value& v) {
  if (v.type == ValueType::ARRAY) return fmt::format("ARRAY of {}", value_type_name(v.elem_type));
  return std::string(value_type_name(v.type));
}

}  // namespace

#define DS_GGUF_LOOKUP(v, key)                                              \
  const Value* v = find(key);                                               \
  if (!v) return err("gguf: {}: missing key '{}'", path(), key)
#define DS_GGUF_WRONG(v, key, expected) \
  err("gguf: {}: key '{}': expected {}, got {}", path(), key, expected, type_desc(*v))

Result<uint64_t> File::get_uint(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (!is_int(v->type)) return DS_GGUF_WRONG(v, key, "an unsigned integer");
  if (is_signed(v->type)) {
    if (v->i < 0) return err("gguf: {}: key '{}': value {} is negative, expected an unsigned integer", path(), key, v->i);
    return (uint64_t)v->i;
  }
  return v->u;
}

Result<int64_t> File::get_int(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (!is_int(v->type)) return DS_GGUF_WRONG(v, key, "an integer");
  if (is_signed(v->type)) return v->i;
  if (v->u > (uint64_t)std::numeric_limits<int64_t>::max())
    return err("gguf: {}: key '{}': value {} does not fit a signed 64-bit integer", path(), key, v->u);
  return (int64_t)v->u;
}

Result<double> File::get_float(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (!is_flt(v->type)) return DS_GGUF_WRONG(v, key, "a float");
  return v->f;
}

Result<bool> File::get_bool(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (v->type != ValueType::BOOL) return DS_GGUF_WRONG(v, key, "BOOL");
  return v->u != 0;
}

Result<std::string> File::get_string(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (v->type != ValueType::STRING) return DS_GGUF_WRONG(v, key, "STRING");
  return v->s;
}

Result<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING) return DS_GGUF_WRONG(v, key, "ARRAY of STRING");
  return v->arr_s;
}

Result<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (v->type != ValueType::ARRAY || !is_int(v->elem_type)) return DS_GGUF_WRONG(v, key, "ARRAY of an integer type");
  if (is_signed(v->elem_type)) return v->arr_i;
  std::vector<int64_t> out(v->arr_u.size());
  for (size_t k = 0; k < out.size(); k++) {
    if (v->arr_u[k] > (uint64_t)std::numeric_limits<int64_t>::max())
      return err("gguf: {}: key '{}': element {} = {} does not fit a signed 64-bit integer", path(), key, k, v->arr_u[k]);
    out[k] = (int64_t)v->arr_u[k];
  }
  return out;
}

Result<std::vector<double>> File::get_float_array(std::string_view key) const {
  DS_GGUF_LOOKUP(v, key);
  if (v->type != ValueType::ARRAY || !is_flt(v->elem_type)) return DS_GGUF_WRONG(v, key, "ARRAY of a float type");
  return v->arr_f;
}

uint64_t File::get_uint_or(std::string_view key, uint64_t def) const {
  if (!has(key)) return def;
  auto r = get_uint(key);
  return r.ok() ? *r : def;
}

}  // namespace ds::gguf
