// GGUF writer in ggml's layout (formats.md §2.6): header, metadata in insertion order, tensor records,
// zero padding to the alignment (only when there are tensors, as gguf-py and ggml's reader expect),
// then each tensor's bytes padded with zeros to the alignment. Values keep their stored types, so
// writer_from(File) reproduces a file written in this layout byte for byte.
#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "gguf/gguf.h"

namespace ds::gguf {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_flt(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

uint64_t scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    default: return 8;
  }
}

uint64_t value_bytes(const Value& v) {
  if (v.type == ValueType::STRING) return 8 + v.s.size();
  if (v.type != ValueType::ARRAY) return scalar_bytes(v.type);
  uint64_t n = 12;
  if (v.elem_type == ValueType::STRING) {
    for (const auto& s : v.arr_s) n += 8 + s.size();
    return n;
  }
  return n + v.array_size() * scalar_bytes(v.elem_type);
}

class Buf {
 public:
  explicit Buf(std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  void put(T x) {
    size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &x, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }
  void scalar(ValueType t, uint64_t u, int64_t i, double f) {
    switch (t) {
      case ValueType::UINT8: case ValueType::BOOL: put<uint8_t>((uint8_t)u); break;
      case ValueType::INT8: put<int8_t>((int8_t)i); break;
      case ValueType::UINT16: put<uint16_t>((uint16_t)u); break;
      case ValueType::INT16: put<int16_t>((int16_t)i); break;
      case ValueType::UINT32: put<uint32_t>((uint32_t)u); break;
      case ValueType::INT32: put<int32_t>((int32_t)i); break;
      case ValueType::UINT64: put<uint64_t>(u); break;
      case ValueType::INT64: put<int64_t>(i); break;
      case ValueType::FLOAT32: put<float>((float)f); break;
      case ValueType::FLOAT64: put<double>(f); break;
      default: DS_CHECK(false, "not a scalar type {}", (uint32_t)t);
    }
  }
  void value(const Value& v) {
    if (v.type == ValueType::STRING) return str(v.s);
    if (v.type != ValueType::ARRAY) return scalar(v.type, v.u, v.i, v.f);
    DS_CHECK(v.elem_type != ValueType::ARRAY, "arrays of arrays cannot be written");
    put<uint32_t>((uint32_t)v.elem_type);
    size_t n = v.array_size();
    put<uint64_t>(n);
    if (v.elem_type == ValueType::STRING) {
      for (const auto& s : v.arr_s) str(s);
    } else if (is_signed(v.elem_type)) {
      for (size_t k = 0; k < n; k++) scalar(v.elem_type, 0, v.arr_i[k], 0);
    } else if (is_flt(v.elem_type)) {
      for (size_t k = 0; k < n; k++) scalar(v.elem_type, 0, 0, v.arr_f[k]);
    } else {
      for (size_t k = 0; k < n; k++) scalar(v.elem_type, v.arr_u[k], 0, 0);
    }
  }

 private:
  std::vector<uint8_t>& b_;
};

Status write_all(std::FILE* f, const void* p, uint64_t n) {
  if (n && std::fwrite(p, 1, n, f) != n) return err("gguf: write failed: {}", std::strerror(errno));
  return {};
}

Status write_zeros(std::FILE* f, uint64_t n) {
  static const uint8_t zeros[4096] = {};
  while (n) {
    uint64_t k = std::min<uint64_t>(n, sizeof zeros);
    DS_TRY(write_all(f, zeros, k));
    n -= k;
  }
  return {};
}

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  DS_CHECK(alignment >= 8 && (alignment & (alignment - 1)) == 0, "alignment {} must be a power of two >= 8", alignment);
  if (alignment != 32) kv_.push_back({"general.alignment", Value::make_u32(alignment)});
}

void Writer::set(std::string key, Value v) {
  header_bytes_ = 0;
  if (key == "general.alignment") {
    DS_CHECK(v.type == ValueType::UINT32 && v.u >= 8 && (v.u & (v.u - 1)) == 0,
             "general.alignment must be a UINT32 power of two >= 8");
    alignment_ = (uint32_t)v.u;
    relayout();
  }
  for (auto& e : kv_)
    if (e.key == key) {
      e.value = std::move(v);
      return;
    }
  kv_.push_back({std::move(key), std::move(v)});
}

size_t Writer::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne) {
  auto info = ggml_type_info(type);
  DS_CHECK(info.has_value(), "unknown tensor type {}", (uint32_t)type);
  DS_CHECK(!ne.empty() && ne.size() <= 4, "tensor '{}': {} dims, expected 1..4", name, ne.size());
  DS_CHECK(ne[0] % info->block_size == 0, "tensor '{}': ne[0] = {} not a multiple of {}", name, ne[0], info->block_size);
  uint64_t bytes = ggml_row_bytes(*info, (uint64_t)ne[0]);
  for (size_t d = 1; d < ne.size(); d++) {
    DS_CHECK(ne[d] >= 0, "tensor '{}': negative dimension", name);
    bytes *= (uint64_t)ne[d];
  }
  for (const auto& t : tensors_) DS_CHECK(t.name != name, "duplicate tensor name '{}'", name);
  tensors_.push_back({std::move(name), type, std::move(ne), bytes, 0, {}});
  header_bytes_ = 0;
  relayout();
  return tensors_.size() - 1;
}

