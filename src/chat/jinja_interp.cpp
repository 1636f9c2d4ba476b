#include "chat/jinja_interp.h"

#include <pthread.h>

#include <cmath>
#include <limits>

#include "chat/jinja_builtins.h"
#include "chat/py_str.h"

namespace ds::chat::jinja {

// ---- frames ----

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get())
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

namespace {

FramePtr child(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

struct CallGuard {
  Interp& in;
  explicit CallGuard(Interp& i) : in(i) { in.enter_call(); }
  ~CallGuard() { in.leave_call(); }
};

// Binds a macro's (or call block's) parameters in a new frame, Jinja2-style.
FramePtr bind_params(Interp& in, const Stmt& def, const std::string& what, const FramePtr& parent, CallArgs& args,
                     Value* caller) {
  FramePtr frame = child(parent);
  const auto& params = def.params;
  std::vector<bool> given(params.size(), false);
  std::vector<Value> extra_pos;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < params.size()) {
      frame->set(params[i].first, args.pos[i]);
      given[i] = true;
    } else {
      extra_pos.push_back(args.pos[i]);
    }
  }
  if (!extra_pos.empty() && !def.uses_varargs)
    fail(what + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  DictObj extra_kw;
  for (auto& [k, v] : args.kw) {
    size_t idx = params.size();
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].first == k) idx = i;
    if (idx < params.size()) {
      if (given[idx]) fail(what + " got multiple values for argument '" + k + "'");
      frame->set(k, v);
      given[idx] = true;
    } else if (k == "caller" && caller && def.uses_caller) {
      *caller = v;
    } else if (def.uses_kwargs) {
      extra_kw.set(Value::string(k), v);
    } else {
      fail(what + " takes no keyword argument '" + k + "'");
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) continue;
    if (params[i].second)
      frame->set(params[i].first, in.eval(*params[i].second, frame));
    else
      frame->set(params[i].first, Value::undefined("parameter '" + params[i].first + "' was not provided"));
  }
  if (def.uses_varargs) frame->set("varargs", Value::list(std::move(extra_pos), true));
  if (def.uses_kwargs) frame->set("kwargs", Value::dict(std::move(extra_kw)));
  return frame;
}

class Macro : public Callable {
 public:
  Macro(const Stmt* def, FramePtr closure) : def_(def), closure_(std::move(closure)) {}
  std::string repr() const override { return "<Macro '" + def_->name + "'>"; }
  Value call(Interp& in, CallArgs& args) override {
    CallGuard g(in);
    Value caller = Value::undefined("no caller defined");
    FramePtr frame = bind_params(in, *def_, "macro '" + def_->name + "'", closure_, args, &caller);
    if (def_->uses_caller) frame->set("caller", caller);
    std::string out;
    in.exec(def_->body, frame, out);
    return Value::string(std::move(out));
  }

 private:
  const Stmt* def_;
  FramePtr closure_;
};

// `caller` inside a macro invoked by {% call %}: renders the call block's body.
class Caller : public Callable {
 public:
  Caller(const Stmt* block, FramePtr frame) : block_(block), frame_(std::move(frame)) {}
  std::string repr() const override { return "<Macro 'caller'>"; }
  Value call(Interp& in, CallArgs& args) override {
    CallGuard g(in);
    FramePtr frame = bind_params(in, *block_, "macro 'caller'", frame_, args, nullptr);
    std::string out;
    in.exec(block_->body, frame, out);
    return Value::string(std::move(out));
  }

 private:
  const Stmt* block_;
  FramePtr frame_;
};

class LoopCycle : public Callable {
 public:
  explicit LoopCycle(size_t index0) : i_(index0) {}
  std::string repr() const override { return "<bound method LoopContext.cycle>"; }
  Value call(Interp&, CallArgs& args) override {
    if (args.pos.empty()) fail("no items for cycling given");
    return args.pos[i_ % args.pos.size()];
  }

 private:
  size_t i_;
};

class LoopChanged : public Callable {
 public:
  explicit LoopChanged(std::shared_ptr<Value> last) : last_(std::move(last)) {}
  std::string repr() const override { return "<bound method LoopContext.changed>"; }
  Value call(Interp&, CallArgs& args) override {
    Value now = Value::list(args.pos, true);
    if (!last_->is_undefined() && equal(*last_, now)) return Value::boolean(false);
    *last_ = now;
    return Value::boolean(true);
  }

 private:
  std::shared_ptr<Value> last_;
};

