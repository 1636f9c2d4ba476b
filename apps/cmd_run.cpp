// deltaserve run: generate text from a prompt on one sequence, streaming it as it comes. The prompt is
// used as is, or (--chat) rendered with the model's chat template; generation stops at an end-of-turn
// token, a --stop string, -n tokens or a full context. Prints prompt and generation speed on stderr.
// -i keeps a conversation: each turn re-renders it and reuses the sequence state when the new prompt
// extends the tokens already processed (a recurrent state cannot be rolled back, so otherwise: reset).
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include "chat/chat_template.h"
#include "command.h"
#include "core/log.h"
#include "backend_options.h"
#include "option_checks.h"
#include "engine/backend_factory.h"
#include "model/qwen35.h"
#if DS_HAVE_CUDA
#include "cuda/model/qwen35_cuda.cuh"
#endif
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

struct RunArgs : ds::app::BackendOptions {
  RunArgs() { backend = "auto"; }  // the GPU when there is one
  std::string model, prompt, prompt_file, system;
  bool ctx_given = false;  // --ctx on the command line (else the default, lowered to the model's context)
  bool chat = false, think = false, no_think = false, interactive = false, ignore_eos = false, show_prompt = false;
  int n_predict = 128;
  int64_t ctx = 4096;
  int threads = 0;
  float temp = 0.7f, top_p = 0.8f, min_p = 0.0f, repeat_penalty = 1.0f;
  int top_k = 20;
  int64_t seed = -1;
  std::vector<std::string> stop;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The model, its tokenizer and one sequence's state (on the CPU, or on the GPU with --backend cuda), with the
// tokens that state has processed.
struct Session {
  ds::Qwen35Model model;
  std::unique_ptr<ds::tokenizer::Tokenizer> tok;
  ds::SequenceState state;     // cpu
  int64_t max_ctx = 0;
  std::vector<int32_t> fed{};  // tokens in the state, in order
  std::vector<float> logits{}; // [V]: the prediction after the last fed token
  bool add_bos = false;
  // Interactive mode: a copy of the state right after the last prompt. A re-rendered conversation may
  // not reproduce the generated tokens exactly (re-tokenization, templates that drop old reasoning), but
  // it nearly always extends the previous prompt; the recurrent state cannot be rolled back otherwise.
  bool keep_snapshot = false;
  ds::SequenceState snap{};
  std::vector<int32_t> snap_tokens{};
#if DS_HAVE_CUDA
  std::unique_ptr<ds::cuda::CudaModel> gpu{};  // set with --backend cuda
  std::unique_ptr<ds::cuda::CudaSeqState> gstate{};
  std::unique_ptr<ds::cuda::CudaSnapshot> gsnap{};
#endif

  bool on_gpu() const {
#if DS_HAVE_CUDA
    return gpu != nullptr;
#else
    return false;
#endif
  }

