// deltaserve serve: the OpenAI-compatible HTTP server (src/server) over the continuous-batching
// engine (src/engine) and a model loaded from one GGUF file (weights, tokenizer, chat template).
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "chat/chat_template.h"
#include "backend_options.h"
#include "command.h"
#include "option_checks.h"
#include "core/log.h"
#include "engine/backend_factory.h"
#include "engine/cuda_backend.h"
#include "engine/engine.h"
#include "engine/qwen35_backend.h"
#include "engine/tokenizer_codec.h"
#include "model/qwen35.h"
#include "server/server.h"
#include "signal_thread.h"
#include "tokenizer/tokenizer.h"

namespace {

using ojson = nlohmann::ordered_json;

struct Options {
  std::string model, model_id, api_key_file, backend = "auto";
  ds::server::ServerConfig srv;
  ds::engine::EngineConfig eng;
  int32_t parallel = 16, ctx = 8192, threads = 0, device = 0;
  bool kv_f16 = false;     // cuda: f16 K / V caches
  bool state_f16 = false;  // cuda: f16 Gated DeltaNet states
  bool ctx_given = false;      // --ctx on the command line (else the default, lowered to the model's context)
  bool api_key_given = false;  // --api-key on the command line, even if empty
  int64_t prefix_cache_mb = 1024;
  size_t max_body_mb = 8;
};

int fail(const std::string& msg) {
  spdlog::error("{}", msg);
  return 1;
}

int run(Options o) {
  ds::app::SignalThread signals;
  auto use_cuda = ds::app::use_cuda("serve", o.backend);
  if (!use_cuda) return fail(use_cuda.error().message);
  // An empty key (say --api-key "$KEY" with KEY unset) would silently serve without one.
  if (o.api_key_given && o.srv.api_key.empty())
    return fail("serve: --api-key is empty; give the key, or leave --api-key out to serve without one");
  if (!o.api_key_file.empty()) {
    std::ifstream f(o.api_key_file);
    if (!f || !std::getline(f, o.srv.api_key) || o.srv.api_key.empty())
      return fail(fmt::format("serve: cannot read an API key from the first line of '{}'", o.api_key_file));
  }
  if (o.threads > 0) omp_set_num_threads(o.threads);
  o.eng.prefix_cache_bytes = static_cast<size_t>(std::max<int64_t>(0, o.prefix_cache_mb)) << 20;
  o.srv.max_body_bytes = o.max_body_mb << 20;
  if (auto s = ds::engine::validate(o.eng); !s) return fail(s.error().message);
  if (auto s = ds::server::validate(o.srv); !s) return fail(s.error().message);

  spdlog::info("serve: loading {}", o.model);
  auto model = ds::Qwen35Model::load_file(o.model);
  if (!model) return fail(model.error().message);
  auto tok = ds::tokenizer::Tokenizer::from_gguf(*model->file);
  if (!tok) return fail(tok.error().message);
  if (tok->n_vocab() != model->cfg.n_vocab)
    return fail(fmt::format("serve: tokenizer has {} tokens, the model {}", tok->n_vocab(), model->cfg.n_vocab));
  ds::server::ChatRenderFn render;
  auto tmpl = ds::chat::chat_template_from_gguf(*model->file);
  std::shared_ptr<ds::chat::ChatTemplate> tp;
  if (tmpl) {
    tp = std::make_shared<ds::chat::ChatTemplate>(std::move(tmpl.value()));
    render = [tp](const ojson& messages, const ojson& tools, bool agp, const ojson& kwargs) {
      return tp->render(messages, tools.empty() ? ojson() : tools, agp, kwargs);
    };
  } else {
    spdlog::warn("serve: {}; chat requests use plain ChatML", tmpl.error().message);
    render = ds::server::render_chatml;
  }
  if (!o.ctx_given && model->cfg.n_ctx_train > 0)  // the default fits every model
    o.ctx = (int32_t)std::min<int64_t>(o.ctx, model->cfg.n_ctx_train);
  if (auto s = ds::app::check_ctx("serve", o.ctx, model->cfg.n_ctx_train, o.model); !s) return fail(s.error().message);
  std::unique_ptr<ds::engine::Backend> backend;
  if (*use_cuda) {
    ds::engine::CudaBackendOptions co;
    co.n_slots = o.parallel;
    co.n_ctx = o.ctx;
    co.device = o.device;
    co.kv_f16 = o.kv_f16;
    co.state_f16 = o.state_f16;
    auto b = ds::engine::make_cuda_backend(*model, co);
    if (!b) return fail(b.error().message);
    backend = std::move(*b);
  } else {
    const std::string what = fmt::format("{} slots (--parallel) x {} tokens (--ctx)", o.parallel, o.ctx);
    if (auto s = ds::app::check_state_fits("serve", model->cfg, o.parallel, o.ctx, what, "--parallel or --ctx"); !s)
      return fail(s.error().message);
    auto b = ds::engine::Qwen35Backend::create(*model, o.parallel, o.ctx);
    if (!b) return fail(b.error().message);
    backend = std::move(*b);
  }
  ds::engine::TokenizerCodec codec(*tok);
  if (o.model_id.empty()) o.model_id = std::filesystem::path(o.model).stem().string();
  o.srv.model_id = o.model_id;

  ds::engine::Engine engine(*backend, codec, o.eng);
  engine.start();
  ds::server::Server server(o.srv, engine, codec, render);
  if (auto s = server.bind(); !s) return fail(s.error().message);
  const auto mem = backend->memory();
  spdlog::info(
      "serve: model '{}' ({} layers, vocab {}), backend {}, {} slots x {} tokens ({:.1f} MiB of state), "
      "queue {}, prefix cache {} MiB, {} OpenMP threads",
      o.model_id, model->cfg.n_layer, model->cfg.n_vocab, backend->name(), o.parallel, o.ctx,
      o.parallel * (mem.fixed_bytes_per_slot + mem.kv_bytes_per_token * o.ctx) / 1048576.0, o.eng.max_queue,
      o.prefix_cache_mb, omp_get_max_threads());
  spdlog::info("serve: listening on http://{}:{}{}", o.srv.host, server.port(),
               o.srv.api_key.empty() ? "" : " (API key required on /v1)");
  // The bound port on stdout, for scripts that asked for --port 0.
  std::printf("%d\n", server.port());
  std::fflush(stdout);

  signals.on_signal([&] {
    server.stop();
    engine.stop();  // unfinished requests end with an error now, so no handler keeps the server waiting
  });
  server.run();
  signals.disarm();
  engine.stop();
  spdlog::info("serve: stopped");
  return 0;
}

ds::app::RunFn setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.footer(
      "Serve a Qwen3.5 GGUF over an OpenAI-compatible HTTP API: POST /v1/chat/completions, /v1/completions "
      "and /v1/responses (streaming with \"stream\": true), GET and DELETE /v1/responses/{id} (stored responses) and GET "
      "/v1/responses/{id}/input_items, GET /v1/models, /health and /metrics (Prometheus), POST /tokenize and "
      "/detokenize. Requests are batched "
      "continuously over --parallel sequence slots; more wait in a queue of --max-queue, beyond which the server "
      "answers 429. Binds to 127.0.0.1 unless --host says otherwise. Prints the bound port on stdout once it "
      "listens. Stop with Ctrl-C (SIGINT) or SIGTERM. On a shared or oversubscribed CPU, run with "
      "OMP_WAIT_POLICY=passive: spinning OpenMP threads otherwise take the cores the work needs.");
  app.add_option("-m,--model", o->model, "GGUF model file (weights, tokenizer and chat template)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--host", o->srv.host, "address to bind; 0.0.0.0 exposes the server to the network")
      ->capture_default_str();
  app.add_option("--port", o->srv.port, "TCP port; 0 picks a free one (printed on stdout)")->capture_default_str();
  app.add_option("--parallel", o->parallel, "sequence slots: requests generated at the same time")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  auto* ctx = app.add_option("--ctx", o->ctx,
                             "context length of each slot in tokens (prompt + reply); the default is lowered to the "
                             "model's training context when that is shorter")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  auto* api_key =
      app.add_option("--api-key", o->srv.api_key, "require 'Authorization: Bearer KEY' on every /v1 request and /tokenize, /detokenize");
  app.add_option("--api-key-file", o->api_key_file, "read the API key from the first line of this file")
      ->check(CLI::ExistingFile);
  app.add_option("--cors", o->srv.cors_origins,
                 "let web pages from this origin call the API from a browser (e.g. http://localhost:3000; repeatable; "
                 "'*' allows any page, then set --api-key); off by default");
  app.add_option("--backend", o->backend, "auto (cuda when built with CUDA and a GPU is visible), cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_option("--device", o->device, "cuda: GPU index")->capture_default_str();
  app.add_flag("--kv-f16", o->kv_f16, ds::app::kKvF16Help);
  app.add_flag("--state-f16", o->state_f16, ds::app::kStateF16Help);
  ds::app::add_threads_option(app, o->threads);
  app.add_option("--model-id", o->model_id, "model name in responses and /v1/models (default: the file's stem)");
  app.add_option("--max-queue", o->eng.max_queue, "requests that may wait for a slot; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--max-body-mb", o->max_body_mb, "largest request body in MiB; larger ones get 413")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-prompt-tokens", o->srv.max_prompt_tokens, "longest prompt accepted (0: the context)")
      ->capture_default_str();
  app.add_option("--max-tokens-limit", o->srv.max_tokens_limit, "largest max_tokens accepted (0: the context)")
      ->capture_default_str();
  app.add_option("--prefix-cache-mb", o->prefix_cache_mb,
                 "memory for state snapshots that let a next turn skip its conversation's prefix (0: off)")
      ->capture_default_str();
  app.add_option("--prefill-chunk", o->eng.prefill_chunk, "prompt tokens per prefill call")->capture_default_str();
  app.add_option("--prefill-budget", o->eng.prefill_budget,
                 "prompt tokens processed between two decode steps (bounds the stall new prompts cause; "
                 "--prefill-first lifts it while prompts outnumber the decoding sequences)")
      ->capture_default_str();
  app.add_flag("--prefill-first,!--no-prefill-first", o->eng.prefill_first,
               "while at least as many sequences wait for their prompt as decode, run all those prompts before the "
               "next decode step (fuller decode batches after a burst of requests; the decoding few wait longer; default on)")
      ->capture_default_str();
  app.add_option("--prefill-first-max", o->eng.prefill_first_max,
                 "most prompt tokens --prefill-first runs between two decode steps (bounds the decoding sequences' "
                 "wait when long prompts arrive together; 0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--warm-up,!--no-warm-up", o->eng.warm_up,
               "cuda: capture the decode step of every batch size before serving (no capture inside a served step; default on)")
      ->capture_default_str();
  app.add_option("--http-threads", o->srv.http_threads, "HTTP worker threads kept ready (0: slots + queue + 16); more start, up to 4x (at least 1024), while every one holds a connection")
      ->capture_default_str();
  app.add_option("--timeout", o->srv.io_timeout_s, "seconds a client may stall a socket read or write")
      ->capture_default_str();
  return [o, ctx, api_key] {
    o->ctx_given = ctx->count() > 0;
    o->api_key_given = api_key->count() > 0;
    return run(*o);
  };
}

}  // namespace

DS_COMMAND("serve", "OpenAI-compatible HTTP server (chat and completions, streaming, continuous batching)", setup);