Value make_loop(size_t i, const std::vector<Value>& items, const std::shared_ptr<Value>& changed_state) {
  size_t n = items.size();
  DictObj d;
  auto put = [&](const char* k, Value v) { d.set(Value::string(k), std::move(v)); };
  put("index", Value::integer(static_cast<int64_t>(i + 1)));
  put("index0", Value::integer(static_cast<int64_t>(i)));
  put("revindex", Value::integer(static_cast<int64_t>(n - i)));
  put("revindex0", Value::integer(static_cast<int64_t>(n - i - 1)));
  put("first", Value::boolean(i == 0));
  put("last", Value::boolean(i + 1 == n));
  put("length", Value::integer(static_cast<int64_t>(n)));
  put("depth", Value::integer(1));
  put("depth0", Value::integer(0));
  if (i > 0) put("previtem", items[i - 1]);
  if (i + 1 < n) put("nextitem", items[i + 1]);
  put("cycle", Value::func(std::make_shared<LoopCycle>(i)));
  put("changed", Value::func(std::make_shared<LoopChanged>(changed_state)));
  return Value::dict(std::move(d));
}

bool checked_int(bool overflow, int64_t) {
  if (overflow) fail("integer overflow (values beyond 64 bits are not supported)");
  return true;
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) fail("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t r = 1;
  while (exp > 0) {
    if (exp & 1) checked_int(__builtin_mul_overflow(r, base, &r), r);
    exp >>= 1;
    if (exp) checked_int(__builtin_mul_overflow(base, base, &base), base);
  }
  return Value::integer(r);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) fail("float division by zero");
    return Value::number(x / y);
  }
  if (op == "**") {
    if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(x, y));
  }
  // // and %: Python's float divmod.
  if (y == 0) fail(op == "%" ? "float modulo" : "float floor division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (op == "%") return Value::number(mod);
  double fl;
  if (div != 0) {
    fl = std::floor(div);
    if (div - fl > 0.5) fl += 1.0;
  } else {
    fl = std::copysign(0.0, x / y);
  }
  return Value::number(fl);
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") return checked_int(__builtin_add_overflow(x, y, &r), r), Value::integer(r);
  if (op == "-") return checked_int(__builtin_sub_overflow(x, y, &r), r), Value::integer(r);
  if (op == "*") return checked_int(__builtin_mul_overflow(x, y, &r), r), Value::integer(r);
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value::number(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "**") return int_pow(x, y);
  if (y == 0) fail(op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
  if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    m += y;
    q -= 1;
  }
  return Value::integer(op == "%" ? m : q);
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::string("") : Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    in.check_size(seq.str().size() * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)));
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += seq.str();
    return Value::string(std::move(s));
  }
  in.check_size(seq.items().size() * 16 * static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 36)));
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(items), seq.is_tuple());
}

}  // namespace

Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    std::string t = to_str(b);
    in.check_size(s.size() + t.size());
    return Value::string(s + t);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_op(op, a.get_float(), b.get_float());
    return int_op(op, a.get_int(), b.get_int());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.is_tuple());
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list()) fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, b.get_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, a.get_int());
  }
  if (op == "%" && a.is_string()) {
    std::string s = percent_format(a.str(), b);
    in.check_size(s.size());
    return Value::string(std::move(s));
  }
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// ---- Interp ----

Interp::~Interp() {
  // Macros close over the frame that holds them and namespaces may hold themselves: clearing
  // these frees the cycles once the render is done.
  for (auto& w : namespaces_)
    if (auto ns = w.lock()) ns->attrs = DictObj();
  for (auto& w : macro_frames_)
    if (auto fr = w.lock()) fr->vars.clear();
}

void Interp::enter_call() {
  if (++call_depth_ > limits_.max_call_depth)
    fail("macro calls nested deeper than " + std::to_string(limits_.max_call_depth) + " (runaway recursion?)");
}

void Interp::check_size(size_t n) const {
  if (n > limits_.max_output_bytes)
    fail("rendered text would exceed " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Interp::step(int line) {
  line_ = line;
  if (++steps_ > limits_.max_steps)
    fail("template evaluation exceeded " + std::to_string(limits_.max_steps) + " steps (runaway loop?)");
  // Every statement and expression passes here, so the recursion is bounded where it grows (the frame address
  // is the real stack even under ASan's fake stacks). Stacks grow down on every platform this builds for.
  const auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (stack_base_ > sp && stack_base_ - sp > stack_room_)
    fail("template nested too deeply: its expressions inside macro calls need more than " +
         std::to_string(stack_room_ >> 10) + " KiB of stack (runaway recursion?)");
}

std::string Interp::render(const Body& body, FramePtr globals) {
  stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  stack_room_ = limits_.max_stack_bytes;
  // The thread's own stack bounds (a worker thread may have far less than the main thread's 8 MB), once per thread:
  // for the main thread glibc reads /proc/self/maps to find them.
  thread_local const uintptr_t stack_low = [] {
    uintptr_t lo = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* low = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &low, &size) == 0) lo = reinterpret_cast<uintptr_t>(low);
      pthread_attr_destroy(&attr);
    }
    return lo;
  }();
  constexpr uintptr_t kMargin = uintptr_t{512} << 10;  // the frames of the check's error path and its throw
  if (stack_low != 0)
    stack_room_ =
        stack_base_ > stack_low + kMargin ? std::min<size_t>(stack_room_, stack_base_ - stack_low - kMargin) : 0;
  std::string out;
  exec(body, child(globals), out);
  return out;
}

