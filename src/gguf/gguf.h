// GGUF v2/v3 reader (formats.md §2). Opening a file validates every structural fact before use
// (magic, version, counts vs file size, string/array lengths, type ids, dims, alignment, tensor
// ranges inside the file and not overlapping); a bad file gives an Error naming what and where.
// Tensor data stays memory-mapped; metadata is parsed into owned values.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ggml_type.h"

namespace ds::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. `type` is the stored type; integers are widened into `i` (signed types) or
// `u` (unsigned types and BOOL), floats into `f`. Arrays keep their element type in `elem_type` and
// their elements in the matching vector (arr_i / arr_u / arr_f / arr_s). Keeping the stored types
// lets the writer reproduce a file byte for byte.
struct Value {
  ValueType type = ValueType::UINT32;
  ValueType elem_type = ValueType::UINT32;  // only for ARRAY
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<uint64_t> arr_u;
  std::vector<int64_t> arr_i;
  std::vector<double> arr_f;
  std::vector<std::string> arr_s;

  size_t array_size() const;  // element count of an ARRAY (0 otherwise)
  bool is_integer() const;    // scalar of an integer type (not BOOL)
  bool is_float() const;
  // Short human form: scalars as is, arrays as "[n × TYPE] first, elements, ..." (at most `max_items`).
  std::string to_string(size_t max_items = 8) const;

  static Value make_u32(uint32_t v);
  static Value make_i32(int32_t v);
  static Value make_u64(uint64_t v);
  static Value make_f32(float v);
  static Value make_bool(bool v);
  static Value make_str(std::string v);
  static Value make_str_array(std::vector<std::string> v);
  static Value make_i32_array(std::vector<int64_t> v);
  static Value make_f32_array(std::vector<double> v);
  static Value make_bool_array(std::vector<bool> v);
};
// Same stored type and same contents (NaN equals NaN for scalars).
bool operator==(const Value& a, const Value& b);

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] contiguous; missing trailing dims are 1
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // relative to the data section, as stored
  uint64_t file_offset = 0;  // absolute position in the file
  uint64_t n_bytes = 0;
  uint64_t n_elements = 0;
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // "[256, 4032]"
};

class File {
 public:
  // Memory-maps and validates `path`.
  static Result<File> open(const std::string& path);
  // Validates an in-memory image (tests, fuzzing); `name` is used in error messages.
  static Result<File> from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& path() const;
  uint32_t version() const;
  uint64_t file_size() const;
  uint32_t alignment() const;
  uint64_t data_offset() const;  // absolute start of the data section (no tensors: end of the records)

  const std::vector<KeyValue>& metadata() const;
  const Value* find(std::string_view key) const;  // nullptr if absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: an Error names the key, expected and actual type. Any integer type converts
  // (range-checked); any float type converts to float/double.
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<double>> get_float_array(std::string_view key) const;
  uint64_t get_uint_or(std::string_view key, uint64_t def) const;  // def if absent; Error if wrong type -> def

  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  const uint8_t* tensor_data(const TensorInfo& t) const;        // points into the mapping

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

 private:
  File();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes GGUF v3 files in ggml's layout (tensors in record order, each padded to the alignment).
// Round trip: File::open(write(x)) reproduces x, and re-writing it gives the same bytes.
// Tensor data can be streamed: add all tensor infos first, then write_header, then each tensor's
// bytes in order with write_tensor_data (so multi-GB files never sit in memory).
class Writer {
 public:
  // An alignment other than 32 is recorded as the first key, general.alignment (UINT32).
  explicit Writer(uint32_t alignment = 32);
  void set_version(uint32_t v) { version_ = v; }  // 3 by default; 2 has the same layout
  // Keeps insertion order; replaces an existing key in place. Setting general.alignment (UINT32,
  // power of two) changes the layout's alignment.
  void set(std::string key, Value v);
  // ne has 1..4 dims (ne[0] first); returns the tensor's index.
  size_t add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne);

  Status write_header(std::FILE* f) const;                                  // header + kv + infos + pad
  Status write_tensor_data(std::FILE* f, size_t index, const void* data, uint64_t n_bytes) const;  // data + pad
  // For a tensor too big for one buffer: fwrite its tensor_bytes(index) bytes yourself, in pieces,
  // then call this to write the zero padding that follows it.
  Status write_tensor_padding(std::FILE* f, size_t index) const;
  uint64_t header_bytes() const;  // size of what write_header writes (= the data section offset)

  // Convenience for small files: everything in memory.
  void set_tensor_data(size_t index, std::vector<uint8_t> data);
  Status write_file(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;

  uint64_t tensor_bytes(size_t index) const;
  uint64_t tensor_offset(size_t index) const;  // relative to the data section
  size_t n_tensors() const { return tensors_.size(); }
  uint32_t alignment() const { return alignment_; }

 private:
  void relayout();
  std::vector<uint8_t> header() const;
  uint32_t alignment_;
  uint32_t version_ = 3;
  mutable uint64_t header_bytes_ = 0;  // cache of header_bytes(); 0 = stale (set/add_tensor)
  std::vector<KeyValue> kv_;
  struct T {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    uint64_t offset;
    std::vector<uint8_t> data;
  };
  std::vector<T> tensors_;
};

// Copies a file's metadata and tensor infos (and data) into a Writer, e.g. to re-write or edit it.
Writer writer_from(const File& f);

}  // namespace ds::gguf
