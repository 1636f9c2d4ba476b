// libFuzzer target for response_format's JSON schemas (grammar/schema.h) and the matcher they drive
// (grammar/matcher.h): both the schema (a client's) and the document (the model's bytes) are arbitrary.
// Input: the schema's JSON text, a NUL byte, then the document. Properties (__builtin_trap when broken):
//  * a schema either compiles or is refused with a message and a path;
//  * plain_char's forecast holds: Same / Count are taken, Full is refused, and once a character forecast Same has
//    ended (its UTF-8 continuation bytes taken) the state's key is what it was before it;
//  * a document the matcher takes whole and calls complete() is JSON (nlohmann parses it, numbers past a double
//    aside).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <variant>

#include "grammar/matcher.h"
#include "grammar/schema.h"

using json = nlohmann::ordered_json;
using namespace ds::grammar;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  if (!nul) return 0;
  const std::string_view schema_text(p, nul - p), doc(nul + 1, size - (nul + 1 - p));
  const json schema = json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return 0;
  auto compiled = compile_schema(schema, "schema");
  if (auto* e = std::get_if<SchemaError>(&compiled)) {
    if (e->message.empty()) __builtin_trap();
    return 0;
  }
  const Grammar& g = std::get<Grammar>(compiled);
  Matcher m(g);
  size_t taken = 0;
  std::string same_key;  // the key before a character forecast Same: the state returns to it once the character ends
  int cont = -1;         // continuation bytes still to come of that character (-1: none pending)
  for (unsigned char b : doc) {
    const Matcher::Plain forecast = cont > 0 ? Matcher::Plain::No : m.plain_char(b, 0);
    if (forecast == Matcher::Plain::Same) {
      same_key = m.key();
      uint8_t more = 0, lo, hi;
      cont = utf8_lead(b, more, lo, hi) ? more : 0;
    }
    const bool ok = m.advance(b);
    if ((forecast == Matcher::Plain::Same || forecast == Matcher::Plain::Count) && !ok) __builtin_trap();
    if (forecast == Matcher::Plain::Full && ok) __builtin_trap();
    if (!ok) break;
    taken++;
    if (cont > 0 && forecast == Matcher::Plain::No) cont--;
    if (cont == 0) {
      if (m.key() != same_key) __builtin_trap();  // a plain character of an unbounded string changes nothing
      cont = -1;
    }
  }
  if (taken == doc.size() && m.complete()) {
    try {
      const json parsed = json::parse(doc);  // throws if the matcher called a non-JSON document complete
      if (parsed.is_discarded()) __builtin_trap();
    } catch (const json::out_of_range&) {
      // valid JSON with a number past a double (2e313): nlohmann refuses it (406), JSON allows it
    } catch (const json::exception&) {
      __builtin_trap();
    }
  }
  return 0;
}
