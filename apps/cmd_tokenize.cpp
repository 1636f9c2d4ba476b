// `deltaserve tokenize` and `deltaserve detokenize`: the model's tokenizer (src/tokenizer) on stdin.
//   tokenize -m MODEL.gguf [--parse-special] [--jsonl]   text in, JSON array of token ids out
//   detokenize -m MODEL.gguf [--skip-special] [--jsonl]  JSON array of ids in, text out
// Only the GGUF's tokenizer.ggml.* metadata is read (the tensors stay unmapped), so a vocabulary-only
// GGUF works too. Exit codes: 0 = done; 1 = unreadable model, unsupported tokenizer, or bad input
// (the message names the line, byte offset or array index).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "json_input.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ds::app {
namespace {

using tokenizer::Tokenizer;

Result<Tokenizer> load_tokenizer(const std::string& path) {
  auto f = gguf::File::open(path);
  if (!f.ok()) return f.error();
  return Tokenizer::from_gguf(*f);
}

std::string read_stdin() {
  std::string s;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) s.append(buf, n);
  return s;
}

void print_ids(const std::vector<int32_t>& ids) { fmt::print("[{}]\n", fmt::join(ids, ",")); }

// ---- tokenize ----

struct TokenizeOpts {
  std::string model;
  std::string text;
  bool have_text = false;
  bool parse_special = false;
  bool jsonl = false;
};

int run_tokenize(const TokenizeOpts& o) {
  auto tok = load_tokenizer(o.model);
  if (!tok.ok()) {
    spdlog::error("{}", tok.error().message);
    return 1;
  }
  if (!o.jsonl) {
    std::string text = o.have_text ? o.text : read_stdin();
    if (auto st = tokenizer::validate_utf8(text, o.have_text ? "tokenize: --text" : "tokenize: stdin"); !st.ok()) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    print_ids(tok->encode(text, o.parse_special));
    return 0;
  }
  std::string line;
  for (size_t lineno = 1; std::getline(std::cin, line); lineno++) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are skipped
    if (auto st = check_json_depth(line, fmt::format("tokenize: stdin line {}", lineno)); !st) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      spdlog::error("tokenize: stdin line {}: expected a JSON object with a string field \"text\"", lineno);
      return 1;
    }
    print_ids(tok->encode(j["text"].get_ref<const std::string&>(), o.parse_special));
  }
  std::fflush(stdout);
  return 0;
}

RunFn setup_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOpts>();
  app.add_option("-m,--model", o->model, "GGUF file whose tokenizer to use (a vocabulary-only GGUF works)")
      ->required();
  CLI::Option* text_opt = app.add_option("--text", o->text, "Tokenize this text instead of reading stdin");
  app.add_flag("--parse-special", o->parse_special,
               "Recognise control tokens written in the text (e.g. <|im_start|>) as single tokens, as in a\n"
               "chat prompt. Off by default: their text is then encoded as ordinary text, so user content\n"
               "cannot inject them. User-defined tokens (e.g. <think>) are always recognised.");
  app.add_flag("--jsonl", o->jsonl,
               "Read JSON Lines: every input line is an object with a \"text\" field, every output line the\n"
               "JSON array of that text's ids")
      ->excludes(text_opt);
  app.footer(
      "Reads text (UTF-8) from stdin, all of it, and prints the JSON array of its token ids on one line.\n"
      "The text is used exactly as given, trailing newline included (printf avoids one; echo adds one).\n"
      "Encoding follows the Hugging Face tokenizer of the model: NFC normalisation, the split regex\n"
      "named by tokenizer.ggml.pre (qwen2 or qwen35), byte-level BPE. Invalid UTF-8 on stdin is an\n"
      "error naming the byte offset. No BOS/EOS token is added.\n"
      "Examples:\n"
      "  printf 'Hello world' | deltaserve tokenize -m model.gguf            -> [9707,1879]\n"
      "  printf '<|im_start|>user' | deltaserve tokenize -m model.gguf --parse-special\n"
      "  echo '{\"text\": \"Hi\"}' | deltaserve tokenize -m model.gguf --jsonl");
  return [o, text_opt] {
    o->have_text = text_opt->count() > 0;
    return run_tokenize(*o);
  };
}

