#include "grammar/grammar.h"

namespace ds::grammar {

Grammar::Grammar() {
  nodes.resize(6);
  nodes[kAny].kind = Kind::Any;
  nodes[kAnyObject].kind = Kind::Object;
  nodes[kAnyObject].additional = kAny;
  nodes[kAnyArray].kind = Kind::Array;
  nodes[kAnyArray].items = kAny;
  nodes[kString].kind = Kind::String;
  nodes[kNumber].kind = Kind::Number;
  nodes[kTrueFalseNull].kind = Kind::Literal;
  nodes[kTrueFalseNull].literals = {"false", "null", "true"};
  root = kAny;
}

int32_t Grammar::add(Node n) {
  nodes.push_back(std::move(n));
  return static_cast<int32_t>(nodes.size() - 1);
}

Grammar any_object() {
  Grammar g;
  g.root = Grammar::kAnyObject;
  return g;
}

}  // namespace ds::grammar