void Writer::relayout() {
  uint64_t off = 0;
  for (auto& t : tensors_) {
    t.offset = off;
    off += align_up(t.n_bytes, alignment_);
  }
}

uint64_t Writer::tensor_bytes(size_t index) const {
  DS_CHECK(index < tensors_.size(), "tensor index {} out of range", index);
  return tensors_[index].n_bytes;
}

uint64_t Writer::tensor_offset(size_t index) const {
  DS_CHECK(index < tensors_.size(), "tensor index {} out of range", index);
  return tensors_[index].offset;
}

uint64_t Writer::header_bytes() const {
  if (header_bytes_) return header_bytes_;  // the vocabulary alone is ~250k strings to sum
  uint64_t n = 24;
  for (const auto& e : kv_) n += 8 + e.key.size() + 4 + value_bytes(e.value);
  for (const auto& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  header_bytes_ = tensors_.empty() ? n : align_up(n, alignment_);
  return header_bytes_;
}

std::vector<uint8_t> Writer::header() const {
  std::vector<uint8_t> out;
  out.reserve(header_bytes());
  Buf b(out);
  b.put<uint32_t>(0x46554747);
  b.put<uint32_t>(version_);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(kv_.size());
  for (const auto& e : kv_) {
    b.str(e.key);
    b.put<uint32_t>((uint32_t)e.value.type);
    b.value(e.value);
  }
  for (const auto& t : tensors_) {
    b.str(t.name);
    b.put<uint32_t>((uint32_t)t.ne.size());
    for (int64_t d : t.ne) b.put<uint64_t>((uint64_t)d);
    b.put<uint32_t>((uint32_t)t.type);
    b.put<uint64_t>(t.offset);
  }
  if (!tensors_.empty()) out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

Status Writer::write_header(std::FILE* f) const {
  auto h = header();
  return write_all(f, h.data(), h.size());
}

Status Writer::write_tensor_data(std::FILE* f, size_t index, const void* data, uint64_t n_bytes) const {
  if (index >= tensors_.size()) return err("gguf: writer: tensor index {} out of range ({} tensors)", index, tensors_.size());
  const auto& t = tensors_[index];
  if (n_bytes != t.n_bytes)
    return err("gguf: writer: tensor '{}': got {} bytes of data, expected {} ({})", t.name, n_bytes, t.n_bytes,
               ggml_type_name(t.type));
  // On a seekable stream, catch tensors written out of order (they would silently corrupt the file).
  long pos = std::ftell(f);
  if (pos >= 0 && (uint64_t)pos != header_bytes() + t.offset)
    return err("gguf: writer: tensor '{}' would start at file offset {:#x}, expected {:#x}; write the header, then the tensors in order",
               t.name, pos, header_bytes() + t.offset);
  DS_TRY(write_all(f, data, n_bytes));
  return write_tensor_padding(f, index);
}

Status Writer::write_tensor_padding(std::FILE* f, size_t index) const {
  if (index >= tensors_.size()) return err("gguf: writer: tensor index {} out of range ({} tensors)", index, tensors_.size());
  const auto& t = tensors_[index];
  return write_zeros(f, align_up(t.n_bytes, alignment_) - t.n_bytes);
}

void Writer::set_tensor_data(size_t index, std::vector<uint8_t> data) {
  DS_CHECK(index < tensors_.size(), "tensor index {} out of range", index);
  DS_CHECK(data.size() == tensors_[index].n_bytes, "tensor '{}': {} bytes of data, expected {}",
           tensors_[index].name, data.size(), tensors_[index].n_bytes);
  tensors_[index].data = std::move(data);
}

std::vector<uint8_t> Writer::to_bytes() const {
  auto out = header();
  for (const auto& t : tensors_) {
    // Tensors without data are written as zeros (handy for metadata-only test files).
    if (t.data.empty()) out.resize(out.size() + t.n_bytes, 0);
    else out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

Status Writer::write_file(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err("gguf: cannot create '{}': {}", path, std::strerror(errno));
  Status st = write_header(f);
  for (size_t k = 0; st.ok() && k < tensors_.size(); k++) {
    const auto& t = tensors_[k];
    if (t.data.empty()) {
      st = write_zeros(f, t.n_bytes);
      if (st.ok()) st = write_tensor_padding(f, k);
    } else {
      st = write_tensor_data(f, k, t.data.data(), t.data.size());
    }
  }
  if (std::fclose(f) != 0 && st.ok()) st = err("gguf: writing '{}' failed: {}", path, std::strerror(errno));
  if (!st.ok()) return err("{} (writing '{}')", st.error().message, path);
  return {};
}

Writer writer_from(const File& f) {
  Writer w(32);
  w.set_version(f.version());
  for (const auto& e : f.metadata()) w.set(e.key, e.value);
  for (const auto& t : f.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    size_t k = w.add_tensor(t.name, t.type, std::move(ne));
    const uint8_t* p = f.tensor_data(t);
    w.set_tensor_data(k, std::vector<uint8_t>(p, p + t.n_bytes));
  }
  return w;
}

}  // namespace ds::gguf