Interp::Flow Interp::exec(const Body& body, const FramePtr& f, std::string& out) {
  for (const auto& sp : body) {
    const Stmt& s = *sp;
    step(s.line);
    switch (s.kind) {
      case StmtKind::Text:
        out += s.text;
        break;
      case StmtKind::Output:
        out += to_str(eval(*s.expr, f));
        break;
      case StmtKind::If: {
        Flow fl = exec(truthy(eval(*s.expr, f)) ? s.body : s.else_body, f, out);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case StmtKind::For:
        exec_for(s, f, out);
        break;
      case StmtKind::Set:
      case StmtKind::SetBlock:
        exec_set(s, f);
        break;
      case StmtKind::Macro:
        f->set(s.name, Value::func(std::make_shared<Macro>(&s, f)));
        macro_frames_.push_back(f);
        break;
      case StmtKind::CallBlock: {
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.a, f);
        CallArgs args = eval_args(call_expr, f);
        args.kw.emplace_back("caller", Value::func(std::make_shared<Caller>(&s, f)));
        line_ = s.line;
        out += to_str(call(callee, args));
        break;
      }
      case StmtKind::FilterBlock: {
        std::string inner;
        Flow fl = exec(s.body, child(f), inner);  // like a block set, the body is its own scope
        out += to_str(filter_block(*s.filter, Value::string(std::move(inner)), f));
        if (fl != Flow::Normal) return fl;
        break;
      }
      case StmtKind::With: {
        FramePtr w = child(f);
        for (auto& [name, e] : s.params) w->set(name, eval(*e, f));
        Flow fl = exec(s.body, w, out);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case StmtKind::Scope: {
        Flow fl = exec(s.body, f, out);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
    check_size(out.size());
  }
  return Flow::Normal;
}

void Interp::exec_for(const Stmt& s, const FramePtr& f, std::string& out) {
  Value seq = eval(*s.expr, f);
  line_ = s.line;
  std::vector<Value> items = iterate(seq);
  if (s.cond) {  // `for x in xs if cond`: the condition sees the loop variables, not `loop`
    std::vector<Value> kept;
    for (auto& item : items) {
      FramePtr tmp = child(f);
      assign(s.targets, item, *tmp, s.line);
      if (truthy(eval(*s.cond, tmp))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  // Jinja runs the else block unless some iteration ran its body to the end: it also runs when
  // every iteration stopped at a break or continue.
  bool completed = false;
  auto changed_state = std::make_shared<Value>();
  for (size_t i = 0; i < items.size(); ++i) {
    step(s.line);
    FramePtr it = child(f);
    assign(s.targets, items[i], *it, s.line);
    if (s.uses_loop) it->set("loop", make_loop(i, items, changed_state));
    Flow fl = exec(s.body, it, out);
    if (fl == Flow::Normal) completed = true;
    if (fl == Flow::Break) break;
  }
  if (!completed && !s.else_body.empty()) exec(s.else_body, child(f), out);
}

void Interp::assign(const std::vector<std::string>& targets, const Value& v, Frame& f, int line) {
  if (targets.size() == 1) {
    f.set(targets[0], v);
    return;
  }
  line_ = line;
  std::vector<Value> parts = iterate(v);
  if (parts.size() > targets.size())
    fail("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  if (parts.size() < targets.size())
    fail("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
         std::to_string(parts.size()) + ")");
  for (size_t i = 0; i < targets.size(); ++i) f.set(targets[i], parts[i]);
}

void Interp::exec_set(const Stmt& s, const FramePtr& f) {
  Value v;
  if (s.kind == StmtKind::SetBlock) {
    std::string inner;
    exec(s.body, child(f), inner);
    v = Value::string(std::move(inner));
    if (s.filter) v = filter_block(*s.filter, std::move(v), f);
  } else {
    v = eval(*s.expr, f);
  }
  line_ = s.line;
  if (!s.attr.empty()) {
    const Value* target = f->lookup(s.targets[0]);
    if (!target || !target->is_namespace()) fail("cannot assign attribute on non-namespace object");
    target->ns().attrs.set(Value::string(s.attr), std::move(v));
    return;
  }
  assign(s.targets, v, *f, s.line);
}

Value Interp::filter_block(const Expr& filter, Value subject, const FramePtr& f) {
  block_values_.push_back(std::move(subject));
  Value v;
  try {
    v = eval(filter, f);
  } catch (...) {
    block_values_.pop_back();
    throw;
  }
  block_values_.pop_back();
  return v;
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_func()) return callee.fn().call(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  fail("'" + type_name(callee) + "' object is not callable");
}

CallArgs Interp::eval_args(const Expr& e, const FramePtr& f, size_t skip) {
  CallArgs args;
  for (size_t i = skip; i < e.items.size(); ++i) args.pos.push_back(eval(*e.items[i], f));
  for (auto& [k, x] : e.kwargs) args.kw.emplace_back(k, eval(*x, f));
  return args;
}

Value Interp::eval_compare(const Expr& e, const FramePtr& f) {
  Value left = eval(*e.items[0], f);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], f);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = equal(left, right);
    else if (op == "!=") r = !equal(left, right);
    else if (op == "<") r = less(left, right);
    else if (op == ">") r = less(right, left);
    else if (op == "<=") r = less(left, right) || equal(left, right);
    else if (op == ">=") r = less(right, left) || equal(left, right);
    else if (op == "in") r = contains(right, left);
    else r = !contains(right, left);  // not in
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval_filter(const Expr& e, const FramePtr& f) {
  Value subject = e.a ? eval(*e.a, f) : block_values_.back();
  CallArgs args = eval_args(e, f);
  line_ = e.line;
  FilterFn fn = find_filter(e.name);
  if (!fn) fail("no filter named '" + e.name + "'");
  return fn(*this, subject, args);
}

Value Interp::eval_test(const Expr& e, const FramePtr& f) {
  Value subject = eval(*e.a, f);
  CallArgs args = eval_args(e, f);
  line_ = e.line;
  TestFn fn = find_test(e.name);
  if (!fn) fail("no test named '" + e.name + "'");
  return Value::boolean(fn(*this, subject, args) != e.negate);
}

Value Interp::eval(const Expr& e, const FramePtr& f) {
  step(e.line);
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: {
      const Value* v = f->lookup(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      for (auto& x : e.items) items.push_back(eval(*x, f));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      DictObj d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], f);
        Value v = eval(*e.items[i + 1], f);
        if (k.is_list() && !k.is_tuple()) fail("unhashable type: 'list'");
        if (k.is_dict()) fail("unhashable type: 'dict'");
        d.set(std::move(k), std::move(v));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::GetAttr: {
      Value obj = eval(*e.a, f);
      line_ = e.line;
      return get_attr(obj, e.name);
    }
    case ExprKind::GetItem: {
      Value obj = eval(*e.a, f);
      Value key = eval(*e.b, f);
      line_ = e.line;
      return get_item(obj, key);
    }
    case ExprKind::Slice: {
      Value obj = eval(*e.a, f);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.items[i] ? eval(*e.items[i], f) : Value::none();
      line_ = e.line;
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: {
      Value callee = eval(*e.a, f);
      CallArgs args = eval_args(e, f);
      line_ = e.line;
      return call(callee, args);
    }
    case ExprKind::Filter: return eval_filter(e, f);
    case ExprKind::Test: return eval_test(e, f);
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.a, f)));
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.a, f);
      line_ = e.line;
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) fail(std::string("bad operand type for unary ") + (e.kind == ExprKind::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
      if (e.kind == ExprKind::Pos) return v.is_float() ? v : Value::integer(v.get_int());
      if (v.is_float()) return Value::number(-v.get_float());
      if (v.get_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow");
      return Value::integer(-v.get_int());
    }
    case ExprKind::Binary: {
      Value a = eval(*e.a, f);
      Value b = eval(*e.b, f);
      line_ = e.line;
      return binary_op(*this, e.name, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*e.a, f);
      return truthy(a) ? eval(*e.b, f) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, f);
      return truthy(a) ? a : eval(*e.b, f);
    }
    case ExprKind::Compare: return eval_compare(e, f);
    case ExprKind::CondExpr:
      if (truthy(eval(*e.b, f))) return eval(*e.a, f);
      if (e.c) return eval(*e.c, f);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::BlockValue: return block_values_.back();
  }
  return Value();
}

}  // namespace ds::chat::jinja
