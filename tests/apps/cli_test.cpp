// The synth / run / bench commands as a user runs them (the built binary, DS_BIN): exit codes, what goes
// to stdout and stderr, determinism of seeded runs, stop strings, context limits, state reuse in -i,
// and the bench JSON fields. One tiny model is synthesized once for the whole binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "testutil.h"

namespace {

struct Out {
  int rc = -1;
  std::string out, err;
};

const char* bin() { return std::getenv("DS_BIN"); }

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `deltaserve ARGS` (optionally with stdin from a file) and captures both streams; with raw, ARGS is the
// whole command line (e.g. the binary under `timeout`).
Out ds_run(const std::string& args, const std::string& stdin_text = "", bool raw = false) {
  const std::string d = ds::test::temp_dir();
  std::string cmd = (raw ? args : std::string(bin()) + " " + args) + " >" + d + "/out.txt 2>" + d + "/err.txt";
  if (!stdin_text.empty()) {
    std::ofstream(d + "/in.txt") << stdin_text;
    cmd += " <" + d + "/in.txt";
  } else {
    cmd += " </dev/null";
  }
  Out o;
  int st = std::system(cmd.c_str());
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  o.out = slurp(d + "/out.txt");
  o.err = slurp(d + "/err.txt");
  return o;
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!bin()) return;
    model_ = ds::test::temp_dir() + "/cli-tiny.gguf";
    Out o = ds_run("synth --size tiny --type Q8_0 --seed 3 -o " + model_);
    ASSERT_EQ(o.rc, 0) << o.err;
  }
  void SetUp() override {
    if (!bin()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
    ASSERT_TRUE(std::filesystem::exists(model_));
  }
  static std::string model_;
};
std::string Cli::model_;

}  // namespace

