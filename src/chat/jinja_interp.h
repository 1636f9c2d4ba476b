// Tree-walking interpreter for the Jinja AST (jinja_ast.h) with Jinja2's scoping: a for-loop
// iteration, a macro call, a with block and a call-block body each get a fresh frame; if blocks do
// not; `set` writes the innermost frame (hence namespaces for state that outlives a loop); macros
// close over the frame they were defined in. Limits make every render finish: output size, macro
// call depth, a step budget (a template can nest range() loops into billions of iterations) and the C++
// stack the interpreter's recursion may use (expressions nested 128 deep inside 200 nested macro calls
// overflowed an 8 MB stack: session 36's fuzzing).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace ds::chat::jinja {

struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // also caps every string a template builds
  int max_call_depth = 200;                   // macro recursion
  uint64_t max_steps = 50'000'000;            // statements + expressions evaluated
  size_t max_stack_bytes = size_t{6} << 20;    // C++ stack below render()'s frame; less where the thread's
                                               // stack has less room left (minus 512 KiB for the error path)
};

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};
using FramePtr = std::shared_ptr<Frame>;

class Interp {
 public:
  explicit Interp(Limits limits) : limits_(limits) {}
  ~Interp();

  // Renders a template body with `globals` as the outermost frame.
  std::string render(const Body& body, FramePtr globals);

  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const FramePtr& f, std::string& out);
  Value eval(const Expr& e, const FramePtr& f);
  Value call(const Value& callee, CallArgs& args);

  // Fails when a string of n bytes would pass the output limit.
  void check_size(size_t n) const;
  int line() const { return line_; }
  void enter_call();  // macro call depth, paired with leave_call
  void leave_call() { --call_depth_; }
  void track(const std::shared_ptr<NamespaceObj>& ns) { namespaces_.push_back(ns); }

 private:
  Limits limits_;
  int line_ = 0;
  int call_depth_ = 0;
  uint64_t steps_ = 0;
  uintptr_t stack_base_ = 0;  // render()'s frame address
  size_t stack_room_ = 0;     // the stack the recursion may use below it
  std::vector<Value> block_values_;  // subjects of the filter blocks being evaluated
  std::vector<std::weak_ptr<NamespaceObj>> namespaces_;  // cleared at the end (breaks cycles)
  std::vector<std::weak_ptr<Frame>> macro_frames_;        // frames holding macros, likewise

  void step(int line);
  void exec_for(const Stmt& s, const FramePtr& f, std::string& out);
  void exec_set(const Stmt& s, const FramePtr& f);
  void assign(const std::vector<std::string>& targets, const Value& v, Frame& f, int line);
  Value filter_block(const Expr& filter, Value subject, const FramePtr& f);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e, const FramePtr& f);
  Value eval_filter(const Expr& e, const FramePtr& f);
  Value eval_test(const Expr& e, const FramePtr& f);
  CallArgs eval_args(const Expr& e, const FramePtr& f, size_t skip = 0);
};

// Arithmetic with Python semantics (+ - * / // % ** and ~), exposed for the filters (sum).
Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b);

}  // namespace ds::chat::jinja