// ---- detokenize ----

struct DetokenizeOpts {
  std::string model;
  bool skip_special = false;
  bool jsonl = false;
};

// The ids of a JSON array, each checked against the vocabulary; `where` names the input in errors.
Result<std::vector<int32_t>> parse_ids(const nlohmann::json& j, const Tokenizer& tok, const std::string& where) {
  if (!j.is_array()) return err("detokenize: {}: expected a JSON array of token ids", where);
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); i++) {
    const auto& e = j[i];
    if (!e.is_number_integer()) return err("detokenize: {}: element {} is {}, expected an integer token id", where, i, e.dump());
    int64_t v = e.get<int64_t>();
    if (e.is_number_unsigned() && e.get<uint64_t>() > (uint64_t)INT64_MAX) v = -1;
    if (v < 0 || v >= tok.n_vocab()) {
      return err("detokenize: {}: element {} = {} is not a token id (0..{})", where, i, e.dump(), tok.n_vocab() - 1);
    }
    ids.push_back((int32_t)v);
  }
  return ids;
}

int run_detokenize(const DetokenizeOpts& o) {
  auto tok = load_tokenizer(o.model);
  if (!tok.ok()) {
    spdlog::error("{}", tok.error().message);
    return 1;
  }
  if (!o.jsonl) {
    const std::string input = read_stdin();
    if (auto st = check_json_depth(input, "detokenize: stdin"); !st) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    auto j = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      spdlog::error("detokenize: stdin: expected a JSON array of token ids, e.g. [9707, 1879]");
      return 1;
    }
    auto ids = parse_ids(j, *tok, "stdin");
    if (!ids.ok()) {
      spdlog::error("{}", ids.error().message);
      return 1;
    }
    std::string text = tok->decode(*ids, o.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  std::string line;
  for (size_t lineno = 1; std::getline(std::cin, line); lineno++) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("detokenize: stdin line {}", lineno);
    if (auto st = check_json_depth(line, where); !st) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto ids = j.is_discarded() ? Result<std::vector<int32_t>>(err("{}: not JSON", where))
                                : parse_ids(j, *tok, fmt::format("stdin line {}", lineno));
    if (!ids.ok()) {
      spdlog::error("{}", ids.error().message);
      return 1;
    }
    nlohmann::json out;
    out["text"] = tok->decode(*ids, o.skip_special);
    fmt::print("{}\n", out.dump());
  }
  std::fflush(stdout);
  return 0;
}

RunFn setup_detokenize(CLI::App& app) {
  auto o = std::make_shared<DetokenizeOpts>();
  app.add_option("-m,--model", o->model, "GGUF file whose tokenizer to use (a vocabulary-only GGUF works)")
      ->required();
  app.add_flag("--skip-special", o->skip_special, "Leave control tokens (e.g. <|im_end|>) out of the text");
  app.add_flag("--jsonl", o->jsonl,
               "Read one JSON array of ids per line and print one JSON object {\"text\": ...} per line");
  app.footer(
      "Reads a JSON array of token ids from stdin and writes their text to stdout, exactly (no newline\n"
      "is added). Byte-level tokens that together form a character are joined; bytes that do not form\n"
      "valid UTF-8 become U+FFFD. Padding/unused ids decode to nothing; an id outside the vocabulary is\n"
      "an error naming its position.\n"
      "Example:\n"
      "  echo '[9707, 1879]' | deltaserve detokenize -m model.gguf      -> Hello world");
  return [o] { return run_detokenize(*o); };
}

}  // namespace

DS_COMMAND("tokenize", "Turn text (stdin) into token ids with a model's tokenizer", setup_tokenize);
DS_COMMAND("detokenize", "Turn token ids (a JSON array on stdin) back into text", setup_detokenize);

}  // namespace ds::app
