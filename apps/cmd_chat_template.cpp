// deltaserve chat-template: renders conversations with a model's chat template (src/chat), the way
// Hugging Face's apply_chat_template does. Reads JSON on stdin, writes the prompt text (or, with
// --jsonl, one JSON object per input line) on stdout.
#include <fstream>
#include <iostream>
#include <sstream>

#include "chat/chat_template.h"
#include "command.h"
#include "json_input.h"
#include "core/log.h"
#include "gguf/gguf.h"

namespace {

using ojson = nlohmann::ordered_json;

struct Options {
  std::string model;
  std::string template_file;
  bool jsonl = false;
  bool check = false;
  bool print_template = false;
};

// One request: {"messages": [...], "tools": [...]|null, "add_generation_prompt": bool, ...}; every
// other member except the golden-file fields (rendered, error) becomes a template variable.
ds::Result<std::string> render_request(const ds::chat::ChatTemplate& t, const ojson& req) {
  if (req.is_array()) return t.render(req, nullptr, false);
  if (!req.is_object()) return ds::err("chat-template: expected a JSON object or a messages array, got {}", req.type_name());
  if (!req.contains("messages")) return ds::err("chat-template: the request has no \"messages\" member");
  const ojson& agp = req.value("add_generation_prompt", ojson(false));
  if (!agp.is_boolean()) return ds::err("chat-template: add_generation_prompt must be true or false, got {}", agp.type_name());
  ojson extra = ojson::object();
  for (auto& [k, v] : req.items())
    if (k != "messages" && k != "tools" && k != "add_generation_prompt" && k != "rendered" && k != "error") extra[k] = v;
  return t.render(req["messages"], req.value("tools", ojson()), agp.get<bool>(), extra);
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

int run_jsonl(const ds::chat::ChatTemplate& t, const Options& o) {
  std::string line;
  int n = 0, bad_input = 0, mismatches = 0;
  while (std::getline(std::cin, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ojson out = ojson::object();
    ojson req;
    if (auto st = ds::app::check_json_depth(line, "chat-template: input line " + std::to_string(n)); !st) {
      out["error"] = st.error().message;
      std::cout << dump(out) << "\n";
      ++bad_input;
      continue;
    }
    try {
      req = ojson::parse(line);
    } catch (const ojson::parse_error& e) {
      out["error"] = "chat-template: input line " + std::to_string(n) + ": invalid JSON: " + e.what();
      std::cout << dump(out) << "\n";
      ++bad_input;
      continue;
    }
    auto r = render_request(t, req);
    if (r) out["rendered"] = *r;
    else out["error"] = r.error().message;
    std::cout << dump(out) << "\n";
    if (o.check && req.is_object()) {
      bool want_error = req.contains("error");
      bool same = want_error ? (!r && req["error"] == r.error().message)
                             : (r && req.contains("rendered") && req["rendered"] == *r);
      if (!same) {
        ++mismatches;
        spdlog::error("line {}: expected {}, got {}", n,
                      want_error ? "error " + dump(req["error"]) : "rendered " + dump(req.value("rendered", ojson())),
                      dump(out));
      }
    }
  }
  std::cout.flush();
  if (o.check) {
    if (mismatches == 0) spdlog::info("chat-template: all {} conversations match the expected output", n);
    else spdlog::error("chat-template: {} of {} conversations differ from the expected output", mismatches, n);
  }
  return (bad_input || mismatches) ? 1 : 0;
}

int run(const Options& o) {
  if (o.check && !o.jsonl) {
    spdlog::error("chat-template: --check compares JSON lines; use it with --jsonl");
    return 2;
  }
  if (o.model.empty() && o.template_file.empty()) {
    spdlog::error("chat-template: give a model (-m MODEL.gguf) or a template (--template FILE.jinja)");
    return 2;
  }
  std::optional<ds::chat::ChatTemplate> tmpl;
  ojson special = ojson::object();
  if (!o.model.empty()) {
    auto f = ds::gguf::File::open(o.model);
    if (!f) {
      spdlog::error("{}", f.error().message);
      return 1;
    }
    if (o.template_file.empty()) {
      auto t = ds::chat::chat_template_from_gguf(*f);
      if (!t) {
        spdlog::error("{}", t.error().message);
        return 1;
      }
      tmpl = std::move(*t);
    } else {
      // The given template, with the model's special tokens.
      auto sp = ds::chat::special_tokens_from_gguf(*f);
      if (!sp) {
        spdlog::error("{}", sp.error().message);
        return 1;
      }
      special = std::move(*sp);
    }
  }
  if (!o.template_file.empty()) {
    std::ifstream in(o.template_file, std::ios::binary);
    if (!in) {
      spdlog::error("chat-template: cannot read template file '{}'", o.template_file);
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    auto t = ds::chat::ChatTemplate::parse(ss.str());
    if (!t) {
      spdlog::error("{} ({})", t.error().message, o.template_file);
      return 1;
    }
    tmpl = std::move(*t);
    tmpl->set_special_tokens(special);
  }
  if (o.print_template) {
    std::cout << tmpl->source();
    return 0;
  }
  if (o.jsonl) return run_jsonl(*tmpl, o);
  std::stringstream ss;
  ss << std::cin.rdbuf();
  ojson req;
  if (auto st = ds::app::check_json_depth(ss.str(), "chat-template: stdin"); !st) {
    spdlog::error("{}", st.error().message);
    return 1;
  }
  try {
    req = ojson::parse(ss.str());
  } catch (const ojson::parse_error& e) {
    spdlog::error("chat-template: stdin is not valid JSON: {}", e.what());
    return 1;
  }
  auto r = render_request(*tmpl, req);
  if (!r) {
    spdlog::error("{}", r.error().message);
    return 1;
  }
  std::cout << *r;
  return 0;
}

ds::app::RunFn setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.footer(
      "Input (stdin): one JSON request {\"messages\": [...], \"tools\": [...] or null, \"add_generation_prompt\": "
      "bool (default false), ...}; any other member (e.g. \"enable_thinking\": false) is passed to the template as "
      "a variable. A bare array is taken as the messages.\n"
      "Output: the rendered prompt text; with --jsonl, one request per input line and one JSON object per output "
      "line, {\"rendered\": TEXT} or {\"error\": MESSAGE} (a template's raise_exception message verbatim).\n"
      "Example: deltaserve chat-template --template ../shared/fixtures/chat/qwen3.5.jinja --jsonl --check "
      "< ../shared/fixtures/chat/golden-qwen3.5.jsonl");
  app.add_option("-m,--model", o->model,
                 "GGUF model whose chat template (tokenizer.chat_template) and special tokens (bos_token, eos_token, ...) are used");
  app.add_option("--template", o->template_file, "Jinja template file to use instead of the model's (the model, if given, still supplies the special tokens)")
      ->check(CLI::ExistingFile);
  app.add_flag("--jsonl", o->jsonl, "Read one JSON request per line; write one JSON result per line");
  app.add_flag("--check", o->check,
               "With --jsonl: compare each result with the input line's \"rendered\" / \"error\" member (golden "
               "files); report differences on stderr and exit 1 if any");
  app.add_flag("--print-template", o->print_template, "Print the template source and exit");
  return [o] { return run(*o); };
}

}  // namespace

DS_COMMAND("chat-template", "Render conversations with a model's chat template (as Hugging Face does)", setup);
