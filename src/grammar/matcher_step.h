// The matcher's inside (matcher.h): the phases of a frame and Step, which feeds one byte to one stack.
// matcher_step.cpp: containers and the dispatch; matcher_leaf.cpp: strings, numbers, literals.
#pragma once
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace ds::grammar::detail {

enum Phase : uint8_t {
  DocBefore, DocAfter,
  ObjOpen, ObjKey, ObjFreeKey, ObjAfterKey, ObjColon, ObjInValue, ObjAfterValue, ObjComma,
  ArrOpen, ArrInValue, ArrAfterValue, ArrComma,
  StrBody, StrEsc, StrHex, StrLowBs, StrLowU, StrLowHex, StrUtf8,
  NumMinus, NumZero, NumInt, NumDot, NumFrac, NumE, NumESign, NumExp,
  Lit,
};

using Stack = std::vector<Frame>;

inline bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

inline void set_phase(Frame& f, uint8_t p) {
  f.phase = p;
  f.ws = 0;
  f.nl = 0;
}

inline Frame frame(int32_t node, uint8_t phase) {
  Frame f;
  f.node = node;
  f.phase = phase;
  return f;
}

// Feeds one byte to one stack; every stack that results is appended to the output.
struct Step {
  const Grammar& g;
  std::vector<Frame>& out;
  std::vector<uint32_t>& out_ends;

  const Node& node(const Frame& f) const { return g.nodes[f.node]; }
  bool free_keys(const Node& n) const { return n.props.empty() && n.additional >= 0; }
  void emit(const Stack& s);
  // The parent's part once its child value (or key string) ended.
  void child_done(Frame& p);
  void close(Stack& s);
  bool none_required(const Node& n, uint32_t from) const;
  // After the opening quote of a declared key: the candidates are the next properties up to and including the
  // first required one.
  bool begin_key(Frame& f);
  void open_key(Stack& s);
  void start_value(Stack& s, int32_t id, uint8_t b, int alt_depth = 0);
  // Literal: 1 taken (the stack is ready to emit), 0 refused, -1 the literal ended before b (popped: feed b on).
  int literal_step(Stack& s, uint8_t b);
  void string_step(Stack& s, uint8_t b);
  // Number: true when b was taken or refused; false when the number ended before b (popped: feed b on).
  bool number_step(Stack& s, uint8_t b);
  void feed(Stack& s, uint8_t b);
};

}  // namespace ds::grammar::detail
