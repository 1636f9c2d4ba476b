#include "chat/jinja_parser.h"

#include <algorithm>

#include "chat/jinja_builtins.h"

namespace ds::chat::jinja {
namespace {

constexpr int kMaxNesting = 128;  // expression / block nesting; deeper templates are refused

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::String: return "string";
    case Tok::Int: case Tok::Float: return t.text;
    case Tok::Eof: return "end of template";
    default: return t.text;
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, &end, "", 0);
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& pp, int line) : p(pp) {
      if (++p.depth_ > kMaxNesting) p.fail(line, "template nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  [[noreturn]] void fail(int line, std::string msg) const { throw TemplateError{std::move(msg), line, false}; }

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur().line, std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail(cur().line, "expected a name, got '" + describe(cur()) + "'");
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd)
      fail(cur().line, "expected token 'end of statement block', got '" + describe(cur()) + "'");
    next();
  }

  static ExprPtr node(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses statements until {% <one of ends> %}; the end tag's name is consumed and stored in *end
  // (its block end is not). At top level (ends empty) stops at the end of the template.
  Body parse_body(std::vector<std::string> ends, std::string* end, const std::string& opener, int open_line) {
    DepthGuard g(*this, open_line);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (ends.empty()) return body;
        std::string want;
        for (auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
        fail(t.line, "unexpected end of template: looking for " + want + " to close the '" + opener +
                         "' block opened on line " + std::to_string(open_line));
      }
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = t.line;
        s->expr = parse_tuple(true, false, {});
        if (cur().type != Tok::VarEnd)
          fail(cur().line, "expected token 'end of print statement', got '" + describe(cur()) + "'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name && std::find(ends.begin(), ends.end(), cur().text) != ends.end()) {
          *end = next().text;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail(t.line, "unexpected '" + describe(t) + "'");
      }
    }
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != Tok::Name) fail(t.line, "tag name expected, got '" + describe(t) + "'");
    std::string tag = t.text;
    int line = t.line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    next();
    if (tag == "if") return parse_if(std::move(s));
    if (tag == "for") return parse_for(std::move(s));
    if (tag == "set") return parse_set(std::move(s));
    if (tag == "macro") return parse_macro(std::move(s));
    if (tag == "call") return parse_call_block(std::move(s));
    if (tag == "filter") {
      s->kind = StmtKind::FilterBlock;
      s->filter = parse_filter(node(ExprKind::BlockValue, line), true);
      expect_block_end();
      s->body = parse_block("filter", {"endfilter"}, line);
      expect_block_end();
      return s;
    }
    if (tag == "with") {
      s->kind = StmtKind::With;
      while (cur().type != Tok::BlockEnd) {
        if (!s->params.empty()) expect_op(",");
        std::string n = expect_name();
        expect_op("=");
        s->params.emplace_back(n, parse_expression(true));
      }
      expect_block_end();
      s->body = parse_block("with", {"endwith"}, line);
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(line, "'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
      expect_block_end();
      return s;
    }
    if (tag == "generation") {  // Hugging Face's AssistantTracker tag: renders its body unchanged
      s->kind = StmtKind::Scope;
      expect_block_end();
      s->body = parse_block("generation", {"endgeneration"}, line);
      expect_block_end();
      return s;
    }
    if (tag == "print") {
      s->kind = StmtKind::Output;
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    if (tag == "elif" || tag == "else" || tag.rfind("end", 0) == 0)
      fail(line, "unexpected '" + tag + "' tag: no open block that it could belong to");
    fail(line, "encountered unknown tag '" + tag + "'");
  }

  Body parse_block(const std::string& opener, std::vector<std::string> ends, int line, std::string* which = nullptr) {
    std::string end;
    Body b = parse_body(std::move(ends), &end, opener, line);
    if (which) *which = end;
    return b;
  }

  StmtPtr parse_if(StmtPtr s) {
    s->kind = StmtKind::If;
    s->expr = parse_tuple(true, false, {});
    expect_block_end();
    std::string which;
    s->body = parse_block("if", {"elif", "else", "endif"}, s->line, &which);
    if (which == "elif") {
      auto e = std::make_unique<Stmt>();
      e->line = cur().line;
      s->else_body.push_back(parse_if(std::move(e)));
      return s;  // the nested if consumed the endif
    }
    if (which == "else") {
      expect_block_end();
      s->else_body = parse_block("if", {"endif"}, s->line);
    }
    expect_block_end();
    return s;
  }

  std::vector<std::string> parse_targets(const char* stop) {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    while (true) {
      names.push_back(expect_name());
      if (!skip_op(",")) break;
      if (paren && is_op(")")) break;
      if (!paren && is_name(stop)) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(StmtPtr s) {
    s->kind = StmtKind::For;
    s->targets = parse_targets("in");
    if (!skip_name("in")) fail(cur().line, "expected 'in' in for loop, got '" + describe(cur()) + "'");
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail(cur().line, "recursive for loops are not supported");
    expect_block_end();
    std::string which;
    ++loop_depth_;
    s->body = parse_block("for", {"endfor", "else"}, s->line, &which);
    --loop_depth_;
    s->uses_loop = mentions(s->body, "loop", false);
    if (which == "else") {
      expect_block_end();
      s->else_body = parse_block("for", {"endfor"}, s->line);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(StmtPtr s) {
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "." && peek(2).type == Tok::Name) {
      s->targets.push_back(next().text);
      next();
      s->attr = next().text;
    } else {
      s->targets = parse_targets("=");
    }
    if (skip_op("=")) {
      s->kind = StmtKind::Set;
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1)
      fail(s->line, "a block set assigns to one plain name");
    s->kind = StmtKind::SetBlock;
    if (is_op("|")) s->filter = parse_filter(node(ExprKind::BlockValue, s->line), false);
    expect_block_end();
    s->body = parse_block("set", {"endset"}, s->line);
    expect_block_end();
    return s;
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    bool had_default = false;
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string n = expect_name();
      ExprPtr def;
      if (skip_op("=")) {
        def = parse_expression(true);
        had_default = true;
      } else if (had_default) {
        fail(cur().line, "non-default argument follows default argument");
      }
      s.params.emplace_back(n, std::move(def));
    }
    expect_op(")");
  }

  static bool mentions(const Expr* e, const std::string& name) {
    if (!e) return false;
    if (e->kind == ExprKind::Name && e->name == name) return true;
    if (mentions(e->a.get(), name) || mentions(e->b.get(), name) || mentions(e->c.get(), name)) return true;
    for (auto& x : e->items)
      if (mentions(x.get(), name)) return true;
    for (auto& kv : e->kwargs)
      if (mentions(kv.second.get(), name)) return true;
    return false;
  }
  // Does `body` read variable `name`? Nested macros have their own varargs / kwargs / caller.
  static bool mentions(const Body& body, const std::string& name, bool skip_macros) {
    for (auto& s : body) {
      if (skip_macros && s->kind == StmtKind::Macro) continue;
      if (mentions(s->expr.get(), name) || mentions(s->cond.get(), name) || mentions(s->filter.get(), name)) return true;
      for (auto& p : s->params)
        if (mentions(p.second.get(), name)) return true;
      if (mentions(s->body, name, skip_macros) || mentions(s->else_body, name, skip_macros)) return true;
    }
    return false;
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->kind = StmtKind::Macro;
    s->name = expect_name();
    parse_params(*s);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;  // a loop around the macro definition is not a loop inside its body
    s->body = parse_block("macro", {"endmacro"}, s->line);
    loop_depth_ = saved;
    if (cur().type == Tok::Name && cur().text == s->name) next();
    expect_block_end();
    s->uses_varargs = mentions(s->body, "varargs", true);
    s->uses_kwargs = mentions(s->body, "kwargs", true);
    s->uses_caller = mentions(s->body, "caller", true);
    return s;
  }

  StmtPtr parse_call_block(StmtPtr s) {
    s->kind = StmtKind::CallBlock;
    if (is_op("(")) parse_params(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) fail(s->line, "expected a call after 'call'");
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_block("call", {"endcall"}, s->line);
    loop_depth_ = saved;
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  bool at_tuple_end(const std::vector<std::string>& extra) const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof) return true;
    if (t.type == Tok::Op && t.text == ")") return true;
    if (t.type == Tok::Name) return std::find(extra.begin(), extra.end(), t.text) != extra.end();
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const std::vector<std::string>& extra) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (at_tuple_end(extra)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail(cur().line, "expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = node(ExprKind::Tuple, line);
    e->items = std::move(args);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this, cur().line);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto c = node(ExprKind::CondExpr, line);
      c->b = parse_or();
      if (skip_name("else")) c->c = parse_expression(true);
      c->a = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind k, const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = node(k, line);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = next().line;
      l = binary(ExprKind::Or, "or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = next().line;
      l = binary(ExprKind::And, "and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, cur().line);
      auto e = node(ExprKind::Not, next().line);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> items;
    std::vector<std::string> ops;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                                t.text == ">" || t.text == ">=")) {
        ops.push_back(next().text);
      } else if (is_name("in")) {
        next();
        ops.push_back("in");
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        next();
        next();
        ops.push_back("not in");
      } else {
        break;
      }
      items.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(ExprKind::Compare, line);
    e->items.push_back(std::move(first));
    for (auto& x : items) e->items.push_back(std::move(x));
    e->ops = std::move(ops);
    return e;
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      std::string op = t.text;
      l = binary(ExprKind::Binary, op, std::move(l), parse_concat(), t.line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      l = binary(ExprKind::Binary, "~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      std::string op = t.text;
      l = binary(ExprKind::Binary, op, std::move(l), parse_pow(), t.line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      l = binary(ExprKind::Binary, "**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this, cur().line);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = node(t.text == "-" ? ExprKind::Neg : ExprKind::Pos, t.line);
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::Name) {
      std::string n = next().text;
      auto e = node(ExprKind::Literal, line);
      if (n == "true" || n == "True") e->value = Value::boolean(true);
      else if (n == "false" || n == "False") e->value = Value::boolean(false);
      else if (n == "none" || n == "None") e->value = Value::none();
      else {
        e->kind = ExprKind::Name;
        e->name = n;
      }
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += next().text;  // adjacent literals concatenate
      auto e = node(ExprKind::Literal, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      auto e = node(ExprKind::Literal, line);
      e->value = t.type == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true, {});
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = node(ExprKind::List, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = node(ExprKind::Dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail(line, "unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("["))
        e = parse_subscript(std::move(e));
      else if (is_op("("))
        e = parse_call(std::move(e));
      else
        return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|"))
        e = parse_filter(std::move(e), false);
      else if (is_name("is"))
        e = parse_test(std::move(e));
      else if (is_op("("))
        e = parse_call(std::move(e));
      else
        return e;
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& t = next();
    int line = t.line;
    if (t.text == ".") {
      const Token& a = next();
      if (a.type == Tok::Name) {
        auto e = node(ExprKind::GetAttr, line);
        e->a = std::move(obj);
        e->name = a.text;
        return e;
      }
      if (a.type == Tok::Int) {
        auto e = node(ExprKind::GetItem, line);
        e->a = std::move(obj);
        e->b = node(ExprKind::Literal, line);
        e->b->value = Value::integer(a.ival);
        return e;
      }
      fail(line, "expected name or number after '.', got '" + describe(a) + "'");
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail(line, "expected an index inside '[]'");
    ExprPtr idx;
    if (args.size() == 1) {
      idx = std::move(args[0]);
    } else {
      // a[1:2, 3] (a tuple holding a slice): Jinja2 builds it and then no list, dict or string takes it as an index;
      // refused here (a Slice node evaluates only as a subscript; session 36's fuzzing found it crashing).
      for (const auto& a : args)
        if (a->kind == ExprKind::Slice) fail(line, "a slice inside a tuple index ('a[1:2, 3]') is not supported");
      idx = node(ExprKind::Tuple, line);
      idx->items = std::move(args);
    }
    if (idx->kind == ExprKind::Slice) {
      idx->a = std::move(obj);
      return idx;
    }
    auto e = node(ExprKind::GetItem, line);
    e->a = std::move(obj);
    e->b = std::move(idx);
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      next();
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      parts.push_back(std::move(e));
    }
    if (is_op(":"))
      parts.push_back(nullptr);
    else if (!is_op("]") && !is_op(","))
      parts.push_back(parse_expression(true));
    else
      parts.push_back(nullptr);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(","))
        parts.push_back(parse_expression(true));
      else
        parts.push_back(nullptr);
    } else {
      parts.push_back(nullptr);
    }
    auto s = node(ExprKind::Slice, line);
    s->items = std::move(parts);
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur().line, "*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = next().text;
        next();
        e.kwargs.emplace_back(k, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail(cur().line, "positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(ExprKind::Call, cur().line);
    e->a = std::move(callee);
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr subject, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      int line = cur().line;
      auto e = node(ExprKind::Filter, line);
      e->name = dotted_name();
      if (!has_filter(e->name)) fail(line, "no filter named '" + e->name + "'");
      if (is_op("(")) parse_call_args(*e);
      e->a = std::move(subject);
      subject = std::move(e);
    }
    return subject;
  }

  ExprPtr parse_test(ExprPtr subject) {
    int line = next().line;  // 'is'
    auto e = node(ExprKind::Test, line);
    e->negate = skip_name("not");
    e->name = dotted_name();
    if (!has_test(e->name)) fail(line, "no test named '" + e->name + "'");
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(t.line, "you cannot chain multiple tests with 'is'");
      e->items.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
    }
    e->a = std::move(subject);
    return e;
  }
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace ds::chat::jinja
