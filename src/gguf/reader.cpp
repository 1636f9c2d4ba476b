// GGUF v2/v3 reader (formats.md §2, checklist §2.10). The file is parsed front to back with a bounds-
// checked cursor; nothing is read, allocated or indexed before the bytes and counts behind it have
// been checked against the file size, so a corrupt file yields an Error, never a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "gguf/gguf.h"

namespace ds::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kMaxKeyLen = 65535;   // spec limit for keys
constexpr uint64_t kMaxNameLen = 64;     // spec limit for tensor names (ggml: < 64)
constexpr uint32_t kMinAlignment = 8;    // keeps every mapped tensor 8-byte aligned
constexpr uint64_t kDefaultAlignment = 32;

// Heterogeneous lookup so find(string_view) needs no temporary std::string.
struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Index = std::unordered_map<std::string, size_t, SvHash, std::equal_to<>>;

// Bytes of the smallest encoding of one element of each value type (strings: the length field).
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;
    default: return 8;  // UINT64, INT64, FLOAT64
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

class Parser {
 public:
  Parser(const uint8_t* p, uint64_t size, const std::string& name) : p_(p), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  // "gguf: FILE: <msg> (offset 0x..)"
  template <typename... Args>
  Error fail_at(uint64_t off, fmt::format_string<Args...> f, Args&&... args) const {
    return Error{fmt::format("gguf: {}: {} (offset {:#x})", name_, fmt::format(f, std::forward<Args>(args)...), off)};
  }

  Status need(uint64_t n, std::string_view what) const {
    if (n > left())
      return fail_at(pos_, "truncated: {} needs {} bytes, only {} left in the {}-byte file", what, n, left(), size_);
    return {};
  }