  static bool extends(const std::vector<int32_t>& longer, const std::vector<int32_t>& prefix) {
    return longer.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), longer.begin());
  }

  ds::Status reset() {
#if DS_HAVE_CUDA
    if (gpu) return gstate->reset();
#endif
    state.reset();
    return {};
  }
  ds::Status save_snapshot() {
#if DS_HAVE_CUDA
    if (gpu) {
      DS_ASSIGN(gsnap, gpu->save(*gstate));
      return {};
    }
#endif
    snap = state;
    return {};
  }
  ds::Status restore_snapshot() {
#if DS_HAVE_CUDA
    if (gpu) return gpu->restore(*gstate, *gsnap);
#endif
    state = snap;
    return {};
  }
  // Runs tokens after the ones fed; logits := the prediction after the last one.
  ds::Status forward(std::span<const int32_t> toks) {
#if DS_HAVE_CUDA
    if (gpu) {
      if (toks.size() == 1 && !fed.empty()) {  // a decode step (a CUDA graph replay)
        ds::cuda::CudaSeqState* sp = gstate.get();
        return gpu->decode({&sp, 1}, toks, logits.data());
      }
      return gpu->prefill(*gstate, toks, logits.data(), false);
    }
#endif
    return ds::forward(model, state, toks, logits.data(), false);
  }

  // Makes the state hold exactly `tokens`, running only what is new: the tail after the tokens already
  // processed, or after the last prompt's snapshot, or everything after a reset. Returns the count run.
  ds::Result<int64_t> set_prompt(const std::vector<int32_t>& tokens) {
    if (!extends(tokens, fed)) {
      if (keep_snapshot && !snap_tokens.empty() && extends(tokens, snap_tokens)) {
        DS_TRY(restore_snapshot());
        fed = snap_tokens;
      } else {
        DS_TRY(reset());
        fed.clear();
      }
    }
    const size_t keep = fed.size();
    std::span<const int32_t> tail(tokens.data() + keep, tokens.size() - keep);
    if (tail.empty()) return ds::err("run: empty prompt");
    DS_TRY(forward(tail));
    fed.insert(fed.end(), tail.begin(), tail.end());
    if (keep_snapshot) {
      DS_TRY(save_snapshot());
      snap_tokens = fed;
    }
    return (int64_t)tail.size();
  }
  ds::Status feed(int32_t token) {
    DS_TRY(forward(std::span<const int32_t>(&token, 1)));
    fed.push_back(token);
    return {};
  }
};

// Prints generated text as it comes, holding back any tail that could still become a stop string.
class StopStreamer {
 public:
  explicit StopStreamer(const std::vector<std::string>& stops) : stops_(stops) {}
  // Adds text; returns true when a stop string completed (the text before it has been printed).
  bool add(const std::string& piece) {
    text_ += piece;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) {
      if (s.empty()) continue;
      size_t at = text_.find(s, printed_ > s.size() ? printed_ - s.size() : 0);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      emit(cut);
      text_.resize(cut);
      return true;
    }
    size_t hold = 0;  // longest suffix that is a proper prefix of a stop string
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); k > hold; k--)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    emit(text_.size() - hold);
    return false;
  }
  void finish() { emit(text_.size()); }
  const std::string& text() const { return text_; }

 private:
  void emit(size_t upto) {
    if (upto > printed_) {
      std::fwrite(text_.data() + printed_, 1, upto - printed_, stdout);
      std::fflush(stdout);
      printed_ = upto;
    }
  }
  std::vector<std::string> stops_;
  std::string text_;
  size_t printed_ = 0;
};

struct TurnResult {
  std::string text;
  int64_t n_prompt = 0, n_prompt_run = 0, n_gen = 0;
  double t_prompt = 0, t_gen = 0;
  std::string stop_reason;
};

// Runs one prompt (already tokenized) and streams the continuation.
ds::Result<TurnResult> generate(Session& s, ds::sampler::Sampler& sampler, const RunArgs& a,
                                const std::vector<int32_t>& prompt) {
  TurnResult r;
  r.n_prompt = (int64_t)prompt.size();
  if (r.n_prompt > s.max_ctx)
    return ds::err("run: the prompt has {} tokens but the context holds {} (--ctx); shorten the prompt or raise --ctx",
                   r.n_prompt, s.max_ctx);
  auto t0 = Clock::now();
  DS_ASSIGN(r.n_prompt_run, s.set_prompt(prompt));
  r.t_prompt = seconds_since(t0);

  std::vector<int32_t> stop_ids;
  if (!a.ignore_eos) stop_ids = s.tok->stop_ids();
  ds::tokenizer::StreamDecoder dec(*s.tok, /*skip_control=*/true);
  StopStreamer out(a.stop);
  std::vector<int32_t> generated;
  auto t1 = Clock::now();
  r.stop_reason = "length";
  for (int i = 0; a.n_predict < 0 || i < a.n_predict; i++) {
    // ---- sampling: the one place that picks the next token (ds::sampler on main) ----
    const int32_t next = sampler.sample(std::span<float>(s.logits), generated);
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) {
      r.stop_reason = "eos";
      break;
    }
    generated.push_back(next);
    r.n_gen++;
    if (out.add(dec.feed(next))) {
      r.stop_reason = "stop string";
      break;
    }
    if ((int64_t)s.fed.size() >= s.max_ctx) {
      r.stop_reason = "context full";
      break;
    }
    if (a.n_predict >= 0 && i + 1 >= a.n_predict) break;  // the last token needs no forward pass
    DS_TRY(s.feed(next));
  }
  if (r.stop_reason != "stop string") {
    out.add(dec.flush());
    out.finish();
  }
  r.t_gen = seconds_since(t1);
  r.text = out.text();
  return r;
}

