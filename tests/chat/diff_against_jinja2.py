#!/usr/bin/env python3
"""Developer tool (not run by CI): renders many conversations with any chat templates, both with
Jinja2 set up as Hugging Face sets it up (make_jinja_cases.env) and with `deltaserve chat-template
--jsonl`, and reports every difference. Renderings must be byte-identical; where Jinja2 fails,
deltaserve must fail too (with the same message when it is the template's raise_exception).

  python3 tests/chat/diff_against_jinja2.py --bin build/apps/deltaserve some-model.jinja ...

Conversations: the fixture goldens' conversations plus odd ones below (content parts, images,
tool results as parts, string arguments, missing roles, wrong types, documents, ...), each with
add_generation_prompt / enable_thinking variations and bos/eos tokens set.
"""
import argparse
import json
import os
import subprocess
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_jinja_cases import env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.environ.get("DS_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather «x» \"q\"",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                         "n": {"type": "number", "default": 1.5}}, "required": ["city"]}}}]
ODD = [
    [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}, {"type": "text", "text": " here"}]}],
    [{"role": "system", "content": [{"type": "text", "text": "sys parts"}]}, {"role": "user", "content": "hi"}],
    [{"role": "user", "content": "q"},
     {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Paris", "n": 2, "f": 1.0, "b": True, "nul": None, "l": [1, "x"], "o": {"k": "v"}}}}]},
     {"role": "tool", "content": [{"type": "text", "text": "res"}]}, {"role": "tool", "content": "second"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\nr1\n</think>\n\nans", "reasoning_content": None},
     {"role": "user", "content": "q2"}, {"role": "assistant", "content": "  spaced  ", "reasoning_content": "  rc  "}],
    [{"role": "user", "content": "<tool_response>x</tool_response>"}],
    [{"role": "user", "content": "a"}, {"role": "tool", "content": "orphan"}],
    [{"role": "user", "content": "tabs\tand\u00a0nbsp\u2028ls  "}, {"role": "assistant", "content": "\n\n<think></think>x"}],
    [{"role": "developer", "content": "dev"}, {"role": "user", "content": "u"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "c", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}],
    [],
    [{"role": "user", "content": 5}],
    [{"content": "no role"}],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "tool_calls": {"function": {"name": "f"}}}],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "tool_calls": [{"function": {"name": "f", "arguments": [1, 2]}}]}],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "tool_calls": [{"name": "bare", "arguments": {"k": 1.5e300}}]}],
    [{"role": "user", "content": [{"type": "video"}, {"image_url": "u"}, {"type": "text", "text": "t"}]}],
    [{"role": "system", "content": [{"type": "image"}]}, {"role": "user", "content": "x"}],
    [{"role": "user", "content": [{"type": "weird"}]}],
    [{"role": "user", "content": {"text": "dict content"}}],
    [{"role": "System", "content": "pre"}, {"role": "user", "content": "q"},
     {"role": "assistant", "content": "", "reasoning_content": "plan", "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "A"}}},
         {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "B"}}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "r1"}, {"role": "tool", "tool_call_id": "c2", "content": {"t": 2}},
     {"role": "user", "content": "more"}],
]


def requests():
    convs = []
    for name in ("golden-qwen3.5.jsonl", "golden-qwen3.jsonl"):
        with open(os.path.join(FIXTURES, "chat", name), encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                convs.append((d["messages"], d["tools"]))
    for m in ODD:
        convs += [(m, None), (m, TOOLS)]
    reqs = []
    for msgs, tools in convs:
        for agp, thinking in ((True, None), (True, False), (False, True)):
            r = {"messages": msgs, "tools": tools, "add_generation_prompt": agp, "bos_token": "<s>", "eos_token": "</s>"}
            if thinking is not None:
                r["enable_thinking"] = thinking
            if len(reqs) % 5 == 0:
                r["documents"] = [{"title": "T", "text": "doc «1»"}, {"url": "u", "snippet": "s"}]
            if len(reqs) % 7 == 0:
                r["enable_citations"] = True
            reqs.append(r)
    return reqs


def reference(template, req):
    kw = json.loads(json.dumps(req))
    kw.setdefault("documents", None)
    try:
        return "ok", template.render(**kw)
    except jinja2.exceptions.TemplateError as e:
        return ("raised" if type(e) is jinja2.exceptions.TemplateError else "error"), str(e)
    except Exception as e:  # noqa: BLE001 - any failure is a reference outcome
        return "error", f"{type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "apps", "deltaserve"))
    ap.add_argument("templates", nargs="+")
    args = ap.parse_args()
    reqs = requests()
    total_bad = 0
    for path in args.templates:
        with open(path, encoding="utf-8") as f:
            template = env.from_string(f.read())
        want = [reference(template, r) for r in reqs]
        inp = "".join(json.dumps(r) + "\n" for r in reqs)
        out = subprocess.run([args.bin, "chat-template", "--template", path, "--jsonl"], input=inp.encode(),
                             capture_output=True, check=False).stdout.decode().split("\n")[:-1]
        if len(out) != len(reqs):
            print(f"{path}: expected {len(reqs)} output lines, got {len(out)}")
            total_bad += 1
            continue
        bad = 0
        for req, (kind, text), line in zip(reqs, want, out):
            got = json.loads(line)
            same = (kind == "ok" and got.get("rendered") == text) or \
                   (kind == "raised" and got.get("error") == text) or (kind == "error" and "error" in got)
            if not same:
                bad += 1
                if bad <= 3:
                    print(f"MISMATCH {path}\n  request: {json.dumps(req)[:400]}\n  jinja2:  {kind} {text!r:.600}\n  got:     {line[:600]}")
        counts = {k: sum(1 for w in want if w[0] == k) for k in ("ok", "raised", "error")}
        print(f"{path}: {bad} mismatches in {len(reqs)} renders (jinja2: {counts})")
        total_bad += bad
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
