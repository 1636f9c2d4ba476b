#include <cstring>

#include "grammar/matcher_step.h"

namespace ds::grammar::detail {

namespace {

// Whitespace in a gap between tokens, within the bounds. Before the document two line breaks (a model writes
// "</think>\n\n" and then the content), elsewhere one.
bool gap(Frame& f, uint8_t b) {
  const bool space = b == ' ' || b == '\t', brk = b == '\n' || b == '\r';
  if (!space && !brk) return false;
  if (f.ws >= Matcher::kMaxGap || (brk && f.nl >= (f.phase == DocBefore ? 2 : 1))) return false;
  f.ws++;
  if (brk) f.nl++;
  return true;
}

}  // namespace

void Step::emit(const Stack& s) {
  out.insert(out.end(), s.begin(), s.end());
  out_ends.push_back(static_cast<uint32_t>(out.size()));
}

void Step::child_done(Frame& p) {
  if (p.phase == DocAfter) return;
  const Node& n = node(p);
  if (p.phase == ObjInValue) {
    if (!n.props.empty()) p.count++;
    set_phase(p, ObjAfterValue);
  } else if (p.phase == ObjFreeKey) {
    set_phase(p, ObjAfterKey);
  } else if (p.phase == ArrInValue) {
    // Only comparisons with min and max matter: an unbounded array stops counting at min (fewer states).
    if (n.max_items != UINT32_MAX || p.count < n.min_items) p.count++;
    set_phase(p, ArrAfterValue);
  }
}

void Step::close(Stack& s) {
  s.pop_back();
  child_done(s.back());
  emit(s);
}

bool Step::none_required(const Node& n, uint32_t from) const {
  for (size_t i = from; i < n.props.size(); i++)
    if (n.props[i].required) return false;
  return true;
}

bool Step::begin_key(Frame& f) {
  const Node& n = node(f);
  uint64_t m = 0;
  for (uint32_t j = 0; j < 64 && f.count + j < n.props.size(); j++) {
    m |= uint64_t(1) << j;
    if (n.props[f.count + j].required) break;
  }
  if (m == 0) return false;
  set_phase(f, ObjKey);
  f.keys = m;
  f.lo = 1;
  return true;
}

void Step::open_key(Stack& s) {
  Frame& f = s.back();
  if (free_keys(node(f))) {
    set_phase(f, ObjFreeKey);
    s.push_back(frame(Grammar::kString, StrBody));
    emit(s);
  } else if (begin_key(f)) {
    emit(s);
  }
}

void Step::start_value(Stack& s, int32_t id, uint8_t b, int alt_depth) {
  const bool room = static_cast<int>(s.size()) <= Matcher::kMaxDepth;  // the document frame + the containers
  const Node& n = g.nodes[id];
  switch (n.kind) {
    case Kind::Any: {
      int32_t pick = -1;
      if (b == '{') pick = Grammar::kAnyObject;
      else if (b == '[') pick = Grammar::kAnyArray;
      else if (b == '"') pick = Grammar::kString;
      else if (b == '-' || is_digit(b)) pick = Grammar::kNumber;
      else if (b == 't' || b == 'f' || b == 'n') pick = Grammar::kTrueFalseNull;
      if (pick >= 0) start_value(s, pick, b, alt_depth);
      return;
    }
    case Kind::AnyOf:
      if (alt_depth > 16) return;  // the compiler refuses cycles of alternatives and flattens them; a backstop
      for (int32_t a : n.alts) {
        if (out_ends.size() >= static_cast<size_t>(Matcher::kMaxStacks)) return;
        Stack c = s;
        start_value(c, a, b, alt_depth + 1);
      }
      return;
    case Kind::Object:
      if (b == '{' && room) s.push_back(frame(id, ObjOpen)), emit(s);
      return;
    case Kind::Array:
      if (b == '[' && room) s.push_back(frame(id, ArrOpen)), emit(s);
      return;
    case Kind::String:
      if (b == '"') s.push_back(frame(id, StrBody)), emit(s);
      return;
    case Kind::Number:
    case Kind::Integer:
      if (b == '-') s.push_back(frame(id, NumMinus)), emit(s);
      else if (b == '0') s.push_back(frame(id, NumZero)), emit(s);
      else if (is_digit(b)) s.push_back(frame(id, NumInt)), emit(s);
      return;
    case Kind::Literal: {
      s.push_back(frame(id, Lit));
      if (literal_step(s, b) == 1) emit(s);
      return;
    }
  }
}

void Step::feed(Stack& s, uint8_t b) {
  while (true) {
    Frame& f = s.back();
    const uint8_t ph = f.phase;
    if (ph >= StrBody && ph <= StrUtf8) return string_step(s, b);
    if (ph >= NumMinus && ph <= NumExp) {
      if (number_step(s, b)) return;
      continue;
    }
    if (ph == Lit) {
      const int r = literal_step(s, b);
      if (r == 1) emit(s);
      if (r >= 0) return;
      continue;
    }
    if (ph == DocAfter) return;  // nothing after the document, not even whitespace
    if (ph != ObjKey && gap(f, b)) return emit(s);  // inside a declared key whitespace is the key's
    if (ph == DocBefore) {
      set_phase(f, DocAfter);
      return start_value(s, g.root, b);
    }
    const Node& n = node(f);
    switch (ph) {
      case ObjOpen:
        if (b == '}' && (free_keys(n) || none_required(n, 0))) return close(s);
        if (b == '"') return open_key(s);
        return;
      case ObjKey: {
        uint64_t m = 0;
        int done = -1;
        for (uint32_t j = 0; j < 64; j++) {
          if (!(f.keys >> j & 1)) continue;
          const std::string& key = n.props[f.count + j].key;
          if (key.size() > f.lo && static_cast<uint8_t>(key[f.lo]) == b) {
            m |= uint64_t(1) << j;
            if (key.size() == f.lo + 1) done = static_cast<int>(j);
          }
        }
        if (m == 0) return;
        f.keys = m;
        f.lo++;
        if (done >= 0) {
          f.count += done;
          f.keys = 0;
          f.lo = 0;
          set_phase(f, ObjAfterKey);
        }
        return emit(s);
      }
      case ObjAfterKey:
        if (b == ':') set_phase(f, ObjColon), emit(s);
        return;
      case ObjColon: {
        const int32_t child = free_keys(n) ? n.additional : n.props[f.count].node;
        set_phase(f, ObjInValue);
        return start_value(s, child, b);
      }
      case ObjAfterValue:
        if (b == ',' && (free_keys(n) || f.count < n.props.size())) return set_phase(f, ObjComma), emit(s);
        if (b == '}' && (free_keys(n) || none_required(n, f.count))) return close(s);
        return;
      case ObjComma:
        if (b == '"') open_key(s);
        return;
      case ArrOpen:
        if (b == ']') {
          if (n.min_items == 0) close(s);
          return;
        }
        if (n.max_items == 0) return;
        set_phase(f, ArrInValue);
        return start_value(s, n.items, b);
      case ArrAfterValue:
        if (b == ',' && f.count < n.max_items) return set_phase(f, ArrComma), emit(s);
        if (b == ']' && f.count >= n.min_items) return close(s);
        return;
      case ArrComma:
        set_phase(f, ArrInValue);
        return start_value(s, n.items, b);
      default: return;  // ObjFreeKey, ObjInValue, ArrInValue: a child is on top
    }
  }
}
}  // namespace ds::grammar::detail