  template <typename T>
  Status read(T& v, std::string_view what) {
    DS_TRY(need(sizeof(T), what));
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string& s, std::string_view what, uint64_t max_len = UINT64_MAX) {
    uint64_t start = pos_, n = 0;
    DS_TRY(read(n, what));
    if (n > max_len) return fail_at(start, "{}: length {} exceeds the limit of {} bytes", what, n, max_len);
    if (n > left())
      return fail_at(start, "{}: string length {} runs past the end of the file ({} bytes left)", what, n, left());
    s.assign(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return {};
  }

  // One value of type t into v; `what` names the key for errors.
  Status read_value(ValueType t, Value& v, std::string_view what);
  Status read_array(Value& v, std::string_view what);

 private:
  template <typename T, typename D>
  void bulk(std::vector<D>& out, uint64_t n) {  // caller has checked n * sizeof(T) <= left()
    out.resize(n);
    for (uint64_t k = 0; k < n; k++) {
      T x;
      std::memcpy(&x, p_ + pos_ + k * sizeof(T), sizeof(T));
      out[k] = (D)x;
    }
    pos_ += n * sizeof(T);
  }

  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

Status Parser::read_value(ValueType t, Value& v, std::string_view what) {
  v.type = t;
  switch (t) {
    case ValueType::UINT8: { uint8_t x{}; DS_TRY(read(x, what)); v.u = x; return {}; }
    case ValueType::INT8: { int8_t x{}; DS_TRY(read(x, what)); v.i = x; return {}; }
    case ValueType::UINT16: { uint16_t x{}; DS_TRY(read(x, what)); v.u = x; return {}; }
    case ValueType::INT16: { int16_t x{}; DS_TRY(read(x, what)); v.i = x; return {}; }
    case ValueType::UINT32: { uint32_t x{}; DS_TRY(read(x, what)); v.u = x; return {}; }
    case ValueType::INT32: { int32_t x{}; DS_TRY(read(x, what)); v.i = x; return {}; }
    case ValueType::UINT64: { uint64_t x{}; DS_TRY(read(x, what)); v.u = x; return {}; }
    case ValueType::INT64: { int64_t x{}; DS_TRY(read(x, what)); v.i = x; return {}; }
    case ValueType::FLOAT32: { float x{}; DS_TRY(read(x, what)); v.f = x; return {}; }
    case ValueType::FLOAT64: { double x{}; DS_TRY(read(x, what)); v.f = x; return {}; }
    case ValueType::BOOL: {
      uint64_t at = pos_;
      uint8_t x = 0;
      DS_TRY(read(x, what));
      if (x > 1) return fail_at(at, "{}: BOOL byte is {}, expected 0 or 1", what, x);
      v.u = x;
      return {};
    }
    case ValueType::STRING: return read_string(v.s, what);
    case ValueType::ARRAY: return read_array(v, what);
  }
  return fail_at(pos_, "{}: unknown value type {}", what, (uint32_t)t);
}

Status Parser::read_array(Value& v, std::string_view what) {
  uint64_t at = pos_;
  uint32_t et = 0;
  uint64_t n = 0;
  DS_TRY(read(et, what));
  if (et > (uint32_t)ValueType::FLOAT64) return fail_at(at, "{}: array element type id {} is not a GGUF value type (0..12)", what, et);
  if (et == (uint32_t)ValueType::ARRAY) return fail_at(at, "{}: arrays of arrays are not supported", what);
  DS_TRY(read(n, what));
  ValueType t = (ValueType)et;
  v.elem_type = t;
  uint64_t min = min_value_bytes(t);
  if (n > left() / min)
    return fail_at(at, "{}: array of {} {} elements needs at least {} bytes, only {} left", what, n,
                   value_type_name(t), (n > UINT64_MAX / min) ? UINT64_MAX : n * min, left());
  switch (t) {
    case ValueType::UINT8: bulk<uint8_t>(v.arr_u, n); return {};
    case ValueType::INT8: bulk<int8_t>(v.arr_i, n); return {};
    case ValueType::UINT16: bulk<uint16_t>(v.arr_u, n); return {};
    case ValueType::INT16: bulk<int16_t>(v.arr_i, n); return {};
    case ValueType::UINT32: bulk<uint32_t>(v.arr_u, n); return {};
    case ValueType::INT32: bulk<int32_t>(v.arr_i, n); return {};
    case ValueType::UINT64: bulk<uint64_t>(v.arr_u, n); return {};
    case ValueType::INT64: bulk<int64_t>(v.arr_i, n); return {};
    case ValueType::FLOAT32: bulk<float>(v.arr_f, n); return {};
    case ValueType::FLOAT64: bulk<double>(v.arr_f, n); return {};
    case ValueType::BOOL:
      for (uint64_t k = 0; k < n; k++)
        if (p_[pos_ + k] > 1) return fail_at(pos_ + k, "{}: element {} of a BOOL array is {}, expected 0 or 1", what, k, p_[pos_ + k]);
      bulk<uint8_t>(v.arr_u, n);
      return {};
    case ValueType::STRING:
      v.arr_s.resize(n);
      for (uint64_t k = 0; k < n; k++) {
        uint64_t len = 0, start = pos_;
        DS_TRY(read(len, what));
        if (len > left())
          return fail_at(start, "{}: string {} of {}: length {} runs past the end of the file ({} bytes left)", what, k, n, len, left());
        v.arr_s[k].assign(reinterpret_cast<const char*>(p_ + pos_), len);
        pos_ += len;
      }
      return {};
    case ValueType::ARRAY: break;
  }
  return fail_at(at, "{}: bad array element type", what);
}

std::string_view retired_type_note(uint32_t id) {
  if (id == 4 || id == 5) return " (retired Q4_2/Q4_3)";
  if (id >= 31 && id <= 33) return " (retired Q4_0_x_x repacked type)";
  if (id >= 36 && id <= 38) return " (retired IQ4_NL_x_x repacked type)";
  return "";
}

}  // namespace

struct File::Impl {
  std::string path;
  std::vector<uint8_t> owned;
  void* map = nullptr;
  size_t map_size = 0;
  const uint8_t* base = nullptr;
  uint64_t size = 0;
  uint32_t version = 0;
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<KeyValue> kv;
  Index kv_index;
  std::vector<TensorInfo> tensors;
  Index tensor_index;