void print_timings(const TurnResult& r) {
  auto rate = [](double n, double t) { return t > 0 ? n / t : 0.0; };
  std::fprintf(stderr, "run: prompt %lld tokens (%lld processed) in %.2f s = %.1f tok/s | generated %lld tokens in %.2f s = %.1f tok/s | stop: %s\n",
               (long long)r.n_prompt, (long long)r.n_prompt_run, r.t_prompt, rate((double)r.n_prompt_run, r.t_prompt),
               (long long)r.n_gen, r.t_gen, rate((double)r.n_gen, r.t_gen), r.stop_reason.c_str());
}

int fail(const ds::Error& e) {
  spdlog::error("{}", e.message);
  return 1;
}

int run(RunArgs a) {
  auto use_cuda = ds::app::use_cuda("run", a.backend);
  if (!use_cuda) return fail(use_cuda.error());
  const bool cuda = *use_cuda;
  if (a.think && a.no_think) {
    spdlog::error("run: --think and --no-think contradict each other");
    return 2;
  }
  if (!a.prompt_file.empty()) {
    std::ifstream f(a.prompt_file, std::ios::binary);
    if (!f) return fail(ds::err("run: cannot read prompt file '{}'", a.prompt_file));
    std::stringstream ss;
    ss << f.rdbuf();
    a.prompt = ss.str();
  }
  const std::string prompt_where = a.prompt_file.empty() ? "run: -p" : "run: -f " + a.prompt_file;
  if (auto st = ds::tokenizer::validate_utf8(a.prompt, prompt_where); !st) return fail(st.error());
  if (a.prompt.empty() && !a.interactive) {
    spdlog::error("run: give a prompt with -p TEXT or -f FILE (or -i for a conversation)");
    return 2;
  }
  if (a.threads > 0) omp_set_num_threads(a.threads);

  auto t_load = Clock::now();
  auto model = ds::Qwen35Model::load_file(a.model);
  if (!model) return fail(model.error());
  auto tok = ds::tokenizer::Tokenizer::from_gguf(*model->file);
  if (!tok) return fail(tok.error());
  std::optional<ds::chat::ChatTemplate> tmpl;
  if (a.chat) {
    auto t = ds::chat::chat_template_from_gguf(*model->file);
    if (!t) return fail(ds::err("run: --chat needs the model's chat template: {}", t.error().message));
    tmpl = std::move(*t);
  }
  if (!a.ctx_given && model->cfg.n_ctx_train > 0)  // the default fits every model
    a.ctx = std::min<int64_t>(a.ctx, model->cfg.n_ctx_train);
  if (auto st = ds::app::check_ctx("run", a.ctx, model->cfg.n_ctx_train, a.model); !st) return fail(st.error());
  if (!cuda) {
    const std::string what = fmt::format("{} tokens (--ctx)", a.ctx);
    if (auto st = ds::app::check_state_fits("run", model->cfg, 1, a.ctx, what, "--ctx"); !st) return fail(st.error());
  }
  auto state = ds::SequenceState::create(model->cfg, cuda ? 1 : a.ctx);  // cuda: the state lives on the GPU
  if (!state) return fail(state.error());
  Session s{std::move(*model), std::make_unique<ds::tokenizer::Tokenizer>(std::move(*tok)), std::move(*state)};
  s.max_ctx = a.ctx;
  if (cuda) {
#if DS_HAVE_CUDA
    ds::cuda::CudaModelOptions mo;
    mo.use_graphs = !a.no_graphs;
    mo.precision = a.precise ? ds::cuda::Precision::kPrecise : ds::cuda::Precision::kFast;
    mo.kv_f16 = a.kv_f16;
    mo.state_f16 = a.state_f16;
    auto cm = ds::cuda::CudaModel::load(s.model, mo);
    if (!cm) return fail(cm.error());
    s.gpu = std::move(*cm);
    auto gs = s.gpu->create_state(a.ctx);
    if (!gs) return fail(gs.error());
    s.gstate = std::move(*gs);
    spdlog::info("run: cuda: {:.1f} MB of weights and a {:.1f} MB state on the device, prefill {}",
                 s.gpu->weight_bytes() / 1e6, s.gstate->bytes() / 1e6, ds::cuda::precision_name(mo.precision));
#endif
  }
  s.keep_snapshot = a.interactive;
  s.logits.resize(s.model.cfg.n_vocab);
  s.add_bos = s.model.file->get_bool("tokenizer.ggml.add_bos_token").ok() &&
              *s.model.file->get_bool("tokenizer.ggml.add_bos_token") && s.tok->bos_id().has_value();

  const uint64_t seed = a.seed >= 0 ? (uint64_t)a.seed : std::random_device{}();
  ds::sampler::SamplingParams sp;
  sp.temperature = a.temp;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.min_p = a.min_p;
  sp.repetition_penalty = a.repeat_penalty;
  sp.seed = seed;
  ds::sampler::Sampler sampler(sp);
  spdlog::info("run: {} loaded in {:.2f} s ({} layers, vocab {}, ctx {}, {}, {}, seed {})", a.model,
               seconds_since(t_load), s.model.cfg.n_layer, s.model.cfg.n_vocab, a.ctx,
               s.on_gpu() ? std::string("cuda") : fmt::format("cpu, {} threads", omp_get_max_threads()),
               a.temp <= 0 ? std::string("greedy") : fmt::format("temp {} top-k {} top-p {} min-p {}", a.temp, a.top_k, a.top_p, a.min_p),
               seed);

  json messages = json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  json kwargs = json::object();
  if (a.think) kwargs["enable_thinking"] = true;
  if (a.no_think) kwargs["enable_thinking"] = false;
  std::string raw_text;  // the whole conversation so far, without --chat

  auto turn = [&](const std::string& user) -> int {
    std::string prompt_text;
    if (a.chat) {
      messages.push_back({{"role", "user"}, {"content", user}});
      auto r = tmpl->render(messages, nullptr, true, kwargs);
      if (!r) {
        messages.erase(messages.end() - 1);
        return fail(r.error());
      }
      prompt_text = std::move(*r);
    } else {
      prompt_text = raw_text + user;
    }
    std::vector<int32_t> ids;
    if (s.add_bos) ids.push_back(*s.tok->bos_id());
    auto enc = s.tok->encode(prompt_text, /*parse_special=*/true);
    ids.insert(ids.end(), enc.begin(), enc.end());
    if (a.show_prompt) std::fprintf(stderr, "run: prompt (%zu tokens):\n%s\n---\n", ids.size(), prompt_text.c_str());
    auto r = generate(s, sampler, a, ids);
    if (!r) {
      if (a.chat) messages.erase(messages.end() - 1);
      return fail(r.error());
    }
    if (a.chat) {
      messages.push_back({{"role", "assistant"}, {"content", r->text}});
    } else {
      raw_text = prompt_text + r->text;
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    print_timings(*r);
    return 0;
  };

  if (!a.interactive) return turn(a.prompt);
  // Interactive: the first turn is -p when given, then one line of stdin per turn.
  const bool tty = isatty(fileno(stdin));
  if (tty) std::fprintf(stderr, "run: interactive; one line per turn, an empty line or end of input quits\n");
  if (!a.prompt.empty() && turn(a.prompt) != 0) return 1;
  // An error ends the turn, not the conversation; the exit status still tells a script feeding stdin that
  // a turn failed.
  int n_turns = a.prompt.empty() ? 0 : 1, n_failed = 0;  // -p's turn succeeded
  std::string line;
  while (true) {
    if (tty) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    n_turns++;
    if (auto st = ds::tokenizer::validate_utf8(line, "run: stdin"); !st) {
      n_failed += fail(st.error());
      continue;
    }
    n_failed += turn(line);
  }
  if (n_failed == 0) return 0;
  spdlog::error("run: {} of {} turns failed", n_failed, n_turns);
  return 1;
}

ds::app::RunFn setup(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  app.add_option("-m,--model", a->model, "Qwen3.5 GGUF file (architecture qwen35)")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", a->prompt, "Prompt text (control tokens such as <|im_start|> are recognised)");
  app.add_option("-f,--file", a->prompt_file, "Read the prompt from this file")->check(CLI::ExistingFile);
  app.add_option("-n,--n-predict", a->n_predict, "Tokens to generate at most (-1: until end of turn or full context)")
      ->capture_default_str();
  auto* chat = app.add_flag("--chat", a->chat, "Apply the model's chat template (system + user turn, generation prompt)");
  // Without --chat these would be ignored without a word.
  app.add_option("--system", a->system, "System message (with --chat)")->needs(chat);
  app.add_flag("--think", a->think, "With --chat: enable_thinking = true")->needs(chat);
  app.add_flag("--no-think", a->no_think, "With --chat: enable_thinking = false (no reasoning block)")->needs(chat);
  app.add_flag("-i,--interactive", a->interactive,
               "Conversation: read a turn per line from stdin, keep the context between turns (a failed turn "
               "is skipped; the exit status is then 1)");
  using ds::app::int_in, ds::app::real_in;
  app.add_option("--temp", a->temp, "Temperature (0: greedy)")->capture_default_str()->check(real_in(0));
  app.add_option("--top-k", a->top_k, "Keep the k most likely tokens (0: off)")->capture_default_str()->check(int_in(0));
  app.add_option("--top-p", a->top_p, "Nucleus sampling mass (1: off)")->capture_default_str()->check(real_in(0, 1, /*lo_open=*/true));
  app.add_option("--min-p", a->min_p, "Drop tokens below min-p x the top probability (0: off)")
      ->capture_default_str()
      ->check(real_in(0, 1));
  app.add_option("--repeat-penalty", a->repeat_penalty, "Repetition penalty on generated tokens (1: off)")
      ->capture_default_str()
      ->check(real_in(0, HUGE_VAL, /*lo_open=*/true));
  app.add_option("--seed", a->seed, "Sampling seed (default: random, printed in the log)");
  app.add_option("--stop", a->stop, "Stop when this text is generated (repeatable); the stop text is not printed");
  app.add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-turn tokens");
  auto* ctx = app.add_option("--ctx", a->ctx,
                             "Context size in tokens (prompt + generation); the default is lowered to the model's "
                             "training context when that is shorter")
                  ->capture_default_str()
                  ->check(int_in(1));
  ds::app::add_threads_option(app, a->threads);
  ds::app::add_backend_options(app, *a);
  app.add_flag("--show-prompt", a->show_prompt, "Print the prompt as the model sees it (after the template) on stderr");
  app.footer("Example: deltaserve run -m model.gguf --chat -p \"Hello! Who are you?\" -n 64 --temp 0.8 --seed 1");
  return [a, ctx] {
    a->ctx_given = ctx->count() > 0;
    return run(*a);
  };
}

}  // namespace

DS_COMMAND("run", "Generate text from a prompt (or a chat) and stream it, with speed on stderr", setup);