TEST_F(Cli, SynthRefusesBadArguments) {
  Out o = ds_run("synth --size 3B -o " + ds::test::temp_dir() + "/x.gguf");
  EXPECT_NE(o.rc, 0);
  EXPECT_NE(o.err.find("size '3B' is not known"), std::string::npos) << o.err;
  o = ds_run("synth --size tiny --type Q2_K -o " + ds::test::temp_dir() + "/x.gguf");
  EXPECT_NE(o.rc, 0);
  EXPECT_NE(o.err.find("Q4_K_M, Q3_K_M, Q5_K_M, Q8_0 or BF16"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(ds::test::temp_dir() + "/x.gguf"));
  o = ds_run("synth --size 0.8B --type Q4_K_M --plan");
  EXPECT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("params 752393024"), std::string::npos) << o.out;
  o = ds_run("synth --size 0.8B --type q5_k_m --plan");  // same shapes, Q5_K trunk
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("params 752393024"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Q5_K"), std::string::npos) << o.out;
}

TEST_F(Cli, RunStreamsSeededTextAndTimings) {
  const std::string args = "run -m " + model_ + " --chat -p \"Hello! Who are you?\" -n 24 --temp 0.8 --seed 5 --threads 1 --ignore-eos";
  Out a = ds_run(args), b = ds_run(args);
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_GT(a.out.size(), 10u);
  EXPECT_EQ(a.out, b.out) << "same seed, same text";
  EXPECT_NE(a.err.find("run: prompt"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("generated 24 tokens"), std::string::npos) << a.err;
  Out c = ds_run("run -m " + model_ + " --chat -p \"Hello! Who are you?\" -n 24 --temp 0.8 --seed 6 --threads 1 --ignore-eos");
  EXPECT_NE(a.out, c.out) << "another seed, other text";
}

TEST_F(Cli, StopStringCutsTheOutput) {
  const std::string base = "run -m " + model_ + " -p \"The answer is\" -n 32 --temp 0 --threads 1";
  Out full = ds_run(base);
  ASSERT_EQ(full.rc, 0) << full.err;
  ASSERT_GT(full.out.size(), 12u);
  // A stop string taken from the middle of the greedy output: the output ends right before its first
  // occurrence. Pick ASCII characters so the stop text is not split inside a UTF-8 character.
  size_t at = std::string::npos;
  for (size_t i = 4; i + 3 < full.out.size() && at == std::string::npos; i++) {
    bool ok = true;
    for (size_t k = 0; k < 3; k++) ok = ok && std::isalnum((unsigned char)full.out[i + k]);
    if (ok) at = i;
  }
  if (at == std::string::npos) GTEST_SKIP() << "no 3 ASCII letters in a row in: " << full.out;
  const std::string stop = full.out.substr(at, 3);
  Out cut = ds_run(base + " --stop " + stop);
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_EQ(cut.out, full.out.substr(0, full.out.find(stop)) + "\n");
  EXPECT_NE(cut.err.find("stop: stop string"), std::string::npos) << cut.err;
}

TEST_F(Cli, PromptLongerThanContextIsAClearError) {
  Out o = ds_run("run -m " + model_ + " -p \"one two three four five six seven eight nine ten\" --ctx 4 -n 4");
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("--ctx"), std::string::npos) << o.err;
  o = ds_run("run -m " + model_ + " -n 4");
  EXPECT_NE(o.rc, 0);
  EXPECT_NE(o.err.find("give a prompt"), std::string::npos) << o.err;
}

TEST_F(Cli, InteractiveReusesTheState) {
  Out o = ds_run("run -m " + model_ + " --chat -i -n 6 --temp 0 --threads 1", "Hi there\nAnd then?\n");
  ASSERT_EQ(o.rc, 0) << o.err;
  // Turn 2's prompt extends turn 1's: only the new tokens run ("(N processed)" with N < prompt tokens).
  size_t first = o.err.find("run: prompt "), second = o.err.find("run: prompt ", first + 1);
  ASSERT_NE(second, std::string::npos) << o.err;
  long n_prompt = 0, n_run = 0;
  ASSERT_EQ(std::sscanf(o.err.c_str() + second, "run: prompt %ld tokens (%ld processed)", &n_prompt, &n_run), 2);
  EXPECT_LT(n_run, n_prompt) << o.err;
  EXPECT_GT(n_run, 0);
}

// A failed turn ends that turn, not the conversation; but the exit status says that one failed (a script
// feeding turns on stdin must not take the run for a success).
TEST_F(Cli, InteractiveFailedTurnGivesNonZeroStatus) {
  const std::string args = "run -m " + model_ + " -i -n 2 --temp 0 --threads 1 --ctx 24";
  Out ok = ds_run(args, "Hi\nok\n");
  EXPECT_EQ(ok.rc, 0) << ok.err;
  const std::string too_long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
  Out o = ds_run(args, "Hi\n" + too_long + "\nok\n");
  EXPECT_EQ(o.rc, 1) << o.err;
  EXPECT_NE(o.err.find("(--ctx)"), std::string::npos) << o.err;
  // The turn after the failed one still ran: a timing line for turns 1 and 3.
  size_t first = o.err.find("run: prompt "), second = o.err.find("run: prompt ", first + 1);
  EXPECT_NE(second, std::string::npos) << o.err;
  EXPECT_NE(o.err.find("1 of 3 turns failed"), std::string::npos) << o.err;
  // A line that is not UTF-8 is a failed turn too.
  o = ds_run(args, "Hi\n\xff\xfe\n");
  EXPECT_EQ(o.rc, 1) << o.err;
  EXPECT_NE(o.err.find("1 of 2 turns failed"), std::string::npos) << o.err;
}

TEST_F(Cli, BenchWritesJsonLines) {
  Out o = ds_run("bench -m " + model_ + " -p 16 -n 4 -r 2 --threads 1 --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  std::istringstream lines(o.out);
  std::string line;
  std::vector<nlohmann::json> js;
  while (std::getline(lines, line)) js.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(js.size(), 2u) << o.out;
  EXPECT_EQ(js[0]["test"], "pp16");
  EXPECT_EQ(js[1]["test"], "tg4");
  for (const auto& j : js) {
    for (const char* k : {"model", "file_bytes", "params", "backend", "test", "tokens_per_s", "min", "max", "runs",
                          "commit", "device", "threads"})
      EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["runs"], 2);
    EXPECT_EQ(j["threads"], 1);
    EXPECT_EQ(j["file_bytes"].get<uint64_t>(), std::filesystem::file_size(model_));
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    EXPECT_LE(j["min"].get<double>(), j["tokens_per_s"].get<double>());
    EXPECT_GE(j["max"].get<double>(), j["tokens_per_s"].get<double>());
    EXPECT_FALSE(j["commit"].get<std::string>().empty());
  }
  // The table form, as llama-bench prints it.
  o = ds_run("bench -m " + model_ + " -p 8 -n 0 -r 1 --threads 1 --no-warmup");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("| model"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pp8"), std::string::npos) << o.out;
}

// --version names the commit the binary was built from (bench results and serve_bench.py record it).
TEST(CliVersion, NamesTheCommit) {
  if (!bin()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  const Out o = ds_run("--version");
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("deltaserve "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("(commit "), std::string::npos) << o.out;
}

// A bad option value is refused before any work, naming the option, what it allows and what was given.
// Before: "--ctx: Value 0 not in range 0.000000 to 1797...(309 digits)", --temp -1 ran greedy, --top-p 0
// and --repeat-penalty 0 ran, and bench -p -5 measured nothing for it.
TEST_F(Cli, BadOptionValuesNameTheAllowedRange) {
  const std::string run = "run -m " + model_ + " -p hi -n 2 ";
  const std::pair<std::string, std::string> cases[] = {
      {run + "--ctx 0", "--ctx: must be an integer >= 1, got '0'"},
      {run + "--ctx -5", "--ctx: must be an integer >= 1, got '-5'"},
      {run + "--ctx abc", "--ctx: must be an integer >= 1, got 'abc'"},
      {run + "--temp -1", "--temp: must be a number >= 0, got '-1'"},
      {run + "--top-p 0", "--top-p: must be a number in (0, 1], got '0'"},
      {run + "--top-k -3", "--top-k: must be an integer >= 0, got '-3'"},
      {run + "--min-p 2", "--min-p: must be a number in [0, 1], got '2'"},
      {run + "--repeat-penalty 0", "--repeat-penalty: must be a number > 0, got '0'"},
      {"bench -m " + model_ + " -p -5", "--n-prompt: must be an integer >= 0, got '-5'"},
      {"bench -m " + model_ + " -r 0", "--repetitions: must be an integer >= 1, got '0'"},
  };
  for (const auto& [args, want] : cases) {
    const Out o = ds_run(args);
    EXPECT_GT(o.rc, 0) << args;
    EXPECT_NE(o.err.find(want), std::string::npos) << args << "\n" << o.err;
  }
}

// --threads 100000 crashed OpenMP (SIGSEGV) in run, bench and synth; now every command refuses it.
TEST_F(Cli, ThreadCountIsBounded) {
  for (const std::string args : {"run -m " + model_ + " -p hi -n 2 --threads 100000",
                                 "bench -m " + model_ + " -p 4 -n 0 -r 1 --threads 100000",
                                 "synth --size tiny --threads 100000 -o " + ds::test::temp_dir() + "/t.gguf",
                                 "logits -m " + model_ + " --tokens-file x --out y --threads 100000",
                                 "serve -m " + model_ + " --port 0 --threads 100000"}) {
    const Out o = ds_run("timeout 20 " + std::string(bin()) + " " + args, "", /*raw=*/true);
    EXPECT_GT(o.rc, 0) << args;
    EXPECT_NE(o.rc, 124) << args << ": still running after 20 s";
    EXPECT_NE(o.err.find("--threads: must be an integer in [0, 1024], got '100000'"), std::string::npos)
        << args << "\n" << o.err;
  }
}

// --backend cuda where CUDA cannot run says so and how to go on. Before: run failed with "forward: 2 tokens
// after 0 would pass the sequence's max context 1" and bench with "bad_function_call".
TEST_F(Cli, BackendCudaWithoutAGpuIsAClearError) {
  for (const std::string cmd : {"run -p hi -n 1", "bench -p 4 -n 0 -r 1", "serve --port 0"}) {
    const Out o = ds_run("timeout 20 " + std::string(bin()) + " " + cmd + " --backend cuda -m " + model_, "",
                         /*raw=*/true);
    if (o.rc == 0 || o.rc == 124) GTEST_SKIP() << "this machine runs CUDA";
    EXPECT_EQ(o.rc, 1) << cmd;
    EXPECT_NE(o.err.find("--backend cuda: "), std::string::npos) << cmd << "\n" << o.err;
    EXPECT_NE(o.err.find("use --backend cpu"), std::string::npos) << cmd << "\n" << o.err;
  }
}

// A --ctx beyond the model's training context is one error that says the limit; the default --ctx is lowered
// to it. Before: serve's default (8192) refused the 4096-position demo model ("sequence state: max_ctx = 8192
// exceeds the model's context_length 4096" after a warning that called it allowed).
TEST_F(Cli, ContextBeyondTheModelsSaysTheLimit) {
  for (const std::string cmd : {"run -p hi -n 1", "serve --port 0"}) {
    const Out o = ds_run("timeout 20 " + std::string(bin()) + " " + cmd + " --ctx 5000 -m " + model_, "",
                         /*raw=*/true);
    EXPECT_EQ(o.rc, 1) << cmd;
    EXPECT_NE(o.err.find("--ctx 5000 is beyond the 4096 positions"), std::string::npos) << cmd << "\n" << o.err;
    EXPECT_NE(o.err.find("use --ctx 4096 or less"), std::string::npos) << cmd << "\n" << o.err;
  }
  const Out b = ds_run("bench -p 5000 -n 1 -r 1 -m " + model_);
  EXPECT_EQ(b.rc, 1);
  EXPECT_NE(b.err.find("bench: a test of 5000 tokens is longer than the 4096 positions"), std::string::npos) << b.err;
  // serve with the default --ctx starts (and stops on timeout's SIGTERM with exit code 0).
  const Out o = ds_run("timeout 5 " + std::string(bin()) + " serve --port 0 -m " + model_, "", /*raw=*/true);
  EXPECT_NE(o.err.find("x 4096 tokens"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("listening on"), std::string::npos) << o.err;
}

// An empty --api-key (e.g. --api-key "$KEY" with KEY unset) served without any key; now it is refused.
TEST_F(Cli, EmptyApiKeyIsRefused) {
  const Out o = ds_run("timeout 20 " + std::string(bin()) + " serve --port 0 --api-key '' -m " + model_, "",
                       /*raw=*/true);
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("--api-key is empty"), std::string::npos) << o.err;
}

// A prompt that is not UTF-8 is an error naming where (tokenize already refused it; run took it).
TEST_F(Cli, InvalidUtf8PromptIsRefused) {
  const std::string f = ds::test::temp_dir() + "/bad-utf8.txt";
  std::ofstream(f, std::ios::binary) << "ok \xff\xfe";
  const Out o = ds_run("run -m " + model_ + " -n 2 -f " + f);
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("run: -f " + f + ": invalid UTF-8 at byte 3"), std::string::npos) << o.err;
}

// JSON on stdin nested 200,000 deep crashed detokenize and chat-template (SIGSEGV: a stack overflow in dumping
// and rendering it); now it is refused before parsing, like a server request body, on every JSON reader.
TEST_F(Cli, DeeplyNestedJsonOnStdinIsRefused) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string in_message = "{\"messages\": [{\"role\": \"user\", \"content\": " + deep + "}]}";
  const std::pair<std::string, std::string> cases[] = {
      {"detokenize", deep},
      {"detokenize --jsonl", deep},
      {"chat-template", in_message},
      {"tokenize --jsonl", "{\"text\": " + deep + "}"},
  };
  for (const auto& [cmd, input] : cases) {
    const Out o = ds_run(cmd + " -m " + model_, input);
    EXPECT_EQ(o.rc, 1) << cmd;
    EXPECT_NE(o.err.find("the JSON nests arrays/objects more than 256 levels deep"), std::string::npos) << cmd << "\n" << o.err;
  }
  // --jsonl rendering reports the line as an error result and goes on with the next line.
  const Out o = ds_run("chat-template --jsonl -m " + model_,
                       in_message + "\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n");
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.out.find("chat-template: input line 1: the JSON nests arrays/objects more than 256 levels deep"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("{\"rendered\":"), std::string::npos) << o.out;
}

// inspect checks the tensors against the config as run does: one tensor's dimension changed in the file
// (blk.0.ssm_a, [n_v_heads] -> [3]) made run fail but inspect print the file with exit code 0.
TEST_F(Cli, InspectRefusesATensorOfTheWrongShape) {
  std::string bytes = slurp(model_);
  const std::string name = "blk.0.ssm_a";
  // The tensor record: u64 name length, the name, u32 n_dims, then ne[0] as u64.
  size_t at = std::string::npos;
  for (size_t p = bytes.find(name); p != std::string::npos; p = bytes.find(name, p + 1))
    if (p >= 8 && bytes[p - 8] == (char)name.size() && bytes[p + name.size()] == 1) at = p + name.size() + 4;
  ASSERT_NE(at, std::string::npos) << "no tensor record of " << name;
  const uint64_t three = 3;
  std::memcpy(&bytes[at], &three, 8);
  const std::string bad = ds::test::temp_dir() + "/bad-shape.gguf";
  std::ofstream(bad, std::ios::binary) << bytes;
  for (const std::string cmd : {"inspect " + bad, "run -p hi -n 1 -m " + bad}) {
    const Out o = ds_run(cmd);
    EXPECT_EQ(o.rc, 1) << cmd;
    EXPECT_NE(o.err.find("tensor '" + name + "' has shape [3], expected"), std::string::npos) << cmd << "\n" << o.err;
  }
}

// A mistyped command is named, with the commands there are (CLI11 said "A subcommand is required").
TEST(CliCommands, UnknownCommandIsNamed) {
  if (!bin()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  const Out o = ds_run("serv -m x.gguf");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("'serv' is not a command; the commands are bench, "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(", serve, "), std::string::npos) << o.err;
}

// --system, --think and --no-think only mean something with --chat; without it they were ignored silently.
TEST_F(Cli, ChatOptionsWithoutChatAreRefused) {
  for (const std::string opt : {"--system 'Be brief.'", "--think", "--no-think"}) {
    const Out o = ds_run("run -m " + model_ + " -p hi -n 2 " + opt);
    EXPECT_GT(o.rc, 0) << opt;
    EXPECT_NE(o.err.find("requires --chat"), std::string::npos) << opt << "\n" << o.err;
  }
}

// synth -o FOLDER wrote the whole model, failed at the rename and left FOLDER.tmp (GBs for a real size)
// behind; now it is refused before writing.
TEST_F(Cli, SynthToAFolderIsRefusedBeforeWriting) {
  const std::string dir = ds::test::temp_dir() + "/synth-out";
  std::filesystem::create_directories(dir);
  for (const std::string out : {dir, dir + "/"}) {
    const Out o = ds_run("synth --size tiny -o " + out);
    EXPECT_EQ(o.rc, 2) << out;
    EXPECT_NE(o.err.find("is a folder; give a file name, e.g. -o " + dir + "/qwen35-tiny.gguf"), std::string::npos)
        << o.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// logits --out where no file can be written says why (it said only "cannot write 'PATH'").
TEST_F(Cli, LogitsSaysWhyItCannotWrite) {
  const std::string toks = ds::test::temp_dir() + "/toks.txt";
  std::ofstream(toks) << "1 2 3\n";
  const Out o = ds_run("logits -m " + model_ + " --tokens-file " + toks + " --out " + ds::test::temp_dir());
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("logits: cannot write '" + ds::test::temp_dir() + "': Is a directory"), std::string::npos)
      << o.err;
}

namespace {
// A copy of `model` whose context_length is `ctx` (the u32 after the key and its u32 type UINT32).
std::string long_context_copy(const std::string& model, uint32_t ctx) {
  std::string bytes = slurp(model);
  const std::string key = "qwen35.context_length";
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos);
  std::memcpy(&bytes[at + key.size() + 4], &ctx, 4);
  const std::string out = ds::test::temp_dir() + "/ctx-" + std::to_string(ctx) + ".gguf";
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}
}  // namespace

// serve and run on the cpu backend with more sequence state than the machine has (zero-filled at full
// context when they start) are refused with the sizes; they used to run into an OOM kill or std::bad_alloc.
// The model's context_length is raised in a copy so that the state needs terabytes (1 KiB per token).
TEST_F(Cli, MoreStateThanTheMachineHasIsRefused) {
  const Out o = ds_run("timeout 60 " + std::string(bin()) + " serve --port 0 --backend cpu --parallel 4096 --ctx " +
                           "1048576 -m " + long_context_copy(model_, 1u << 20),
                       "", /*raw=*/true);
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("serve: 4096 slots (--parallel) x 1048576 tokens (--ctx) need "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("GiB of memory is available; lower --parallel or --ctx"), std::string::npos) << o.err;
  const Out r = ds_run("run -p hi -n 1 --backend cpu --ctx 2147483648 -m " + long_context_copy(model_, 1u << 31));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("run: 2147483648 tokens (--ctx) need "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GiB of memory is available; lower --ctx"), std::string::npos) << r.err;
}

// logits of more tokens than the model's context names the tokens file and the limit (it said "model:
// sequence state: max_ctx = 5000 exceeds the model's context_length 4096").
TEST_F(Cli, LogitsOfTooManyTokensNamesTheFile) {
  const std::string toks = ds::test::temp_dir() + "/toks-5000.txt";
  {
    std::ofstream f(toks);
    for (int i = 0; i < 5000; i++) f << "5 ";
  }
  const Out o = ds_run("logits -m " + model_ + " --tokens-file " + toks + " --out " + ds::test::temp_dir() + "/l.f32");
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("logits: '" + toks + "' has 5000 tokens, more than the 4096 positions"), std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("give at most 4096"), std::string::npos) << o.err;
}

// Every command takes its model with -m; inspect took only a positional file ("The following argument was
// not expected: -m"). Both work now, and neither is a clear error.
TEST_F(Cli, InspectTakesTheModelWithMToo) {
  const Out positional = ds_run("inspect " + model_), with_m = ds_run("inspect -m " + model_);
  EXPECT_EQ(with_m.rc, 0) << with_m.err;
  EXPECT_EQ(with_m.out, positional.out);
  EXPECT_NE(with_m.out.find("model config (qwen35):"), std::string::npos) << with_m.out;
  const Out none = ds_run("inspect");
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.err.find("inspect: give the GGUF file: deltaserve inspect MODEL.gguf (or -m MODEL.gguf)"),
            std::string::npos)
      << none.err;
}

// cuda-bench takes bench's option names too (-p/--n-prompt, -n/--n-gen, -r/--repetitions): a user who
// learned them on bench got "The following argument was not expected".
TEST_F(Cli, CudaBenchTakesBenchsOptionNames) {
  for (const std::string opts : {"--n-prompt 4 --n-gen 2 --repetitions 1", "-p 4 -n 2 -r 1"}) {
    const Out o = ds_run("cuda-bench -m " + model_ + " " + opts);
    EXPECT_EQ(o.err.find("not expected"), std::string::npos) << opts << "\n" << o.err;
    // Without a GPU it stops at the device: "built without CUDA" (a CPU build) or "no CUDA device found".
    if (o.rc != 0)
      EXPECT_TRUE(o.err.find("built without CUDA") != std::string::npos ||
                  o.err.find("no CUDA device found") != std::string::npos)
          << opts << "\n" << o.err;
  }
}
