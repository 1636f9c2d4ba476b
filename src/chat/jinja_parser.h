// Jinja2 parser: tokens (jinja_lexer.h) -> AST (jinja_ast.h), following Jinja2's grammar and operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons (== != < <= > >= in, not in;
// chained), + -, ~, * / // %, ** (left-associative, as in Jinja), unary - +, then primaries with
// postfix .attr, [item / slice], (call), and |filter / `is` test. Statements: if/elif/else, for (with
// `if` filter, else), set (plain, namespace attribute, tuple unpacking, block set with filters),
// macro, call, filter, with, break/continue (loopcontrols), generation (HF), print, raw.
// Unknown tags, unknown filters / tests and malformed syntax throw TemplateError naming the line.
#pragma once
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace ds::chat::jinja {

Body parse(std::vector<Token> tokens);

}  // namespace ds::chat::jinja
