// AST of a parsed Jinja template: expressions (Expr) and statements (Stmt), one generic node type
// each; which fields a node uses is listed per kind. Every node keeps its template line for errors.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace ds::chat::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Literal,    // value
  Name,       // name
  List,       // items
  Tuple,      // items
  Dict,       // items: key, value, key, value, ...
  GetAttr,    // a.name
  GetItem,    // a[b]
  Slice,      // a[b:c:d]: a = object, items = {start, stop, step} (null when absent)
  Call,       // a(items..., kwargs...)
  Filter,     // a | name(items..., kwargs...); a is null for a filter block / set-block filter
  Test,       // a is [not] name(items...)   (negate)
  Not,        // not a
  Neg,        // -a
  Pos,        // +a
  Binary,     // a name b: + - * / // % ** ~
  And,        // a and b
  Or,         // a or b
  Compare,    // items[0] ops[0] items[1] ops[1] items[2] ... (chained, as in Python)
  CondExpr,   // a if b else c   (c null: undefined)
  BlockValue  // the rendered body of a filter block / block set (stands in for the filter subject)
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negate = false;
};

enum class StmtKind {
  Text,         // text
  Output,       // {{ expr }}
  If,           // if expr: body else: else_body (elif = If inside else_body)
  For,          // for targets in expr [if cond]: body else: else_body
  Set,          // set targets = expr | set targets[0].attr = expr (attr non-empty)
  SetBlock,     // set targets[0] [| filter]: body   (filter: Expr tree on BlockValue, may be null)
  Macro,        // macro name(params): body
  CallBlock,    // call(params) expr: body  (expr is the Call; body becomes `caller`)
  FilterBlock,  // filter filter: body
  With,         // with params (name = value): body
  Break,
  Continue,
  Scope         // a body with no effect of its own ({% generation %})
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0;
  std::string text;                  // Text
  std::string name;                  // Macro name
  std::string attr;                  // Set on a namespace attribute
  std::vector<std::string> targets;  // For / Set names
  ExprPtr expr;                      // Output / If / For iterable / Set value / CallBlock call
  ExprPtr cond;                      // For filter
  ExprPtr filter;                    // SetBlock / FilterBlock
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro / CallBlock (default or null) / With
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;  // Macro
  bool uses_loop = true;  // For: the body reads `loop` (else the loop object is not built)
  Body body, else_body;
};

}  // namespace ds::chat::jinja
