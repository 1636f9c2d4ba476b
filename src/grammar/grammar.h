// A compiled JSON grammar: the node graph that grammar::Matcher walks byte by byte. Nodes are what a
// JSON value may be at one place of the document (any value, an object with declared properties, an
// array of some item, a string, a number, one of a set of literal texts, one of several alternatives).
// schema.h compiles a JSON schema into one; any_object() is response_format json_object. Immutable
// once built, shared by every request that uses it.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ds::grammar {

enum class Kind : uint8_t {
  Any,      // any JSON value
  Object,   // declared properties in order, or free keys (props empty, additional >= 0)
  Array,    // items, min_items..max_items of them
  String,   // a string of min_items..max_items characters (code points)
  Number,   // any number (RFC 8259 grammar)
  Integer,  // a number without fraction or exponent
  Literal,  // one of `literals` (canonical JSON texts)
  AnyOf,    // one of `alts`
};

struct Property {
  std::string key;  // the key as JSON text, quotes included: "\"name\""
  int32_t node = 0;
  bool required = false;
};

struct Node {
  Kind kind = Kind::Any;
  std::vector<Property> props;   // Object
  int32_t additional = -1;       // Object without props: value node of any key (-1: no keys, only {})
  int32_t items = -1;            // Array
  // Array: items; String: characters (code points; an escape counts as the character it stands for).
  uint32_t min_items = 0, max_items = std::numeric_limits<uint32_t>::max();
  std::vector<std::string> literals;  // Literal: sorted, unique, non-empty
  std::vector<int32_t> alts;          // AnyOf
};

struct Grammar {
  std::vector<Node> nodes;
  int32_t root = 0;
  // Built-in nodes every grammar holds at these indices (Any dispatches to them by a value's first byte).
  static constexpr int32_t kAny = 0, kAnyObject = 1, kAnyArray = 2, kString = 3, kNumber = 4, kTrueFalseNull = 5;
  Grammar();  // the built-in nodes, root kAny
  int32_t add(Node n);
};

// response_format {"type": "json_object"}: any JSON object at the top level.
Grammar any_object();

}  // namespace ds::grammar
