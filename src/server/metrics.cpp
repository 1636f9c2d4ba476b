#include "server/metrics.h"

#include <fmt/format.h>

namespace ds::server {

namespace {

void header(std::string& o, const char* name, const char* type, const char* help) {
  o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string num(double v) { return fmt::format("{}", v); }

void histogram(std::string& o, const char* name, const char* help, const engine::Histogram& h,
               const std::string& labels = {}) {
  if (help) header(o, name, "histogram", help);
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); i++) {
    cum += h.counts[i];
    o += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, num(h.bounds[i]), cum);
  }
  cum += h.counts.back();
  o += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, cum);
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  o += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, l, num(h.sum), name, l, h.count);
}

}  // namespace

void HttpMetrics::record(const std::string& route, int status, double seconds) {
  std::lock_guard lk(m_);
  count_[{route, status}]++;
  auto it = duration_.find(route);
  if (it == duration_.end())
    it = duration_.emplace(route, engine::Histogram({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})).first;
  it->second.observe(seconds);
}

std::string HttpMetrics::render(const engine::EngineStats& st) const {
  std::string o;
  {
    std::lock_guard lk(m_);
    header(o, "ds_http_requests_total", "counter", "HTTP requests by route and status code.");
    for (auto& [k, n] : count_) o += fmt::format("ds_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
    header(o, "ds_http_request_duration_seconds", "histogram", "Time from request to the end of the response.");
    for (auto& [route, h] : duration_)
      histogram(o, "ds_http_request_duration_seconds", nullptr, h, fmt::format("route=\"{}\"", route));
  }
  header(o, "ds_requests_finished_total", "counter", "Generation requests finished, by reason.");
  o += fmt::format("ds_requests_finished_total{{reason=\"stop\"}} {}\n", st.requests_stop);
  o += fmt::format("ds_requests_finished_total{{reason=\"length\"}} {}\n", st.requests_length);
  o += fmt::format("ds_requests_finished_total{{reason=\"cancelled\"}} {}\n", st.requests_cancelled);
  o += fmt::format("ds_requests_finished_total{{reason=\"error\"}} {}\n", st.requests_error);
  header(o, "ds_requests_running", "gauge", "Sequences holding a slot.");
  o += fmt::format("ds_requests_running {}\n", st.running);
  header(o, "ds_requests_waiting", "gauge", "Requests queued for a free slot (queue depth).");
  o += fmt::format("ds_requests_waiting {}\n", st.waiting);
  header(o, "ds_slots", "gauge", "Sequence slots (--parallel).");
  o += fmt::format("ds_slots {}\n", st.n_slots);
  header(o, "ds_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  o += fmt::format("ds_prompt_tokens_total {}\n", st.prompt_tokens);
  header(o, "ds_prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.");
  o += fmt::format("ds_prompt_tokens_cached_total {}\n", st.cached_prompt_tokens);
  header(o, "ds_generation_tokens_total", "counter", "Tokens generated.");
  o += fmt::format("ds_generation_tokens_total {}\n", st.generated_tokens);
  header(o, "ds_decode_steps_total", "counter", "Batched decode steps.");
  o += fmt::format("ds_decode_steps_total {}\n", st.decode_steps);
  header(o, "ds_engine_seconds_total", "counter",
         "Engine thread time by phase: prefill (prompt chunks), decode (the batched step and its download), sample "
         "(host work on the step's rows), other (admission, bookkeeping).");
  o += fmt::format("ds_engine_seconds_total{{phase=\"prefill\"}} {:.6f}\n", st.prefill_s);
  o += fmt::format("ds_engine_seconds_total{{phase=\"decode\"}} {:.6f}\n", st.decode_s);
  o += fmt::format("ds_engine_seconds_total{{phase=\"sample\"}} {:.6f}\n", st.sample_s);
  o += fmt::format("ds_engine_seconds_total{{phase=\"other\"}} {:.6f}\n", st.other_s);
  header(o, "ds_engine_step_gap_seconds_total", "counter",
         "Host time from a decode step's result to the launch of the next step, summed over the steps launched right "
         "after one ended (ds_engine_step_gaps_total): the time the engine leaves the device without a step.");
  o += fmt::format("ds_engine_step_gap_seconds_total {:.6f}\n", st.gap_s);
  header(o, "ds_engine_step_gaps_total", "counter", "Decode steps launched right after one ended.");
  o += fmt::format("ds_engine_step_gaps_total {}\n", st.gap_steps);
  header(o, "ds_prefill_calls_total", "counter", "Backend prefill calls (prompt chunks).");
  o += fmt::format("ds_prefill_calls_total {}\n", st.prefill_calls);
  header(o, "ds_decode_full_rows_total", "counter",
         "Decode rows downloaded whole (samplers with penalties, logit bias or no top_k); the others come reduced.");
  o += fmt::format("ds_decode_full_rows_total {}\n", st.full_rows);
  header(o, "ds_prefix_cache_lookups_total", "counter", "Prefix cache lookups at admission, by result.");
  o += fmt::format("ds_prefix_cache_lookups_total{{result=\"hit\"}} {}\n", st.prefix_cache_hits);
  o += fmt::format("ds_prefix_cache_lookups_total{{result=\"miss\"}} {}\n", st.prefix_cache_misses);
  header(o, "ds_prefix_cache_entries", "gauge", "Snapshots held by the prefix cache.");
  o += fmt::format("ds_prefix_cache_entries {}\n", st.prefix_cache_entries);
  header(o, "ds_state_memory_bytes", "gauge",
         "Sequence state memory (GDN conv/recurrent state + KV cache): allocated for all slots, in use by running "
         "sequences, held by prefix-cache snapshots.");
  o += fmt::format("ds_state_memory_bytes{{kind=\"allocated\"}} {}\n", st.state_bytes_allocated);
  o += fmt::format("ds_state_memory_bytes{{kind=\"in_use\"}} {}\n", st.state_bytes_in_use);
  o += fmt::format("ds_state_memory_bytes{{kind=\"prefix_cache\"}} {}\n", st.prefix_cache_bytes);
  histogram(o, "ds_time_to_first_token_seconds", "Time from submission to the first generated token.", st.ttft_s);
  histogram(o, "ds_inter_token_latency_seconds", "Time between consecutive tokens of one sequence.", st.itl_s);
  histogram(o, "ds_decode_batch_size", "Sequences per batched decode step.", st.batch_size);
  return o;
}

}  // namespace ds::server