  ~Impl() {
    if (map) munmap(map, map_size);
  }
  Status parse();
};

Status File::Impl::parse() {
  Parser ps(base, size, path);
  uint32_t magic = 0;
  if (size < 24) return ps.fail_at(0, "file is {} bytes, too small for the 24-byte GGUF header", size);
  DS_TRY(ps.read(magic, "magic"));
  if (magic != kMagic) {
    char m[4];
    std::memcpy(m, &magic, 4);
    std::string shown;
    for (char c : m) shown += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", (uint8_t)c);
    return ps.fail_at(0, "not a GGUF file: magic is \"{}\", expected \"GGUF\"", shown);
  }
  DS_TRY(ps.read(version, "version"));
  if (version != 0 && (version & 0xFFFF) == 0)
    return ps.fail_at(4, "version field {:#010x} looks like a big-endian GGUF; only little-endian files are supported", version);
  if (version == 1) return ps.fail_at(4, "GGUF version 1 (32-bit counts) is not supported; expected version 2 or 3");
  if (version != 2 && version != 3) return ps.fail_at(4, "unsupported GGUF version {}, expected 2 or 3", version);
  uint64_t n_tensors = 0, n_kv = 0;
  DS_TRY(ps.read(n_tensors, "tensor count"));
  DS_TRY(ps.read(n_kv, "metadata count"));
  // Each pair takes at least 13 bytes (key length, type, 1-byte value), each tensor record at
  // least 33; larger counts cannot fit, so they are rejected before anything is allocated.
  uint64_t body = size - 24;
  if (n_kv > body / 13) return ps.fail_at(16, "metadata count {} is impossible in a {}-byte file", n_kv, size);
  if (n_tensors > body / 33) return ps.fail_at(8, "tensor count {} is impossible in a {}-byte file", n_tensors, size);
  if (n_kv * 13 + n_tensors * 33 > body)
    return ps.fail_at(8, "{} metadata pairs and {} tensors cannot fit in a {}-byte file", n_kv, n_tensors, size);

  kv.reserve(n_kv);
  kv_index.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; k++) {
    uint64_t at = ps.pos();
    KeyValue e;
    DS_TRY(ps.read_string(e.key, fmt::format("key of metadata pair {}", k), kMaxKeyLen));
    if (e.key.empty()) return ps.fail_at(at, "metadata pair {}: empty key", k);
    std::string what = fmt::format("key '{}'", e.key);
    uint32_t t = 0;
    uint64_t tat = ps.pos();
    DS_TRY(ps.read(t, what));
    if (t > (uint32_t)ValueType::FLOAT64) return ps.fail_at(tat, "{}: value type id {} is not a GGUF value type (0..12)", what, t);
    DS_TRY(ps.read_value((ValueType)t, e.value, what));
    if (e.key == "general.alignment") {
      if (e.value.type != ValueType::UINT32)
        return ps.fail_at(tat, "general.alignment has type {}, expected UINT32", value_type_name(e.value.type));
      uint64_t a = e.value.u;
      if (a == 0 || (a & (a - 1)) != 0 || a < kMinAlignment)
        return ps.fail_at(tat, "general.alignment is {}, expected a power of two >= {}", a, kMinAlignment);
      alignment = (uint32_t)a;
    }
    if (!kv_index.emplace(e.key, kv.size()).second) return ps.fail_at(at, "duplicate metadata key '{}'", e.key);
    kv.push_back(std::move(e));
  }

  tensors.reserve(n_tensors);
  tensor_index.reserve(n_tensors);
  std::vector<uint64_t> record_at(n_tensors);
  for (uint64_t k = 0; k < n_tensors; k++) {
    uint64_t at = record_at[k] = ps.pos();
    TensorInfo ti;
    DS_TRY(ps.read_string(ti.name, fmt::format("name of tensor record {}", k), kMaxNameLen));
    if (ti.name.empty()) return ps.fail_at(at, "tensor record {}: empty name", k);
    std::string what = fmt::format("tensor '{}'", ti.name);
    uint64_t dat = ps.pos();
    DS_TRY(ps.read(ti.n_dims, what));
    if (ti.n_dims < 1 || ti.n_dims > 4) return ps.fail_at(dat, "{}: n_dims is {}, expected 1..4", what, ti.n_dims);
    for (uint32_t d = 0; d < ti.n_dims; d++) {
      uint64_t nat = ps.pos(), ne = 0;
      DS_TRY(ps.read(ne, what));
      if (ne > (uint64_t)INT64_MAX) return ps.fail_at(nat, "{}: dimension {} is negative ({})", what, d, (int64_t)ne);
      ti.ne[d] = (int64_t)ne;
    }
    uint64_t tat = ps.pos();
    uint32_t type = 0;
    DS_TRY(ps.read(type, what));
    auto info = ggml_type_info(type);
    if (!info) return ps.fail_at(tat, "{}: unknown tensor type id {}{}", what, type, retired_type_note(type));
    ti.type = info->type;
    DS_TRY(ps.read(ti.offset, what));
    // Element count and byte size, with every product checked for overflow.
    uint64_t n = 1;
    for (int d = 0; d < 4; d++)
      if (__builtin_mul_overflow(n, (uint64_t)ti.ne[d], &n) || n > (uint64_t)INT64_MAX)
        return ps.fail_at(dat, "{}: element count of shape {} overflows", what, ti.shape_string());
    ti.n_elements = n;
    if (ti.ne[0] % info->block_size != 0)
      return ps.fail_at(dat, "{}: ne[0] = {} is not a multiple of the {} block size {}", what, ti.ne[0], info->name, info->block_size);
    uint64_t bytes = 0;
    bool overflow = __builtin_mul_overflow((uint64_t)ti.ne[0] / info->block_size, (uint64_t)info->type_size, &bytes);
    for (int d = 1; d < 4; d++)
      if (overflow || __builtin_mul_overflow(bytes, (uint64_t)ti.ne[d], &bytes))
        return ps.fail_at(dat, "{}: byte size of shape {} overflows", what, ti.shape_string());
    ti.n_bytes = bytes;
    if (!tensor_index.emplace(ti.name, tensors.size()).second) return ps.fail_at(at, "duplicate tensor name '{}'", ti.name);
    tensors.push_back(std::move(ti));
  }

