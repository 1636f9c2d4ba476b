// Jinja2 lexer, configured as Hugging Face configures it: trim_blocks (the first newline after a
// block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or comment tag at
// the start of a line are dropped), keep_trailing_newline off (one final newline of the template is
// dropped), "\r\n" / "\r" read as "\n". Whitespace control signs: "{%-" / "{{-" / "{#-" strip all
// whitespace before the tag, "-%}" / "-}}" / "-#}" all whitespace after it, "{%+" keeps what
// lstrip_blocks would strip and "+%}" what trim_blocks would. {% raw %} ... {% endraw %} is literal.
// Comments are dropped here. Syntax errors throw TemplateError with the line.
#pragma once
#include <string>
#include <vector>

namespace ds::chat::jinja {

enum class Tok { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string text;   // Data / Name / Op text; String: the decoded value; Int/Float: the literal
  int64_t ival = 0;   // Int
  double fval = 0;    // Float
  int line = 1;
};

std::vector<Token> tokenize(const std::string& source);

}  // namespace ds::chat::jinja
