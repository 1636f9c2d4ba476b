#!/usr/bin/env python3
"""Writes jinja_cases.jsonl: small templates rendered by the reference, Jinja2 (3.1.x) set up the way
Hugging Face's apply_chat_template sets it up (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception).

Each line: {"name", "template", "vars", and either "expected" (the rendered text) or "error":
{"type", "message", "line", "raised"}}. "line" is the template line Jinja2 blames (syntax errors,
and runtime errors via the traceback); "raised" marks raise_exception. test_chat checks deltaserve's
interpreter against every line. Re-run after adding cases:  python3 tests/chat/make_jinja_cases.py
"""
import json
import os
import sys
import traceback

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "42"},
]
D = {"a": 1, "b": [1, 2.5, "x"], "c": {"d": None, "e": True}, "items": "shadow", "é": "ü"}

CASES = [
    # ---- whitespace control, trim_blocks, lstrip_blocks ----
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("ws_lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\nend", {}),
    ("ws_lstrip_tabs", "\t \t{% for i in [1,2] %}\n{{ i }}\n\t{% endfor %}\n", {}),
    ("ws_lstrip_not_line_start", "a {% if 1 %}b{% endif %} c", {}),
    ("ws_var_not_lstripped", "  {{ 1 }}  \n  {{ 2 }}\n", {}),
    ("ws_minus_both", "a  \n {%- if true -%} \n b \n {%- endif -%}  \n c", {}),
    ("ws_minus_var", "x  \n  {{- ' v ' -}}  \n  y", {}),
    ("ws_plus_lstrip", "  {%+ if true %}x{% endif %}", {}),
    ("ws_plus_trim", "{% if true +%}\nx{% endif +%}\ny", {}),
    ("ws_comment", "a\n  {# comment #}\nb {#- c -#}   c\n{#+ k #}\nd", {}),
    ("ws_comment_multiline", "x{# a\nb\nc #}y\n{{ z }}", {"z": 1}),
    ("ws_raw", "{% raw %}{{ not parsed }} {% if %}{% endraw %}|{%- raw -%}  a  {%- endraw -%}  |", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws_cr_only", "a\r{{ 1 }}\rb", {}),
    ("ws_trailing_newline", "x\n", {}),
    ("ws_two_trailing_newlines", "x\n\n", {}),
    ("ws_unicode_space_minus", "a\u00a0\u2003{%- if 1 %}b{% endif %}", {}),
    ("ws_unicode_space_lstrip", "\u3000{% if 1 %}b{% endif %}", {}),
    ("ws_block_end_minus_newlines", "{% set x = 1 -%}\n\n\n  {{ x }}", {}),
    ("ws_nested_blocks", "{% for m in msgs %}\n  {% if m.role == 'user' %}\n    U:{{ m.content }}\n  {% else %}\n    O\n  {% endif %}\n{% endfor %}", {"msgs": MSGS}),
    ("ws_braces_in_text", "a { b } {x} }} %} #} c", {}),
    # ---- literals and printing (Python str()) ----
    ("lit_numbers", "{{ 1 }} {{ -2 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1_000 }} {{ 0x1f }} {{ 0b101 }} {{ 0o17 }}", {}),
    ("lit_float_repr", "{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 / 2 }} {{ 1e300 * 1e10 }} {{ -0.0 }} {{ 123456789012345678.0 }} {{ 1.23e-7 }}", {}),
    ("lit_consts", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", {}),
    ("lit_containers", "{{ [1, 'a', none, true, 1.0] }} {{ {'k': 'v', 'n': [1]} }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ [] }} {{ {} }}", {}),
    ("lit_string_repr", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'bs\\\\', 'é', '\\x00', '\\x7f'] }}", {}),
    ("lit_escapes", "{{ 'a\\nb' }}|{{ \"q\\\"q\" }}|{{ '\\x41\\u00e9\\U0001F600' }}|{{ '\\d\\w' }}|{{ '\\101' }}", {}),
    ("lit_adjacent_strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("lit_data_types", "{{ d }}|{{ d.b }}|{{ d.c }}|{{ n }}|{{ f }}|{{ s }}", {"d": D, "n": 7, "f": 2.0, "s": "str"}),
    ("lit_multiline_string", "{{ 'a\nb' }}", {}),
    ("print_tuple", "{{ 1, 2 }}", {}),
    # ---- operators ----
    ("op_arith", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}", {}),
    ("op_float_arith", "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 2.0 ** 3 }} {{ 1 + 1.0 }} {{ true + 1 }} {{ 10 / 4 * 2 }}", {}),
    ("op_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 2 * 3 ~ 4 }} {{ 'a' ~ 2 * 3 }} {{ not 1 == 2 }} {{ 10 - 2 - 3 }}", {}),
    ("op_concat_binds_tighter_than_plus", "{{ 1 + 2 ~ 3 }}", {}),
    ("op_filter_binds_tighter", "{{ l|length - 1 }} {{ -3|abs }} {{ 'a' ~ 'b'|upper }} {{ 1 + l|length }}", {"l": [1, 2, 3]}),
    ("op_concat", "{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ u ~ [1] }}", {}),
    ("op_string_plus", "{{ 'a' + 'b' }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [0] * 3 }} {{ 'x' * 0 }} {{ 'x' * -1 }}", {}),
    ("op_compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != '1' }} {{ none == none }} {{ [1] == (1,) }}", {}),
    ("op_compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1 == 1 }} {{ 3 > 2 >= 2 }}", {}),
    ("op_in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'a' in {'a': 1} }} {{ 'z' not in 'abc' }} {{ 1 in [1.0] }} {{ 'x' in u }} {{ [1] in [[1]] }}", {}),
    ("op_and_or_values", "{{ 0 or 'x' }} {{ 'a' or 'b' }} {{ 1 and 'y' }} {{ 0 and 1 }} {{ none or [] }} {{ '' or none }} {{ u or 'dflt' }}", {}),
    ("op_not", "{{ not 0 }} {{ not 'a' }} {{ not [] }} {{ not u }} {{ not not 2 }}", {}),
    ("op_condexpr", "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("op_equality_containers", "{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ [1, [2]] == [1, [2]] }} {{ 'a' == none }} {{ u == u }}", {}),
    ("op_string_percent", "{{ '%s-%d-%05.2f|%x|%r|%%' % ('a', 3, 2.5, 255, 'q') }} {{ '%(k)s!' % {'k': 'v'} }} {{ '%s' % [1, 2] }} {{ '%-4s|%4s|' % ('a', 'b') }}", {}),
    # ---- tests ----
    ("test_types", "{% for v in [1, 1.5, 'a', [1], {'a': 1}, none, true, false] %}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is sequence }}{{ v is mapping }}{{ v is iterable }}{{ v is none }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is callable }}\n{% endfor %}", {}),
    ("test_defined", "{{ x is defined }} {{ u is defined }} {{ u is undefined }} {{ d.a is defined }} {{ d.zz is defined }} {{ d.zz is not defined }} {{ none is defined }}", {"x": 1, "d": D}),
    ("test_undefined_kinds", "{{ u is iterable }} {{ u is sequence }} {{ u is mapping }} {{ u is string }} {{ u is none }}", {}),
    ("test_numeric", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 2 is ne 3 }}", {}),
    ("test_misc", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 2 is in [1, 2] }} {{ none is sameas none }} {{ true is sameas true }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ range is callable }}", {}),
    ("test_in_condition", "{% if x is string and x|length > 2 %}long{% endif %}{% if y is not none %}y{% endif %}", {"x": "abcd", "y": 0}),
    # ---- filters ----
    ("f_trim", "[{{ '  a b \\n'|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ u|trim }}] [{{ 5|trim }}]", {}),
    ("f_case", "{{ 'hello World'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD-foo(bar'|title }} {{ 'hELLO world'|capitalize }} {{ 'éa'|upper }}", {}),
    ("f_length", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|length }} {{ u|length }} {{ 'abc'|count }}", {}),
    ("f_default", "{{ u|default('d') }} {{ none|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ u|default }}|", {}),
    ("f_join", "{{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ msgs|join('|', attribute='role') }} {{ 'abc'|join('-') }}", {"msgs": MSGS}),
    ("f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ {'k': 1, 'j': 2}|first }} [{{ []|first }}]", {}),
    ("f_list", "{{ 'abc'|list }} {{ {'a': 1, 'b': 2}|list }} {{ (1, 2)|list }} {{ u|list }}", {}),
    ("f_items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in u|items %}x{% endfor %}", {"d": D}),
    ("f_dict_methods", "{% for k, v in d.items() %}{{ k }}:{{ v }},{% endfor %} {{ d.keys()|list }} {{ d.values()|list|length }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}", {"d": {"a": 1, "b": 2}}),
    ("f_map_select", "{{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('role', 'in', ['user', 'tool'])|list|length }} {{ msgs|selectattr('tool_calls')|list|length }} {{ msgs|selectattr('tool_calls', 'defined')|list|length }}", {"msgs": MSGS}),
    ("f_map_filter", "{{ ['a', 'B']|map('upper')|list }} {{ [' a ', 'b ']|map('trim')|join(',') }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'a']|select|list }} {{ ['x', 'y']|map('replace', 'x', 'z')|list }}", {}),
    ("f_map_default", "{{ msgs|map(attribute='name', default='anon')|list }} {{ msgs|map(attribute='tool_calls.0.function.name')|list }}", {"msgs": MSGS}),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 123|replace('2', 'x') }}", {}),
    ("f_tojson", "{{ d|tojson }}\n{{ msgs|tojson }}\n{{ 'é\"\\n\\t\\u0001<>&\\''|tojson }}\n{{ [1.0, 2.5e-8, 1e100, -0.0, true, none]|tojson }}", {"d": D, "msgs": MSGS}),
    ("f_tojson_options", "{{ d|tojson(indent=2) }}\n{{ d|tojson(indent=2, sort_keys=true) }}\n{{ d|tojson(separators=(',', ':')) }}\n{{ 'é'|tojson(ensure_ascii=true) }}\n{{ [[], {}, [1]]|tojson(indent=1) }}\n{{ 'x😀'|tojson(true) }}\n{{ d|tojson(indent='\\t') }}", {"d": {"b": [1, {"c": 2}], "a": "x"}}),
    ("f_tojson_safe", "{% set v = x | tojson | safe if x is mapping else x | string %}{{ v }}", {"x": {"q": [1, 2, {"k": "v"}]}}),
    ("f_string", "{{ 1|string }} {{ none|string }} {{ [1, 'a']|string }} {{ u|string }}| {{ 1.0|string }} {{ true|string ~ '!' }}", {}),
    ("f_int_float", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1f'|int(base=16) }} {{ '3.5'|float }} {{ 'y'|float }} {{ 2|float }} {{ true|int }}", {}),
    ("f_abs_round", "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }} {{ 1234.5|round(-2) }}", {}),
    ("f_sort_unique", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }} {{ [1, 2, 1, 'a', 'A']|unique|list }}", {"msgs": MSGS}),
    ("f_min_max_sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|max }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [{'n': 1}, {'n': 5}]|sum(attribute='n') }} {{ [[1], [2]]|sum(start=[]) }}", {}),
    ("f_reverse", "{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }} {{ 'héllo'[::-1] }}", {}),
    ("f_dictsort", "{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'A': 2}|dictsort(reverse=true) }}", {}),
    ("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}", {}),
    ("f_center_truncate", "[{{ 'ab'|center(7) }}] [{{ 'abc'|center(8) }}] {{ 'one two three four'|truncate(9) }} {{ 'one two three four'|truncate(9, true) }} {{ 'short'|truncate(9) }} {{ 'abcdefghijklmnop'|truncate(10, leeway=0) }}", {}),
    ("f_wordcount_batch", "{{ 'hello big_world, 123!'|wordcount }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", {}),
    ("f_escape_safe_format", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ '%s=%d'|format('k', 3) }} {{ '%(a)s'|format(a='z') }}", {}),
    ("f_attr", "{{ d|attr('a') }} [{{ d|attr('zz') }}]", {"d": {"a": 5}}),
    ("f_chain", "{{ msgs|selectattr('role', 'eq', 'assistant')|map(attribute='tool_calls')|first|first|attr('function') }}", {"msgs": MSGS}),
    # ---- string methods ----
    ("m_startswith", "{{ s.startswith('<tool') }} {{ s.endswith('>') }} {{ s.startswith(('x', '<')) }} {{ s.startswith('tool', 1) }} {{ s.endswith('e', 0, 5) }}", {"s": "<tool_response>"}),
    ("m_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'xyhixy'.strip('xy') }}][{{ 'ab\\n'.rstrip('\\n') }}]", {"s": "  \t pad \n "}),
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a<think>b</think>c'.split('</think>')[0].split('<think>')[-1] }} {{ 'x'.split('y') }} {{ ' a b '.split(none, 1) }} {{ 'a,b,c'.rsplit(',', 1) }}", {}),
    ("m_replace_case", "{{ 'aXa'.replace('a', 'b') }} {{ 'aaa'.replace('a', '', 1) }} {{ 'Hi There'.upper() }} {{ 'Hi There'.lower() }} {{ \"it's a dog's-life x1y\".title() }} {{ 'hELLO'.capitalize() }} {{ 'aB'.swapcase() }}", {}),
    ("m_format", "{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<4}|{:^6}|'.format('r', 'l', 'c') }} {{ '{:.2f} {:05d} {:,} {:x} {!r}'.format(3.14159, 42, 1234567, 255, 'q') }} {{ '{{}} {}'.format(1) }} {{ '{0[a]} {0.a}'.format(d) }}", {"d": {"a": 9}}),
    ("m_misc", "{{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} {{ 'aaa'.count('a') }} {{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ '-'.join(['a', 'b']) }} {{ 'x'.center(5, '*') }} {{ '7'.zfill(3) }} {{ 'k=v=w'.partition('=') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'pre_x'.removeprefix('pre_') }}", {}),
    ("m_unicode", "{{ 'héllo wörld'.upper() }} {{ 'ÀÉ'.lower() }} {{ 'naïve café'.title() }} {{ '日本語'[1] }} {{ '日本語'|length }} {{ '😀x'[1:] }} {{ 'straße'.upper() }}", {}),
    # ---- subscripts and slicing ----
    ("sub_index", "{{ l[0] }} {{ l[-1] }} [{{ l[10] }}] {{ d['a'] }} {{ d.a }} {{ d['items'] }} {{ s[1] }} {{ l.1 }} [{{ d['zz'] }}] [{{ none.x }}] [{{ 5.real }}]", {"l": [1, 2, 3], "d": D, "s": "abc"}),
    ("sub_slice", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[1:3] }} {{ l[-2:] }} {{ l[5:] }} {{ s[::-1] }} {{ s[1:-1] }} {{ l[3:0:-1] }} {{ (1, 2, 3)[1:] }} {{ s[-100:100] }}", {"l": [1, 2, 3, 4], "s": "héllo"}),
    ("sub_messages_reverse", "{% for m in msgs[::-1] %}{{ loop.index0 }}:{{ m.role }} {% endfor %}", {"msgs": MSGS}),
    ("sub_items_vs_method", "{{ d.items is callable }} {{ d['items'] }} {{ d.get is callable }} {{ d['é'] }}", {"d": D}),
    # ---- for loops ----
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}] {% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}e{% endfor %}|{% for x in [1, 2] if x > 5 %}{% else %}none{% endfor %}", {}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_break_else", "{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}done", {}),
    ("for_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}/{{ loop.index }} {% endfor %}", {}),
    ("for_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for (k, v) in {'x': 1}|items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("for_dict", "{% for k in d %}{{ k }},{% endfor %}", {"d": D}),
    ("for_undefined", "[{% for x in u %}x{% endfor %}]", {}),
    ("for_cycle_changed", "{% for x in [1, 1, 2, 3, 3] %}{{ loop.cycle('a', 'b') }}{% if loop.changed(x) %}!{% endif %}{% endfor %}", {}),
    ("for_loop_scope", "{% set x = 'out' %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }} {% endfor %}{{ x }}", {}),
    ("for_previtem_messages", "{% for m in msgs %}{% if loop.previtem and loop.previtem.role != 'tool' %}[{{ loop.previtem.role }}]{% endif %}{% if not loop.last and loop.nextitem.role != 'tool' %}<{{ loop.nextitem.role }}>{% endif %}{% endfor %}", {"msgs": MSGS}),
    ("for_loop_in_filter_cond", "{% for m in msgs if m.role != 'system' %}{{ loop.index }}{{ m.role[0] }}{% endfor %}", {"msgs": MSGS}),
    # ---- set, namespace, scoping ----
    ("set_basic", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}{% set a, b = 'pq' %}{{ b }}{{ a }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_if_no_scope", "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", {}),
    ("set_loop_scope", "{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}", {}),
    ("set_namespace", "{% set ns = namespace(n=0, found=false, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.found }} {{ ns.s }} [{{ ns.missing }}]", {}),
    ("set_namespace_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set_block", "{% set x %}\n  hi {{ 1 + 1 }}\n{% endset %}[{{ x }}]{% set y | trim | upper %}  yo  {% endset %}[{{ y }}]", {}),
    ("set_override_loop_var", "{% for t in [{'function': {'name': 'f'}}, {'name': 'g'}] %}{% if t.function is defined %}{% set t = t.function %}{% endif %}{{ t.name }}{% endfor %}", {}),
    ("set_with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("set_dict_literal_keys", "{% set d = {1: 'one', 'k': 'v', true: 't'} %}{{ d[1] }} {{ d.k }} {{ d }}", {}),
    # ---- macros ----
    ("macro_basic", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(greeting='Yo', name='C') }} {{ greet() }}|", {}),
    ("macro_defaults_ref", "{% macro m(a, b=a ~ 'x') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }}", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_returns_string", "{% macro m(x) %}  {{ x }}  {% endmacro %}[{{ m(1)|trim }}] {{ m(2)|length }} {{ m(3) is string }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(10) }}", {}),
    ("macro_closure", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ late }}{% endmacro %}{% set late = 'L' %}{{ m() }}", {}),
    ("macro_namespace_mutation", "{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.c }}", {}),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}in {{ 1 + 1 }}{% endcall %}", {}),
    ("macro_caller_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}", {}),
    ("macro_print", "{% macro m() %}{% endmacro %}{{ m }}", {}),
    ("macro_render_content", "{% macro rc(content) %}{% if content is string %}{{ content }}{% elif content is iterable and content is not mapping %}{% for item in content %}{% if 'text' in item %}{{ item.text }}{% elif item.type == 'image' %}<img>{% endif %}{% endfor %}{% elif content is none or content is undefined %}{{ '' }}{% endif %}{% endmacro %}{{ rc('s') }}|{{ rc([{'type': 'text', 'text': 'a'}, {'type': 'image'}]) }}|{{ rc(none) }}|{{ rc(u) }}", {}),
    # ---- filter and generation blocks, misc statements ----
    ("block_filter", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim|replace('a', 'b') %}  aa  {% endfilter %}", {}),
    ("block_print", "{% print 'p' ~ 1 %}", {}),
    ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a }}", {}),
    ("joiner", "{% set j = joiner(' | ') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
    # ---- undefined semantics ----
    ("undef_print", "[{{ u }}][{{ d.zz }}][{{ l[9] }}][{{ u|upper }}][{{ u ~ 'x' }}]", {"d": D, "l": []}),
    ("undef_bool", "{% if u %}t{% else %}f{% endif %}{% if not d.zz %}!{% endif %}{{ u is false }}", {"d": D}),
    ("undef_tool_call_function", "{% for tc in calls %}{% if tc.function %}{% set tc = tc.function %}{% endif %}{{ tc.name }}({{ tc.arguments|tojson }}) {% endfor %}", {"calls": [{"function": {"name": "a", "arguments": {"x": 1}}}, {"name": "b", "arguments": {}}]}),
    # ---- chat-style templates ----
    ("chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
    ("llama3_style", "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}", {"messages": MSGS, "add_generation_prompt": True, "bos_token": "<|begin_of_text|>"}),
    ("mistral_style", "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}], "bos_token": "<s>", "eos_token": "</s>"}),
    ("tool_args_items", "{% for tc in m.tool_calls %}{% for k, v in tc.function.arguments|items %}<p={{ k }}>{{ v | tojson | safe if v is mapping or (v is sequence and v is not string) else v | string }}</p>{% endfor %}{% endfor %}", {"m": {"tool_calls": [{"function": {"arguments": {"s": "x", "n": 3, "f": 1.0, "b": False, "l": [1, "a"], "o": {"k": None}}}}]}}),
    # ---- more edge semantics ----
    ("edge_undefined_filters", "[{{ u|upper }}][{{ u|join(',') }}][{{ u|first }}][{{ u|list }}][{{ u|items|list }}][{{ u|selectattr('x')|list }}][{{ u|string }}][{{ u|trim }}][{{ u|default(none) }}]", {}),
    ("edge_attr_on_list_and_scalars", "[{{ [1, 2].y }}][{{ 'abc'.nope }}][{{ 3.x }}][{{ none['k'] }}][{{ true.x }}]", {}),
    ("edge_trailing_commas", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }} {{ f(1,) if false else 'ok' }}", {}),
    ("edge_not_in_precedence", "{{ not 1 in [1] }} {{ not 1 in [2] }} {{ not 1 == 1 and true }} {{ 1 if not none else 2 }}", {}),
    ("edge_paren_filter", "{{ (x or 'dflt')|upper }} {{ (1, 2)|join('-') }} {{ ('a' ~ 'b')|length }}", {}),
    ("edge_outer_loop_ref", "{% for a in 'xy' %}{% set outer = loop %}{% for b in 'pq' %}{{ outer.index }}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("edge_set_shadows_global", "{% set x = x + 1 %}{{ x }}{% for i in [1] %}{% set x = x * 10 %}{{ x }}{% endfor %}{{ x }}", {"x": 1}),
    ("edge_macro_before_def", "[{{ m is defined }}]{% macro m() %}M{% endmacro %}[{{ m is defined }}]{{ m() }}", {}),
    ("edge_percent_formats", "{{ '%.3f|%5d|%-5d|%05d|%e|%g|%g|%+d|%x|%o|%c|%5.1f%%' % (1.23456, 42, 42, 42, 12345.678, 0.00001, 123456789.0, 5, 255, 8, 65, 99.44) }}", {}),
    ("edge_str_format_specs", "{{ '{:g}|{:e}|{}|{:>8.3f}|{:+d}|{:08.2f}|{:b}|{:#x}|{:%}|{:_}|{:.3}|{:.3}|{:10}|{:<6}|'.format(1e-5, 1234.5, 1.0, 3.14159, 5, -3.5, 5, 255, 0.25, 1234567, 3.14159, 'abcdef', 1.5, true) }}", {}),
    ("edge_repr_strings", "{{ ['a\\'b\"c', '\\u200b', '😀', '\\x1b', 'ü', '\\\\'] }}", {}),
    ("edge_float_printing", "{{ 1e2 }} {{ 1.5e-10 }} {{ 3.0 }} {{ 2.5|round }} {{ 0.15|round(1) }} {{ 1e16|int }} {{ 123456789.123456789 }} {{ [0.1, 1e22, 5e-324] }} {{ 1e22|tojson }}", {}),
    ("edge_map_string_sort", "{{ [1, 2, 3]|map('string')|join('-') }} {{ ['b', 'a']|sort|first }} {{ range(3)|reverse|list }} {{ [{'a': 2}, {'a': 1}, {'a': 2}]|unique(attribute='a')|list }}", {}),
    ("edge_method_kwargs", "{{ 'a,b,c'.split(sep=',', maxsplit=1) }} {{ 'xax'.strip(chars='x') }} {{ 'aaa'.replace('a', 'b', count=2) }} {{ d.get('z', default=0) if false else d.get('z', 0) }}", {"d": {}}),
    ("edge_method_kwargs_split", "{{ 'a,b,c'.split(sep=',', maxsplit=1) }} {{ 'a b'.rsplit(maxsplit=1) }} {{ 'a\\nb'.splitlines(keepends=true) }}", {}),
    ("edge_block_scopes", "{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{% filter upper %}{% set fx = 1 %}x{% endfilter %}[{{ fx }}]{% set y %}{% set inner = 2 %}{% endset %}[{{ inner }}]{% for i in [1] %}{% macro lm() %}{{ i }}{% endmacro %}{% endfor %}[{{ lm }}]{% if true %}{% macro im() %}M{% endmacro %}{% endif %}{{ im() }}", {}),
    ("edge_block_set_in_loop", "{% for i in [1, 2] %}{% set line %}<{{ i }}>{% endset %}{{ line }}{% endfor %}[{{ line }}]", {}),
    ("edge_namespace_print", "{% set ns = namespace(a=[1, {'b': none}], s='x') %}{{ ns }} {{ ns.a[1].b is none }}", {}),
    ("edge_loop_in_macro_in_loop", "{% macro m(items) %}{% for i in items %}{{ loop.index }}{% endfor %}{% endmacro %}{% for x in [[1, 2], [3]] %}{{ m(x) }}/{{ loop.index }} {% endfor %}", {}),
    ("edge_unicode_compare", "{{ 'é' > 'z' }} {{ 'a' < 'B' }} {{ ['é', 'e', 'z', 'É']|sort }} {{ ['é', 'e', 'Z']|sort(case_sensitive=true) }}", {}),
    ("edge_in_tuple_dict_keys", "{{ 'a' in ('a', 'b') }} {{ 1 in {1: 'x'} }} {{ 'x' in {1: 'x'} }} {{ 'ab' in ['a', 'b'] }}", {}),
    ("edge_tool_args_string", "{% for tc in calls %}{% if tc.function.arguments is string %}{{ tc.function.arguments }}{% else %}{{ tc.function.arguments|tojson }}{% endif %};{% endfor %}", {"calls": [{"function": {"arguments": "{\"a\": 1}"}}, {"function": {"arguments": {"a": [1, 2.0]}}}]}),
    ("edge_dict_iteration_order", "{% for k, v in d.items() %}{{ k }}{% endfor %} {{ d|list }} {{ d|tojson }} {{ d|dictsort|map('first')|list }}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("edge_whitespace_mix", "<{%- if true %} a {% endif -%}>\n  {#- c #}  x  {#+ d -#}\n  <{{- 'v' }}>\n\t{%+ if 1 -%}\n   y\n{%- endif %}\n{% raw -%}\n  raw {{ }}\n{%- endraw %}\nend", {}),
    ("edge_comment_in_block_line", "a\n    {# only a comment #}\n    {% set x = 1 %}\nb{{ x }}", {}),
    ("edge_minus_var_newlines", "line1\n\n   {{- 'X' -}}   \n\nline2", {}),
    ("edge_empty_template", "", {}),
    ("edge_only_whitespace_tags", "{%- if true -%}   {%- endif -%}|{{- '' -}}|", {}),
    ("edge_string_with_tag_chars", "{{ '{% not a tag %}' }}{{ \"}}\" }}{{ '{#' }}", {}),
    ("edge_nested_dict_literal_in_var", "{{ {'a': {'b': 1}} }}{{ {'a': {'b': {'c': [1]}}}['a']['b'] }}", {}),
    ("edge_is_sequence_tuple", "{{ (1, 2) is sequence }} {{ (1, 2) is iterable }} {{ ((1, 2)|list) is sequence }} {{ 'x' is sequence }}", {}),
    ("edge_int_overflow_free", "{{ 2 ** 62 }} {{ 9223372036854775807 }} {{ -9223372036854775807 - 1 }}", {}),
    ("edge_lstrip_after_var", "{{ 'a' }}  {% if true %}b{% endif %}\n  {% if true %}c{% endif %}", {}),
    ("edge_generation_free_names", "{{ add_generation_prompt is defined }} {{ tools is defined }} {{ foo is defined }}", {"add_generation_prompt": False}),
    # ---- errors (compile time: the line is checked too) ----
    ("err_unknown_filter", "line1\n{{ x|nosuchfilter }}", {}),
    ("err_unknown_test", "a\nb\n{% if x is nosuchtest %}{% endif %}", {}),
    ("err_unknown_tag", "\n\n{% frobnicate %}", {}),
    ("err_unclosed_if", "{% if true %}\nx\n", {}),
    ("err_unclosed_for", "{% for x in y %}\n{% if x %}{% endif %}", {}),
    ("err_unexpected_end", "a\n{% endif %}", {}),
    ("err_bad_expr", "ok\n{{ 1 + }}", {}),
    ("err_unclosed_var", "x\n{{ 1 + 2", {}),
    ("err_unclosed_comment", "x {# never closed", {}),
    ("err_bad_paren", "{{ (1 + 2 }}", {}),
    ("err_stray_close", "{{ 1 ] }}", {}),
    ("err_unterminated_string", "{{ 'abc }}", {}),
    ("err_else_twice", "{% if a %}{% else %}{% else %}{% endif %}", {}),
    ("err_break_outside_loop", "{% break %}", {}),
    ("err_bad_char", "{{ 1 ? 2 }}", {}),
    ("err_set_missing_value", "{% set %}", {}),
    # ---- errors (run time) ----
    ("err_raise", "a\n{{ raise_exception('Custom failure: ' ~ n) }}", {"n": 3}),
    ("err_raise_in_macro", "{% macro m() %}{{ raise_exception('from macro') }}{% endmacro %}\n{{ m() }}", {}),
    ("err_undefined_attr", "x\n{{ u.attr }}", {}),
    ("err_undefined_attr_chain", "{{ d.zz.yy }}", {"d": D}),
    ("err_str_plus_int", "\n\n{{ 'a' + 1 }}", {}),
    ("err_int_plus_str", "{{ 1 + 'a' }}", {}),
    ("err_undefined_plus", "{{ u + 1 }}", {}),
    ("err_call_non_callable", "{{ d.a() }}", {"d": D}),
    ("err_call_undefined", "{{ nosuchfunction() }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_mod_zero", "{{ 1 % 0 }}", {}),
    ("err_compare_types", "{{ 1 < 'a' }}", {}),
    ("err_iterate_int", "{% for x in 5 %}{% endfor %}", {}),
    ("err_items_non_mapping", "{{ [1]|items|list }}", {}),
    ("err_tojson_undefined", "{{ u|tojson }}", {}),
    ("err_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("err_macro_bad_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("err_list_append_sandbox", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("err_in_int", "{{ 1 in 5 }}", {}),
    ("err_int_in_str", "{{ 1 in 'abc' }}", {}),
    ("err_range_too_big", "{{ range(1000000)|length }}", {}),
    ("err_split_empty_sep", "{{ 'a'.split('') }}", {}),
    ("err_str_format_missing", "{{ '{} {}'.format(1) }}", {}),
    ("err_percent_args", "{{ '%s %s' % (1,) }}", {}),
    ("err_neg_string", "{{ -'a' }}", {}),
    ("err_unhashable", "{{ {[1]: 2} }}", {}),
    ("err_no_user_query", "{%- set ns = namespace(multi_step_tool=true) %}\n{%- for message in messages[::-1] %}\n    {%- if message.role == 'user' %}{%- set ns.multi_step_tool = false %}{%- endif %}\n{%- endfor %}\n{%- if ns.multi_step_tool %}\n    {{- raise_exception('No user query found in messages.') }}\n{%- endif %}", {"messages": [{"role": "system", "content": ""}]}),
]


def template_line(exc):
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename == "<template>":
            line = fr.lineno
    return line


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_cases.jsonl")
    names = set()
    with open(out_path, "w", encoding="utf-8") as out:
        for name, tpl, variables in CASES:
            assert name not in names, name
            names.add(name)
            rec = {"name": name, "template": tpl, "vars": variables}
            try:
                rec["expected"] = env.from_string(tpl).render(**json.loads(json.dumps(variables)))
            except jinja2.exceptions.TemplateSyntaxError as e:
                rec["error"] = {"type": type(e).__name__, "message": e.message, "line": e.lineno, "raised": False}
            except Exception as e:  # noqa: BLE001 - any render error is a reference result
                raised = type(e) is jinja2.exceptions.TemplateError
                rec["error"] = {"type": type(e).__name__, "message": str(e), "line": template_line(e), "raised": raised}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(CASES)} cases to {out_path} (jinja2 {jinja2.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