  // ggml seeks to the aligned data section only when there are tensors; a vocabulary-only file
  // (no tensors) may end right after the metadata, so its data_offset is the end of the records.
  data_offset = tensors.empty() ? ps.pos() : align_up(ps.pos(), alignment);
  if (tensors.empty()) return {};
  if (data_offset > size)
    return ps.fail_at(ps.pos(), "data section would start at {:#x}, past the end of the {}-byte file", data_offset, size);
  uint64_t avail = size - data_offset;
  for (size_t k = 0; k < tensors.size(); k++) {
    auto& t = tensors[k];
    if (t.offset % alignment != 0)
      return ps.fail_at(record_at[k], "tensor '{}': data offset {:#x} is not a multiple of the alignment {}", t.name, t.offset, alignment);
    if (t.offset > avail || t.n_bytes > avail - t.offset)
      return ps.fail_at(record_at[k], "tensor '{}': data [{:#x}, +{} bytes) at file offset {:#x} extends past the end of the {}-byte file",
                        t.name, t.offset, t.n_bytes, data_offset + std::min(t.offset, avail), size);
    t.file_offset = data_offset + t.offset;
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset : tensors[a].n_bytes < tensors[b].n_bytes;
  });
  for (size_t k = 1; k < order.size(); k++) {
    const auto& a = tensors[order[k - 1]];
    const auto& b = tensors[order[k]];
    if (a.offset + a.n_bytes > b.offset)
      return ps.fail_at(b.file_offset, "tensor '{}' (file offset {:#x}, {} bytes) overlaps tensor '{}' (file offset {:#x}, {} bytes)",
                        b.name, b.file_offset, b.n_bytes, a.name, a.file_offset, a.n_bytes);
  }
  return {};
}

File::File() : impl_(std::make_unique<Impl>()) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

Result<File> File::open(const std::string& path) {
  File f;
  f.impl_->path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err("gguf: cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return err("gguf: cannot stat '{}': {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return err("gguf: '{}' is not a regular file", path);
  }
  if (st.st_size < 24) {
    ::close(fd);
    return err("gguf: {}: file is {} bytes, too small for the 24-byte GGUF header (offset 0x0)", path, (uint64_t)st.st_size);
  }
  void* m = mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) return err("gguf: cannot map '{}': {}", path, std::strerror(e));
  f.impl_->map = m;
  f.impl_->map_size = (size_t)st.st_size;
  f.impl_->base = static_cast<const uint8_t*>(m);
  f.impl_->size = (uint64_t)st.st_size;
  DS_TRY(f.impl_->parse());
  return f;
}

Result<File> File::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  File f;
  f.impl_->path = std::move(name);
  f.impl_->owned = std::move(bytes);
  f.impl_->base = f.impl_->owned.data();
  f.impl_->size = f.impl_->owned.size();
  DS_TRY(f.impl_->parse());
  return f;
}

const std::string& File::path() const { return impl_->path; }
uint32_t File::version() const { return impl_->version; }
uint64_t File::file_size() const { return impl_->size; }
uint32_t File::alignment() const { return impl_->alignment; }
uint64_t File::data_offset() const { return impl_->data_offset; }
const std::vector<KeyValue>& File::metadata() const { return impl_->kv; }
const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const Value* File::find(std::string_view key) const {
  auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->kv[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const uint8_t* File::tensor_data(const TensorInfo& t) const { return impl_->base + t.file_offset; }

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < std::max<uint32_t>(n_dims, 1) && d < 4; d++) s += fmt::format("{}{}", d ? ", " : "", ne[d]);
  return s + "]";
}

}  // namespace ds::gguf
