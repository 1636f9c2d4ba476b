// libFuzzer target for the GGUF reader (formats.md §2.10) and the qwen35 config built on it.
// Any input must give either an Error or a File whose every reported range can be read; a file that
// parses must survive a writer round trip: write(read(x)) parses again, and writing that again gives
// the same bytes. ASan/UBSan catch out-of-bounds reads and overflow; __builtin_trap marks a broken
// round trip.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"

using namespace ds;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = gguf::File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!f.ok()) return 0;
  volatile uint64_t sink = 0;
  for (const auto& kv : f->metadata()) {
    sink = sink + kv.value.to_string(4).size();
    (void)f->get_uint(kv.key);
    (void)f->get_int(kv.key);
    (void)f->get_float(kv.key);
    (void)f->get_int_array(kv.key);
  }
  for (const auto& t : f->tensors()) {
    if (f->find_tensor(t.name) != &t) __builtin_trap();
    if (t.file_offset + t.n_bytes > f->file_size()) __builtin_trap();
    const uint8_t* p = f->tensor_data(t);
    if (t.n_bytes) sink = sink + p[0] + p[t.n_bytes - 1];
    sink = sink + t.shape_string().size();
  }
  (void)qwen35_config_from_gguf(*f);

  auto bytes = gguf::writer_from(*f).to_bytes();
  auto g = gguf::File::from_bytes(bytes, "fuzz-rewritten");
  if (!g.ok()) __builtin_trap();
  if (g->metadata().size() != f->metadata().size() || g->tensors().size() != f->tensors().size()) __builtin_trap();
  for (size_t k = 0; k < f->metadata().size(); k++)
    if (g->metadata()[k].key != f->metadata()[k].key) __builtin_trap();
  if (gguf::writer_from(*g).to_bytes() != bytes) __builtin_trap();
  return 0;
}
