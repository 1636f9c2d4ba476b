// GGUF metadata values: names, predicates, constructors and the short human form used by `inspect`.
#include <fmt/format.h>

#include "core/escape.h"
#include "gguf/gguf.h"

namespace ds::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "?";
}

namespace {
bool is_signed_type(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_unsigned_type(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_float_type(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

// Strings are shown quoted with control characters escaped, so a template or a token made of
// whitespace stays readable on one line. Long strings are cut (the byte count is given).
std::string quote(const std::string& s, size_t max_bytes) {
  const size_t n = std::min(s.size(), max_bytes);
  std::string out = quoted(std::string_view(s).substr(0, n), QuoteStyle::Display);
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// FLOAT32 values print in their shortest float form (1e-06, not 9.99999997e-07).
std::string fmt_float(double v, ValueType t) {
  return t == ValueType::FLOAT32 ? fmt::format("{}", (float)v) : fmt::format("{}", v);
}
}  // namespace

size_t Value::array_size() const {
  if (type != ValueType::ARRAY) return 0;
  if (elem_type == ValueType::STRING) return arr_s.size();
  if (is_signed_type(elem_type)) return arr_i.size();
  if (is_float_type(elem_type)) return arr_f.size();
  return arr_u.size();
}

bool Value::is_integer() const { return is_signed_type(type) || is_unsigned_type(type); }
bool Value::is_float() const { return is_float_type(type); }

std::string Value::to_string(size_t max_items) const {
  constexpr size_t kMaxString = 200;
  switch (type) {
    case ValueType::STRING: return quote(s, kMaxString);
    case ValueType::BOOL: return u ? "true" : "false";
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return fmt_float(f, type);
    case ValueType::ARRAY: break;
    default: return is_signed_type(type) ? fmt::format("{}", i) : fmt::format("{}", u);
  }
  size_t n = array_size();
  std::string out = fmt::format("[{} × {}]", n, value_type_name(elem_type));
  for (size_t k = 0; k < n && k < max_items; k++) {
    out += k ? ", " : " ";
    if (elem_type == ValueType::STRING) out += quote(arr_s[k], 40);
    else if (elem_type == ValueType::BOOL) out += arr_u[k] ? "true" : "false";
    else if (is_signed_type(elem_type)) out += fmt::format("{}", arr_i[k]);
    else if (is_float_type(elem_type)) out += fmt_float(arr_f[k], elem_type);
    else out += fmt::format("{}", arr_u[k]);
  }
  if (n > max_items) out += ", ...";
  return out;
}

Value Value::make_u32(uint32_t v) {
  Value x;
  x.type = ValueType::UINT32;
  x.u = v;
  return x;
}
Value Value::make_i32(int32_t v) {
  Value x;
  x.type = ValueType::INT32;
  x.i = v;
  return x;
}
Value Value::make_u64(uint64_t v) {
  Value x;
  x.type = ValueType::UINT64;
  x.u = v;
  return x;
}
Value Value::make_f32(float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  return x;
}
Value Value::make_bool(bool v) {
  Value x;
  x.type = ValueType::BOOL;
  x.u = v ? 1 : 0;
  return x;
}
Value Value::make_str(std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.s = std::move(v);
  return x;
}
Value Value::make_str_array(std::vector<std::string> v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = ValueType::STRING;
  x.arr_s = std::move(v);
  return x;
}
Value Value::make_i32_array(std::vector<int64_t> v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = ValueType::INT32;
  x.arr_i = std::move(v);
  return x;
}
Value Value::make_f32_array(std::vector<double> v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = ValueType::FLOAT32;
  x.arr_f = std::move(v);
  return x;
}
Value Value::make_bool_array(std::vector<bool> v) {
  Value x;
  x.type = ValueType::ARRAY;
  x.elem_type = ValueType::BOOL;
  x.arr_u.assign(v.begin(), v.end());
  return x;
}

bool operator==(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::STRING: return a.s == b.s;
    case ValueType::ARRAY:
      return a.elem_type == b.elem_type && a.arr_u == b.arr_u && a.arr_i == b.arr_i &&
             a.arr_s == b.arr_s && a.arr_f == b.arr_f;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return a.f == b.f || (a.f != a.f && b.f != b.f);
    default: return is_signed_type(a.type) ? a.i == b.i : a.u == b.u;
  }
}

}  // namespace ds::gguf
